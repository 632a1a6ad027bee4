"""report.html and `rltrain diagnose`'s table, read by a person: a finding's evidence as
key/value rows of whole, rounded values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rltrain.utils.diagnostics import report

LAYERS = {f"{net}.net.{i}.{kind}": 1.234567891e-09 * (i + 1)
          for net in ("actor", "critic") for i in (0, 2, 4) for kind in ("weight", "bias")}


def _write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("value", "rows"), [
    (0.123456789, [("", "0.1235")]),
    (12345678.9, [("", "1.235e+07")]),
    ([4, 8, 11], [("", "4, 8, 11")]),
    ("evaluation return", [("", "evaluation return")]),
    ({"actor.net.0.weight": 1.234567e-09, "actor.net.0.bias": None},
     [("actor.net.0.weight", "1.235e-09"), ("actor.net.0.bias", "none")]),
    ({"effect": {"per_dimension": [0.5, 0.25], "rows": 100}},
     [("effect.per_dimension", "0.5, 0.25"), ("effect.rows", "100")]),
    ({"states": [[1.0, 2.0], [3.0, float("inf")]]},
     [("states[0]", "1, 2"), ("states[1]", "3, inf")]),
    (list(range(25)), [("", ", ".join(map(str, range(20))) + " (and 5 more)")]),
])
def test_evidence_rows_flatten_and_round_whole_values(value: Any,
                                                      rows: list[tuple[str, str]]) -> None:
    from rltrain.utils.diagnostics import evidence

    assert evidence.rows(value) == rows


def test_the_evidence_column_is_a_table_of_whole_values(tmp_path: Path, capsys) -> None:
    # It was the JSON cut at 80 characters: '{"actor.net.0.weight": 1.234567891e-09, "act...'.
    _write(tmp_path, "events.jsonl", [
        {"env_steps": 500, "rule": "vanishing_gradient", "value": LAYERS, "threshold": 0.01,
         "action": "warn", "message": "vanishing gradient in the actor"}])
    result = report.diagnose(tmp_path)
    page = report.write_html(tmp_path, result).read_text()
    [cell] = re.findall(r'<table class="evidence">.*?</table>', page)
    assert re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", cell) == [
        (name, f"{norm:.4g}") for name, norm in LAYERS.items()]
    assert "critic.net.4.bias</th><td>6.173e-09<" in cell and "..." not in page
    report.print_table(result)  # 80 columns under pytest: one block per finding
    printed = capsys.readouterr().out
    assert "critic.net.4.bias: 6.173e-09" in printed
    assert "1.234567891e-09" not in printed

