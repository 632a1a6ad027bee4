"""`status.json`: the live state of a run, readable whether the run is alive or not.

The training process rewrites it atomically (temp file + rename) at every evaluation,
checkpoint, pause and end, and every few seconds in between as a heartbeat. Whether
the run is alive is decided by its recorded process on this host: its id, paired with
the process's start time and the machine's boot id, since an ended run's id may be
reused by another process (which `rltrain pause` would otherwise signal). A run that
says "running" but whose process is gone ended without a clean stop (killed).
"""

from __future__ import annotations

import functools
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
    data = {**status, "pid": os.getpid(), **(process_identity(os.getpid()) or {}),
            "host": socket.gethostname(), "updated_at": round(time.time(), 3)}
    write_json(path, data, indent=2)


@functools.lru_cache(maxsize=4)
def _boot_id() -> str:
    """This boot of the machine: Linux's boot id, else the boot time."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        import psutil

        return f"boot-{psutil.boot_time():.0f}"


def process_identity(pid: int) -> dict[str, Any] | None:
    """What tells process `pid` apart from a later one given the same id: its start time
    (seconds since the epoch) and the boot id. None: no such process."""
    import psutil

    try:
        started = psutil.Process(pid).create_time()
    except (psutil.Error, OSError, ValueError):
        return None
    return {"pid_started": round(started, 2), "boot_id": _boot_id()}


def same_process(pid: int, status: dict[str, Any]) -> bool:
    """True if the live process `pid` is the one that wrote `status` (a status written
    before the start time was recorded: its id is all there is to go by)."""
    started, boot = status.get("pid_started"), status.get("boot_id")
    if started is None and boot is None:
        return True
    now = process_identity(pid)
    try:
        return (now is not None and boot == now["boot_id"]
                and abs(float(started) - now["pid_started"]) < 0.05)
    except (TypeError, ValueError):
        return False


NUMBER = (int, float)
# The type of each field readers compute with; a field of another type (a damaged or
# hand-edited file) is read as absent. NaN and inf are written as strings.
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(("env_steps", "max_timesteps", "episodes", "updates", "best_eval_step",
                     "evals_since_best", "latest_episode_non_finite_rewards", "pid"), int),
    **dict.fromkeys(("state", "run", "host", "latest_checkpoint", "pause_reason",
                     "continue_with", "checkpoint_dir", "boot_id", "integration"), str),
    **dict.fromkeys(("waiting", "stuck", "workers"), dict),
    **dict.fromkeys(("latest_eval", "best_eval", "latest_episode_return"), (*NUMBER, str)),
    **dict.fromkeys(("updated_at", "pid_started"), NUMBER),
}


def read_status(path: Path) -> dict[str, Any] | None:
    """The status a run wrote, or None where there is none or it is no JSON object; its
    fields of the wrong type (`unreadable_fields`) left out."""
    status = _read_json_object(path)
    if status is None:
        return None
    bad = unreadable_fields(status)
    return {k: v for k, v in status.items() if k not in bad}


def _read_json_object(path: Path) -> dict[str, Any] | None:
    try:
        status = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return status if isinstance(status, dict) else None


def unreadable_fields(status: dict[str, Any]) -> list[str]:
    """The fields of `status` whose type is not the one rltrain writes (None is one)."""
    bad = []
    for key, kind in FIELD_TYPES.items():
        value = status.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            bad.append(key)
    waiting = status.get("waiting")
    if isinstance(waiting, dict) and not isinstance(waiting.get("since"), NUMBER):
        bad.append("waiting")
    return bad


def status_problem(path: Path) -> str | None:
    """What of a run's status.json could not be read (None: all of it, or no file)."""
    if not path.exists():
        return None
    status = _read_json_object(path)
    if status is None:
        return f"{path.name} (not a JSON object)"
    bad = unreadable_fields(status)
    return f"{path.name} fields {', '.join(bad)}" if bad else None


def process_alive(status: dict[str, Any]) -> bool:
    """True if the process that wrote `status` still runs (on this host)."""
    if status.get("host") != socket.gethostname():
        return False
    try:
        pid = int(status["pid"])
    except (KeyError, ValueError, TypeError, OverflowError):
        return False
    return pid_alive(pid) and same_process(pid, status)


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
