"""The report's charts (report.html): line charts of a run's series.

Matplotlib's object API with the Agg canvas (no pyplot state, no display), so it is
safe in any process and in tests. The heatmap's picture, drawn while training, is
heatmap_image.py's.
"""

from __future__ import annotations

import base64
import io
from typing import Any, Sequence

LABEL_SIZE = 8  # points: the smallest text of a picture, readable in report.html


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def line_chart(series: dict[str, Sequence[tuple[int, float]]], title: str, ylabel: str,
               log: bool = False, zeros: dict[str, Sequence[int]] | None = None,
               zero_label: str = "zero") -> str:
    """A line chart of named (step, value) series as a base64 PNG for an HTML page
    (`line_figure`)."""
    fig = line_figure(series, title, ylabel, log, zeros, zero_label)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode()


def line_figure(series: dict[str, Sequence[tuple[int, float]]], title: str, ylabel: str,
                log: bool = False, zeros: dict[str, Sequence[int]] | None = None,
                zero_label: str = "zero") -> Any:
    """The figure of `line_chart`. `zeros`: per name, the steps at which that series was
    0, which a log scale cannot show: they are drawn as crosses on a dotted floor line
    (a decade under the smallest value drawn) labelled `zero_label`, in the series'
    colour, or under their own legend entry for a series that was never above 0."""
    fig = _figure(9.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    colours = {}
    for name, points in series.items():
        if points:
            steps, values = zip(*points, strict=True)
            [line] = ax.plot(steps, values, label=name, linewidth=1)
            colours[name] = line.get_color()
    if zeros and any(zeros.values()):
        _zero_floor(ax, series, zeros, colours, zero_label, log)
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(set(series) | set(zeros or {})) > 1:  # beside the plot, never over its lines
        ax.legend(fontsize=LABEL_SIZE, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    fig.tight_layout()
    return fig


def _zero_floor(ax: Any, series: dict[str, Sequence[tuple[int, float]]],
                zeros: dict[str, Sequence[int]], colours: dict[str, str], label: str,
                log: bool) -> None:
    """The zero values of `line_figure`, on the floor line."""
    positive = [v for points in series.values() for _, v in points if v > 0]
    floor = (min(positive, default=1.0) / 10) if log else 0.0
    ax.axhline(floor, color="grey", linestyle=":", linewidth=1)
    # x in axes units, y in data units: the label sits at the left end of the floor line.
    ax.text(0.01, floor, label, transform=ax.get_yaxis_transform(), fontsize=LABEL_SIZE,
            color="grey", va="bottom")
    for name, steps in zeros.items():
        if not steps:
            continue
        style = ({"color": colours[name]} if name in colours
                 else {"label": f"{name} ({label})"})
        ax.plot(steps, [floor] * len(steps), linestyle="none", marker="x", markersize=5,
                **style)
