"""The `rltrain` command line (Click).

Exit codes: 0 success, 1 unexpected error (a bug: traceback shown), 2 bad usage, config
or input file (one line, no traceback), 3 training paused (a resumable checkpoint was
written and the resume command printed), 4 a file could not be written, 5 the env raised.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rltrain.scripts.commands.config_commands import (
    config_group,
    everyday_options,
    flag_overrides,
    to_stderr,
)
from rltrain.scripts.commands.diagnose_command import diagnose
from rltrain.scripts.commands.eval_command import eval_command, load_actor  # noqa: F401 (API)
from rltrain.scripts.commands.run_commands import pause, status
from rltrain.scripts.commands.runs_command import runs
from rltrain.scripts.commands.wait_commands import continue_command, stop
from rltrain.utils.config.fields import FIXED_ON_RESUME
from rltrain.utils.config.loader import shipped_config_names
from rltrain.utils.config.resolve import ConfigRequest, given_value, resolve_config
from rltrain.utils.errors import (
    EnvFailure,
    OutputError,
    UserError,
    describe_os_error,
    printable,
)
from rltrain.utils.run.folders import relative_to_cwd
from rltrain.utils.version import __version__

# torch, Gymnasium and what uses them are imported inside the commands that need them:
# `rltrain --help`, `status`, `runs`, `pause` start in a fraction of a second.
if TYPE_CHECKING:
    from rltrain.scripts.training.outcome import RunOutcome


def say(text: str) -> None:
    """utils/run/progress.py's `say` (imported when a run starts)."""
    from rltrain.utils.run.progress import say as progress_say

    progress_say(text)


EXIT_PAUSED = 3
EXIT_CANNOT_WRITE = 4
EXIT_ENV_FAILED = 5


class InputError(click.ClickException):
    """A user mistake: printed as one line, exit code 2."""

    exit_code = 2


class WriteFailure(click.ClickException):
    """A file could not be written (disk full, no permission): one line, exit code 4."""

    exit_code = EXIT_CANNOT_WRITE


class EnvFailed(click.ClickException):
    """The env's own code raised an exception: one line, exit code 5."""

    exit_code = EXIT_ENV_FAILED


