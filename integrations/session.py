"""Session: one watched run of another library's training loop, shared by the SB3
callback and the plain-loop Watcher.

It drives the run shell (utils/run/shell.py) as rltrain's own trainer does: the same
hooks in the same order, the same episode accounting and status.json keys, the run
folder and its lock, the logs, and the `TrainingMonitor` that records the findings and
owns the one pause path (a rule, or `rltrain pause` through the request file), adapted
to the library's checkpoints in session_monitor.py. What differs per integration comes
in as data: an `AgentView` of the networks, a replay buffer (or a view of one), and
`save`, which writes a checkpoint the library itself can load. What the loop tells it
of its steps and updates is session_steps.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium as gym

from rltrain.integrations.continued import Continuation, save_watch_state
from rltrain.integrations.session_monitor import LibraryMonitor, LibraryNoise, Saver
from rltrain.integrations.session_steps import StepTelling
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import UserError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.folders import (
    RunLock,
    create_run,
    paths_for,
    set_aside_later,
)
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.run.metrics import RunMetrics
from rltrain.utils.run.progress import say
from rltrain.utils.run.shell import (
    Counters,
    EpisodeTally,
    RunHooks,
    counters_status,
    make_diagnostics,
)
from rltrain.utils.run.status import StatusFile
from rltrain.utils.training.evaluation import evaluate
from rltrain.utils.training.reward_terms import TermReader

STATUS_EVERY_SECONDS = 5.0


def session_config(user: Mapping[str, Any] | None, derived: Mapping[str, Any]) -> TrainConfig:
    """The run's validated config: the user's rltrain keys (rule thresholds and actions,
    eval_freq, ...), then what the integration knows from the library (gamma, batch
    size, ...), which wins: it describes the training that actually runs."""
    return config_from_dict({**dict(user or {}), **dict(derived)})


class Session(StepTelling):
    """The run folder, hooks, monitor and status of one watched training run."""

    def __init__(self, config: TrainConfig, view: AgentView, buffer: Any, obs_dim: int,
                 save: Saver, integration: str, eval_env: gym.Env | None = None,
                 noise: float = 0.0, env_steps: int = 0, updates: int = 0,
                 continued: Continuation | None = None,
                 translate: Callable[[Finding], Finding] | None = None) -> None:
        """A new run from `env_steps`, or, with `continued`, the run `config.run_name`
        going on in its own folders. `translate`: each finding in the library's terms
        (its `suggested_set` in the library's settings) before it is recorded."""
        self.config, self.view, self.integration = config, view, integration
        self.translate = translate
        if continued is not None:
            assert config.run_name is not None
            self.paths = paths_for(config, config.run_name)
        else:
            try:
                self.paths = create_run(config)
            except UserError as exc:  # its hint is rltrain's own resume, not the library's
                raise UserError(f"{str(exc).split(';')[0]}; choose another run_name") from None
        self.lock = RunLock(self.paths)
        try:
            if continued is not None:  # from an earlier step: a later history is set aside
                self.set_aside = set_aside_later(self.paths, continued.env_steps)
            self._open(buffer, obs_dim, save, eval_env, noise, updates,
                       continued or Continuation(env_steps, 0, None, None, ""),
                       resumed=continued is not None)
            if continued is not None:
                self._continue(continued)
        except BaseException:  # the run's folders stay free for another try
            self.lock.release()
            raise

    def _open(self, buffer: Any, obs_dim: int, save: Saver, eval_env: gym.Env | None,
              noise: float, updates: int, start: Continuation, resumed: bool) -> None:
        config, view, env_steps = self.config, self.view, start.env_steps
        # a continued run's TensorBoard drops what an abandoned history wrote after `start`
        self.logger = RunLogger(self.paths, resume_step=env_steps if resumed else None)
        self.logger.write_run_files(config)
        self.found: list[Finding] = []
        self.eval_env = eval_env
        self._given: EvalResult | None = None  # an evaluation the loop ran itself
        self.monitor = LibraryMonitor(config, self.paths, self.logger, self._evaluation, save)
        self.hooks = self.monitor.hooks
        self.hooks.report = self._report  # kept for `take`, then recorded
        self.counters = Counters(env_steps, start.episodes, start.last_return)
        self._ended = env_steps
        self.updates = updates
        self.diagnostics = make_diagnostics(config, obs_dim, view, buffer, self.paths,
                                            self.logger, say)
        self.metrics = RunMetrics(self.logger, config.log_freq, LibraryNoise(noise),
                                  self.diagnostics, env_steps, updates)
        hooks = RunHooks.build(config, obs_dim, len(view.action_low), view, self.metrics,
                               self.diagnostics, view.device)
        self.rules = hooks.rule_states()
        self.hooks.hooks = hooks.ordered()
        self.run_hooks = hooks
        self.episodes = [EpisodeTally(start.episodes + i) for i in range(config.num_envs)]
        self.terms = TermReader()  # the reward's terms in the envs' infos
        self.closed = False
        self.status_file = StatusFile(self.paths.status_file, {
            "run": self.paths.name, "max_timesteps": config.max_timesteps,
            "checkpoint_dir": str(self.paths.checkpoint_dir.resolve()),
            "integration": self.integration}, [self, self.monitor],
            every_seconds=STATUS_EVERY_SECONDS)
        self.write_status("running")

    def _continue(self, continued: Continuation) -> None:
        """Mark where the run goes on in its logs; give the watch its saved state."""
        if continued.state is not None:
            state = continued.state
            self.monitor.load_state_dict(state["monitor"])
            self.diagnostics.load_state_dict(state["diagnostics"])
            self.metrics.load_state_dict(state["metrics"])
            self.rules.load_state_dict(state["rule_hooks"])
        message = continued.message
        moved = sum(len(names) for names in self.set_aside.values())
        if moved:
            files = "1 file" if moved == 1 else f"{moved} files"
            message += (f"; the {files} written after that step were moved aside, nothing "
                        f"deleted: {', '.join(map(str, self.set_aside))}")
        self.logger.resume(continued.env_steps, message)
        say(f"run {self.paths.name}: {message}")

    def state_dict(self) -> dict[str, Any]:
        """What the watch holds beyond the logs, for a continued run (continued.py)."""
        return {"monitor": self.monitor.state_dict(),
                "diagnostics": self.diagnostics.state_dict(),
                "metrics": self.metrics.state_dict(), "rule_hooks": self.rules.state_dict()}

    def continuation(self, how: str) -> Continuation:
        """This run going on in another session of the same process (a later `learn()`)."""
        c = self.counters
        return Continuation(c.env_steps, c.episodes, c.last_return, self.final_state,
                            f"continued at step {c.env_steps} ({how}); its rules go on")

    def status(self) -> dict[str, Any]:
        """The counters, as status.json shows them (the run shell's keys)."""
        return counters_status(self.counters, self.updates)

    # ------------------------------------------------------------ findings
    def _report(self, found: list[Finding]) -> None:
        if self.translate is not None:
            found = [self.translate(f) for f in found]
        self.found.extend(found)
        self.monitor.handle(found)

    def take(self) -> list[Finding]:
        """The findings made since the last call."""
        found, self.found = self.found, []
        return found

    @property
    def pause(self) -> Finding | None:
        """The finding the run pauses for (a rule's, or `rltrain pause`'s), if any."""
        return self.monitor.pause

    # ------------------------------------------------------------ evaluation
    def evaluate_on(self, env: gym.Env, episodes: int | None = None) -> EvalResult:
        """rltrain's deterministic evaluation of `view.act` on `env` (no map samples)."""
        c = self.config
        with self.diagnostics.paused_collection():
            return evaluate(self.view.act, env, episodes or c.n_eval_episodes, c.seed,
                            c.gamma)

    def evaluated(self, result: EvalResult) -> None:
        """An evaluation the loop ran: recorded and judged as the monitor's own."""
        self._given = result
        self.monitor.evaluate(self.env_steps)
        self.write_status("running")

    def _evaluation(self) -> EvalResult:
        if self._given is not None:
            result, self._given = self._given, None
            return result
        assert self.eval_env is not None
        return self.evaluate_on(self.eval_env)

    # ------------------------------------------------------------- endings
    def pause_run(self, continue_with: Callable[[Path], str] | None = None) -> Path:
        """Write the paused checkpoint and the watch's state, and record why; the loop
        then stops. `continue_with(checkpoint)`: the lines that continue the run in the
        library's own API, kept in status.json for `rltrain pause` and `status` to show."""
        finding, path = self.monitor.take_pause(self.env_steps)
        save_watch_state(self.paths, self.env_steps, self.state_dict())
        hint = continue_with(path) if continue_with is not None else None
        self.status_file.write("paused", f"[{finding.rule}] {finding.message}",
                               continue_with=hint)
        return path

    def close(self, state: str) -> None:
        """End the run as `state` (finished, paused, crashed); release its folders."""
        if self.closed:
            return
        self.closed = True
        self.final_state = self.state_dict()  # before the hooks close
        if state != "paused":
            self.write_status(state)
        try:
            self.run_hooks.record_unjudged(self.logger, self.env_steps)
            self.hooks.close()
            self.logger.close()
        finally:
            self.lock.release()

    def write_status(self, state: str, pause_reason: str | None = None) -> None:
        self.status_file.write(state, pause_reason)
