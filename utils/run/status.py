"""`status.json`: the live state of a run, readable whether the run is alive or not.

The training process rewrites it atomically (temp file + rename) at every evaluation,
checkpoint, pause and end, and every few seconds in between as a heartbeat. Whether
the run is alive is decided by its recorded process id on this host: a run that
says "running" but whose process is gone ended without a clean stop (killed).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from rltrain.utils.io.checkpoint import pid_alive, write_json

# A run in one of these states has a live process (stuck: inside one env call for long).
LIVE_STATES = ("running", "stuck")


def write_status(path: Path, status: dict[str, Any]) -> None:
    data = {**status, "pid": os.getpid(), "host": socket.gethostname(),
            "updated_at": round(time.time(), 3)}
    write_json(path, data, indent=2)


def read_status(path: Path) -> dict[str, Any] | None:
    """The status a run wrote, or None where there is none or it is no JSON object."""
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def process_alive(status: dict[str, Any]) -> bool:
    """True if the process that wrote `status` still runs (on this host)."""
    if status.get("host") != socket.gethostname():
        return False
    try:
        return pid_alive(int(status["pid"]))
    except (KeyError, ValueError, TypeError):
        return False


def effective_state(status: dict[str, Any]) -> str:
    """The recorded state, with a dead "running" or "stuck" process reported as "stopped"."""
    state = status.get("state", "unknown")
    if state in LIVE_STATES and not process_alive(status):
        return "stopped"
    return state


class StatusFile:
    """A run's status.json, written from what its `parts` report (each has `status()`:
    the run's counters, the monitor's evaluations): at every change the owner names, after
    the env steps that are multiples of one of `freqs` (evaluations, checkpoints), and
    as a heartbeat at most every `every_seconds` in between."""

    def __init__(self, path: Path, fixed: dict[str, Any], parts: list[Any],
                 freqs: tuple[int, ...] = (), every_seconds: float = 5.0) -> None:
        self.path, self.fixed, self.parts = path, fixed, parts
        self.freqs, self.every_seconds = freqs, every_seconds
        self._mark = 0.0

    def write(self, state: str, pause_reason: str | None = None, **extra: Any) -> None:
        self._mark = time.monotonic()
        status: dict[str, Any] = {**self.fixed, "state": state}
        for part in self.parts:
            status.update(part.status())
        write_status(self.path, {**status, "pause_reason": pause_reason, **extra})

    def after_step(self, env_steps: int, state: str) -> None:
        if any(env_steps % freq == 0 for freq in self.freqs):
            self.write(state)
        if env_steps % 100 == 0 and time.monotonic() - self._mark > self.every_seconds:
            self.write(state)
