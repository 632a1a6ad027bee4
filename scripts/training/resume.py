"""A trainer and the run folders it may write, ready to run: `prepare_train` for a new run,
`prepare_resume` for `rltrain resume` (a checkpoint's config plus changes, its run
folders, the restored trainer).

"Change parameters and continue" is `--set` on resume; keys that would not fit the
checkpoint (env, seed, algorithm, network and buffer sizes) cannot change. Without
`--run-name` the run continues in its own folders; with it, the run is forked into new
ones and the original stays as it was.
A re-seeded fork (`fork_seed`, for `rltrain diagnose --verify --seeds K`) starts from
the same state with new random streams instead of the checkpoint's.

A checkpoint may come from anywhere, so the keys that run a command or name a place
(`NOT_FROM_FILES`: notify's webhook and command, the Ray address, the log and checkpoint
folders) are never taken from it: they come from the resume's own `--set`, else their
defaults, and the resume says which of the checkpoint's it left out. A run continued in
place writes where the checkpoint file lies and into the log folder that the user's
log_dir gives, or the one the checkpoint names if that folder's own status.json names
this checkpoint folder as its run's.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from rltrain.scripts.training.run_state import ResumeInfo, check_resumable
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.config.fields import FIXED_ON_RESUME, FOLDER_KEYS, NOT_FROM_FILES
from rltrain.utils.config.loader import apply_overrides, config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import CheckpointError, ConfigError, UserError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.device import resolve_device
from rltrain.utils.run.folders import (
    STATUS_FILE,
    SUPERSEDED_PREFIX,
    RunLock,
    RunPaths,
    create_run,
    inherit_best_model,
    relative_to_cwd,
    set_aside_later,
)
from rltrain.utils.run.notify_target import mask_text
from rltrain.utils.run.status import read_status


def _value(config: TrainConfig, key: str) -> Any:
    return functools.reduce(getattr, key.split("."), config)


def given_by(overrides: tuple[str, ...], key: str) -> bool:
    """True if an override sets `key` or a section that holds it (`notify={...}`)."""
    parts = key.split(".")
    names = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return any(item.partition("=")[0].strip() in names for item in overrides)


def _file_settings_replaced(plain: dict[str, Any], trusted: TrainConfig | None) -> dict[str, Any]:
    """A checkpoint's config (plain) with every `NOT_FROM_FILES` key set to `trusted`'s
    value (the config this process already runs with), else to its default."""
    source = config_to_dict(trusted if trusted is not None else TrainConfig())
    result = copy.deepcopy(plain)
    for key in NOT_FROM_FILES:
        *sections, name = key.split(".")
        node, values = result, source
        for section in sections:
            node, values = node.setdefault(section, {}), values[section]
        node[name] = values[name]
    return result


def resume_config(payload: dict[str, Any], overrides: tuple[str, ...], path: str,
                  trusted: TrainConfig | None = None) -> TrainConfig:
    """The checkpoint's config with `--set` changes, refusing ones that cannot apply. The
    `NOT_FROM_FILES` keys are `trusted`'s (this process's own config), else the defaults,
    unless `overrides` set them."""
    saved = saved_config(payload, path)
    base = _file_settings_replaced(config_to_dict(saved), trusted)
    config = config_from_dict(apply_overrides(base, overrides))
    for key in FIXED_ON_RESUME:
        if _value(config, key) != _value(saved, key):
            raise UserError(f"cannot change '{key}' on resume (the checkpoint was trained with "
                            f"{_value(saved, key)!r}); start a new run with `rltrain train`")
    return config


def saved_config(payload: dict[str, Any], path: str) -> TrainConfig:
    """The config a checkpoint holds, validated as a config file is."""
    try:
        return config_from_dict(payload["config"])
    except UserError as exc:
        raise CheckpointError(f"checkpoint '{path}' holds an invalid config: {exc}") from None


def settings_left_out(saved: TrainConfig, used: TrainConfig, keys: tuple[str, ...]) -> str | None:
    """The line that says which of the checkpoint's commands, addresses and folders the
    resume did not take (None: it left out none)."""
    left = [f"{key} {mask_text(repr(_value(saved, key)))}" for key in keys
            if not _same(key, _value(saved, key), _value(used, key))]
    if not left:
        return None
    return ("not taken from the checkpoint (commands, addresses and folders come only from "
            "your own --set, e.g. --set notify.command=...): " + ", ".join(left))


def _same(key: str, saved: Any, used: Any) -> bool:
    """A folder is the same folder however it is written (relative or absolute)."""
    if key in FOLDER_KEYS:
        return Path(saved).resolve() == Path(used).resolve()
    return saved == used


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
                          checkpoint: str, trusted: TrainConfig | None = None) -> TrainConfig:
    """The config a resume of `payload` with `overrides` would train with, or the
    UserError that refuses them (`rltrain continue` checks its changes with this too)."""
    check_resumable(payload, checkpoint)
    config = resume_config(payload, overrides, checkpoint, trusted)
    steps = int(payload["total_steps"])
    if steps >= config.max_timesteps:
        raise UserError(f"the run already reached max_timesteps ({config.max_timesteps}) at "
                        f"step {steps}; resume with --set max_timesteps=N (N > {steps}) to "
                        "train further")
    return config


def prepare_resume(checkpoint: str, overrides: tuple[str, ...], run_name: str | None,
                   interactive: bool | None = None, lock: RunLock | None = None,
                   fork_seed: int | None = None,
                   trusted: TrainConfig | None = None) -> tuple[Trainer, RunPaths, ResumeInfo]:
    """Load, check and restore everything; only then touch any run folder. `lock`: the
    run's lock, already held by this process (a run waiting after its pause).
    `fork_seed`: a fork (`run_name`) whose random streams restart from this seed instead
    of continuing (RunState.reseed; `diagnose --verify --seeds K` uses it).
    `trusted`: the config this process already runs the run with (a waiting run that
    continues, a sweep's trial), whose commands, addresses and folders the resume keeps."""
    if fork_seed is not None and run_name is None:
        raise UserError("a re-seeded resume is a fork: give it a --run-name")
    payload = load_checkpoint(checkpoint)
    config = checked_resume_config(payload, overrides, checkpoint, trusted)
    steps = int(payload["total_steps"])
    original = str(payload.get("run_name", ""))
    if run_name is not None and run_name == original:
        raise UserError(f"'{run_name}' is this checkpoint's own run: leave out --run-name to "
                        "continue it in its own folders, or give a new name to fork it")
    given = set(FOLDER_KEYS) if trusted is not None else {
        key for key in FOLDER_KEYS if given_by(overrides, key)}
    confirmed = confirmed_folders(payload, Path(checkpoint))
    if run_name is not None:
        config = _fork_config(config, run_name, confirmed, given)
    keys = NOT_FROM_FILES if run_name is not None and confirmed is None else tuple(
        key for key in NOT_FROM_FILES if key not in FOLDER_KEYS)
    left_out = settings_left_out(saved_config(payload, checkpoint), config, keys)
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
        own = None if run_name is not None else _own_folders(
            config, original, Path(checkpoint), payload, confirmed, "log_dir" in given)
        paths = _claim_folders(trainer, own, checkpoint, steps, lock)
        moved = set_aside_later(paths, steps) if run_name is None else {}
    except BaseException:
        trainer.close()  # async env workers included, and the run's lock
        raise
    if left_out is not None:
        warnings.insert(0, left_out)
    if moved:
        warnings.append(_set_aside_note(moved, steps, trainer.state.restored.get("monitor")))
    info = ResumeInfo(steps, checkpoint, [mask_text(change) for change in overrides], warnings,
                      original if run_name is not None else None, fork_seed)
    return trainer, paths, info


def _claim_folders(trainer: Trainer, own: RunPaths | None, checkpoint: str, steps: int,
                   lock: RunLock | None) -> RunPaths:
    """The folders the resumed run writes, taken for this process: a new run's when
    forking (`own` None; with the best model so far), else the run's own."""
    if own is None:
        paths = create_run(trainer.config)
        trainer.claim(paths)
        inherit_best_model(Path(checkpoint).resolve().parent, paths, steps)
        # The fork's events.jsonl starts empty: the warnings its parent reported do not
        # hold back the fork's own (monitor.warn_every). Its metrics.jsonl holds its own
        # lines only: a line its parent could not write belongs in the parent's.
        restored = trainer.state.restored
        restored["monitor"] = {**restored["monitor"], "last_warned": {}, "held_back": {}}
        restored.pop("logger", None)
        return paths
    trainer.claim(own, lock)
    return own


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


def _fork_config(config: TrainConfig, run_name: str, confirmed: RunPaths | None,
                 given: set[str]) -> TrainConfig:
    """A fork's config: named `run_name`, its folders beside its parent's `confirmed`
    folders, else the ones the user gave (`given`: the folder keys set) or the defaults."""
    logs = (Path(config.log_dir) if "log_dir" in given or confirmed is None
            else confirmed.log_dir.parent)
    checkpoints = (Path(config.checkpoint_dir) if "checkpoint_dir" in given or confirmed is None
                   else confirmed.checkpoint_dir.parent)
    return config_from_dict({**config_to_dict(config), "run_name": run_name,
                             "log_dir": str(relative_to_cwd(logs)),
                             "checkpoint_dir": str(relative_to_cwd(checkpoints))})


def confirmed_folders(payload: dict[str, Any], checkpoint: Path) -> RunPaths | None:
    """The run folders the checkpoint names, where the files on disk confirm them: the
    checkpoint lies in its run's checkpoint folder (named after the run), and the log
    folder it names has a status.json that names that checkpoint folder. None otherwise
    (a checkpoint's word alone names no place to write)."""
    name, home, logs = (payload.get(k) for k in ("run_name", "checkpoint_dir", "log_dir"))
    folder = checkpoint.resolve().parent
    if not name or folder.name != name or not logs or (home and Path(home).resolve() != folder):
        return None
    logs = Path(logs).resolve()
    return RunPaths(str(name), logs, folder) if _claims(logs, folder) else None


def _own_folders(config: TrainConfig, name: str, checkpoint: Path, payload: dict[str, Any],
                 confirmed: RunPaths | None, log_dir_given: bool) -> RunPaths:
    """The run's own folders: its checkpoints are where the checkpoint file lies (a folder
    named after the run), its logs `<log_dir>/<run>` of the log_dir the user gave (--set,
    or this process's own config), else the `confirmed` log folder, else that of the
    default log_dir, which must then be the one the checkpoint names. A copy of the
    checkpoint elsewhere is refused: continuing it in place would write into the original
    run's logs (its history) from an experiment; it is forked with --run-name."""
    if not name:
        raise CheckpointError(f"checkpoint '{checkpoint}' does not name its run; "
                              "resume it with --run-name NEW")
    folder = checkpoint.resolve().parent
    if folder.name.startswith(SUPERSEDED_PREFIX):
        raise UserError(f"checkpoint '{checkpoint}' was set aside when run '{name}' was resumed "
                        "from an earlier step; to continue it, fork it with --run-name NEW")
    home = payload.get("checkpoint_dir")  # only ever a reason to refuse, never a place
    if folder.name != name or (home and Path(home).resolve() != folder):
        raise UserError(f"checkpoint '{checkpoint}' is a copy, not in the checkpoint folder of "
                        f"run '{name}' ({home or name}): resuming it in place would write into "
                        "that run's folders; fork it with --run-name NEW")
    if confirmed is not None and not log_dir_given:
        return RunPaths(name, relative_to_cwd(confirmed.log_dir), relative_to_cwd(folder))
    logs = (Path(config.log_dir) / name).resolve()
    named = payload.get("log_dir")
    if not log_dir_given and named and Path(named).resolve() != logs:
        raise UserError(
            f"checkpoint '{checkpoint}' names '{Path(named).resolve()}' as its run's log "
            f"folder, which does not name '{folder}' as its checkpoint folder; to continue "
            f"the run there, add --set log_dir={Path(named).resolve().parent}, or fork it "
            "with --run-name NEW")
    return RunPaths(name, relative_to_cwd(logs), relative_to_cwd(folder))


def _claims(log_folder: Path, checkpoint_folder: Path) -> bool:
    """True if the run whose status.json is in `log_folder` wrote its checkpoints to
    `checkpoint_folder` (status.json records it)."""
    recorded = (read_status(log_folder / STATUS_FILE) or {}).get("checkpoint_dir")
    return isinstance(recorded, str) and Path(recorded).resolve() == checkpoint_folder
