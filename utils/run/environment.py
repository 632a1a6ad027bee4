"""The software and machine a run trains on, recorded in each checkpoint, so that a resume
can say when bit-exact continuation cannot be promised.

Another torch, NumPy or gymnasium build can change float results or random streams;
another intra-op thread count changes the order of parallel reductions; another CPU
instruction set (AVX2 vs AVX-512) picks other kernels. Any of them lets a resumed run go
on correctly but not bit-for-bit like the run that was never stopped.
"""

from __future__ import annotations

import platform
from typing import Any

import gymnasium
import numpy as np
import torch

# key -> the type its value must have in a checkpoint's record
FIELDS: dict[str, type] = {
    "python": str, "torch": str, "gymnasium": str, "numpy": str,
    "torch_threads": int, "device": str, "cpu_capability": str,
}

UNREADABLE = ("environment record unreadable: the checkpoint's record of the machine "
              "that wrote it is malformed and was ignored, so whether this resume can be "
              "bit-exact is not known")


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels were chosen for (e.g. AVX2, AVX512)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):  # a torch without the query
        return "unknown"


def environment_record(device: torch.device) -> dict[str, Any]:
    """The current process's record, for a run training on `device`."""
    # Plain str and int: torch's TorchVersion (a str subclass) would not load back with
    # weights_only=True.
    return {
        "python": platform.python_version(), "torch": str(torch.__version__),
        "gymnasium": str(gymnasium.__version__), "numpy": str(np.__version__),
        "torch_threads": int(torch.get_num_threads()), "device": str(device.type),
        "cpu_capability": cpu_capability(),
    }


def _readable(record: Any) -> bool:
    if not isinstance(record, dict):
        return False
    return all(key in FIELDS and type(value) is FIELDS[key] for key, value in record.items())


def environment_warning(saved: Any, current: dict[str, Any]) -> str | None:
    """One line naming what differs between the checkpoint's record and `current`, or
    None when nothing does. A checkpoint from before the record (None) is not checked;
    a record of the wrong shape (edited or forged) is ignored, saying so."""
    if saved is None:
        return None
    if not _readable(saved):
        return UNREADABLE
    differ = [f"{key} {saved[key]} -> {current[key]}" for key in FIELDS
              if key in saved and saved[key] != current.get(key)]
    if not differ:
        return None
    return ("this machine differs from the one that wrote the checkpoint ("
            + ", ".join(differ) + "): the run goes on correctly, but bit-exact "
            "continuation cannot be promised")
