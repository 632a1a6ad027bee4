"""The state-action heatmap's picture: P(action bin | state cluster), one panel per action
dimension, as a PNG and as the RGB array TensorBoard shows.

Drawn with Pillow, not Matplotlib: a training process draws one every few thousand
steps, and Matplotlib's figure machinery would be most of the diagnostics' memory (about
30 MiB once imported) and take about half a second a picture; Pillow (which Matplotlib
and TensorBoard's image summaries use as well) draws it in milliseconds. The layout is
a fixed grid: a row per cluster, labelled as the findings number it, a column per
action bin, labelled by the bin's centre, a colour bar beside each panel.
"""

from __future__ import annotations

import functools
import io
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from rltrain.utils.diagnosis.measure.state_action import ClusterView
from rltrain.utils.io.checkpoint import atomic_write

MARKS = {"fixated_cluster": "F", "chaotic_cluster": "C", "blind_cluster": "B"}
LABEL_DIMS = 6  # observation dimensions written in a row's label
MAX_DIMS = 4  # panels drawn (the first action dimensions)
LABEL_PX = 11  # the labels' font size in pixels: 8 points at 100 dots per inch
TITLE_PX = 13
ROW_PX = 18  # height of a cluster's row, at least
MIN_MAP_PX = 160  # a map of few clusters gets taller rows: room for its colour bar and axis
MAP_PX = 440  # width of a panel's map, whatever its number of bins
BAR_PX = 16  # width of the colour bar
PAD = 8
# Viridis (van der Walt and Smith's perceptually uniform colour map, Matplotlib's
# default) at 0, 1/4, 1/2, 3/4 and 1; the colours between are interpolated linearly.
VIRIDIS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98],
                    [253, 231, 37]], dtype=np.float64)


@dataclass(frozen=True)
class Panel:
    """Where one action dimension's map lies in the picture, in pixels."""

    origin: int  # the panel's left edge (its vertical axis label)
    left: int  # the map's
    top: int
    cell_width: float
    row_height: float
    rows: int
    bins: int

    def cell_centre(self, cluster: int, action_bin: int) -> tuple[int, int]:
        """The (x, y) pixel at the centre of a cluster's cell for an action bin."""
        return (int(self.left + (action_bin + 0.5) * self.cell_width),
                int(self.top + (cluster + 0.5) * self.row_height))


def heatmap(view: ClusterView, path: Path, action_low: np.ndarray,
            action_high: np.ndarray) -> tuple[bytes, int, int]:
    """Save the heatmap PNG at `path`; return its bytes, height and width (for
    TensorBoard, which takes it encoded)."""
    picture, _ = draw(view, action_low, action_high)
    encoded = io.BytesIO()
    # zlib level 1: its flat colours compress as well, in about two thirds of the time
    picture.save(encoded, format="PNG", compress_level=1)
    png = encoded.getvalue()
    # Temp file and rename: a full disk names the file, and a link there is replaced.
    atomic_write(path, lambda f: f.write(png), durable=False)
    return png, picture.height, picture.width


def draw(view: ClusterView, action_low: np.ndarray,
         action_high: np.ndarray) -> tuple[Image.Image, list[Panel]]:
    """The picture and where each panel's map lies in it."""
    dims = min(view.probs.shape[1], MAX_DIMS)
    rows = len(view.counts)
    labels = [[row_label(view, c, d) for c in range(rows)] for d in range(dims)]
    font = _font(LABEL_PX)
    label_width = max((int(font.getlength(text)) for column in labels for text in column),
                      default=0)
    map_height = max(rows * ROW_PX, MIN_MAP_PX)
    tick_height = max(int(font.getlength(_tick(v))) for d in range(dims)
                      for v in _centres(action_low[d], action_high[d], view.probs.shape[2]))
    panel_width = LABEL_PX + PAD + label_width + PAD + MAP_PX + PAD + BAR_PX + 4 * PAD
    top = PAD + TITLE_PX + PAD
    height = top + map_height + PAD + tick_height + PAD + LABEL_PX + 2 * PAD
    picture = Image.new("RGB", (panel_width * dims, height), "white")
    canvas = ImageDraw.Draw(picture)
    panels = []
    for d in range(dims):
        origin = d * panel_width
        bins = view.probs.shape[2]
        panel = Panel(origin, origin + LABEL_PX + PAD + label_width + PAD, top, MAP_PX / bins,
                      map_height / max(rows, 1), rows, bins)
        _panel(picture, canvas, panel, view, d, labels[d],
               _centres(action_low[d], action_high[d], panel.bins))
        panels.append(panel)
    return picture, panels


