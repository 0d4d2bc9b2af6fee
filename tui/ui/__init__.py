"""The Textual console: the only package of vtc that imports textual.

Build it with :func:`tui.ui.app.create_app` (the CLI, the demo and the tests share it).
"""
