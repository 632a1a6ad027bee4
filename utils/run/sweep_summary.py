"""The summary of a sweep, read from its trials' run folders (whatever state they are in).

Per grid point: mean, std, min and max over seeds of the final and of the best
evaluation return, the env steps reached, and the paused and unfinished trials. Saved
as `<log_dir>/<sweep>/summary.csv`, `summary.json` and `learning_curves.png` (mean and
min-max spread over seeds of the evaluation return, per grid point).
"""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path
from typing import Any

from rltrain.utils.io.checkpoint import atomic_write, write_json
from rltrain.utils.run.folders import METRICS_FILE, STATUS_FILE
from rltrain.utils.run.log_files import eval_curve, read_jsonl
from rltrain.utils.run.status import effective_state, read_status

ERROR_FILE = "trial_error.txt"  # in a trial's log folder: why it could not run
# In a trial's log folder: it ended as an outcome (finished, or paused by a rule or
# `rltrain pause`), which `rltrain sweep --resume` reports rather than runs again.
OUTCOME_FILE = "trial_outcome.txt"
# The pause request a sweep's Ctrl-C leaves in each running trial's folder. A trial paused
# by it is not an outcome like a health rule's pause: `rltrain sweep --resume` continues it.
INTERRUPTED_NOTE = "the sweep was interrupted (Ctrl-C); rltrain sweep --resume continues it"


def trial_row(log_dir: Path, run_name: str, point: str) -> dict[str, Any]:
    folder = log_dir / run_name
    evals = eval_curve(read_jsonl(folder / METRICS_FILE))
    status = read_status(folder / STATUS_FILE) or {}
    state = effective_state(status) if status else "not started"
    error = folder / ERROR_FILE
    if error.exists() and state not in ("finished", "paused"):
        state = "failed"
    if state == "paused" and interrupted(status):
        state = "interrupted"  # counted as unfinished
    return {"run": run_name, "grid_point": point, "state": state,
            "env_steps": status.get("env_steps", 0),
            "final_eval": evals[-1][1] if evals else None,
            "best_eval": max(v for _, v in evals) if evals else None,
            "pause_reason": status.get("pause_reason"),
            "error": error.read_text().strip() if error.exists() else None, "curve": evals}


def interrupted(status: dict[str, Any]) -> bool:
    """True for a trial paused by the sweep's Ctrl-C (its pause is not an outcome)."""
    return status.get("pause_reason") == f"[outside_request] {INTERRUPTED_NOTE}"


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_{k}": None for k in ("mean", "std", "min", "max")}
    return {f"{prefix}_mean": statistics.mean(values),
            f"{prefix}_std": statistics.pstdev(values),
            f"{prefix}_min": min(values), f"{prefix}_max": max(values)}


def point_rows(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for point in dict.fromkeys(t["grid_point"] for t in trials):
        group = [t for t in trials if t["grid_point"] == point]
        finals = [t["final_eval"] for t in group if t["final_eval"] is not None]
        bests = [t["best_eval"] for t in group if t["best_eval"] is not None]
        rows.append({"grid_point": point, "seeds": len(group), **_stats(finals, "final"),
                     **_stats(bests, "best"),
                     "env_steps_mean": statistics.mean(t["env_steps"] for t in group),
                     "paused": sum(t["state"] == "paused" for t in group),
                     "unfinished": sum(t["state"] not in ("finished", "paused")
                                       for t in group)})
    return rows


def write_summary(sweep_dir: Path, trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    points = point_rows(trials)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(points[0]))
    writer.writeheader()
    writer.writerows(points)
    csv_bytes = text.getvalue().encode()
    atomic_write(sweep_dir / "summary.csv", lambda f: f.write(csv_bytes), durable=False)
    write_json(sweep_dir / "summary.json", {
        "sweep": sweep_dir.name, "points": points,
        "trials": [{k: v for k, v in t.items() if k != "curve"} for t in trials]})
    _plot(sweep_dir / "learning_curves.png", trials)
    return points


def print_summary(sweep_dir: Path, points: list[dict[str, Any]]) -> None:
    """The per-point rows as a table on the terminal, and where the files are."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"sweep {sweep_dir.name}")
    for column in ("grid point", "seeds", "final mean +/- std", "final min..max",
                   "best mean", "env steps", "paused", "unfinished"):
        table.add_column(column)

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"

    for p in points:
        table.add_row(p["grid_point"], str(p["seeds"]),
                      f"{fmt(p['final_mean'])} +/- {fmt(p['final_std'])}",
                      f"{fmt(p['final_min'])}..{fmt(p['final_max'])}", fmt(p["best_mean"]),
                      f"{p['env_steps_mean']:.0f}", str(p["paused"]), str(p["unfinished"]))
    console = Console(soft_wrap=True)
    console.print(table)
    console.print(f"summary: {sweep_dir / 'summary.csv'}, {sweep_dir / 'summary.json'}, "
                  f"{sweep_dir / 'learning_curves.png'}", markup=False, highlight=False)


def _plot(path: Path, trials: list[dict[str, Any]]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for point in dict.fromkeys(t["grid_point"] for t in trials):
        curves = [dict(t["curve"]) for t in trials if t["grid_point"] == point and t["curve"]]
        if not curves:
            continue
        steps = sorted(set().union(*curves))
        values = [[c[s] for c in curves if s in c] for s in steps]
        ax.plot(steps, [statistics.mean(v) for v in values],
                label=f"{point} ({len(curves)} seeds)")
        ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel("evaluation return")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