def row_label(view: ClusterView, cluster: int, dim: int) -> str:
    """The cluster by its number and its centroid in the observation's own terms: "#4
    obs=(0.98, -0.1, 2.3) n=40", the first `LABEL_DIMS` dimensions (then "..."), and the
    marks of the cluster rules that flagged it for this dimension. The number is the
    cluster's index, as the findings name it ("clusters [4]", from the view's verdicts)
    and as heatmaps/clusters_step_<N>.json keys it."""
    marks = "".join(m for rule, m in MARKS.items() if (cluster, dim) in view.verdicts[rule])
    if view.centroids is None:
        return f"#{cluster} n={view.counts[cluster]} {marks}".strip()
    centre = view.centroids[cluster]
    values = ", ".join(f"{v:.2g}" for v in centre[:LABEL_DIMS])
    more = ", ..." if len(centre) > LABEL_DIMS else ""
    return f"#{cluster} obs=({values}{more}) n={view.counts[cluster]} {marks}".strip()


def colours(probs: np.ndarray) -> np.ndarray:
    """Probabilities in [0, 1] as viridis RGB (uint8, one more trailing axis of 3)."""
    position = np.clip(np.nan_to_num(probs), 0.0, 1.0) * (len(VIRIDIS) - 1)
    lower = np.minimum(position.astype(int), len(VIRIDIS) - 2)
    share = (position - lower)[..., None]
    return np.rint(VIRIDIS[lower] * (1 - share) + VIRIDIS[lower + 1] * share).astype(np.uint8)


def _panel(picture: Image.Image, canvas: ImageDraw.ImageDraw, panel: Panel, view: ClusterView,
           dim: int, labels: list[str], centres: list[float]) -> None:
    """One action dimension: its title, map, row and column labels and colour bar."""
    font = _font(LABEL_PX)
    map_height = round(panel.rows * panel.row_height)
    canvas.text((panel.left, PAD), f"P(action bin | state cluster), step {view.env_steps}",
                fill="black", font=_font(TITLE_PX))
    cells = Image.fromarray(colours(view.probs[:, dim, :])).resize(
        (MAP_PX, map_height), Image.Resampling.NEAREST)
    picture.paste(cells, (panel.left, panel.top))
    for cluster, text in enumerate(labels):  # right-aligned against the map
        _, y = panel.cell_centre(cluster, 0)
        canvas.text((panel.left - PAD, y), text, fill="black", font=font, anchor="rm")
    tick_top = panel.top + map_height + PAD
    for action_bin, centre in enumerate(centres):  # written upwards, under each column
        x, _ = panel.cell_centre(0, action_bin)
        _vertical_text(picture, _tick(centre), (x - LABEL_PX // 2, tick_top), font)
    bottom = picture.height - PAD - LABEL_PX
    canvas.text((panel.left + MAP_PX // 2, bottom), f"action[{dim}] value (bin centre)",
                fill="black", font=font, anchor="mt")
    axis = "state cluster #, as the findings number it: mean observation, samples"
    _vertical_text(picture, axis, (panel.origin + PAD // 2, panel.top), font,
                   height=map_height)
    _colour_bar(picture, canvas, panel.left + MAP_PX + PAD, panel.top, map_height, font)


def _colour_bar(picture: Image.Image, canvas: ImageDraw.ImageDraw, left: int, top: int,
                height: int, font: ImageFont.ImageFont | ImageFont.FreeTypeFont) -> None:
    """Probability 1 at the top to 0 at the bottom, labelled at 0, 0.5 and 1."""
    ramp = colours(np.linspace(1.0, 0.0, height))[:, None, :].repeat(BAR_PX, axis=1)
    picture.paste(Image.fromarray(ramp), (left, top))
    for value in (0.0, 0.5, 1.0):
        y = top + round((1.0 - value) * (height - 1))
        canvas.text((left + BAR_PX + 2, y), f"{value:g}", fill="black", font=font, anchor="lm")


def _vertical_text(picture: Image.Image, text: str, corner: tuple[float, float],
                   font: ImageFont.ImageFont | ImageFont.FreeTypeFont,
                   height: int | None = None) -> None:
    """`text` turned a quarter anticlockwise with its top-left corner at `corner`; centred
    over `height` pixels where given (cut where it is longer)."""
    length = int(font.getlength(text)) + 2
    strip = Image.new("RGB", (length, LABEL_PX + 4), "white")
    ImageDraw.Draw(strip).text((1, 0), text, fill="black", font=font)
    turned = strip.rotate(90, expand=True)
    x, y = int(corner[0]), int(corner[1])
    if height is not None:
        y += max(0, (height - turned.height) // 2)
        turned = turned.crop((0, max(0, turned.height - height), turned.width, turned.height))
    picture.paste(turned, (x, y))


def _centres(low: float, high: float, bins: int) -> list[float]:
    edges = np.linspace(low, high, bins + 1)
    return [(a + b) / 2 for a, b in itertools.pairwise(edges)]


def _tick(value: float) -> str:
    return f"{value:.2g}"


@functools.cache
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's own font (Aileron) at `size` pixels; its fixed bitmap font where Pillow
    was built without FreeType (which a sized font needs)."""
    try:
        return ImageFont.load_default(size)
    except (ImportError, OSError):
        return ImageFont.load_default()
