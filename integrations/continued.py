"""A watched run that goes on: another `learn()` call, or a saved model trained on under
the same run name, continues the run's folder (its steps, episodes, logs and findings)
instead of starting a new one.

rltrain's own `resume` restores the watch from its checkpoint; a library's checkpoint
(an SB3 `.zip`) does not hold it, so a pause also writes the watch's state beside it
(`paused_at_step_<N>_watch_state.pt`: the monitor, diagnostics, metrics and rules) and a
run continued from that step picks it up. From any other step the counts come from the
run's metrics.jsonl and its rules start afresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import load_tensors, save_tensors
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.run.status import read_status


@dataclass(frozen=True)
class Continuation:
    """Where a watched run goes on: after env step `env_steps`, with `episodes` completed
    (the latest returning `last_return`); `state`: the watch's state at that step (None:
    its rules and diagnostics start afresh); `message`: the resume line of its logs."""

    env_steps: int
    episodes: int
    last_return: float | None
    state: dict[str, Any] | None
    message: str


def watch_state_file(paths: RunPaths, env_steps: int) -> Path:
    return paths.checkpoint_dir / f"paused_at_step_{env_steps}_watch_state.pt"


def save_watch_state(paths: RunPaths, env_steps: int, state: dict[str, Any]) -> Path:
    path = watch_state_file(paths, env_steps)
    save_tensors(path, state)
    return path


def load_watch_state(paths: RunPaths, env_steps: int) -> dict[str, Any] | None:
    """The watch's state a pause at `env_steps` wrote, or None (no pause there)."""
    path = watch_state_file(paths, env_steps)
    if not path.is_file():
        return None
    return load_tensors(path)  # its size and depth bounded, as a checkpoint's


def run_integration(paths: RunPaths) -> str | None:
    """The `integration` status.json names for an existing run ("" for rltrain's own
    training); None where the run has no status yet (not a run)."""
    status = read_status(paths.status_file)
    return None if status is None else str(status.get("integration") or "")


def from_logs(paths: RunPaths, env_steps: int, how: str) -> Continuation:
    """The run continued after `env_steps`: its episodes up to then, from metrics.jsonl
    (a resume line there drops the lines a later, abandoned history wrote), and the
    watch's state where a pause at that step saved it."""
    episodes = [m for m in read_jsonl(paths.metrics_file)
                if m.get("kind") == "episode" and m.get("env_steps", 0) <= env_steps]
    last = episodes[-1].get("episode_return") if episodes else None
    state = load_watch_state(paths, env_steps)
    rules = "its rules go on" if state is not None else "its rules start afresh"
    return Continuation(env_steps, len(episodes),
                        None if last is None or not math.isfinite(last) else float(last),
                        state, f"continued at step {env_steps} ({how}); {rules}")


def check_continuable(paths: RunPaths, library: str, how: str) -> None:
    """A run of `library` may be continued by it; any other run under the name is a
    UserError saying what to do instead."""
    integration = run_integration(paths)
    if integration is None or not integration.startswith(library):
        owner = "rltrain's own training" if integration == "" else (integration or "no run")
        raise UserError(f"run '{paths.name}' already exists ({paths.log_dir}, written by "
                        f"{owner}); {how}, or choose another run_name")
