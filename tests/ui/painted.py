"""What a widget paints, line by line, as the terminal shows it: after Textual's own
clipping (``text-overflow: ellipsis`` and the like), so a test reads what the operator reads."""

from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget


def painted(widget: Widget) -> list[str]:
    """The widget's rows as painted (border and padding included)."""
    size = widget.outer_size
    return [strip.text for strip in widget.render_lines(Region(0, 0, size.width, size.height))]
