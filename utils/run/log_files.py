"""A run's JSON Lines files read back (metrics.jsonl, events.jsonl, flow1.jsonl, which
utils/run/logger.py writes): one consistent history across resumes, damaged lines
skipped and counted, and the numbers and marks readers take from them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


class JsonLines(list):
    """A JSON Lines file's lines; `skipped`: how many could not be read (cut short by a
    crash, damaged bytes, not an object rltrain writes) and were left out."""

    skipped = 0


HEATMAP = re.compile(r"^heatmap_step_(\d+)\.png$")  # the heatmaps a run writes
# Where a line of each file says what it is (metrics.jsonl and flow1.jsonl: "kind").
TYPE_KEYS = {"events.jsonl": "action"}


def read_jsonl(path: Path) -> JsonLines:
    """The lines of metrics.jsonl/events.jsonl/flow1.jsonl as one consistent history.

    A `resume` line at step N means the run continued from a checkpoint taken at N:
    lines written before it for steps after N belong to the abandoned continuation and
    are dropped. A line that cannot be read (cut short by a crash, damaged bytes, not an
    object with its env step and kind) is skipped and counted (`skipped`).
    """
    lines = JsonLines()
    if not path.exists():
        return lines
    type_key = TYPE_KEYS.get(path.name, "kind")
    with open(path, "rb") as f:
        for raw in f:
            line = _line(raw, type_key)
            if line is None:
                lines.skipped += 1 if raw.strip() else 0
                continue
            # metrics.jsonl and flow1.jsonl lines name their type in "kind", events.jsonl
            # lines in "action"; the trainer writes the three resume markers together.
            if (line.get("kind") == "resume" or line.get("action") == "resume") \
                    and line["env_steps"] is not None:
                lines[:] = [x for x in lines
                            if x["env_steps"] is None or x["env_steps"] <= line["env_steps"]]
            lines.append(line)
    return lines


def _line(raw: bytes, type_key: str) -> dict[str, Any] | None:
    """One line as rltrain wrote it, or None: not JSON, not an object, no env step of
    its own (a whole number; in events.jsonl also null, a note written after the run
    ended) or no kind."""
    try:
        line = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(line, dict) or not isinstance(line.get(type_key), str):
        return None
    if "env_steps" not in line:
        return None
    steps = line["env_steps"]
    if steps is None and type_key == "action":  # events.jsonl: a note after the run
        return line
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        return None
    return line


def unreadable_note(log_dir: Path) -> str | None:
    """One line naming what of a run's files could not be read and was left out (damaged
    lines, fields of the wrong type, stray files); None when everything could be."""
    from rltrain.utils.run.status import status_problem

    parts = [f"{name} ({count} line{'s' if count > 1 else ''})"
             for name in ("metrics.jsonl", "events.jsonl", "flow1.jsonl")
             if (count := read_jsonl(log_dir / name).skipped)]
    status = status_problem(log_dir / "status.json")
    parts += [status] if status else []
    stray = sorted(p.name for p in (log_dir / "heatmaps").glob("heatmap_step_*.png")
                   if not HEATMAP.match(p.name))
    parts += [f"heatmaps/{name}" for name in stray[:3]] + (
        [f"{len(stray) - 3} more stray heatmaps"] if len(stray) > 3 else [])
    return "unreadable, skipped: " + "; ".join(parts) if parts else None


def eval_curve(metrics: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """(env steps, mean evaluation return) of every evaluation in metrics.jsonl lines (NaN
    and inf are written as strings there: float() reads them back)."""
    return [(m["env_steps"], value) for m in metrics
            if m["kind"] == "eval" and (value := number(m.get("mean_return"))) is not None]


def number(value: Any) -> float | None:
    """A number of a JSON Lines file (NaN and inf as strings), or None where there is
    none (a line edited or damaged by hand)."""
    try:
        return None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def resume_keys(event: dict[str, Any]) -> set[str]:
    """The config keys a `resume` line of events.jsonl says the resume changed (its
    value: the --set changes, "KEY=VALUE" each)."""
    return {str(change).split("=", 1)[0].strip() for change in event.get("value") or []}
