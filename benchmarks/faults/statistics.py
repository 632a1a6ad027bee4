"""The statistics the mechanism rules judge, as the fault benchmark's runs measured them:
the threshold tables of docs/diagnosing.md, healthy runs beside the faults.

    python -m benchmarks.faults --keep runs/ ...          # keep the runs' folders
    python -m benchmarks.faults.statistics runs/ [--half tune]

Each rule's statistic is read from a run's flow1.jsonl as the rule judges it (its worst
over the run, once the rule judges: after its warm-up, over its measurements in a row),
for every healthy run and for every case that the rule should name (its `rules`),
by half of the split: thresholds are set on the `tune` half only.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Callable

from benchmarks.faults.cases import CASES, HALVES, HEALTHY
from rltrain.utils.diagnosis.rules.fit_rules import outfit_ratio

Reader = Callable[[list[dict[str, Any]]], float | None]


def _lines(folder: Path, kind: str, rule: str | None = None) -> list[dict[str, Any]]:
    path = folder / "flow1.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("kind") == kind and (rule is None or r.get("rule") == rule)]


def _in_a_row(values: list[float], n: int, worst: Callable) -> float | None:
    """The worst value the rule compares when it needs `n` measurements in a row beyond
    its threshold: over every window of n, the least extreme, and of those the worst."""
    windows = [values[i:i + n] for i in range(len(values) - n + 1)]
    if not windows:
        return None
    inner = max if worst is min else min
    return worst(inner(w) for w in windows)


def critic_fit(folder: Path) -> float | None:
    rows = [r for r in _lines(folder, "fit") if r["updates"] >= 2000
            and r.get("explained") == r.get("explained")]
    return _in_a_row([r["explained"] for r in rows], 3, min)


def critic_outfitted(folder: Path, floor: float = 0.03) -> float | None:
    """The critic's unexplained share over a plain regression's on the rows it held out
    (0 where the critic leaves `floor` or less unexplained, or was not compared)."""
    rows = [r for r in _lines(folder, "fit") if r["updates"] >= 2000
            and r.get("explained") == r.get("explained")]
    return _in_a_row([outfit_ratio(r, floor) for r in rows], 3, max)


def actor_rank(folder: Path, min_spread: float = 0.05) -> float | None:
    rows = [r for r in _lines(folder, "fit") if r["updates"] >= 2000
            and (r.get("action_spread") or 0.0) >= min_spread]
    return _in_a_row([r["rank"] for r in rows], 3, min)


def gradient_noise(folder: Path) -> float | None:
    rows = [r for r in _lines(folder, "gradient_noise") if r.get("measurements", 0) >= 2]
    values = [max(v for k, v in r.items() if k.endswith("over_batch") and v is not None)
              for r in rows if any(k.endswith("over_batch") and v is not None
                                   for k, v in r.items())]
    return max(values, default=None)


def history_gain(folder: Path) -> float | None:
    return max((r["history_gain"] for r in _lines(folder, "observability")), default=None)


def reward_unexplained(folder: Path) -> float | None:
    values = [_number(r.get("reward_unexplained")) for r in _lines(folder, "observability")]
    return max((v for v in values if math.isfinite(v)), default=None)


def _number(value: Any) -> float:
    """A logged number (the logs write a non-finite one as text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def pace(folder: Path, worst: Callable = max) -> float | None:
    rows = _lines(folder, "rule", "actor_pace") or _lines(folder, "rule", "actor_stalled")
    values = [r["policy_change"] / r["critic_change"] for r in rows if r["critic_change"] > 0]
    return _in_a_row(values, 4, worst)


def entropy_per_dim(folder: Path) -> float | None:
    rows = _lines(folder, "rule", "entropy_temperature")
    return max((r["entropy"] for r in rows), default=None)


def temperature(folder: Path) -> float | None:
    rows = _lines(folder, "rule", "entropy_temperature")
    return max((r["ent_coef"] for r in rows), default=None)


# rule -> (what is shown, how it is read, the faults' side: "high" or "low")
STATISTICS: dict[str, tuple[str, Reader, str]] = {
    "critic_fit": ("explained share of the targets' variance, worst 3 in a row",
                   critic_fit, "low"),
    "actor_fit": ("the actor's rank among uniform actions, worst 3 in a row", actor_rank,
                  "low"),
    "actor_direction": ("the actor's rank, worst 3 in a row", actor_rank, "low"),
    "gradient_noise": ("noise scale over batch size, largest", gradient_noise, "high"),
    "partial_observability": ("history gain, largest", history_gain, "high"),
    "actor_pace": ("pace, largest 4 in a row", pace, "high"),
    "entropy_temperature": ("temperature, largest", temperature, "high"),
}
EXTRA = {"critic_fit": ("unexplained over a regression's (where over 0.03), largest 3 in "
                        "a row", critic_outfitted),
         "partial_observability": ("reward unexplained, largest", reward_unexplained),
         "actor_pace": ("pace, smallest 4 in a row", lambda f: pace(f, min))}


def rows(runs: Path, which: str | None) -> list[str]:
    lines = []
    for rule, (what, read, _) in STATISTICS.items():
        shown = [(what, read), *([EXTRA[rule]] if rule in EXTRA else [])]
        for label, reader in shown:
            healthy = _values(runs, [h.id for h in HEALTHY if which in (None, h.half)], reader)
            faults = _values(runs, [c.id for c in CASES if rule in c.rules
                                    and which in (None, c.half)], reader)
            lines.append(f"| `{rule}`: {label} | {healthy} | {faults} |")
    return lines


def _values(runs: Path, names: list[str], read: Reader) -> str:
    found = []
    for name in names:
        for folder in sorted((runs / "logs").glob(f"{name}_s*")):
            value = read(folder)
            if value is not None and math.isfinite(value):
                found.append(f"{folder.name} {value:.3g}")
    return "; ".join(found) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="the --keep folder of a benchmark run")
    parser.add_argument("--half", choices=HALVES, default=None)
    args = parser.parse_args()
    print("| rule: statistic | healthy runs | faults it should name |\n|---|---|---|")
    print("\n".join(rows(args.runs, args.half)))


if __name__ == "__main__":
    main()
