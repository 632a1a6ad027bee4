"""Readable heatmaps: rows named by their cluster's centroid in the observation's own
terms, columns by action values; a run too short for a scheduled heatmap gets one at
its end; report.html leads with "no problems found" and shows the latest video."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rltrain.scripts.trainer import Trainer
from rltrain.utils.diagnostics import report
from rltrain.utils.diagnostics.plots import _label
from rltrain.utils.diagnostics.state_action import ClusterView
from rltrain.utils.run.folders import create_run

from conftest import DEVICE, tiny_config


def test_a_row_names_its_centroid_and_count() -> None:
    view = ClusterView(100, np.zeros((2, 1, 10)), np.array([40, 7]),
                       {"fixated_cluster": [], "chaotic_cluster": [], "blind_cluster": []},
                       np.zeros(2), [], {}, np.array([[0.98, -0.1, 2.3], [0.5, 0.5, -8.0]]))
    assert _label(view, 0, 0) == "obs=(0.98, -0.1, 2.3) n=40"
    assert _label(view, 1, 0).startswith("obs=(0.5, 0.5, -8) n=7")


def test_a_short_run_gets_a_heatmap_at_its_end(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, max_timesteps=600, run_name="short",
                         diagnostics={"heatmap_freq": 100_000})
    paths = create_run(config)
    Trainer(config, DEVICE, interactive=False).run(paths)
    assert [p.name for p in (paths.log_dir / "heatmaps").glob("heatmap_step_*.png")] == [
        "heatmap_step_600.png"]
    result = report.diagnose(paths.log_dir)
    (paths.log_dir / "videos").mkdir(exist_ok=True)
    (paths.log_dir / "videos" / "step_600.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    page = report.write_html(paths.log_dir, result).read_text()
    assert "Latest behaviour video" in page and "step_600.mp4" in page
    if not report.problems(result):
        assert page.index("No problems found") < page.index("<h2>Charts")
