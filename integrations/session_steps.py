"""What a watched loop tells its Session (session.py) of its env steps and updates, as
hooks calls: the state-action map's samples, a step, a vector step, a block of vector
steps (a collection told at once), an update, and the work due by step count. The same
hooks in the same order as rltrain's own trainer, and the same episode accounting
(utils/run/shell.py): the library decides where its episodes end.

`StepTelling` is the Session's part that does this; the Session's `_open` sets the
attributes it reads (annotated below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gymnasium as gym
import numpy as np
import torch

from rltrain.utils.diagnosis.watch import NoDiagnostics
from rltrain.utils.hooks.hook import HookList, Step, Steps, Update
from rltrain.utils.run.health import is_finite
from rltrain.utils.run.shell import (
    Counters,
    EpisodeTally,
    add_reward,
    count_step,
    end_episode,
    next_episode_index,
)
from rltrain.utils.training.reward_terms import add_terms

if TYPE_CHECKING:
    from rltrain.integrations.session_monitor import LibraryMonitor
    from rltrain.utils.config.schema import TrainConfig
    from rltrain.utils.hooks.agent_view import AgentView
    from rltrain.utils.run.logger import RunLogger
    from rltrain.utils.run.status import StatusFile


class StepTelling:
    """The steps, updates and due work a loop tells, handed to the run's hooks."""

    config: TrainConfig
    view: AgentView
    diagnostics: Any
    hooks: HookList
    monitor: LibraryMonitor
    pause: Any  # the finding the run pauses for (Session's property)
    counters: Counters
    episodes: list[EpisodeTally]
    eval_env: gym.Env | None
    status_file: StatusFile
    logger: RunLogger
    updates: int
    _ended: int  # the env steps step_end has run for

    @property
    def env_steps(self) -> int:
        return self.counters.env_steps

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
        d.map.keep_rows(kept, states, self._acted(states) if actions is None else actions())

    def _acted(self, states: np.ndarray) -> np.ndarray:
        """The policy's deterministic actions at `states` (the view's actor)."""
        with torch.no_grad():  # not inference mode: the map's actor hook skips it
            return self.view.actor(torch.as_tensor(states, device=self.view.device)).cpu().numpy()

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
        bounds = np.cumsum([len(k) for k in kept])[:-1]
        return [(k, x, a) if len(k) else None for k, x, a in zip(
            kept, np.split(states, bounds), np.split(self._acted(states), bounds),
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
            if due[stop - 1] and (stop < len(due) or not last) and self.pause is None:
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

    def update(self, metrics: dict[str, float], count: int = 1) -> None:
        """`count` updates with these metrics (a library's mean over them), told at once."""
        self.updates += count
        self.hooks.on_update(Update(self.env_steps, self.updates, metrics, count))

    def step_end(self, requests: bool = True) -> None:
        """After the updates of the latest env steps: what is due by step count, and
        (`requests`) a `rltrain pause` asked since the last call."""
        before, now = self._ended, self.env_steps
        self.hooks.on_steps_end(before, now)
        self._ended = now
        self.monitor.due(before, now, self.eval_env is not None, requests)
        self.logger.hand_over_due()
        if now // 100 > before // 100:  # a heartbeat, at most every few seconds
            self.status_file.after_step(now - now % 100, "running")
