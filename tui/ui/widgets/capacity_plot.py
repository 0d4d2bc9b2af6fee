"""The capacity curve in the console: the twin's SLO statistic against the offered rate.

A :class:`~textual_plotext.PlotextPlot` drawn by the domain's
:func:`~tui.domain.capacity_plot.draw` (the same drawing ``vtc capacity`` prints as text):
the predicted line, its interval band, the SLO line, the highest rate and the interval's
edges, and any real load marked.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui.domain.capacity import CapacityAnswer
from tui.domain.capacity_plot import draw

PLOT_WIDTH = 80
"""The width drawn for before the plot has its own (an 80-column terminal)."""


class CapacityPlot(PlotextPlot):
    """The curve of one capacity answer (empty until one is shown)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._answer: CapacityAnswer | None = None

    @property
    def answer(self) -> CapacityAnswer | None:
        """The answer drawn."""
        return self._answer

    def show(self, answer: CapacityAnswer | None) -> None:
        """Draw ``answer`` (``None``: clear)."""
        self._answer = answer
        self._redraw()

    def on_resize(self) -> None:
        """Draw again at the new size (plotext lays out for the cells it is given)."""
        self._redraw()

    def _redraw(self) -> None:
        if self._answer is None:
            self.plt.clear_figure()
        else:
            width = self.size.width or PLOT_WIDTH
            draw(self.plt, self._answer, width=width, height=self.size.height or 12)
        self.refresh()
