"""The training loop, and every way a run ends.

The run's state (agent, replay buffer, envs, counters, random states) is a `RunState`
(scripts/training/run_state.py), which takes the env steps and the updates. The loop puts
them in order and tells the hooks (utils/hooks/hook.py: metrics, health rules,
diagnostics, the rules of utils/diagnosis/rules/, progress, and any the caller adds) of
each step, update, episode and evaluation; the TrainingMonitor records what they find,
evaluates and checkpoints. Per vector step the loop does one action transfer (the
diagnostics' actor hook two more when it keeps that step's states) and, per update, one
transfer of a few scalar metrics; all file writes happen per episode or less often.

Every way a run ends is here: finished (max_timesteps); paused (a health rule, Ctrl-C,
SIGTERM or `rltrain pause` asked the monitor: the loop finishes the env step it is in and
writes `paused_at_step_<N>.pt`); stopped from outside the training (a file that cannot be
written, an exception from the env's own code, the device out of memory: a paused
checkpoint where one can be written, not halfway through an env step, and the reason in
events.jsonl and status.json); aborted (a second Ctrl-C) or crashed. All writes are
atomic, so every checkpoint written before stays whole.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Callable

import torch

from rltrain.scripts.training.outcome import RunOutcome
from rltrain.scripts.training.run_state import ResumeInfo, RunState
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import (
    Aborted,
    EnvFailure,
    OutputError,
    describe_write_failure,
    first_line,
    os_error_in,
)
from rltrain.utils.hooks.hook import Hook
from rltrain.utils.io.checkpoint import remove_stale_temp_files
from rltrain.utils.io.run_files import write_run_file
from rltrain.utils.run.folder_watch import FolderWatch, deleted_message
from rltrain.utils.run.folders import RunLock, RunPaths, checkpoint_step, relative_to_cwd
from rltrain.utils.run.health import HealthRules
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.run.metrics import RunMetrics
from rltrain.utils.run.monitor import TrainingMonitor
from rltrain.utils.run.progress import ProgressDisplay, ProgressHook
from rltrain.utils.run.shell import RunHooks, make_diagnostics
from rltrain.utils.run.signals import SignalCatcher
from rltrain.utils.run.status import StatusFile
from rltrain.utils.training.env_clock import ENV_CLOCK


class Trainer:
    """One training run of any algorithm, from scratch or restored from a checkpoint."""

    def __init__(self, config: TrainConfig, device: torch.device,
                 interactive: bool | None = None) -> None:
        self.config, self.device, self.interactive = config, device, interactive
        self.state = RunState(config, device)
        self.rules = HealthRules(config, self.state.obs_dim, device)
        # Hooks told of everything after the run's own (`rltrain sweep`'s Tune reporter).
        self.extra_hooks: list[Hook] = []
        self.on_event: Callable[[int, dict], None] | None = None  # each events.jsonl line
        self.paths: RunPaths | None = None
        self.folders = FolderWatch()  # the run's folders, deleted while it runs?
        self.in_due = False
        self.run_lock: RunLock | None = None  # held from `claim` until `close`
        self.argv: list[str] | None = None  # what command.txt records (None: sys.argv)

    def run(self, paths: RunPaths, resume: ResumeInfo | None = None) -> RunOutcome:
        """Train until max_timesteps or a pause; `resume` when continuing from a checkpoint."""
        # Signals are caught from the start: a Ctrl-C while the run starts pauses it before
        # its first step, rather than aborting with a half-made run folder.
        with SignalCatcher() as self.signals, self._env_clock():
            try:
                self._start(paths, resume)
            except BaseException as exc:
                self.close()  # the envs, and the run's folders for another process
                if not isinstance(exc, (OSError, OutputError)) or os_error_in(exc) is None:
                    raise
                then = (f"; the checkpoint is unchanged: once that is fixed, rltrain resume "
                        f"--checkpoint {resume.checkpoint}" if resume else "")
                problem = describe_write_failure(exc)
                raise OutputError(f"the run could not start: {problem}{then}") from None
            try:
                outcome = self._loop(resumed=resume is not None)
            except KeyboardInterrupt as exc:
                self.write_status("aborted")
                if isinstance(exc, Aborted):
                    print(self._aborted_line(), file=sys.stderr)
                raise
            except (OSError, OutputError) as exc:
                if not isinstance(exc, OutputError) and os_error_in(exc) is None:
                    raise
                raise self._output_failed(exc) from None
            except EnvFailure as exc:
                raise self._env_failed(exc) from None
            except torch.OutOfMemoryError as exc:
                outcome = self._out_of_memory(exc)
            except BaseException:
                self.write_status("crashed")
                raise
            finally:
                self.signals.settle()  # the outcome is decided: a Ctrl-C now changes nothing
                failed = self._close_all()
            if failed:
                raise OutputError(f"the run {outcome.status} at step {outcome.env_steps} "
                                  f"(checkpoint {outcome.checkpoint}), but its last files "
                                  f"could not all be written: {'; '.join(failed)}")
            return outcome

    def _env_clock(self) -> contextlib.AbstractContextManager[None]:
        """Time the env's calls with the config's limit; status says when one is stuck."""
        return ENV_CLOCK.watching(
            self.config.env_step_timeout,
            on_stuck=lambda call, seconds: self.write_status(
                "stuck", stuck={"call": call, "seconds": round(seconds)}),
            on_unstuck=lambda: self.write_status("running"))

    def _close_all(self) -> list[str]:
        """Close hooks (the final heatmaps), display, logs and envs; returns what could not
        be written (a full disk). That must not replace an error that says what to resume:
        with one under way, it is a warning."""
        failed = []
        for close in (self.hooks.close, self.progress.close, self.logger.close, self.close):
            try:
                close()
            except (OSError, OutputError) as exc:
                if not isinstance(exc, OutputError) and os_error_in(exc) is None:
                    raise
                failed.append(describe_write_failure(exc))
        if failed and sys.exc_info()[1] is not None:
            for problem in failed:
                print(f"warning: closing the run: {problem}", file=sys.stderr)
            return []
        return failed

    def _start(self, paths: RunPaths, resume: ResumeInfo | None) -> None:
        """Open the run's logs, monitor and hooks."""
        state, config = self.state, self.config
        self.paths = state.paths = paths
        self.folders = FolderWatch((paths.log_dir, paths.checkpoint_dir))
        remove_stale_temp_files(paths.checkpoint_dir)
        paths.pause_request_file.unlink(missing_ok=True)  # meant for an earlier process
        self.logger = RunLogger(paths, resume_step=resume.env_steps if resume else None)
        self.logger.write_run_files(config, self.argv)
        self.logger.on_event = self.on_event
        state.watch("logger", self.logger)  # lines a full disk left out: written on resume
        self.progress = ProgressDisplay(config.max_timesteps, state.counters.env_steps,
                                        self.interactive)
        self.monitor = TrainingMonitor(config, paths, self.logger, state, self.progress.message)
        self.hooks = self.monitor.hooks
        state.watch("monitor", self.monitor)
        if resume is not None and resume.forked_from is None:  # until this run writes one
            self.monitor.latest_checkpoint = str(relative_to_cwd(Path(resume.checkpoint)))
        self.diagnostics = make_diagnostics(
            config, state.obs_dim, state.view, state.buffer, paths, self.logger,
            self.progress.message, state.collector.normalizer.observation)  # videos' view
        self.metrics = RunMetrics(self.logger, config.log_freq, state.exploration,
                                  self.diagnostics, state.counters.env_steps,
                                  state.agent.updates)
        hooks = RunHooks.build(config, state.obs_dim, state.action_dim, state.view,
                               self.metrics, self.diagnostics, self.device, self.rules)
        hooks.driver = [ProgressHook(self.progress, state.counters.last_return,
                                     self.monitor.best_eval),
                        *state.collector.hooks(self.logger, self.rules.check_pace),
                        *self.extra_hooks]
        state.watch("diagnostics", self.diagnostics)
        state.watch("metrics", self.metrics, spread=True)
        state.watch("rule_hooks", hooks.rule_states())
        self.hooks.hooks = hooks.ordered()
        self.run_hooks = hooks
        # checkpoint_dir: how a resume from another folder knows this log folder is the
        # run's own (scripts/training/resume.py).
        self.status = StatusFile(paths.status_file, {
            "run": paths.name, "max_timesteps": config.max_timesteps,
            "checkpoint_dir": str(paths.checkpoint_dir.resolve())}, [state, self.monitor],
            (config.checkpoint_freq, config.eval_freq))
        if resume is not None:
            self.logger.resume(resume.env_steps, resume.describe(), checkpoint=resume.checkpoint,
                               changes=resume.changes, forked_from=resume.forked_from)
            for warning in resume.warnings:
                self._warn(resume.env_steps, "resume", warning)
        state.collector.report = lambda message: self._warn(
            state.counters.env_steps, "env_runner", message)
        if state.backend_warning:
            self._warn(state.counters.env_steps, "update_backend", state.backend_warning)

    def claim(self, paths: RunPaths, lock: RunLock | None = None) -> None:
        """Take the run's folders (before anything is written there), unless `lock`."""
        self.run_lock = lock if lock is not None else RunLock(paths)

    def close(self) -> None:
        """Close the envs; give the run's folders back. An env whose `close` raises is a
        warning: the run's outcome and its checkpoint stand."""
        try:
            for problem in self.state.close():
                print(f"warning: {problem} (ignored: the run's files are written)",
                      file=sys.stderr)
        finally:
            if self.run_lock is not None:
                self.run_lock.release()

    def _loop(self, resumed: bool) -> RunOutcome:
        state = self.state
        if not state.collector.episodes:
            state.collector.start(state.counters.episodes)
        if resumed:
            self.monitor.handle(state.restored_findings(self.rules, self.monitor.evals_since_best))
        if state.redo_due:  # stopped in the middle of it: the env raised in an evaluation
            state.redo_due = False
            self._due(state.counters.env_steps)
        self.write_status("running")
        while True:
            if self.signals.received is not None:  # Ctrl-C, SIGTERM: as `rltrain pause`
                self.monitor.request_outside_pause(*self.signals.received,
                                                   state.counters.env_steps)
            if self.monitor.pause is not None:
                return self._pause()
            if state.counters.env_steps >= self.config.max_timesteps:
                return self._finish()
            self._step()

    def _step(self) -> None:
        """One env step, the updates it allows, and everything that is due after it."""
        state, hooks = self.state, self.hooks
        if state.counters.env_steps % 10 == 0 and self.folders.deleted():  # before a write
            raise OutputError(deleted_message(self.folders.deleted()))  # makes them again
        step = state.env_step()
        hooks.on_step(step)
        ended = state.count_step(step)
        if ended is not None:
            hooks.on_episode_end(ended)
            state.end_episode(ended.env)
        state.in_env_step = False
        if state.learning():
            for _ in range(self.config.utd_ratio):
                hooks.on_update(state.learn())
        hooks.on_step_end(step.env_steps)
        self._due(step.env_steps)
        # Last: the step is whole, so a reset that raises (an env breaking the API when
        # its episode ends) stops the run with a checkpoint of it, nothing lost.
        if ended is not None:
            state.start_episode(ended.env)

    def _due(self, steps: int) -> None:
        """Evaluation, checkpoints and status due after env step `steps`. An env that
        raises in evaluation leaves `in_due` set: the run's checkpoint then says to do
        all of this again when it is resumed (`redo_due`)."""
        self.in_due = True
        self.monitor.after_step(steps)
        self.in_due = False
        self.status.after_step(steps, "running")
        self.logger.hand_over_due()

    def _warn(self, env_steps: int, rule: str, warning: str) -> None:
        self.logger.event(env_steps, rule=rule, value=None, threshold=None, action="warn",
                          message=warning)
        self.progress.message(f"warning: {warning}")

    def write_status(self, state: str, pause_reason: str | None = None, **extra: Any) -> None:
        if hasattr(self, "status"):  # not before the run has its folders and monitor
            self.status.write(state, pause_reason, **extra)

    # ------------------------------------------------------- how a run ends
    def _finish(self) -> RunOutcome:
        steps = self.state.counters.env_steps
        self.run_hooks.record_unjudged(self.logger, steps)
        path = self.paths.periodic_checkpoint(steps)
        if self.monitor.latest_checkpoint != str(path):  # not written at this step already
            path = self.monitor.checkpoint("periodic", steps)
        self.write_status("finished")
        return RunOutcome("finished", steps, path)

    def _aborted_line(self) -> str:
        """What a second Ctrl-C cost: the env steps since the newest checkpoint."""
        steps, newest = self.state.counters.env_steps, self.monitor.latest_checkpoint
        if not newest or not Path(newest).is_file():
            return (f"aborted at step {steps} by a second Ctrl-C: the run has no checkpoint "
                    "to resume; all of it is lost")
        since = checkpoint_step(Path(newest))
        return (f"aborted at step {steps} by a second Ctrl-C, before a checkpoint of it: the "
                f"{steps - since} env steps since {newest} (step {since}) are lost; resume "
                f"with: rltrain resume --checkpoint {newest}")

    def _pause(self) -> RunOutcome:
        # The pause is decided: a second Ctrl-C while its checkpoint is written would lose
        # that checkpoint and what came since the last one, so it no longer aborts.
        self.signals.settle()
        steps = self.state.counters.env_steps
        self.run_hooks.record_unjudged(self.logger, steps)
        finding, path = self.monitor.take_pause(steps)
        self.write_status("paused", pause_reason=f"[{finding.rule}] {finding.message}")
        return RunOutcome("paused", steps, path, finding.message, finding.rule,
                          finding.on_weights)

    def _output_failed(self, exc: BaseException) -> OutputError:
        """A log or checkpoint could not be written (disk full, permissions, a run folder
        deleted while the run wrote to it)."""
        problem = describe_write_failure(exc)
        deleted = self.folders.deleted()
        if deleted and problem != deleted_message(deleted):  # found by a failed write
            problem = f"{deleted_message(deleted)} ({problem})"
        _, then = self._stop("write_failure", problem, "that is fixed")
        return OutputError(f"stopped at step {self.state.counters.env_steps}: {problem}; {then}")

    def _env_failed(self, exc: EnvFailure) -> EnvFailure:
        """The env raised an exception; its traceback goes to the log folder. A failed
        vector step leaves the run as it was before it, with the step's actions kept, so
        the resumed run takes that step again with the same actions."""
        problem, steps = str(exc), self.state.counters.env_steps
        # In an evaluation: nothing of it was recorded yet, so the resumed run does it
        # again, and the checkpoint and diagnostics due after it, before its next step.
        self.state.redo_due = self.in_due
        with contextlib.suppress(OSError, OutputError):
            trace = self.paths.env_error_file(steps)
            write_run_file(trace, exc.details)
            problem += f" (traceback: {trace})"
        _, then = self._stop(exc.rule, problem, exc.fixed)
        return EnvFailure(f"stopped at step {steps}: {problem}; {then}", exc.details)

    def _out_of_memory(self, exc: torch.OutOfMemoryError) -> RunOutcome:
        """The device ran out of memory (on CUDA, other processes count too): a pause by
        the memory rule, with a checkpoint if one can still be written (it is saved from
        host memory). An update under way when it happened is lost, or half in it."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        problem = f"out of {self.device.type} memory: {first_line(exc)}"
        saved, _ = self._stop("memory", problem, "memory is free")
        if saved is None:
            raise exc
        return RunOutcome("paused", self.state.counters.env_steps, saved, problem, "memory")

    def _stop(self, rule: str, problem: str, fixed: str) -> tuple[Path | None, str]:
        """Write a paused checkpoint if one can be, and the reason where status reads it.
        Returns the checkpoint, and which checkpoint to resume once `fixed`."""
        steps, halfway = self.state.counters.env_steps, self.state.in_env_step
        saved: Path | None = None
        with contextlib.suppress(OSError, OutputError):
            if not halfway:
                saved = self.monitor.checkpoint("paused", steps)
        with contextlib.suppress(OSError, OutputError):
            self.logger.event(steps, rule=rule, value=None, threshold=None,
                              action="pause" if saved else "stop", message=problem)
        with contextlib.suppress(OSError, OutputError):
            self.write_status("paused" if saved else "crashed", pause_reason=problem)
        if saved is not None:
            return saved, (f"a checkpoint was still written; once {fixed}: rltrain resume "
                           f"--checkpoint {saved}")
        none = ("no checkpoint was written halfway through an env step" if halfway
                else "no checkpoint could be written")
        newest = self.monitor.latest_checkpoint
        if newest and not Path(newest).exists():
            return None, f"{none}; the newest, {newest}, is gone (deleted with its folder?)"
        return None, f"{none}; the newest is {newest}" if newest else none

