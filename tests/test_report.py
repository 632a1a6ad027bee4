"""report.html and `rltrain diagnose`'s table, read by a person: a finding's evidence as
key/value rows of whole, rounded values; the gradient chart marks the layers whose
gradient was zero instead of leaving them out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rltrain.utils.diagnosis.report import findings, plots, table
from rltrain.utils.diagnosis.report import page as report_page

LAYERS = {f"{net}.net.{i}.{kind}": 1.234567891e-09 * (i + 1)
          for net in ("actor", "critic") for i in (0, 2, 4) for kind in ("weight", "bias")}


def _write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("value", "rows"), [
    (0.123456789, [("", "0.1235")]),
    (12345678.9, [("", "1.235e+07")]),
    ([4, 8, 11], [("", "[4, 8, 11]")]),
    ("evaluation return", [("", "evaluation return")]),
    ({"actor.net.0.weight": 1.234567e-09, "actor.net.0.bias": None},
     [("actor.net.0.weight", "1.235e-09"), ("actor.net.0.bias", "none")]),
    ({"effect": {"per_dimension": [0.5, 0.25], "rows": 100}},
     [("effect.per_dimension", "[0.5, 0.25]"), ("effect.rows", "100")]),
    ({"states": [[1.0, 2.0], [3.0, float("inf")]]},
     [("states[0]", "[1, 2]"), ("states[1]", "[3, inf]")]),
    (list(range(25)), [("", f"[{', '.join(map(str, range(20)))}] and 5 more")]),
    ([], [("", "[]")]),
])
def test_evidence_rows_flatten_and_round_whole_values(value: Any,
                                                      rows: list[tuple[str, str]]) -> None:
    from rltrain.utils.diagnosis.report import evidence

    assert evidence.rows(value) == rows


def test_the_evidence_column_is_a_table_of_whole_values(tmp_path: Path, capsys) -> None:
    # It was the JSON cut at 80 characters: '{"actor.net.0.weight": 1.234567891e-09, "act...'.
    _write(tmp_path, "events.jsonl", [
        {"env_steps": 500, "rule": "vanishing_gradient", "value": LAYERS, "threshold": 0.01,
         "action": "warn", "message": "vanishing gradient in the actor"}])
    result = findings.diagnose(tmp_path)
    page = report_page.write_html(tmp_path, result).read_text()
    [cell] = re.findall(r'<table class="evidence">.*?</table>', page)
    assert re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", cell) == [
        (name, f"{norm:.4g}") for name, norm in LAYERS.items()]
    assert "critic.net.4.bias</th><td>6.173e-09<" in cell and "..." not in page
    table.print_table(result)  # 80 columns under pytest: one block per finding
    printed = capsys.readouterr().out
    assert "critic.net.4.bias: 6.173e-09" in printed
    assert "1.234567891e-09" not in printed


def test_the_gradient_chart_marks_layers_with_zero_gradient(tmp_path: Path) -> None:
    # The actor died at step 200: its norms of 0 fell off the log scale without a word.
    records = [{"kind": "gradients", "env_steps": step,
                "actor": {"net.0.weight": 0.5 if step < 200 else 0.0, "net.0.bias": 0.0},
                "critic": {"net.0.weight": 2.0, "net.0.bias": 0.3}}
               for step in (100, 200, 300)]
    _write(tmp_path, "flow1.jsonl", records)
    page = report_page.write_html(tmp_path, findings.diagnose(tmp_path)).read_text()
    [listed] = re.findall(r"<p>Zero gradient.*?</p>", page)
    assert "actor.net.0.weight at 2 of 3 reads (steps 200-300)" in listed
    assert "actor.net.0.bias at 3 of 3 reads (steps 100-300)" in listed
    assert "critic" not in listed
    series, zeros = report_page._gradient_series(records)
    figure = plots.line_figure(series, "gradients", "norm", log=True, zeros=zeros,
                               zero_label=report_page.ZERO_GRADIENT)
    [axes] = figure.axes
    floor = 0.3 / 10  # a decade under the smallest norm drawn
    on_floor = {line.get_label(): list(line.get_xdata()) for line in axes.get_lines()
                if len(line.get_ydata()) and set(line.get_ydata()) == {floor}
                and line.get_marker() == "x"}
    assert sorted(on_floor.values()) == [[100, 200, 300], [200, 300]]
    assert on_floor["actor.net.0.bias (zero gradient)"] == [100, 200, 300]  # never above 0
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "actor.net.0.weight" in legend and "actor.net.0.bias (zero gradient)" in legend
    assert report_page.ZERO_GRADIENT in [text.get_text() for text in axes.texts]


def test_a_heatmap_file_name_with_html_in_it_runs_nothing_in_the_page(tmp_path: Path) -> None:
    """A file named `heatmap_step_<img src=x onerror=...>_9.png` dropped into a run folder
    went into report.html as markup, and its script ran in the browser."""
    heatmaps = tmp_path / "heatmaps"
    heatmaps.mkdir()
    (heatmaps / "heatmap_step_<img src=x onerror=alert(1)>_9.png").write_bytes(b"png")
    (heatmaps / "heatmap_step_200.png").write_bytes(b"png")
    page = report_page.write_html(tmp_path, findings.diagnose(tmp_path)).read_text()
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert re.findall(r"<p>(heatmap_step_[^<]*)</p>", page) == ["heatmap_step_200.png"]
