"""`rltrain sweep`: many seeds and hyperparameter grids on Ray Tune, locally or on a cluster.

One Tune trial per (grid point, seed). Each trial is an ordinary rltrain run with its
own folders under `<log_dir>/<sweep>/` and `<checkpoint_dir>/<sweep>/` (TensorBoard
logs, checkpoints, monitor rules, pauses) that reports every evaluation to Tune and
hands Tune its newest periodic checkpoint. When a trial crashes or its worker dies,
Tune's failure handling (`FailureConfig(max_failures)`) restarts it and the trial
resumes exactly from that checkpoint. A trial paused by a health rule ends as paused,
with its reason; it is not retried. Ctrl-C pauses the running trials, each with a
paused checkpoint, before Tune stops (scripts/sweep/sweep_pause.py); `--resume` continues
them from those checkpoints. Ray is an optional extra: `rltrain[sweep]`.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rltrain.scripts.commands.config_commands import to_stderr
from rltrain.scripts.sweep.sweep_plan import (
    check_sweep_name,
    plan_for_resume,
    plan_trials,
    read_plan,
    say_once,
    trial_config,
)
from rltrain.scripts.workers.ray_start import init_ray
from rltrain.utils.errors import UserError
from rltrain.utils.hooks.hook import Hook
from rltrain.utils.run.sweep_summary import (
    ERROR_FILE,
    INTERRUPTED_NOTE,
    OUTCOME_FILE,
    interrupted,
)

if TYPE_CHECKING:
    from rltrain.utils.run.folders import RunPaths

INSTALL_HINT = 'rltrain sweep needs Ray Tune: pip install "rltrain[sweep]"'


def run_trial(tune_config: dict[str, Any]) -> None:
    """The Tune trainable: one rltrain run, resumed from Tune's checkpoint after a crash."""
    import torch
    from ray import tune

    params = tune_config["trial"]
    torch.set_num_threads(int(params["threads"]))
    try:
        _run_trial(params, tune)
    except UserError as error:  # bad input fails the same way every time: not retried
        config = trial_config(params["config"], params["overrides"])
        folder = Path(config.log_dir) / params["run_name"]
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / ERROR_FILE).open("a") as file:  # one line per attempt
            file.write(f"{error}\n")
        tune.report({"status": "error", "error": str(error)})


def _run_trial(params: dict[str, Any], tune: Any) -> None:
    from rltrain.scripts.training.resume import prepare_resume, prepare_train
    from rltrain.utils.run.folders import paths_for, set_aside_attempt
    from rltrain.utils.run.status import read_status

    config = trial_config(params["config"], params["overrides"])
    own = paths_for(config, params["run_name"])
    if _reported_as_it_ended(read_status(own.status_file) or {}, own, tune):
        return
    checkpoint = _checkpoint_to_resume(tune, own)
    if checkpoint is not None:
        trainer, paths, info = prepare_resume(str(checkpoint), (), None, interactive=False,
                                              trusted=config)
    else:
        set_aside_attempt(own)
        (trainer, paths), info = prepare_train(config, interactive=False), None
    reporter = TuneReporter(trainer, tune)
    outcome = reporter.attach().run(paths, info)
    reporter.final(outcome)
    if outcome.reason == INTERRUPTED_NOTE:  # paused by the sweep's Ctrl-C
        from rltrain.scripts.sweep.sweep_pause import wait_for_hand_over

        wait_for_hand_over(Path(config.log_dir))
    else:
        from rltrain.utils.io.run_files import write_run_file

        write_run_file(paths.log_dir / OUTCOME_FILE, f"{outcome.status} {outcome.env_steps}\n")


def _reported_as_it_ended(status: dict[str, Any], paths: RunPaths, tune: Any) -> bool:
    """A trial that ended before (finished, paused as its outcome, failed on bad input;
    a sweep resumed, or a trial stopped after its end before telling Tune) is reported as
    it ended, not run again. False: it has yet to end (a pause by the sweep's Ctrl-C or
    by a crash, such as the env's exception, is continued)."""
    state = status.get("state")
    error = paths.log_dir / ERROR_FILE
    ended = state == "finished" or (state == "paused" and not interrupted(status)
                                    and _outcome(paths) == f"paused {status.get('env_steps')}")
    if ended:
        tune.report({key: status.get(key) for key in ("env_steps", "best_eval")}
                    | {"eval_mean_return": status.get("latest_eval"), "status": state}
                    | ({"pause_reason": status.get("pause_reason")} if state == "paused" else {}))
        return True
    if error.is_file():
        tune.report({"status": "error", "error": error.read_text(errors="replace").strip()})
        return True
    return False


