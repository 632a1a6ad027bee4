"""`rltrain runs`: the runs under a log folder, newest first, from each run's status.json.

A run folder is a direct child of the log folder holding a status.json or the config.yaml
every run writes first; other folders (a sweep's own folder, anything else) are skipped.
Automatic run names carry timestamps, so this is how one finds a run's name for
`rltrain status`, `pause` or `diagnose`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click

from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import to_json
from rltrain.utils.run.folders import CONFIG_FILE, STATUS_FILE
from rltrain.utils.run.status import effective_state, read_status


def run_row(folder: Path) -> dict[str, Any] | None:
    """One run's line, or None when `folder` is not a run folder."""
    status_path, config_path = folder / STATUS_FILE, folder / CONFIG_FILE
    if not status_path.is_file() and not config_path.is_file():
        return None
    status = read_status(status_path)
    if not isinstance(status, dict):  # not started yet, or status.json damaged
        state = "unreadable" if status_path.exists() else "not started"
        changed = max(p.stat().st_mtime for p in (status_path, config_path) if p.exists())
        return {"run": folder.name, "state": state, "env_steps": None, "max_timesteps": None,
                "best_eval": None, "best_eval_step": None, "updated_at": round(changed, 3)}
    updated = status.get("updated_at")
    if not _number(updated):
        updated = status_path.stat().st_mtime
    return {"run": folder.name, "state": effective_state(status),
            "env_steps": status.get("env_steps"), "max_timesteps": status.get("max_timesteps"),
            "best_eval": status.get("best_eval"), "best_eval_step": status.get("best_eval_step"),
            "updated_at": round(float(updated), 3)}


def list_runs(log_dir: Path) -> list[dict[str, Any]]:
    """Every run folder directly under `log_dir`, the most recently changed first."""
    if not log_dir.is_dir():
        raise UserError(f"log folder '{log_dir}' does not exist (give the one runs were "
                        "trained with: --log-dir DIR)")
    rows = [row for folder in log_dir.iterdir() if folder.is_dir()
            and (row := run_row(folder)) is not None]
    return sorted(rows, key=lambda row: (-row["updated_at"], row["run"]))


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _steps(row: dict[str, Any]) -> str:
    if row["env_steps"] is None:
        return "-"
    total = f"/{row['max_timesteps']}" if row["max_timesteps"] is not None else ""
    return f"{row['env_steps']}{total}"


def _best(row: dict[str, Any]) -> str:
    best = row["best_eval"]
    if best is None:
        return "-"
    shown = f"{best:.1f}" if _number(best) else str(best)  # NaN is stored as "nan"
    return f"{shown} (step {row['best_eval_step']})"


def _table(rows: list[dict[str, Any]]) -> list[str]:
    header = ("RUN", "STATE", "ENV STEPS", "BEST EVAL", "LAST CHANGE")
    cells = [header] + [
        (row["run"], row["state"], _steps(row), _best(row),
         time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["updated_at"])))
        for row in rows]
    widths = [max(len(str(line[i])) for line in cells) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True))
            .rstrip() for line in cells]


@click.command("runs")
@click.option("--log-dir", default="logs", show_default=True, metavar="DIR",
              help="The log folder the runs were trained with (the config's log_dir).")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list (updated_at: seconds since the epoch).")
def runs(log_dir: str, as_json: bool) -> None:
    """List the runs under the log folder, newest first: name, state, env steps, best
    evaluation and when it last changed."""
    rows = list_runs(Path(log_dir))
    if as_json:
        click.echo(to_json(rows, indent=2))
    elif not rows:
        click.echo(f"no runs under {log_dir}")
    else:
        click.echo("\n".join(_table(rows)))
