"""The training loop: env steps and updates, and the hooks told of each.

It wires the layers together: the Collector (the training envs and the exploration)
produces transitions one env step at a time, the replay buffer stores them, the agent
learns from batches, the hooks (utils/hooks.py: metrics, health rules, diagnostics,
progress, and any the caller adds) watch each step, update, episode and evaluation and
return findings, and the TrainingMonitor records those, evaluates and checkpoints.
Per vector step the loop does one action transfer (the diagnostics' actor hook two more
when it keeps that step's states and actions) and, per update, one transfer of a
handful of scalar metrics; all file writes happen per episode or less often.

Pauses: a health rule, Ctrl-C, SIGTERM or `rltrain pause` all become a pause request
on the monitor; the loop finishes the env step it is in, writes
`paused_at_step_<N>.pt` and returns. A second Ctrl-C aborts at once (KeyboardInterrupt);
every checkpoint written before stays whole because all writes are atomic. How a run
ends, also when a file cannot be written, the env raises or memory runs out, is in
scripts/run_endings.py.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from rltrain.scripts import run_endings
from rltrain.scripts.agent_setup import agent_view, build_agent, network_spec
from rltrain.scripts.collector import Collector
from rltrain.scripts.run_endings import RunOutcome
from rltrain.scripts.train_state import (
    Counters,
    ResumeInfo,
    build_payload,
    resume_findings,
)
from rltrain.utils.checkpoint import remove_stale_temp_files
from rltrain.utils.config import TrainConfig
from rltrain.utils.device import check_network_memory, tune_process
from rltrain.utils.diagnostics.flow1 import Flow1Diagnostics, NoDiagnostics
from rltrain.utils.envs import make_env, space_dims
from rltrain.utils.errors import EnvFailure, OutputError, describe_write_failure, os_error_in
from rltrain.utils.evaluation import EvalResult, evaluate
from rltrain.utils.exploration import Exploration
from rltrain.utils.health import HealthRules, is_finite
from rltrain.utils.hooks import EpisodeEnd, Hook, HookList, Step, Update
from rltrain.utils.monitor import TrainingMonitor
from rltrain.utils.progress import ProgressDisplay, ProgressHook
from rltrain.utils.replay_buffer import ReplayBuffer
from rltrain.utils.rules import RuleContext, rule_hooks
from rltrain.utils.run_logger import RunLogger
from rltrain.utils.run_metrics import RunMetrics, recent_episodes
from rltrain.utils.run_status import write_status
from rltrain.utils.runs import RunLock, RunPaths, relative_to_cwd
from rltrain.utils.seeding import (
    DIAGNOSTICS,
    EXPLORATION,
    NETWORK_INIT,
    REPLAY,
    derive_seed,
    seed_global_generators,
)
from rltrain.utils.signals import SignalCatcher

STATUS_EVERY_SECONDS = 5.0


class Trainer:
    """One run of DDPG/TD3 training, from scratch or restored from a checkpoint."""

    def __init__(self, config: TrainConfig, device: torch.device,
                 interactive: bool | None = None) -> None:
        self.config, self.device, self.interactive = config, device, interactive
        tune_process(config.torch_threads)
        seed_global_generators(config.seed)
        # first: a bad env fails here, in-process
        self.eval_env = make_env(config.env_name, env_kwargs=config.env_kwargs)
        self.obs_dim, self.action_dim, low, high = space_dims(self.eval_env)
        self.rules = HealthRules(config, self.obs_dim, device)
        check_network_memory(self.obs_dim, self.action_dim,
                             network_spec(config, "actor").hidden_sizes,
                             network_spec(config, "critic").hidden_sizes, device)
        torch.manual_seed(derive_seed(config.seed, NETWORK_INIT))
        self.agent, self.backend_warning = build_agent(config, self.obs_dim, low, high, device)
        self.agent_view = agent_view(self.agent, low, high)  # what the diagnostics see
        self.buffer = ReplayBuffer(config.replay_buffer_size, self.obs_dim, self.action_dim,
                                   device, seed=derive_seed(config.seed, REPLAY))
        self.exploration = Exploration(config, low, high, derive_seed(config.seed, EXPLORATION))
        self.collector = Collector(config, self.exploration)
        self.eval_env = self.collector.normalizer.frozen_env(self.eval_env)  # normalize.*
        self.counters = Counters()
        self.loss_window: dict[str, list[float]] = {}  # restored, then the metrics hook's
        self.recent_episodes = recent_episodes()  # the same
        self.monitor_state: dict | None = None  # set by restore(), applied in run()
        self.diagnostics_state: dict | None = None  # set by restore(), applied in run()
        self.rule_hooks_state: dict = {}  # the same
        # More hooks, told of everything after the run's own (`rltrain sweep` reports to
        # Tune through one).
        self.extra_hooks: list[Hook] = []
        self.on_event: Callable[[int, dict], None] | None = None  # each events.jsonl line
        self.paths: RunPaths | None = None
        self.in_env_step = False
        self.in_due = False
        self.redo_due = False  # set by a checkpoint written when `_due` failed
        self.run_lock: RunLock | None = None  # held from `claim` until `close`
        self.argv: list[str] | None = None  # what command.txt records (None: sys.argv)

    # ----------------------------------------------------------------- the loop
    def run(self, paths: RunPaths, resume: ResumeInfo | None = None) -> RunOutcome:
        """Train until max_timesteps or a pause; `resume` when continuing from a checkpoint."""
        # Signals are caught from the start: a Ctrl-C while the run starts pauses it before
        # its first step, rather than aborting with a half-made run folder.
        with SignalCatcher() as self.signals:
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
                return self._loop(resumed=resume is not None)
            except KeyboardInterrupt:
                self.write_status("aborted")
                raise
            except (OSError, OutputError) as exc:
                if os_error_in(exc) is None:
                    raise
                raise run_endings.output_failed(self, exc) from None
            except EnvFailure as exc:
                raise run_endings.env_failed(self, exc) from None
            except torch.OutOfMemoryError as exc:
                return run_endings.out_of_memory(self, exc)
            except BaseException:
                self.write_status("crashed")
                raise
            finally:
                self.signals.settle()  # the outcome is decided: a Ctrl-C now changes nothing
                self._close_all()

    def _close_all(self) -> None:
        """Close diagnostics, display, logs and envs. A log that cannot be flushed (a full
        disk) must not replace the run's outcome or the error that says what to resume."""
        for close in (self.hooks.close, self.progress.close, self.logger.close, self.close):
            try:
                close()
            except (OSError, OutputError) as exc:
                if os_error_in(exc) is None:
                    raise
                print(f"warning: closing the run: {describe_write_failure(exc)}", file=sys.stderr)

    def _start(self, paths: RunPaths, resume: ResumeInfo | None) -> None:
        """Open the run's logs, monitor and diagnostics."""
        self.paths = paths
        remove_stale_temp_files(paths.checkpoint_dir)
        paths.pause_request_file.unlink(missing_ok=True)  # meant for an earlier process
        self.logger = RunLogger(paths, resume_step=resume.env_steps if resume else None)
        self.logger.write_run_files(self.config, self.argv)
        self.logger.on_event = self.on_event
        self.progress = ProgressDisplay(self.config.max_timesteps, self.counters.env_steps,
                                        self.interactive)
        self.hooks = HookList([], report=lambda findings: self.monitor.handle(findings))
        self.monitor = TrainingMonitor(self.config, paths, self.logger, self._evaluate,
                                       self.checkpoint_payload, self.progress.message,
                                       self.hooks)
        if self.monitor_state is not None:
            self.monitor.load_state_dict(self.monitor_state)
        if resume is not None and resume.forked_from is None:  # until this run writes one
            self.monitor.latest_checkpoint = str(relative_to_cwd(Path(resume.checkpoint)))
        self.diagnostics = self._diagnostics(paths)
        self.metrics = RunMetrics(self.logger, self.config.log_freq, self.exploration,
                                  self.diagnostics, self.counters.env_steps, self.agent.updates,
                                  self.loss_window, self.recent_episodes)
        progress = ProgressHook(self.progress, self.counters.last_return, self.monitor.best_eval)
        self.rule_hooks = rule_hooks(RuleContext(self.config, self.obs_dim, self.action_dim,
                                                 self.agent_view))
        for hook in self.rule_hooks:
            if hook.name in self.rule_hooks_state:
                hook.load_state_dict(self.rule_hooks_state[hook.name])
        self.hooks.hooks = [self.metrics, self.rules, self.diagnostics, *self.rule_hooks,
                            progress, *self.extra_hooks]
        self._status_mark = 0.0
        if resume is not None:
            self._record_resume(resume)
        if self.backend_warning:
            self._warn(self.counters.env_steps, "update_backend", self.backend_warning)

    def claim(self, paths: RunPaths, lock: RunLock | None = None) -> None:
        """Take the run's folders for this process (before anything is written there);
        `lock`: this process holds them already."""
        self.run_lock = lock if lock is not None else RunLock(paths)

    def close(self) -> None:
        """Close the envs (async vector envs run worker processes); give the run back."""
        self.collector.close()
        self.eval_env.close()
        if self.run_lock is not None:
            self.run_lock.release()

    def _loop(self, resumed: bool) -> RunOutcome:
        if not self.collector.episodes:
            self.collector.start(self.counters.episodes)
        if resumed:
            self.monitor.handle(resume_findings(self))
        if self.redo_due:  # stopped in the middle of it: the env raised in an evaluation
            self.redo_due = False
            self._due(self.counters.env_steps)
        self.write_status("running")
        self._pause_on_signal()  # one that came while the run started
        while self.monitor.pause is None and self.counters.env_steps < self.config.max_timesteps:
            self._step()
            self._pause_on_signal()
        if self.monitor.pause is not None:
            return run_endings.pause(self)
        return run_endings.finish(self)

    def _pause_on_signal(self) -> None:
        """Ctrl-C or SIGTERM asks for a pause, as `rltrain pause` does."""
        if self.signals.received is not None:
            self.monitor.request_outside_pause(*self.signals.received, self.counters.env_steps)

    def _step(self) -> None:
        """One env step and everything that is due after it."""
        self._env_step()
        steps = self.counters.env_steps
        if steps >= self.config.learning_starts and len(self.buffer) >= self.config.batch_size:
            for _ in range(self.config.utd_ratio):
                self._learn()
        self.hooks.on_step_end(steps)
        self._due(steps)

    def _due(self, steps: int) -> None:
        """Evaluation, checkpoints and status due after env step `steps`. An env that
        raises in evaluation leaves `in_due` set: the run's checkpoint then says to do
        all of this again when it is resumed (`redo_due`)."""
        self.in_due = True
        self.monitor.after_step(steps)
        self.in_due = False
        if steps % self.config.checkpoint_freq == 0 or steps % self.config.eval_freq == 0:
            self.write_status("running")
        if steps % 100 == 0 and time.monotonic() - self._status_mark > STATUS_EVERY_SECONDS:
            self.write_status("running")

    def _env_step(self) -> None:
        steps = self.counters.env_steps
        t = self.collector.next(steps, self.agent.act)  # if the envs raise, nothing changed
        self.in_env_step = True  # a failure from here on leaves the bookkeeping half done
        episode = self.collector.episodes[t.env]
        truncated = t.truncated
        self.counters.env_steps += 1
        stored = is_finite(t.next_obs, t.action, t.reward)
        if stored:
            self.buffer.add(t.obs, t.action, t.stored_reward, t.next_obs, t.terminated,
                            truncated)
        self.hooks.on_step(Step(self.counters.env_steps, t.env, t.obs, t.action, t.reward,
                                t.next_obs, t.terminated, truncated, stored))
        if not stored and not np.isfinite(t.next_obs).all():
            truncated = True  # the env state is broken: end the episode here
        if math.isfinite(t.reward):  # a refused NaN/inf reward is non_finite's, not the return's
            episode.episode_return += t.reward
        else:
            episode.non_finite_rewards += 1  # counted, so that the return says what it lacks
        episode.length += 1
        if t.terminated or truncated:
            self._end_episode(t.env, t.terminated)
        self.in_env_step = False

    def _learn(self) -> None:
        metrics = self.agent.update(self.buffer.sample(self.config.batch_size))
        # One host transfer per update, for all the metrics.
        values = dict(zip(metrics, torch.stack(list(metrics.values())).tolist(), strict=True))
        self.hooks.on_update(Update(self.counters.env_steps, self.agent.updates, values))

    def _end_episode(self, env: int, terminated: bool) -> None:
        episode, steps = self.collector.episodes[env], self.counters.env_steps
        self.counters.episodes += 1
        self.counters.last_return = episode.episode_return
        self.counters.last_non_finite_rewards = episode.non_finite_rewards
        self.hooks.on_episode_end(EpisodeEnd(steps, env, episode.index, episode.episode_return,
                                             episode.length, terminated,
                                             episode.non_finite_rewards))
        # num_envs episodes are always in progress: the next index is the one after them.
        self.collector.restart(env, self.counters.episodes + self.collector.num_envs - 1)

    def _record_resume(self, resume: ResumeInfo) -> None:
        changes = ", ".join(resume.changes) or "no changes"
        origin = f" of run '{resume.forked_from}'" if resume.forked_from else ""
        self.logger.resume(resume.env_steps,
                           f"resumed from {resume.checkpoint}{origin} ({changes})",
                           checkpoint=resume.checkpoint, changes=resume.changes,
                           forked_from=resume.forked_from)
        for warning in resume.warnings:
            self._warn(resume.env_steps, "resume", warning)

    def _warn(self, env_steps: int, rule: str, warning: str) -> None:
        self.logger.event(env_steps, rule=rule, value=None, threshold=None, action="warn",
                          message=warning)
        self.progress.message(f"warning: {warning}")

    # ------------------------------------------------------- periodic work
    def _evaluate(self) -> EvalResult:
        with self.diagnostics.paused_collection():
            return evaluate(self.agent.act, self.eval_env, self.config.n_eval_episodes,
                            self.config.seed, self.config.gamma, env_name=self.config.env_name)

    def _diagnostics(self, paths: RunPaths) -> Flow1Diagnostics | NoDiagnostics:
        if not self.config.diagnostics.enabled:
            return NoDiagnostics()
        diagnostics = Flow1Diagnostics(
            self.config, self.obs_dim, self.agent_view, self.buffer, paths, self.logger,
            self.progress.message, derive_seed(self.config.seed, DIAGNOSTICS))
        if self.diagnostics_state:
            diagnostics.load_state_dict(self.diagnostics_state)
        return diagnostics

    def write_status(self, state: str, pause_reason: str | None = None) -> None:
        if self.paths is None or not hasattr(self, "monitor"):
            return
        self._status_mark = time.monotonic()
        m, c = self.monitor, self.counters
        write_status(self.paths.status_file, {
            "run": self.paths.name, "state": state, "env_steps": c.env_steps,
            "max_timesteps": self.config.max_timesteps, "episodes": c.episodes,
            "updates": self.agent.updates, "latest_episode_return": c.last_return,
            "latest_episode_non_finite_rewards": c.last_non_finite_rewards,
            "latest_eval": m.latest_eval, "best_eval": m.best_eval,
            "best_eval_step": m.best_eval_step, "evals_since_best": m.evals_since_best,
            "evaluations": m.evaluations, "pause_reason": pause_reason,
            "latest_checkpoint": m.latest_checkpoint})

    def checkpoint_payload(self, kind: str) -> dict:
        return build_payload(self, kind)
