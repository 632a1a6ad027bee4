"""Readable heatmaps: rows numbered as the findings number the clusters and named by
their cluster's centroid in the observation's own terms, columns by action values; a run
too short for a scheduled heatmap gets one at its end; report.html leads with "no
problems found" and shows the latest video."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.diagnosis.measure.state_action import ClusterView
from rltrain.utils.diagnosis.report import findings, heatmap_image, plots
from rltrain.utils.diagnosis.report import page as report_page
from rltrain.utils.diagnosis.report.heatmap_image import row_label
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.diagnosis.rules.state_action_rules import FixatedCluster
from rltrain.utils.run.folders import create_run

from conftest import DEVICE, tiny_config


def test_a_row_names_its_centroid_and_count() -> None:
    view = ClusterView(100, np.zeros((2, 1, 10)), np.array([40, 7]),
                       {"fixated_cluster": [], "chaotic_cluster": [], "blind_cluster": []},
                       np.zeros(2), [], {}, np.array([[0.98, -0.1, 2.3], [0.5, 0.5, -8.0]]))
    assert row_label(view, 0, 0) == "#0 obs=(0.98, -0.1, 2.3) n=40"
    assert row_label(view, 1, 0).startswith("#1 obs=(0.5, 0.5, -8) n=7")


def test_the_rows_carry_the_cluster_numbers_the_findings_name(tmp_path: Path) -> None:
    # The findings said "clusters [4, 8, 11]"; the rows had no numbers to find them by.
    k = 12
    probs = np.full((k, 1, 10), 0.1)
    probs[[4, 8, 11], 0] = np.eye(10)[3]  # all of these clusters' actions in bin 3
    view = ClusterView(100, probs, np.full(k, 30),
                       {"fixated_cluster": [(4, 0), (8, 0), (11, 0)],
                        "chaotic_cluster": [], "blind_cluster": []},
                       np.zeros(k), [4, 8, 11], {}, np.arange(k * 3.0).reshape(k, 3))
    rule = FixatedCluster(RuleContext(tiny_config(tmp_path), 3, 1))
    [finding] = rule.check(100, view.verdicts["fixated_cluster"], view.dropped, k)
    assert finding.value == [4, 8, 11] and "clusters [4, 8, 11]" in finding.message
    rows = [row_label(view, c, 0) for c in range(k)]
    assert [int(row.split()[0].lstrip("#")) for row in rows] == list(range(k))
    for cluster in finding.value:  # row N of the picture is the findings' cluster N
        assert rows[cluster].startswith(f"#{cluster} obs=") and rows[cluster].endswith(" F")
    assert not rows[5].endswith("F")
    # ... and the picture's row N is that cluster's: bright in bin 3, dark elsewhere.
    png, height, width = heatmap_image.heatmap(view, tmp_path / "heatmap.png",
                                               np.array([-2.0]), np.array([2.0]))
    with Image.open(tmp_path / "heatmap.png") as saved:  # the file holds the picture drawn
        rgb = np.asarray(saved.convert("RGB"))
    assert rgb.shape == (height, width, 3) and (tmp_path / "heatmap.png").read_bytes() == png
    [panel] = heatmap_image.draw(view, np.array([-2.0]), np.array([2.0]))[1]
    bright, dark = heatmap_image.colours(np.array([1.0, 0.1]))
    for cluster in range(k):
        x, y = panel.cell_centre(cluster, 3)
        expected = bright if cluster in finding.value else dark
        assert rgb[y, x].tolist() == expected.tolist()
        assert rgb[y, panel.cell_centre(cluster, 0)[0]].tolist() == (
            heatmap_image.colours(np.array([0.0]))[0] if cluster in finding.value
            else dark).tolist()
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_short_run_gets_a_heatmap_at_its_end(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, max_timesteps=600, run_name="short",
                         diagnostics={"heatmap_freq": 100_000})
    paths = create_run(config)
    Trainer(config, DEVICE, interactive=False).run(paths)
    assert [p.name for p in (paths.log_dir / "heatmaps").glob("heatmap_step_*.png")] == [
        "heatmap_step_600.png"]
    result = findings.diagnose(paths.log_dir)
    (paths.log_dir / "videos").mkdir(exist_ok=True)
    (paths.log_dir / "videos" / "step_600.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    page = report_page.write_html(paths.log_dir, result).read_text()
    assert "Latest behaviour video" in page and "step_600.mp4" in page
    if not findings.problems(result):
        assert page.index("No problems found") < page.index("<h2>Charts")


def test_the_reports_pictures_are_readable() -> None:
    """report.html showed the heatmap's map about 220 px wide under 6 px labels, and the
    gradient chart's legend over its lines."""
    k = 30
    view = ClusterView(5000, np.full((k, 1, 10), 0.1), np.full(k, 30),
                       {"fixated_cluster": [], "chaotic_cluster": [], "blind_cluster": []},
                       np.zeros(k), [], {}, np.arange(k * 3.0).reshape(k, 3) / 7)
    picture, [panel] = heatmap_image.draw(view, np.array([-2.0]), np.array([2.0]))
    assert panel.cell_width * panel.bins >= 400  # pixels of the map itself
    assert panel.cell_width * panel.bins + panel.left < picture.width
    # Each row's label is drawn left of the map, its glyphs at least 7 px tall (8
    # points at 100 dots per inch), within its own row.
    pixels = np.asarray(picture)
    for cluster in (0, k - 1):
        _, centre = panel.cell_centre(cluster, 0)
        band = pixels[centre - heatmap_image.ROW_PX // 2:centre + heatmap_image.ROW_PX // 2,
                      heatmap_image.LABEL_PX + heatmap_image.PAD:panel.left]
        inked = (band < 128).all(axis=2)
        assert 7 <= inked.any(axis=1).sum() < heatmap_image.ROW_PX
        assert inked.any(axis=0).sum() > 60  # "#29 obs=(...) n=30": a line of text
    series = {f"actor.net.{i}.weight": [(s, 1.0 + i + s / 100) for s in range(100, 1100, 100)]
              for i in range(6)}
    chart = plots.line_figure(series, "gradients", "norm", log=True)
    chart.canvas.draw()
    renderer = chart.canvas.get_renderer()
    [axes] = chart.axes
    plot, legend = axes.get_window_extent(renderer), axes.get_legend().get_window_extent(renderer)
    assert legend.x0 >= plot.x1 and legend.x1 <= chart.bbox.width  # beside it, on the page
    assert axes.get_legend().get_texts()[0].get_fontsize() >= 8
