"""Pictures for the flow-1 diagnostics: state-cluster x action-bin heatmaps, report charts.

Matplotlib's object API with the Agg canvas (no pyplot state, no display), so it is
safe in a training process and in tests.
"""

from __future__ import annotations

import base64
import io
import itertools
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rltrain.utils.diagnosis.measure.state_action import ClusterView
from rltrain.utils.io.checkpoint import atomic_write

MARKS = {"fixated_cluster": "F", "chaotic_cluster": "C", "blind_cluster": "B"}
LABEL_SIZE = 8  # points: the smallest text of a picture, readable in report.html
LABEL_DIMS = 6  # observation dimensions written in a row's label
MAX_DIMS = 4


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def heatmap(view: ClusterView, path: Path, action_low: np.ndarray,
            action_high: np.ndarray) -> np.ndarray:
    """Save the heatmap PNG; return it as an RGB array [H, W, 3] for TensorBoard."""
    dims = min(view.probs.shape[1], MAX_DIMS)
    # Wide enough that the rows' labels leave the map itself most of the width.
    fig = _figure(7.5 * dims + 1.0, max(4.5, 0.22 * len(view.counts) + 1.8))
    for d in range(dims):
        ax = fig.add_subplot(1, dims, d + 1)
        image = ax.imshow(view.probs[:, d, :], aspect="auto", cmap="viridis", vmin=0, vmax=1)
        bins = view.probs.shape[2]
        edges = np.linspace(action_low[d], action_high[d], bins + 1)
        ax.set_xticks(range(bins))
        ax.set_xticklabels([f"{(a + b) / 2:.2g}" for a, b in itertools.pairwise(edges)],
                           rotation=90, fontsize=LABEL_SIZE)
        ax.set_yticks(range(len(view.counts)))
        ax.set_yticklabels([_label(view, c, d) for c in range(len(view.counts))],
                           fontsize=LABEL_SIZE)
        ax.set_xlabel(f"action[{d}] value (bin centre)")
        ax.set_ylabel("state cluster #, as the findings number it: mean observation, samples",
                      fontsize=LABEL_SIZE)
        ax.set_title(f"P(action bin | state cluster), step {view.env_steps}", fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.05)
    fig.tight_layout()
    fig.canvas.draw()  # rendered once: the PNG is written from the same pixels
    rgba = np.asarray(fig.canvas.buffer_rgba())
    from matplotlib.image import imsave

    # Temp file and rename: a full disk names the file, and a link there is replaced.
    atomic_write(path, lambda f: imsave(f, rgba, format="png"), durable=False)
    return rgba[:, :, :3].copy()


def _label(view: ClusterView, cluster: int, dim: int) -> str:
    """The cluster by its number and its centroid in the observation's own terms: "#4
    obs=(0.98, -0.1, 2.3) n=40", the first `LABEL_DIMS` dimensions (then "..."). The
    number is the cluster's index, as the findings name it ("clusters [4]", from the
    view's verdicts) and as heatmaps/clusters_step_<N>.json keys it."""
    marks = "".join(m for rule, m in MARKS.items() if (cluster, dim) in view.verdicts[rule])
    if view.centroids is None:
        return f"#{cluster} n={view.counts[cluster]} {marks}".strip()
    centre = view.centroids[cluster]
    values = ", ".join(f"{v:.2g}" for v in centre[:LABEL_DIMS])
    more = ", ..." if len(centre) > LABEL_DIMS else ""
    return f"#{cluster} obs=({values}{more}) n={view.counts[cluster]} {marks}".strip()


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
