"""The console's screens: the main screen and the help modal."""
