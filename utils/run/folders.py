"""Run folders: naming, paths of every file a run writes, and finding a run by name.

A run named R writes `<log_dir>/R/` (TensorBoard events, config.yaml, command.txt,
metrics.jsonl, events.jsonl, status.json) and `<checkpoint_dir>/R/` (checkpoints).
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows: no lock, only the status check
    fcntl = None  # type: ignore[assignment]

from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import CheckpointError, OutputError, UserError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.io.run_files import open_run_file
from rltrain.utils.run.status import LIVE_STATES, effective_state, read_status

# The files of a run's log folder; readers that only have the folder use these names too.
METRICS_FILE = "metrics.jsonl"
EVENTS_FILE = "events.jsonl"
STATUS_FILE = "status.json"
DIAGNOSTICS_FILE = "flow1.jsonl"
PAUSE_REQUEST_FILE = "pause.request"
INSTRUCTION_FILE = "instruction.request"  # `rltrain continue` / `stop` to a waiting run
TAKEN_FILE = "instruction.taken"  # the one the waiting run took: its id and action
CONFIG_FILE = "config.yaml"
LOCK_FILE = "run.lock"
# Files named after the env step they were written at: periodic and paused checkpoints,
# and the diagnostics' files in these log subfolders (`heatmap_step_200.png`, `pause_200.mp4`).
STEP_CHECKPOINT = re.compile(r"^(?:checkpoint_step|paused_at_step)_(\d+)\.pt$")
STEP_FOLDERS = ("heatmaps", "traces", "videos")
STEP_IN_NAME = re.compile(r"_(\d+)\.[A-Za-z0-9]+$")
SUPERSEDED_PREFIX = "superseded_after_step_"


@dataclass(frozen=True)
class RunPaths:
    name: str
    log_dir: Path
    checkpoint_dir: Path

    @property
    def config_file(self) -> Path:
        return self.log_dir / CONFIG_FILE

    @property
    def command_file(self) -> Path:
        return self.log_dir / "command.txt"

    @property
    def metrics_file(self) -> Path:
        return self.log_dir / METRICS_FILE

    @property
    def events_file(self) -> Path:
        return self.log_dir / EVENTS_FILE

    @property
    def diagnostics_file(self) -> Path:
        return self.log_dir / DIAGNOSTICS_FILE

    @property
    def status_file(self) -> Path:
        return self.log_dir / STATUS_FILE

    @property
    def pause_request_file(self) -> Path:
        return self.log_dir / PAUSE_REQUEST_FILE

    @property
    def instruction_file(self) -> Path:
        return self.log_dir / INSTRUCTION_FILE

    def periodic_checkpoint(self, env_steps: int) -> Path:
        return self.checkpoint_dir / f"checkpoint_step_{env_steps}.pt"

    def paused_checkpoint(self, env_steps: int) -> Path:
        return self.checkpoint_dir / f"paused_at_step_{env_steps}.pt"

    def env_error_file(self, env_steps: int) -> Path:
        """The traceback of an exception the env raised at this step."""
        return self.log_dir / f"env_error_step_{env_steps}.txt"

    @property
    def best_model(self) -> Path:
        return self.checkpoint_dir / "best_model.pt"


def relative_to_cwd(path: Path) -> Path:
    """`path` relative to the current folder when it lies inside it (as a run started here
    with the shipped configs' relative folders names its files), else absolute."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd())
    except ValueError:
        return resolved


def default_run_name(config: TrainConfig) -> str:
    """<env>_<algo>_s<seed>_<YYYYmmdd-HHMMSS>, with characters unsafe in paths replaced."""
    env = "".join(c if c.isalnum() or c in "-_." else "-" for c in config.env_name)
    return f"{env}_{config.algo}_s{config.seed}_{time.strftime('%Y%m%d-%H%M%S')}"


def paths_for(config: TrainConfig, name: str) -> RunPaths:
    return RunPaths(name, Path(config.log_dir) / name, Path(config.checkpoint_dir) / name)


def create_run(config: TrainConfig) -> RunPaths:
    """Make the folders of a new run; never reuse an existing run's folders (empty ones,
    left by a start that failed, are not a run)."""
    if config.run_name is not None:
        paths = paths_for(config, config.run_name)
        taken = _taken(paths)
        if taken is not None:
            raise UserError(f"run '{config.run_name}' already exists ({taken}); resume it with "
                            "`rltrain resume --checkpoint ...` or choose another --run-name")
    else:
        base = default_run_name(config)
        paths, n = paths_for(config, base), 1
        while _taken(paths) is not None:
            n += 1
            paths = paths_for(config, f"{base}-{n}")
    made = []
    try:
        for folder in (paths.log_dir, paths.checkpoint_dir):
            if not folder.is_dir():
                folder.mkdir(parents=True)
                made.append(folder)
    except OSError as exc:
        for folder in made:
            folder.rmdir()
        raise OutputError(f"cannot create the run folder '{exc.filename}': "
                          f"{exc.strerror or exc}") from None
    return paths


def _taken(paths: RunPaths) -> Path | None:
    """The first of the run's folders that exists and holds something (a lock file alone,
    left by a start that failed, is not something)."""
    for folder in (paths.log_dir, paths.checkpoint_dir):
        if folder.exists() and (not folder.is_dir()
                                or any(f.name != LOCK_FILE for f in folder.iterdir())):
            return folder
    return None


# The lock files this process holds (RunLock), closed in a child it forks: a child
# holding a copy of one keeps the flock after this process has ended (an env that forks
# a helper process kept its run locked).
_HELD: set[BinaryIO] = set()


def _close_held_in_child() -> None:
    for file in list(_HELD):
        file.close()  # the child's copy only: the parent's lock stays
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_in_child)


