"""Checkpoint files: atomic writes, safe loads, retention.

A checkpoint is a plain dict of tensors, numbers, strings and containers, so
`torch.load(path, weights_only=True)` loads it and nothing in it can run code. Writes
go to a temporary file in the same folder, are fsynced, then renamed over the target:
a crash or `kill -9` at any moment leaves every existing checkpoint whole.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Callable

from rltrain.agents.registry import algorithm, trained_names
from rltrain.utils.errors import CheckpointError, OutputError, os_error_in
from rltrain.utils.io.checkpoint_bounds import check_bounds
from rltrain.utils.io.checkpoint_folder import RLLIB_MARK, folder_message

FORMAT = "rltrain-checkpoint"
FORMAT_VERSION = 1
# Every checkpoint's keys; each algorithm adds the keys its agent's state_dict writes
# (agents/base.py `Implementation.state_keys`: its target networks, if it keeps any).
REQUIRED_KEYS = ("actor", "critic", "actor_optimizer", "critic_optimizer", "total_steps",
                 "config")
PERIODIC = re.compile(r"^checkpoint_step_(\d+)\.pt$")


def json_safe(value: Any) -> Any:
    """JSON has no NaN/inf: write them as readable strings ("nan", "inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def to_json(data: Any, indent: int | None = None) -> str:
    """Strict JSON (what jq and JavaScript parse): NaN and inf as strings."""
    return json.dumps(json_safe(data), indent=indent, allow_nan=False)


def write_json(path: Path, data: Any, indent: int = 1) -> None:
    """A small JSON file (status, summaries, diagnostics), atomically and without fsync."""
    text = to_json(data, indent).encode()
    atomic_write(path, lambda f: f.write(text), durable=False)


def atomic_write(path: Path, write: Callable[[Any], None], durable: bool = True) -> None:
    """Call `write(file)` on a temp file, fsync it, and rename it to `path` in one step.

    Readers see the old file or the new one, never a mix. `durable=False` skips the
    fsyncs (for small status files, where losing the latest version to a power cut is ok).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)  # a stale one, or a link planted there: never followed
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except Exception as exc:
        cause = os_error_in(exc)
        if cause is None:
            raise
        raise OutputError(f"cannot write '{path}': {cause.strerror or cause}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def checkpoint_algo(data: dict[str, Any], path: object = "") -> str:
    """The algorithm whose agent a checkpoint holds: its `algo` record (a checkpoint
    written before that record: its config's, else ddpg). A name this rltrain does not
    know, or a record that disagrees with the config, is a CheckpointError."""
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    algo = data.get("algo", config.get("algo", "ddpg"))
    if not isinstance(algo, str) or algo not in trained_names():
        raise CheckpointError(f"checkpoint '{path}' names algo {algo!r}, which this rltrain "
                              f"does not train (it trains {', '.join(trained_names())})")
    if config.get("algo", algo) != algo:
        raise CheckpointError(f"checkpoint '{path}' holds a {algo} agent but its config says "
                              f"algo {config.get('algo')!r}")
    return algo


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` (with the format marker added) atomically to `path`."""
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    assert not missing, f"checkpoint payload lacks {missing}"
    save_tensors(path, {"format": FORMAT, "format_version": FORMAT_VERSION, **payload})


def save_tensors(path: Path, data: Any) -> None:
    """`torch.save` atomically, every tensor moved to the CPU first: a file written by a
    CUDA run then loads with a plain `torch.load(path, weights_only=True)` on a machine
    without CUDA too (torch tags each tensor with its device and would restore it there)."""
    import torch  # here, not at the top: `rltrain --help` and `status` need no torch

    on_cpu = _on_cpu(data)
    atomic_write(path, lambda f: torch.save(on_cpu, f))


def _on_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint safely onto the CPU, every field checked (utils/io/checkpoint_fields.py),
    or raise one clear `CheckpointError`."""

    from rltrain.utils.io.checkpoint_fields import check_fields

    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' not found")
    if path.is_dir():
        raise CheckpointError(folder_message(path))
    if (path.parent / RLLIB_MARK).is_file():  # a file of an RLlib checkpoint folder
        raise CheckpointError(folder_message(path.parent))
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' is not a file")
    data = load_tensors(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(_not_a_checkpoint(path, data))
    if data.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint '{path}' has format version "
                              f"{data.get('format_version')}; this rltrain reads "
                              f"{FORMAT_VERSION}")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    counters: tuple[str, ...] = ()
    if not missing:
        implementation = algorithm(checkpoint_algo(data, path)).implementation()
        missing = [k for k in implementation.state_keys if k not in data]
        counters = implementation.network_counters
    if missing:
        raise CheckpointError(f"checkpoint '{path}' is incomplete: missing {', '.join(missing)}")
    check_fields(data, path, counters)  # every field in range, before anything uses one
    return data


def load_tensors(path: Path) -> Any:
    """What `save_tensors` wrote to `path`, loaded on the CPU with weights_only=True after
    the archive's checks (what loading may cost, checksums), or one CheckpointError."""
    import torch

    _check_archive(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any failure to parse a user file is a user-facing error
        if "weights only load failed" in str(exc).lower():
            raise CheckpointError(
                f"refused to load '{path}': it contains objects other than tensors and "
                "plain data (possibly code); rltrain loads checkpoints with "
                "weights_only=True and never unpickles code") from None
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt "
                              f"({type(exc).__name__})") from None


def _not_a_checkpoint(path: Path, data: Any) -> str:
    """Why `path` is no rltrain checkpoint: a plain loop's saved state (a Watcher's pause
    or best model) is said to be one, with how to continue it."""
    if isinstance(data, dict) and {"env_steps", "critic"} <= data.keys():
        return (f"'{path}' is the state a Watcher saved (a plain training loop's), not an "
                "rltrain checkpoint: `rltrain resume` and `eval` cannot run your loop; load "
                "it in your loop with torch.load(path, weights_only=True), fix the cause, "
                "and run the loop on, watched by Watcher(..., continue_from=path)")
    return f"'{path}' is not an rltrain checkpoint"


# A file in every zip archive Stable-Baselines3's `save` writes.
SB3_MARK = "_stable_baselines3_version"


def _check_archive(path: Path) -> None:
    """torch.save writes a zip archive; check what loading it may cost (before anything
    is unpacked: utils/io/checkpoint_bounds.py) and its checksums, which torch.load does
    not check: a file damaged inside a tensor's bytes would otherwise load and run."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if not b"PK\x03\x04".startswith(magic):  # an empty or cut-off file is "truncated"
            raise CheckpointError(f"'{path}' is not an rltrain checkpoint (not the zip "
                                  "archive that torch.save writes)")
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if SB3_MARK not in names:
                check_bounds(path, archive)  # before anything unpacks an entry
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
            RuntimeError):  # the last two: a compression or encryption flag torch never sets
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt") from None
    if SB3_MARK in names:
        raise CheckpointError(_sb3_model_message(path))
    if damaged is not None:
        raise CheckpointError(f"checkpoint '{path}' is corrupt: '{damaged}' in it fails its "
                              "checksum")


def _sb3_model_message(path: Path) -> str:
    """What to do with a Stable-Baselines3 model, which rltrain's resume cannot continue:
    SB3 does, in Python. One in the checkpoint folder of a run (whose log folder, under
    logs/ here or beside its checkpoints folder, has a status.json) continues that run."""
    head = (f"'{path}' is a Stable-Baselines3 model, not an rltrain checkpoint: continue "
            f"it in Python with SB3 (Model.load, load_replay_buffer, learn with "
            f"reset_num_timesteps=False")
    folder = path.resolve().parent
    run = folder.name
    if not any((logs / run / "status.json").is_file()
               for logs in (Path("logs"), folder.parent.parent / "logs")):
        return f"{head}; watch it with callback=RltrainCallback(run_name=...))"
    return (f"{head} and callback=RltrainCallback(run_name=\"{run}\")); `rltrain status "
            f"{run}` prints the exact lines")


def check_spaces(payload: dict[str, Any], current: dict[str, Any], path: str | Path) -> None:
    """The checkpoint's networks must fit the env's observation and action spaces
    (`current`: `utils.envs.space_record` of the env)."""
    saved = dict(payload.get("spaces", {}))
    if isinstance(saved.get("action_low"), list):  # the action size before its bounds
        saved["action_dim"] = len(saved["action_low"])
    current = {**current, "action_dim": len(current["action_low"])}
    for key in ("obs_dim", "action_dim", "action_low", "action_high"):
        if saved.get(key) != current[key]:
            raise CheckpointError(
                f"checkpoint '{path}' does not fit env '{current['env_name']}': "
                f"{key} is {saved.get(key)} in the checkpoint but {current[key]} in the env")


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete temp files that a process killed mid-write left behind (never valid files)."""
    removed = []
    for path in folder.glob(".*.tmp-*") if folder.is_dir() else []:
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def pid_alive(pid: int) -> bool:
    """True if a process with this pid runs on this machine (an ended one that its parent
    has not yet reaped, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:  # Linux: the state is the field after the command's closing parenthesis
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:][:1] != "Z"


def periodic_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of the periodic checkpoints in `folder`, oldest first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PERIODIC.match(p.name))]
    return sorted(found)


def prune_periodic(folder: Path, keep: int) -> None:
    """Delete all but the newest `keep` periodic checkpoints (best/paused are never touched)."""
    for _, path in periodic_checkpoints(folder)[:-keep]:
        path.unlink(missing_ok=True)
