"""Session: one watched run of another library's training loop, shared by the SB3
callback and the plain-loop Watcher.

It drives the run shell (utils/run/shell.py) as rltrain's own trainer does: the same
hooks in the same order, the same episode accounting and status.json keys, the run
folder and its lock, the logs, and the `TrainingMonitor` that records the findings and
owns the one pause path (a rule, or `rltrain pause` through the request file), adapted
to the library's checkpoints in session_monitor.py. What differs per integration comes
in as data: an `AgentView` of the networks, a replay buffer (or a view of one), and
`save`, which writes a checkpoint the library itself can load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
import torch

from rltrain.integrations.continued import Continuation, save_watch_state
from rltrain.integrations.session_monitor import LibraryMonitor, LibraryNoise, Saver
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.watch import NoDiagnostics
from rltrain.utils.errors import UserError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Steps, Update
from rltrain.utils.run.folders import (
    RunLock,
    create_run,
    paths_for,
    set_aside_later,
)
from rltrain.utils.run.health import is_finite
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.run.metrics import RunMetrics
from rltrain.utils.run.progress import say
from rltrain.utils.run.shell import (
    Counters,
    EpisodeTally,
    RunHooks,
    add_reward,
    count_step,
    counters_status,
    end_episode,
    make_diagnostics,
    next_episode_index,
)
from rltrain.utils.run.status import StatusFile
from rltrain.utils.training.evaluation import evaluate
from rltrain.utils.training.reward_terms import TermReader, add_terms

STATUS_EVERY_SECONDS = 5.0


def session_config(user: Mapping[str, Any] | None, derived: Mapping[str, Any]) -> TrainConfig:
    """The run's validated config: the user's rltrain keys (rule thresholds and actions,
    eval_freq, ...), then what the integration knows from the library (gamma, batch
    size, ...), which wins: it describes the training that actually runs."""
    return config_from_dict({**dict(user or {}), **dict(derived)})


class Session:
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

    @property
    def env_steps(self) -> int:
        return self.counters.env_steps

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

    # ---------------------------------------------------- what the loop tells
    def sample(self, obs: np.ndarray,
               actions: Callable[[], np.ndarray] | None = None) -> None:
        """Let the state-action map sample the policy's deterministic action at a vector
        step's states ([num_envs, obs_dim]): `actions()` gives them where the library
        computed them, else the actor is called. Both only when the map keeps a row of
        this step (it keeps fewer as training goes on). Not during the warm-up, whose
        actions are random, as in rltrain's own loop."""
        d = self.diagnostics
        if (isinstance(d, NoDiagnostics) or not d.map.collecting
                or self.env_steps < self.config.learning_starts):
            return
        kept = d.map.chosen(self.config.num_envs)
        if not kept:
            return
        states = np.asarray(obs, np.float32).reshape(self.config.num_envs, -1)
        if actions is None:
            with torch.no_grad():  # not inference mode: the map's actor hook skips it
                x = torch.as_tensor(states, device=self.view.device)
                acted = self.view.actor(x).cpu().numpy()
        else:
            acted = actions()
        d.map.keep_rows(kept, states, acted)

    def sample_parts(self, obs: np.ndarray, parts: list[tuple[int, int]]
                     ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """As `sample` for each vector step of `block`'s parts ([start, stop) vector
        steps of `obs`' [k * num_envs, ...] rows, the policy the same throughout, as in
        one rollout), before any is told: per part, the rows the map keeps (drawn as
        `sample` would draw them), their states and the policy's deterministic actions,
        all computed in one pass of the view's actor (None: the part keeps none)."""
        d, n = self.diagnostics, self.config.num_envs
        if isinstance(d, NoDiagnostics) or not d.map.collecting:
            return [None] * len(parts)
        kept = [d.map.chosen_block(stop - start, n, self.env_steps + start * n,
                                   self.config.learning_starts) for start, stop in parts]
        rows = np.concatenate([k + start * n for k, (start, _) in zip(kept, parts,
                                                                       strict=True)])
        if not len(rows):
            return [None] * len(parts)
        states = np.asarray(obs, np.float32).reshape(len(obs), -1)[rows]
        with torch.no_grad():  # not inference mode: the map's actor hook skips it
            acted = self.view.actor(torch.as_tensor(states, device=self.view.device))
        bounds = np.cumsum([len(k) for k in kept])[:-1]
        return [(k, x, a) if len(k) else None for k, x, a in zip(
            kept, np.split(states, bounds), np.split(acted.cpu().numpy(), bounds),
            strict=True)]

    def sample_env(self, env: int, obs: np.ndarray) -> None:
        """As `sample`, for one training env's step where the envs do not step together
        (RLlib's env runners): its row kept at the map's rate, the actor called then."""
        if not isinstance(self.diagnostics, NoDiagnostics):
            self.diagnostics.sample_env(env, obs, self.env_steps)

    def step(self, env: int, obs: np.ndarray, action: np.ndarray, reward: float,
             next_obs: np.ndarray, terminated: bool, truncated: bool,
             reward_terms: dict[str, float] | None = None,
             noise: np.ndarray | None = None, steered: np.ndarray | None = None,
             finite: bool | None = None) -> bool:
        """One env step of training env `env`; `next_obs` is the true final observation
        when the episode ended; `reward_terms`: the terms of its reward the env reported
        (`self.terms` reads them from its info); `noise`, `steered`: the action's
        exploration noise and what the state decided of it (Step's), where known;
        `finite`: `is_finite` of the step where the loop checked its vector step at once.
        Whether the step is finite (what rltrain's replay buffer would store)."""
        self.counters.env_steps += 1
        if reward_terms:
            add_terms(self.episodes[env].reward_terms, reward_terms)
        if finite is None:  # what rltrain would store
            finite = is_finite(next_obs, action, reward)
        step = Step(self.env_steps, env, obs, action, reward, next_obs, terminated, truncated,
                    finite, noise, steered)
        self.hooks.on_step(step)
        # The library decides where its episodes end (it resets its envs itself).
        ended = count_step(self.counters, self.episodes[env], step, terminated or truncated)
        if ended is not None:
            self.hooks.on_episode_end(ended)
            self.episodes[env] = EpisodeTally(
                next_episode_index(self.counters, self.config.num_envs))
        return finite

    def steps(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray,
              next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
              finite: np.ndarray, reward_terms: list[dict[str, float] | None] | None = None,
              noise: np.ndarray | None = None, steered: np.ndarray | None = None,
              envs: int = 0) -> None:
        """One vector step, a row per training env, told to the hooks at once: what
        they find is reported as `step` of each env in turn would (by env step, a step's
        findings before its episode end's, each in the hooks' order), so the first pause
        is the same. `next_obs` holds the true final observation where an episode ended;
        `finite`: `is_finite` of each row (what rltrain's replay buffer would store).
        `envs`: rows per vector step, where the rows are several vector steps in which
        an episode ends only in the last (`block` cuts them so)."""
        n = len(reward)
        self.counters.env_steps += n
        report, found = self.hooks.report, []
        self.hooks.report = lambda f: found.extend((x.env_steps, 0, x) for x in f)
        try:
            self.hooks.on_steps(Steps(self.env_steps, obs, action, reward, next_obs,
                                      terminated, truncated, finite, noise, steered, envs))
            self.hooks.report = lambda f: found.extend((x.env_steps, 1, x) for x in f)
            self._count_steps(reward, terminated | truncated, terminated, reward_terms)
        finally:  # what was found is reported even if a hook raised
            self.hooks.report = report
            if found:
                found.sort(key=lambda row: row[:2])  # stable: the hooks' order within
                report([finding for *_, finding in found])

    def block(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray,
              next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
              finite: np.ndarray,
              reward_terms: list[dict[str, float] | None] | None = None,
              last: bool = True) -> None:
        """Several vector steps of one policy told at once ([k * num_envs] rows in step
        order, as `steps` takes one), as a loop telling them one by one would: cut
        after each vector step where an episode ended, or where work is due by step
        count (`step_end`: a heatmap, an evaluation), each part's map samples kept
        (`sample_parts`) and the part told as one `steps` call, then the due work run
        (the policy is the same throughout). `last`: the library updates its networks after
        the block (the due work of its last vector step then waits for `step_end`, after
        the updates, as for a step told alone)."""
        n = self.config.num_envs
        ended = (terminated | truncated).reshape(-1, n).any(axis=1)
        due = self._due_by_steps(len(ended), n)
        stops = (np.flatnonzero((ended | due)[:-1]) + 1).tolist() + [len(due)]
        parts = list(zip([0, *stops[:-1]], stops, strict=True))
        for (start, stop), picked in zip(parts, self.sample_parts(obs, parts), strict=True):
            if picked is not None:  # before the part is told: its episodes' rows
                kept, states, acted = picked
                self.diagnostics.map.keep_block(kept, n, states, acted)
            rows = slice(start * n, stop * n)
            self.steps(obs[rows], action[rows], reward[rows], next_obs[rows],
                       terminated[rows], truncated[rows], finite[rows],
                       None if reward_terms is None else reward_terms[rows], envs=n)
            if due[stop - 1] and (stop < len(due) or not last):
                self.step_end(requests=False)  # told after the fact: no request yet

    def _due_by_steps(self, vector_steps: int, n: int) -> np.ndarray:
        """Which of the next vector steps of `n` env steps each hold a multiple of a
        hook's `step_end_every` or of eval_freq (with an env to evaluate on)."""
        every = self.hooks.step_end_cadence()
        if self.eval_env is not None:
            every.append(self.config.eval_freq)
        ends = self.env_steps + n * np.arange(vector_steps + 1)
        due = np.zeros(vector_steps, dtype=bool)
        for e in set(every):
            due |= ends[1:] // e > ends[:-1] // e
        return due

    def _count_steps(self, reward: np.ndarray, ended: np.ndarray, terminated: np.ndarray,
                     reward_terms: list[dict[str, float] | None] | None) -> None:
        """A vector step's rewards to each env's episode (or several vector steps':
        row r is env r % num_envs's); the episodes that ended."""
        first, n = self.env_steps - len(reward) + 1, self.config.num_envs
        rewards, ends = reward.tolist(), ended.tolist()
        for row in range(len(rewards)):  # the library decides where its episodes end
            env = row % n
            episode = self.episodes[env]
            if reward_terms is not None and reward_terms[row]:
                add_terms(episode.reward_terms, reward_terms[row])
            add_reward(episode, rewards[row])
            if ends[row]:
                self.hooks.on_episode_end(end_episode(
                    self.counters, episode, first + row, env, bool(terminated[row])))
                self.episodes[env] = EpisodeTally(next_episode_index(self.counters, n))

    def update(self, metrics: dict[str, float]) -> None:
        self.updates += 1
        self.hooks.on_update(Update(self.env_steps, self.updates, metrics))

    def step_end(self, requests: bool = True) -> None:
        """After the updates of the latest env steps: what is due by step count, and
        (`requests`) a `rltrain pause` asked since the last call."""
        before, now = self._ended, self.env_steps
        self.hooks.on_steps_end(before, now)
        self._ended = now
        self.monitor.due(before, now, self.eval_env is not None, requests)
        if now // 100 > before // 100:  # a heartbeat, at most every few seconds
            self.status_file.after_step(now - now % 100, "running")

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
