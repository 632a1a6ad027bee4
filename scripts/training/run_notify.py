"""What a run tells its `notify:` targets: one JSON object per event.

Fields (docs/notify.md): run, event (pause, finish, crash, warning), rule, reason,
env_steps, max_timesteps, checkpoint (absolute), resume_command, waiting (true when the
process waits for `rltrain continue` or `rltrain stop`), answer_with (those commands),
log_dir, host, pid, time.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from rltrain.scripts.training.outcome import RunOutcome
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import first_line
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.status import read_status


def answer_commands(run: str) -> list[str]:
    """The commands that answer a run waiting after its pause."""
    return [f"rltrain continue {run} [--set KEY=VALUE ...]", f"rltrain stop {run}"]


def _event(paths: RunPaths, config: TrainConfig, kind: str, **fields: Any) -> dict[str, Any]:
    checkpoint = fields.pop("checkpoint", None)
    checkpoint = None if checkpoint is None else str(Path(checkpoint).resolve())
    resumable = kind in ("pause", "crash") and checkpoint is not None
    return {"run": paths.name, "event": kind, "rule": None, "reason": None,
            "max_timesteps": config.max_timesteps, "checkpoint": checkpoint,
            "resume_command": f"rltrain resume --checkpoint {checkpoint}" if resumable else None,
            "waiting": False, "answer_with": None, **fields,
            "log_dir": str(paths.log_dir.resolve()), "host": socket.gethostname(),
            "pid": os.getpid(), "time": round(time.time(), 3)}


def outcome_event(paths: RunPaths, config: TrainConfig, outcome: RunOutcome,
                  waiting: bool) -> dict[str, Any]:
    """The pause or finish event of a run's outcome."""
    if outcome.status == "finished":
        return _event(paths, config, "finish", env_steps=outcome.env_steps,
                      checkpoint=outcome.checkpoint,
                      reason=f"reached max_timesteps ({config.max_timesteps})")
    return _event(paths, config, "pause", rule=outcome.rule, reason=outcome.reason,
                  env_steps=outcome.env_steps, checkpoint=outcome.checkpoint, waiting=waiting,
                  answer_with=answer_commands(paths.name) if waiting else None)


def crash_event(paths: RunPaths, config: TrainConfig, env_steps: int,
                exc: BaseException) -> dict[str, Any]:
    """The run ended with an exception (the env raised, a file could not be written, a
    second Ctrl-C, a bug). The checkpoint is the paused one written on the way out, if
    status.json says there is one."""
    status = read_status(paths.status_file) or {}
    paused = status.get("state") == "paused" and status.get("latest_checkpoint")
    checkpoint = None
    if paused:
        written = Path(status["latest_checkpoint"])
        checkpoint = written if written.is_absolute() else Path.cwd() / written
    reason = "aborted (a second Ctrl-C)" if isinstance(exc, KeyboardInterrupt) else (
        first_line(exc) or type(exc).__name__)
    return _event(paths, config, "crash", rule=type(exc).__name__, reason=reason,
                  env_steps=env_steps, checkpoint=checkpoint)


def warning_event(paths: RunPaths, config: TrainConfig, env_steps: int,
                  fields: dict[str, Any]) -> dict[str, Any]:
    """A rule's warning, as events.jsonl records it."""
    return _event(paths, config, "warning", rule=fields.get("rule"),
                  reason=fields.get("message"), env_steps=env_steps)