class RunLock:
    """This process's claim on a run's folders: an exclusive `flock` on
    `<log_dir>/<run>/run.lock`, so that no second rltrain process trains, resumes or
    forks into them while this one does (two resumes of one checkpoint started together
    would both write its logs and checkpoints). The OS releases it when the process ends,
    however it ends: a killed run never leaves its folders locked. Where there is no
    `flock` (Windows), a run whose status.json says it is running is refused instead."""

    def __init__(self, paths: RunPaths) -> None:
        self.file: BinaryIO | None = None
        if fcntl is None:
            status = read_status(paths.status_file)
            if status is not None and effective_state(status) in LIVE_STATES:
                raise self._in_use(paths, f"pid {status.get('pid')}")
            return
        path = paths.log_dir / LOCK_FILE
        if paths.log_dir.exists() and not paths.log_dir.is_dir():  # mkdir says "File exists"
            raise OutputError(f"cannot use the run's log folder '{paths.log_dir}': it is not a "
                              "directory (a file has its name)")
        try:
            paths.log_dir.mkdir(parents=True, exist_ok=True)
            file = open_run_file(path, binary=True)
        except OSError as exc:
            raise OutputError(f"cannot create the run's lock file '{path}': "
                              f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            file.close()
            raise self._in_use(paths, f"it holds {path}") from None
        self.file = file
        _HELD.add(file)

    @staticmethod
    def _in_use(paths: RunPaths, evidence: str) -> UserError:
        status = read_status(paths.status_file) or {}
        if status.get("waiting") and effective_state(status) == "paused":
            return UserError(f"run '{paths.name}' is paused and its process waits for an "
                             f"instruction (pid {status.get('pid')}): rltrain continue "
                             f"{paths.name} [--set KEY=VALUE ...], or rltrain stop "
                             f"{paths.name} and then resume it")
        return UserError(f"run '{paths.name}' is in use by another rltrain process "
                         f"({evidence}); wait for it to end, pause it (`rltrain pause "
                         f"{paths.name}`), or fork with --run-name NEW")

    def release(self) -> None:
        if self.file is not None:
            _HELD.discard(self.file)
            self.file.close()  # closing the file releases the lock
            self.file = None


def find_run_log_dir(run: str, log_dir: str = "logs") -> Path:
    """A run given as a folder path, or as a name under `log_dir`."""
    path = Path(run)
    if path.is_dir() and (path / CONFIG_FILE).exists():
        return path
    candidate = Path(log_dir) / run
    if candidate.is_dir() and (candidate / CONFIG_FILE).exists():
        return candidate
    close = difflib.get_close_matches(run, run_names(Path(log_dir)), n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UserError(f"run '{run}' not found (neither a run folder nor a run name under "
                    f"'{log_dir}/'){hint}")


def run_names(log_dir: Path) -> list[str]:
    """The names of the runs under `log_dir` (folders with a config.yaml)."""
    try:
        return sorted(p.name for p in log_dir.iterdir() if (p / CONFIG_FILE).is_file())
    except OSError:
        return []


def set_aside_later(paths: RunPaths, env_steps: int) -> dict[Path, list[str]]:
    """Move the files a run wrote after `env_steps` into a `superseded_after_step_<N>_<time>/`
    folder in its checkpoint and log folders; return each such folder with what it got.

    A run resumed into its own folders from an earlier checkpoint starts a new history
    from that step. The checkpoints (the best model too, if saved later), heatmaps,
    traces and videos that its abandoned continuation wrote would otherwise mix with the
    new ones, and be pruned, read or overwritten as if they were. Nothing is deleted.
    """
    later = [p for p in _step_files(paths.checkpoint_dir, STEP_CHECKPOINT)
             if _step(p, STEP_CHECKPOINT) > env_steps]
    for folder in STEP_FOLDERS:
        later += [p for p in _step_files(paths.log_dir / folder, STEP_IN_NAME)
                  if _step(p, STEP_IN_NAME) > env_steps]
    if saved_at(paths.best_model) > env_steps:
        later.append(paths.best_model)
    name = f"{SUPERSEDED_PREFIX}{env_steps}_{time.strftime('%Y%m%d-%H%M%S')}"
    moved: dict[Path, list[str]] = {}
    for path in later:
        root = paths.checkpoint_dir if path.parent == paths.checkpoint_dir else paths.log_dir
        relative = path.relative_to(root)
        target = root / name / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        moved.setdefault(root / name, []).append(str(relative))
    return moved


def newest_checkpoint(paths: RunPaths) -> Path | None:
    """The run's periodic or paused checkpoint of the latest env step (None: it has none)."""
    files = _step_files(paths.checkpoint_dir, STEP_CHECKPOINT)
    return max(files, key=lambda p: _step(p, STEP_CHECKPOINT), default=None)


def set_aside_attempt(paths: RunPaths) -> list[Path]:
    """Rename the folders of an earlier attempt at this run, one that left no checkpoint to
    resume (a sweep trial stopped before its first), to `<run>.attempt-<k>`, so that the
    run can start again under its name; nothing is deleted. Returns the renamed folders.
    Refused (UserError) while a process holds the run."""
    if _taken(paths) is None:
        return []
    folders = [f for f in (paths.log_dir, paths.checkpoint_dir) if f.exists()]
    lock = RunLock(paths)
    try:
        k = 1
        while any(f.with_name(f"{f.name}.attempt-{k}").exists() for f in folders):
            k += 1
        return [f.rename(f.with_name(f"{f.name}.attempt-{k}")) for f in folders]
    finally:
        lock.release()


def inherit_best_model(parent_checkpoint_dir: Path, paths: RunPaths, env_steps: int) -> bool:
    """A fork from step `env_steps` starts with its parent's best model, if that was saved
    by then (their history up to that step is the same)."""
    parent_best = parent_checkpoint_dir / paths.best_model.name
    if not 0 <= saved_at(parent_best) <= env_steps:
        return False
    shutil.copy2(parent_best, paths.best_model)
    return True


def _step_files(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if p.is_file() and pattern.search(p.name)]


def _step(path: Path, pattern: re.Pattern[str]) -> int:
    match = pattern.search(path.name)
    assert match is not None
    return int(match.group(1))


def checkpoint_step(checkpoint: Path) -> int:
    """The env step of a periodic or paused checkpoint, from its name (reading the file
    would load its replay buffer); of any other, from its contents (`saved_at`)."""
    match = STEP_CHECKPOINT.search(checkpoint.name)
    return int(match.group(1)) if match else saved_at(checkpoint)


def saved_at(checkpoint: Path) -> int:
    """The env step a checkpoint was written at; -1 if there is none or it is unreadable
    (an unreadable best model stays where it is, for the user to look at)."""
    if not checkpoint.is_file():
        return -1
    try:
        return int(load_checkpoint(checkpoint)["total_steps"])
    except CheckpointError:
        return -1
