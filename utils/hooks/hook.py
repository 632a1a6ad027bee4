"""The one interface of everything that watches training: `Hook`.

The health rules, the flow-1 diagnostics, metric logging, the progress display and the
sweep's reporter are hooks. Whoever owns the training loop (rltrain's trainer, or an
integration driving another library's loop) calls the same few methods at the same
points: after an env step, after an update, at the end of a step's work, at the end of
an episode, after an evaluation, after a checkpoint, when the run pauses. Each method
gets a small read-only record and returns the findings it makes; a finding whose action
is "pause" is a pause request. The owner hands them to the monitor, which records them
and pauses the run: no hook reaches into the loop, and the loop names no rule.

A hook that has state to keep across a pause returns it from `state_dict()`; it goes
into checkpoints under the hook's `name`.

What a hook returns, `Finding`, and what happens to it are the monitor's
(utils/run/monitor.py), which also holds the list of hooks a run is watched by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

if TYPE_CHECKING:  # annotations only: the config (which imports the rules) needs no numpy
    import numpy as np

    from rltrain.utils.hooks.eval_result import EvalResult
    from rltrain.utils.hooks.findings import Finding


@dataclass(frozen=True)
class Step:
    """One env step of one training env."""

    env_steps: int  # env steps so far, this one included
    env: int        # which training env (0 without vector envs)
    obs: np.ndarray
    action: np.ndarray  # the action sent to the env, exploration noise included
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    stored: bool    # it went into the replay buffer (non-finite transitions do not)
    # The action's exploration noise, standard normal draws independent of the env, and
    # what the state decided of the action before it (the policy's action); None: unknown
    # (a random warm-up action, or the library does not say).
    noise: np.ndarray | None = None
    steered: np.ndarray | None = None


@dataclass(frozen=True)
class Steps:
    """One vector step: a step of every training env at once, row i env i's, in the
    order a loop telling them one by one would (env i's is env step `first + i`); or
    several vector steps one after another (`envs` rows each: row r is env `r % envs`'s,
    env step `first + r`), in which an episode ends only in the last. A hook that
    judges them as arrays overrides `Hook.on_steps`; any other sees each `Step` in
    turn."""

    env_steps: int  # env steps so far, these included
    obs: np.ndarray         # [num_envs, ...]
    action: np.ndarray      # [num_envs, action_dim]
    reward: np.ndarray      # [num_envs], float64
    next_obs: np.ndarray    # [num_envs, ...]: the true final observation where one ended
    terminated: np.ndarray  # [num_envs], bool
    truncated: np.ndarray   # [num_envs], bool
    stored: np.ndarray      # [num_envs], bool
    noise: np.ndarray | None = None    # [num_envs, action_dim], as Step's (None: unknown)
    steered: np.ndarray | None = None
    envs: int = 0  # rows per vector step (0: all of them, one vector step)
    # the largest finite |reward| among them (0 where none is): several rules keep the
    # run's largest
    largest_abs_reward: float = field(init=False)

    def __post_init__(self) -> None:
        largest = max((abs(r) for r in self.reward.tolist() if math.isfinite(r)), default=0.0)
        object.__setattr__(self, "largest_abs_reward", largest)
        if not self.envs:
            object.__setattr__(self, "envs", len(self.reward))

    @property
    def first(self) -> int:
        return self.env_steps - len(self.reward) + 1

    def each(self) -> Iterator[Step]:
        noise, steered, first, envs = self.noise, self.steered, self.first, self.envs
        for row in range(len(self.reward)):
            yield Step(first + row, row % envs, self.obs[row], self.action[row],
                       float(self.reward[row]), self.next_obs[row],
                       bool(self.terminated[row]), bool(self.truncated[row]),
                       bool(self.stored[row]), None if noise is None else noise[row],
                       None if steered is None else steered[row])


@dataclass(frozen=True)
class Update:
    env_steps: int
    updates: int    # updates so far, this one included
    metrics: dict[str, float]  # critic_loss, q_mean, critic_grad_norm (+ actor_*)
    # The updates this record stands for, the newest being `updates`: a library that
    # reports one mean over a call's gradient steps (SB3, RLlib) tells them at once.
    count: int = 1

    @property
    def first(self) -> int:
        """The number of the oldest update this record stands for."""
        return self.updates - self.count + 1

    def each(self) -> list["Update"]:
        """One record per update, oldest first (itself where it stands for one)."""
        if self.count == 1:
            return [self]
        return [Update(self.env_steps, u, self.metrics)
                for u in range(self.first, self.updates + 1)]


@dataclass(frozen=True)
class EpisodeEnd:
    env_steps: int
    env: int
    index: int      # the episode's number among all training episodes
    episode_return: float  # NaN/inf rewards left out
    length: int
    terminated: bool  # False: truncated (a time limit)
    non_finite_rewards: int
    # The episode's sum of each reward term the env reports in info (`reward_*` entries
    # or a `reward_terms` dict: utils/training/reward_terms.py); None: it reports none.
    reward_terms: dict[str, float] | None = None


@dataclass(frozen=True)
class Evaluation:
    env_steps: int
    result: EvalResult
    best: float             # the best mean return so far, this one included
    evals_since_best: int   # 0 when this one is the new best


class Hook:
    """Watches training; every method may return findings (none by default)."""

    name = "hook"
    # `on_step_end` is called at the env steps that are multiples of this only (every
    # step: 1); a hook whose work there is due every N steps says N, and a loop whose
    # vector step adds many env steps calls it at those steps alone.
    step_end_every = 1
    # `on_update` takes a record of several updates (`Update.count`) in one call; a hook
    # that does not (the default) is called once per update, `updates` counting up.
    update_batches = False

    def on_step(self, step: Step) -> list[Finding]:
        """After an env step, before the updates it allows."""
        return []

    def on_steps(self, steps: Steps) -> list[Finding]:
        """A vector step's env steps; by default `on_step` of each in turn. A hook that
        overrides it judges every step of the vector loops (the SB3 callback, the
        Watcher) here, and keeps `on_step` for the loops that tell one step at a time
        (rltrain's trainer, RLlib's episodes): the two must judge alike."""
        found: list[Finding] = []
        for step in steps.each():
            found += self.on_step(step) or []
        return found

    def on_update(self, update: Update) -> list[Finding]:
        return []

    def on_step_end(self, env_steps: int) -> list[Finding]:
        """After a step's updates, evaluation and checkpoint: what is due by step count
        (called at multiples of `step_end_every`)."""
        return []

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        return []

    def on_eval_start(self, env_steps: int) -> list[Finding]:
        """An evaluation of the policy begins (its env steps are not training's)."""
        return []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        return []

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> list[Finding]:
        """`kind`: periodic, best or paused."""
        return []

    def on_pause(self, env_steps: int) -> list[Finding]:
        """The run pauses after this step (its checkpoint is written)."""
        return []

    def close(self) -> None:
        """The run ends; release what the hook holds (files, module hooks)."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` of a checkpoint."""


class RunSource(Protocol):
    """What the monitor needs of a run: its checkpoint and an evaluation of its policy."""

    def state_dict(self, kind: str) -> dict[str, Any]: ...

    def evaluate(self) -> EvalResult: ...


class HookList:
    """Calls every hook in turn and hands what they find to `report` (the monitor)."""

    def __init__(self, hooks: list[Hook], report: Callable[[list[Finding]], None]) -> None:
        self.hooks, self.report = hooks, report
        self._methods: dict[str, list[Callable[..., list[Finding]]]] = {}
        self._made_from: list[Hook] | None = None  # the list `_methods` was made from

    def _calls(self, method: str) -> list[Callable[..., list[Finding]]]:
        # Hooks that keep `Hook`'s no-op for a method are left out: this runs per env step.
        if self._made_from is not self.hooks:
            self._methods, self._made_from = {}, self.hooks
        if method not in self._methods:
            # a hook that watches steps one by one is told of a vector step's too
            own = ("on_step", "on_steps") if method == "on_steps" else (method,)
            self._methods[method] = [
                getattr(h, method) for h in self.hooks
                if any(getattr(type(h), m) is not getattr(Hook, m) for m in own)]
        return self._methods[method]

    def _each(self, method: str, *args: Any) -> None:
        for call in self._calls(method):
            found = call(*args)
            if found:
                self.report(found)

    def on_step(self, step: Step) -> None:
        self._each("on_step", step)

    def on_steps(self, steps: Steps) -> None:
        """A vector step, to each hook that watches steps (`on_step` or `on_steps`)."""
        self._each("on_steps", steps)

    def on_update(self, update: Update) -> None:
        """An update, or several told at once (`Update.count`): each hook in turn, once
        if it takes batches (`update_batches`), else once per update."""
        if update.count == 1:
            self._each("on_update", update)
            return
        each: list[Update] | None = None
        for call in self._calls("on_update"):
            if call.__self__.update_batches:
                found = call(update)
                if found:
                    self.report(found)
                continue
            each = each or update.each()
            for one in each:
                found = call(one)
                if found:
                    self.report(found)

    def on_step_end(self, env_steps: int) -> None:
        self.on_steps_end(env_steps - 1, env_steps)

    def step_end_cadence(self) -> list[int]:
        """The `step_end_every` of each hook with step-end work (a loop that tells many
        steps at once runs `on_steps_end` where a multiple of one falls)."""
        return [call.__self__.step_end_every for call in self._calls("on_step_end")]

    def on_steps_end(self, before: int, now: int) -> None:
        """`on_step_end` of the env steps in (before, now] (a vector step adds several),
        in step order, for each hook only at the multiples of its `step_end_every`."""
        due = []
        for order, call in enumerate(self._calls("on_step_end")):
            every = call.__self__.step_end_every
            if now // every > before // every:  # a multiple in (before, now]: rarely
                due += [(steps, order, call) for steps in
                        range((before // every + 1) * every, now + 1, every)]
        if len(due) > 1:
            due.sort(key=lambda d: d[:2])
        for steps, _, call in due:
            found = call(steps)
            if found:
                self.report(found)

    def on_episode_end(self, episode: EpisodeEnd) -> None:
        self._each("on_episode_end", episode)

    def on_eval_start(self, env_steps: int) -> None:
        self._each("on_eval_start", env_steps)

    def on_eval(self, evaluation: Evaluation) -> None:
        self._each("on_eval", evaluation)

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> None:
        self._each("on_checkpoint", kind, path, env_steps)

    def on_pause(self, env_steps: int) -> None:
        self._each("on_pause", env_steps)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()

    def state_dict(self) -> dict[str, Any]:
        return {hook.name: hook.state_dict() for hook in self.hooks}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for hook in self.hooks:
            if hook.name in state:
                hook.load_state_dict(state[hook.name])
