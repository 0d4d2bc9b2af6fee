"""The console's widgets, one per module. They render samples and records; no decisions."""
