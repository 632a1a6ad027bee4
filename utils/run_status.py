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

from rltrain.utils.checkpoint import pid_alive, write_json


def write_status(path: Path, status: dict[str, Any]) -> None:
    data = {**status, "pid": os.getpid(), "host": socket.gethostname(),
            "updated_at": round(time.time(), 3)}
    write_json(path, data, indent=2)


def read_status(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def process_alive(status: dict[str, Any]) -> bool:
    """True if the process that wrote `status` still runs (on this host)."""
    if status.get("host") != socket.gethostname():
        return False
    try:
        return pid_alive(int(status["pid"]))
    except (KeyError, ValueError, TypeError):
        return False


def effective_state(status: dict[str, Any]) -> str:
    """The recorded state, with a dead "running" process reported as "stopped"."""
    state = status.get("state", "unknown")
    if state == "running" and not process_alive(status):
        return "stopped"
    return state
