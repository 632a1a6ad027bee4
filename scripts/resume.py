"""A trainer and the run folders it may write, ready to run: `prepare_train` for a new run,
`prepare_resume` for `rltrain resume` (a checkpoint's config plus changes, its run
folders, the restored trainer).

"Change parameters and continue" is `--set` on resume; keys that would not fit the
checkpoint (env, seed, algorithm, network and buffer sizes) cannot change. Without
`--run-name` the run continues in its own folders; with it, the run is forked into new
ones and the original stays as it was.
A re-seeded fork (`fork_seed`, for `rltrain diagnose --verify --seeds K`) starts from
the same state with new random streams instead of the checkpoint's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rltrain.scripts.run_state import ResumeInfo, check_resumable
from rltrain.scripts.trainer import Trainer
from rltrain.utils.config.fields import FIXED_ON_RESUME
from rltrain.utils.config.loader import apply_overrides, config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import CheckpointError, ConfigError, UserError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.device import resolve_device
from rltrain.utils.run.folders import (
    SUPERSEDED_PREFIX,
    RunLock,
    RunPaths,
    create_run,
    inherit_best_model,
    paths_for,
    relative_to_cwd,
    set_aside_later,
)
from rltrain.utils.run.notify_target import mask_text

# The checkpoint's arrays, networks and episodes are sized by these (dotted: nested
# sections).


def _value(config: TrainConfig, key: str) -> Any:
    return functools.reduce(getattr, key.split("."), config)


def resume_config(payload: dict[str, Any], overrides: tuple[str, ...], path: str) -> TrainConfig:
    """The checkpoint's config with `--set` changes, refusing ones that cannot apply."""
    try:
        saved = config_from_dict(payload["config"])
    except UserError as exc:
        raise CheckpointError(f"checkpoint '{path}' holds an invalid config: {exc}") from None
    config = config_from_dict(apply_overrides(config_to_dict(saved), overrides))
    for key in FIXED_ON_RESUME:
        if _value(config, key) != _value(saved, key):
            raise UserError(f"cannot change '{key}' on resume (the checkpoint was trained with "
                            f"{_value(saved, key)!r}); start a new run with `rltrain train`")
    return config


def prepare_train(config: TrainConfig,
                  interactive: bool | None = None) -> tuple[Trainer, RunPaths]:
    """The trainer (a bad env fails first, before any folder is made), then the new run's
    folders, taken for this process; if they cannot be, the envs are closed again."""
    trainer = Trainer(config, resolve_device(config.device), interactive)
    try:
        paths = create_run(config)
        trainer.claim(paths)
    except BaseException:
        trainer.close()  # async env workers included
        raise
    return trainer, paths


def checked_resume_config(payload: dict[str, Any], overrides: tuple[str, ...],
                          checkpoint: str) -> TrainConfig:
    """The config a resume of `payload` with `overrides` would train with, or the
    UserError that refuses them (`rltrain continue` checks its changes with this too)."""
    check_resumable(payload, checkpoint)
    config = resume_config(payload, overrides, checkpoint)
    steps = int(payload["total_steps"])
    if steps >= config.max_timesteps:
        raise UserError(f"the run already reached max_timesteps ({config.max_timesteps}) at "
                        f"step {steps}; resume with --set max_timesteps=N (N > {steps}) to "
                        "train further")
    return config