def _outcome(paths: RunPaths) -> str | None:
    """The outcome the trial wrote when it last ended as one ("paused 2000")."""
    try:
        return (paths.log_dir / OUTCOME_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _checkpoint_to_resume(tune: Any, paths: RunPaths) -> Path | None:
    """Where a retried or continued trial resumes: the newer of the checkpoint Tune hands
    back and the run's own newest (one written after the trial's last report to Tune,
    such as the paused checkpoint of an env failure), else None: a fresh start. Tune's
    copy is put into the run's folder: on a cluster it may come from another node."""
    from rltrain.utils.run.folders import checkpoint_step, newest_checkpoint

    own, restored = newest_checkpoint(paths), tune.get_checkpoint()
    if restored is None:
        return own
    with restored.as_directory() as folder:
        source = next(Path(folder).glob("*.pt"))  # the run's own file name
        if own is not None and checkpoint_step(own) >= checkpoint_step(source):
            return own
        target = paths.checkpoint_dir / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return target


class TuneReporter(Hook):
    """A hook that reports each evaluation and periodic checkpoint to Tune; the checkpoint
    file goes along, so a retried trial resumes from it (on any node of a cluster)."""

    name = "tune"

    def __init__(self, trainer: Any, tune: Any) -> None:
        self.trainer, self.tune = trainer, tune

    def attach(self) -> Any:
        self.trainer.extra_hooks.append(self)
        return self.trainer

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> list:
        if kind == "periodic":
            self._send(self._metrics("running"), force=str(path))
        return []

    def _metrics(self, status: str) -> dict[str, Any]:
        monitor = self.trainer.monitor
        return {"env_steps": self.trainer.state.counters.env_steps,
                "eval_mean_return": monitor.latest_eval, "best_eval": monitor.best_eval,
                "status": status}

    def on_eval(self, evaluation: Any) -> list:
        self.tune.report(self._metrics("running"))
        return []

    def final(self, outcome: Any) -> None:
        metrics = self._metrics(outcome.status)
        metrics["pause_reason"] = outcome.reason
        self._send(metrics, force=str(outcome.checkpoint))

    def _send(self, metrics: dict[str, Any], force: str) -> None:
        import tempfile

        from ray.tune import Checkpoint

        if not Path(force).exists():  # e.g. a run that finished without a new file
            self.tune.report(metrics)
            return
        with tempfile.TemporaryDirectory() as folder:
            shutil.copy(force, Path(folder) / Path(force).name)
            self.tune.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def start_ray(address: str | None) -> None:
    import ray

    if ray.is_initialized():
        return
    if address is None:
        init_ray(ray, num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False)


def require_ray() -> None:
    try:
        import ray  # noqa: F401
        from ray import tune  # noqa: F401
    except ImportError:
        raise UserError(INSTALL_HINT) from None


def plan_file(sweep_dir: Path) -> Path:
    return sweep_dir / "sweep.yaml"


def launch(config_name: str | None, overrides: tuple[str, ...], grid: tuple[str, ...],
           seeds: int, name: str, max_concurrent: int | None, address: str | None,
           per_trial: dict[str, float], max_failures: int) -> Path:
    """Validate every trial, write the plan, and run it on Tune. `overrides` hold --env
    and --algo as `rltrain train`'s do; `per_trial`: the CPUs and GPUs Ray reserves for
    each trial."""
    require_ray()
    note = say_once(to_stderr)  # which defaults were taken, as `rltrain train` says it
    base = trial_config(config_name, overrides, note, check_env=True)
    check_gpus(base.device, per_trial["gpu"], address)
    check_sweep_name(name)
    sweep_dir = Path(base.log_dir).resolve() / name
    if sweep_dir.exists():
        raise UserError(f"sweep '{name}' already exists ({sweep_dir}); continue it with "
                        f"`rltrain sweep --resume {name}` or choose another --name")
    folders = (f"log_dir={sweep_dir}",
               f"checkpoint_dir={Path(base.checkpoint_dir).resolve() / name}")
    overrides = (*overrides, *folders)
    trials = plan_trials(config_name, overrides, grid, seeds, name, note)
    sweep_dir.mkdir(parents=True)
    is_file = config_name is not None and Path(config_name).is_file()
    plan = {"config": str(Path(config_name).resolve()) if is_file else config_name,
            "cpus_per_trial": per_trial["cpu"],
            "gpus_per_trial": per_trial["gpu"], "max_failures": max_failures,
            "max_concurrent": max_concurrent,
            "trials": [{"run_name": t.run_name, "point": t.point,
                        "overrides": list(t.overrides)} for t in trials]}
    plan_file(sweep_dir).write_text(yaml.safe_dump(plan, sort_keys=False))
    _fit(sweep_dir, plan, address, restore=False)
    return sweep_dir


def resume_sweep(name: str, log_dir: str, address: str | None,
                 overrides: tuple[str, ...] = ()) -> Path:
    """Run the plan of sweep `name` again on a new Tuner (its finished trials report at
    once); `overrides`: the --set given with --resume (commands and addresses only)."""
    require_ray()
    check_sweep_name(name)
    sweep_dir = Path(log_dir).resolve() / name
    if not plan_file(sweep_dir).exists():
        raise UserError(f"no sweep '{name}' under '{log_dir}/' (no sweep.yaml)")
    plan = plan_for_resume(read_plan(plan_file(sweep_dir)), sweep_dir, overrides, to_stderr)
    _fit(sweep_dir, plan, address, restore=True)
    return sweep_dir


def _fit(sweep_dir: Path, plan: dict[str, Any], address: str | None, restore: bool) -> None:
    """Run (or continue) the plan's trials on Tune. Ends with Ctrl-C ignored (the caller
    restores it): a late one would otherwise cut the summary that follows."""
    import signal

    from rltrain.scripts.sweep.sweep_pause import HANDED_ON_FILE

    (sweep_dir / HANDED_ON_FILE).unlink(missing_ok=True)  # from an earlier Ctrl-C
    try:
        start_ray(address)
        _tuner(sweep_dir, plan, restore).fit()
    except KeyboardInterrupt:
        pass  # the summary covers what ran; `--resume` continues the rest
    finally:  # Tune leaves its own handler installed after a fit that was not interrupted
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        (sweep_dir / HANDED_ON_FILE).unlink(missing_ok=True)


def _tuner(sweep_dir: Path, plan: dict[str, Any], restore: bool) -> Any:
    """A new Tuner for the plan; for a resumed sweep (`restore`) one that keeps its state
    in a folder of its own (`tune-2`, ...): Tune's saved state is never loaded (module
    docstring), each trial takes up from its own run folder."""
    from ray import tune

    from rltrain.scripts.sweep.sweep_pause import SweepPause

    threads = max(1, int(plan["cpus_per_trial"]))
    params = [{"config": plan["config"], "run_name": t["run_name"],
               "overrides": t["overrides"], "threads": threads} for t in plan["trials"]]
    trainable = tune.with_resources(run_trial, trial_resources(plan))
    name, k = "tune", 1
    while restore and (sweep_dir / name).exists():
        k += 1
        name = f"tune-{k}"
    return tune.Tuner(
        trainable, param_space={"trial": tune.grid_search(params)},
        tune_config=tune.TuneConfig(max_concurrent_trials=plan["max_concurrent"]),
        run_config=tune.RunConfig(
            name=name, storage_path=str(sweep_dir), verbose=1,
            failure_config=tune.FailureConfig(max_failures=plan["max_failures"]),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            callbacks=[SweepPause(sweep_dir)]))


def trial_resources(plan: dict[str, Any]) -> dict[str, float]:
    """What Ray reserves for each trial. With GPUs, Ray also sets each trial's
    CUDA_VISIBLE_DEVICES to its share, so trials spread over the machine's GPUs."""
    gpus = float(plan.get("gpus_per_trial", 0.0))  # plans written before it: none
    return {"cpu": plan["cpus_per_trial"], **({"gpu": gpus} if gpus > 0 else {})}


def check_gpus(device: str, gpus_per_trial: float, address: str | None) -> None:
    """Trials on CUDA need GPUs reserved (without, Ray neither schedules by GPU memory nor
    spreads trials over the GPUs, and some Ray versions hide the GPUs from them); GPUs
    reserved where this machine has none would leave every trial waiting forever."""
    import torch

    if not math.isfinite(gpus_per_trial):
        raise UserError(f"--gpus-per-trial must be a finite number; got {gpus_per_trial}")
    if device == "cuda" and gpus_per_trial == 0:
        raise UserError("device cuda needs GPUs for the trials: add --gpus-per-trial "
                        "(e.g. 1, or 0.25 for four trials on one GPU)")
    if gpus_per_trial > 0 and address is None and not torch.cuda.is_available():
        raise UserError(f"--gpus-per-trial {gpus_per_trial:g}: this machine has no CUDA GPU "
                        "for local Ray to give the trials")


def summarise(sweep_dir: Path) -> list[dict[str, Any]]:
    from rltrain.utils.run.sweep_summary import trial_row, write_summary

    plan = read_plan(plan_file(sweep_dir))
    trials = [trial_row(sweep_dir, t["run_name"], t["point"]) for t in plan["trials"]]
    return write_summary(sweep_dir, trials)