class RLTrainGroup(click.Group):
    """Turns every `UserError` raised by a command into a one-line message (one line per
    problem of a config that has several) and exit 2, every file that could not be
    written into one with exit 4, and an exception raised by the env into one with exit 5."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        args = list(ctx.args)  # the command's, for a usage error's hint
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            hint = _key_value_hint(args)
            if hint is None or "unexpected extra argument" not in exc.message:
                raise
            raise click.UsageError(f"{exc.message}; {hint}", exc.ctx) from None
        except UserError as exc:  # several (a config's problems): each its own Error line
            lines = printable(str(exc)).splitlines() or [""]
            raise InputError("\nError: ".join(lines)) from None
        except OutputError as exc:
            raise WriteFailure(printable(str(exc))) from None
        except EnvFailure as exc:
            raise EnvFailed(printable(str(exc))) from None
        except BrokenPipeError:  # stdout's reader has gone (`rltrain diagnose RUN | head`):
            raise  # Click ends quietly with code 1, as when that happens after the command
        except OSError as exc:
            raise WriteFailure(describe_os_error(exc)) from None


def _key_value_hint(args: list[str]) -> str | None:
    """What `--set gamma 0.98` meant: Click reads 0.98 as an extra argument."""
    for option, word, value in zip(args, args[1:], args[2:], strict=False):
        if option in ("--set", "--grid") and "=" not in word and not value.startswith("-"):
            return (f"{option} takes KEY=VALUE as one word: {option} {word}={value}")
    return None


@click.group(cls=RLTrainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rltrain")
def cli() -> None:
    """Train off-policy actor-critic agents (`rltrain train --help` lists them under
    --algo) on Gymnasium environments, stop safely, resume exactly.

    Quick start:

        \b
        rltrain train --config pendulum_ddpg.yaml
        rltrain train --algo td3 --env LunarLanderContinuous-v3   (tuned values per env)
        tensorboard --logdir logs
        rltrain runs                  (the runs under logs/, newest first)
        rltrain status <run>          (from another terminal)
        rltrain pause <run>           (pauses with a resumable checkpoint)
        rltrain resume --checkpoint checkpoints/<run>/paused_at_step_<N>.pt
        rltrain eval --checkpoint checkpoints/<run>/best_model.pt
        rltrain diagnose <run>        (why does the agent misbehave?)
    """
    # The block is indented 4 more than the text: the reference page (mkdocs-click,
    # Markdown) shows it as a code block, and \b keeps --help from rewrapping it.


CONFIG_HELP = ("YAML config: a path, or the name of a config shipped with rltrain ("
               + ", ".join(shipped_config_names()) + ").")
SET_HELP = ("Override a config key, e.g. --set gamma=0.98 --set td3.policy_delay=3 "
            "(values parsed as YAML; repeatable).")


WAIT_HELP = ("After a pause, wait in this process for `rltrain continue RUN [--set ...]` "
             "or `rltrain stop RUN` (as on_pause: wait).")


@cli.command()
@click.option("--config", "config_name", default=None, metavar="FILE",
              help=CONFIG_HELP + " A file keyed by env id (as RL Zoo's hyperparams/*.yml) "
              "gives --env's section. Default: the shipped <algo>.yaml's section for --env, "
              "or rltrain's defaults.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--run-name", default=None, metavar="NAME",
              help="Run folder name under log_dir and checkpoint_dir "
                   "(default: <env>_<algo>_s<seed>_<time>).")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@everyday_options
def train(config_name: str | None, overrides: tuple[str, ...], run_name: str | None,
          wait: bool, **flags: str | None) -> None:
    """Train a new agent: from a YAML config, or the tuned values for --algo and --env.

    Writes TensorBoard events and JSON Lines logs to <log_dir>/<run>/ and checkpoints to
    <checkpoint_dir>/<run>/. Exits 0 when max_timesteps is reached, 3 when paused.
    `rltrain config show` with the same --config, --algo, --env, --set prints every key
    it would train with.
    """
    from rltrain.utils.training.envs import check_env_id

    # The config is checked before torch is imported: a refused one costs no torch start-up.
    config = resolve_config(ConfigRequest(config_name, flag_overrides(overrides, **flags),
                                          run_name=run_name), to_stderr, check_env=check_env_id)
    from rltrain.scripts.training.resume import prepare_train
    from rltrain.scripts.training.wait import supervise

    trainer, paths = prepare_train(config)
    say(f"run {paths.name}: {config.algo} on {config.env_name}, {config.max_timesteps} "
               f"steps, device {trainer.device}")
    say(f"  logs: {paths.log_dir}  (tensorboard --logdir {config.log_dir})")
    _report(supervise(trainer, paths, None, wait, _say_paused_waiting))


def _shown(path: Path | None) -> str:
    """A path as short as it is exact: relative to the current folder when inside it."""
    return "none" if path is None else str(relative_to_cwd(Path(path)))


def _outcome_decided() -> None:
    """The run has ended, its checkpoint written. In the `rltrain` process itself a Ctrl-C
    from now on changes nothing: not the report, not the exit code (SIG_IGN, unlike a
    Python handler, holds through the interpreter's shutdown). Not when the CLI runs inside
    another program (tests, notebooks): their Ctrl-C stays theirs."""
    from rltrain.utils.run.signals import PAUSE_SIGNALS

    context = click.get_current_context(silent=True)
    if context is not None and (context.find_root().obj or {}).get("owns_process"):
        for signum in PAUSE_SIGNALS:  # nor a SIGTERM (it gave 143), SIGHUP, ...
            signal.signal(signum, signal.SIG_IGN)


def _say_paused(outcome: RunOutcome) -> None:
    from rltrain.scripts.training.outcome import resume_hint

    say(f"paused at step {outcome.env_steps} [{outcome.rule}]: {outcome.reason}")
    say(f"resume with: rltrain resume --checkpoint {_shown(outcome.checkpoint)}")
    hint = resume_hint(outcome)
    if hint is not None:
        say(hint)


def _say_paused_waiting(outcome: RunOutcome) -> None:
    """A pause the process waits after (--wait, on_pause: wait): the run is answered from
    another terminal with `rltrain continue` or `rltrain stop`, not resumed."""
    from rltrain.scripts.training.outcome import resume_hint

    say(f"paused at step {outcome.env_steps} [{outcome.rule}]: {outcome.reason}")
    hint = resume_hint(outcome)
    if hint is not None:
        say(hint.replace("rltrain resume --checkpoint", "rltrain continue with --set, or "
                         "rltrain resume --checkpoint"))


def _report(outcome: RunOutcome) -> None:
    _outcome_decided()
    if outcome.status == "paused":
        _say_paused(outcome)
        sys.exit(EXIT_PAUSED)
    say(f"finished at step {outcome.env_steps}; checkpoint: {_shown(outcome.checkpoint)}")


@cli.command()
@click.option("--checkpoint", "checkpoint_path", required=True, metavar="FILE",
              help="A periodic (checkpoint_step_N.pt) or paused (paused_at_step_N.pt) "
                   "checkpoint.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Change a config key and continue (recorded in events.jsonl). "
                   f"{', '.join(FIXED_ON_RESUME)} cannot change.")
@click.option("--run-name", default=None, metavar="NAME",
              help="Fork into a new run NAME instead of continuing in the run's own folders.")
@click.option("--fork-seed", type=click.IntRange(min=0), default=None, hidden=True,
              help="Internal (diagnose --verify --seeds): the fork's random streams restart "
                   "from this seed.")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
def resume(checkpoint_path: str, overrides: tuple[str, ...], run_name: str | None,
           wait: bool, fork_seed: int | None) -> None:
    """Continue a run exactly where a checkpoint left it.

    The run continues in its own folders (TensorBoard resumes at the checkpoint's step,
    with no gap and no duplicate points) unless --run-name forks it. On CPU the result
    is bit-identical to a run that never stopped. Exits 0, or 3 when paused again.
    """
    from rltrain.scripts.training.resume import prepare_resume
    from rltrain.scripts.training.wait import supervise

    trainer, paths, info = prepare_resume(checkpoint_path, overrides, run_name,
                                         fork_seed=fork_seed)
    say(f"run {paths.name}: resuming at step {info.env_steps} of "
               f"{trainer.config.max_timesteps}, device {trainer.device}")
    _report(supervise(trainer, paths, info, wait, _say_paused_waiting))



@cli.command()
@click.option("--config", "config_name", default=None, metavar="FILE",
              help=CONFIG_HELP + " A file keyed by env id (as RL Zoo's hyperparams/*.yml) "
              "gives each trial its env's section. Default: the shipped <algo>.yaml's "
              "section for --env. One of --config and --env is needed.")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Seeds per grid point: the config's seed, seed+1, ...")
@click.option("--grid", multiple=True, metavar="KEY=V1,V2",
              help="A config key and the values to try (repeatable: the full product).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--max-concurrent", type=click.IntRange(min=1), default=None,
              help="Trials running at once (default: as many as the CPUs allow).")
@click.option("--cpus-per-trial", type=click.FloatRange(min=0.1), default=1.0,
              show_default=True, help="CPUs Ray reserves for each trial (its torch threads).")
@click.option("--gpus-per-trial", type=click.FloatRange(min=0), default=0.0,
              show_default=True, help="GPUs Ray reserves for each trial (e.g. 0.25: four "
                                      "trials share one); needed for device cuda.")
@click.option("--max-failures", type=click.IntRange(min=0), default=3, show_default=True,
              help="Retries of a crashed trial, each from its latest checkpoint.")
@click.option("--address", default=None, metavar="ADDR",
              help="Join a Ray cluster: auto, or ray://host:10001 (default: local Ray).")
@click.option("--name", default=None, help="Sweep name: folder <log_dir>/<name>/.")
@click.option("--resume", "resume_name", default=None, metavar="NAME",
              help="Continue an interrupted sweep; finished trials are not rerun.")
@click.option("--log-dir", default="logs", show_default=True,
              help="Where the sweep to --resume lives.")
@everyday_options
def sweep(config_name: str | None, seeds: int, grid: tuple[str, ...],
          overrides: tuple[str, ...], max_concurrent: int | None, cpus_per_trial: float,
          gpus_per_trial: float, max_failures: int, address: str | None, name: str | None,
          resume_name: str | None, log_dir: str, **flags: str | None) -> None:
    """Run one trial per (grid point, seed) on Ray Tune, then summarise them.

    Each trial is an ordinary rltrain run under <log_dir>/<name>/ with its own
    checkpoints; a crashed trial is retried from its latest checkpoint, a trial paused
    by a health rule stays paused. Writes summary.csv, summary.json and
    learning_curves.png to <log_dir>/<name>/. Needs pip install "rltrain[sweep]".
    """
    from rltrain.scripts.sweep import sweep as sweeps
    from rltrain.utils.run.sweep_summary import print_summary

    before = signal.getsignal(signal.SIGINT)  # the sweep ends with Ctrl-C ignored
    try:
        if resume_name is not None:
            folder = sweeps.resume_sweep(resume_name, log_dir, address, overrides)
        else:
            overrides = flag_overrides(overrides, **flags)
            if config_name is None and given_value(overrides, "env_name") is None:
                raise click.UsageError("--config or --env is required (or --resume NAME)")
            name = name or time.strftime("sweep_%Y%m%d-%H%M%S")
            folder = sweeps.launch(config_name, overrides, grid, seeds, name, max_concurrent,
                                   address, {"cpu": cpus_per_trial, "gpu": gpus_per_trial},
                                   max_failures)
        points = sweeps.summarise(folder)
        print_summary(folder, points)
    finally:
        signal.signal(signal.SIGINT, before)
    unfinished = sum(p["unfinished"] for p in points)
    if unfinished:  # crashed past --max-failures, failed on bad input, or interrupted
        click.echo(f"{unfinished} trial(s) did not finish: see {folder / 'summary.json'}; "
                   f"`rltrain sweep --resume {folder.name}` retries crashed or interrupted ones",
                   err=True)
        sys.exit(1)


cli.add_command(eval_command)
cli.add_command(pause)
cli.add_command(continue_command)
cli.add_command(stop)
cli.add_command(status)
cli.add_command(diagnose)
cli.add_command(config_group)
cli.add_command(runs)