def prepare_resume(checkpoint: str, overrides: tuple[str, ...], run_name: str | None,
                   interactive: bool | None = None, lock: RunLock | None = None,
                   fork_seed: int | None = None) -> tuple[Trainer, RunPaths, ResumeInfo]:
    """Load, check and restore everything; only then touch any run folder. `lock`: the
    run's lock, already held by this process (a run waiting after its pause).
    `fork_seed`: a fork (`run_name`) whose random streams restart from this seed instead
    of continuing (RunState.reseed; `diagnose --verify --seeds K` uses it)."""
    if fork_seed is not None and run_name is None:
        raise UserError("a re-seeded resume is a fork: give it a --run-name")
    payload = load_checkpoint(checkpoint)
    config = checked_resume_config(payload, overrides, checkpoint)
    steps = int(payload["total_steps"])
    original = str(payload.get("run_name", ""))
    if run_name is not None and run_name == original:
        raise UserError(f"'{run_name}' is this checkpoint's own run: leave out --run-name to "
                        "continue it in its own folders, or give a new name to fork it")
    if run_name is not None:  # validated as `train --run-name` is
        config = config_from_dict({**config_to_dict(config), "run_name": run_name})
    try:
        device = resolve_device(config.device)
    except ConfigError as exc:  # e.g. a run from a GPU machine, resumed on a laptop
        raise ConfigError(f"{exc} (to continue this run here: rltrain resume --checkpoint "
                          f"{checkpoint} --set device=cpu)") from None
    trainer = Trainer(config, device, interactive)
    try:
        warnings = trainer.state.load_state_dict(payload, checkpoint)
        if fork_seed is not None:
            trainer.state.reseed(fork_seed)
        paths = _claim_folders(trainer, payload, checkpoint, run_name, lock)
        moved = set_aside_later(paths, steps) if run_name is None else {}
    except BaseException:
        trainer.close()  # async env workers included, and the run's lock
        raise
    if moved:
        warnings.append(_set_aside_note(moved, steps, trainer.state.restored.get("monitor")))
    info = ResumeInfo(steps, checkpoint, [mask_text(change) for change in overrides], warnings,
                      original if run_name is not None else None, fork_seed)
    return trainer, paths, info


def _claim_folders(trainer: Trainer, payload: dict[str, Any], checkpoint: str,
                   run_name: str | None, lock: RunLock | None) -> RunPaths:
    """The folders the resumed run writes, taken for this process: a new run's when
    forking (with the best model so far), else the run's own."""
    config, steps = trainer.config, int(payload["total_steps"])
    if run_name is not None:
        paths = create_run(config)
        trainer.claim(paths)
        inherit_best_model(Path(checkpoint).resolve().parent, paths, steps)
        # The fork's events.jsonl starts empty: the warnings its parent reported do not
        # hold back the fork's own (monitor.warn_every).
        restored = trainer.state.restored
        restored["monitor"] = {**restored["monitor"], "last_warned": {}, "held_back": {}}
        return paths
    paths = _own_folders(config, str(payload.get("run_name", "")), Path(checkpoint),
                         payload.get("log_dir"), payload.get("checkpoint_dir"))
    trainer.claim(paths, lock)
    return paths


def _set_aside_note(moved: dict[Path, list[str]], steps: int,
                    monitor: dict[str, Any] | None) -> str:
    """One line for the console and events.jsonl: what moved where."""
    parts = [f"{folder} ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"
             for folder, names in moved.items()]
    count = sum(len(names) for names in moved.values())
    files = "1 file" if count == 1 else f"{count} files"
    note = (f"this run continues from step {steps}, so the {files} it had written after "
            f"that step were moved aside, nothing deleted: {'; '.join(parts)}")
    if (any("best_model.pt" in names for names in moved.values()) and monitor
            and monitor.get("best_eval") is not None):
        note += (f"; it has no best_model.pt until an evaluation beats its best up to step "
                 f"{steps} ({monitor['best_eval']:.1f} at step {monitor['best_eval_step']}, "
                 "whose model the later one replaced)")
    return note


def _own_folders(config: TrainConfig, name: str, checkpoint: Path, log_dir: str | None,
                 checkpoint_dir: str | None) -> RunPaths:
    """The run's own folders: its checkpoints are where the checkpoint file lies, its logs
    where the checkpoint says they were written (whatever the current folder is). A copy
    of the checkpoint elsewhere is refused: continuing it in place would write into the
    original run's logs (its history) from an experiment; it is forked with --run-name."""
    if not name:
        raise CheckpointError(f"checkpoint '{checkpoint}' does not name its run; "
                              "resume it with --run-name NEW")
    if checkpoint.resolve().parent.name.startswith(SUPERSEDED_PREFIX):
        raise UserError(f"checkpoint '{checkpoint}' was set aside when run '{name}' was resumed "
                        "from an earlier step; to continue it, fork it with --run-name NEW")
    folder = checkpoint.resolve().parent
    home = Path(checkpoint_dir).resolve() if checkpoint_dir else None
    if folder != home and (home is not None or folder.name != name):
        raise UserError(f"checkpoint '{checkpoint}' is a copy, not in the checkpoint folder of "
                        f"run '{name}' ({home or name}): resuming it in place would write into "
                        "that run's folders; fork it with --run-name NEW")
    logs = Path(log_dir) if log_dir else paths_for(config, name).log_dir
    return RunPaths(name, relative_to_cwd(logs), relative_to_cwd(checkpoint).parent)
