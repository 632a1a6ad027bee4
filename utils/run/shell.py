"""The run shell: what every way of driving a run shares.

rltrain's own loop (scripts/training/trainer.py with scripts/training/run_state.py), the
SB3 callback and a plain loop's Watcher (integrations/, through integrations/session.py)
all drive a run through these, so that a behaviour fixed here is fixed for the three:

- the hooks and their order (`RunHooks`): metrics, the health rules, the flow-1
  diagnostics, the rules that are their own hooks, then the driver's own (progress, a
  sweep's reporter);
- the episode accounting (`count_step`) and the counters it keeps (`Counters`): an
  episode's return leaves NaN/inf rewards out and counts them, and the next episode's
  index follows the `num_envs` episodes in progress;
- the counters' part of status.json (`counters_status`; the monitor adds its own part,
  `StatusFile` writes them).

The run folder, logs, monitor (findings and the one pause path) are the parts in this
package each driver builds the same way; only what differs per driver comes in as
data: its `AgentView`, its replay buffer, how it saves a checkpoint and evaluates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.rules.registry import not_judging, rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleContext, RuleHook
from rltrain.utils.diagnosis.watch import Flow1Diagnostics, NoDiagnostics
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.hook import EpisodeEnd, Hook, HookList, Step
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.health import HealthRules
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.seeding import DIAGNOSTICS, derive_seed


@dataclass
class Counters:
    """A run's counts, in checkpoints (trainer.counters) and status.json."""

    env_steps: int = 0
    episodes: int = 0  # completed training episodes
    last_return: float | None = None  # of the latest completed episode
    last_non_finite_rewards: int = 0  # NaN/inf rewards left out of that return


class Episode(Protocol):
    """An episode in progress, as the accounting sees it (the collector's episodes keep
    more: their actions, to be replayed on resume)."""

    index: int
    episode_return: float
    length: int
    non_finite_rewards: int
    reward_terms: dict[str, float]  # sums of the reward's terms (empty: the env reports none)


@dataclass
class EpisodeTally:
    """An episode in progress of a driver that keeps nothing else of it."""

    index: int
    episode_return: float = 0.0
    length: int = 0
    non_finite_rewards: int = 0
    reward_terms: dict[str, float] = field(default_factory=dict)


def count_step(counters: Counters, episode: Episode, step: Step,
               ended: bool) -> EpisodeEnd | None:
    """Add `step` to its episode; when the episode `ended` with it, count it and return
    its end. A NaN/inf reward is the non_finite rule's, not the return's: it is counted
    apart, so that the return says what it lacks."""
    add_reward(episode, step.reward)
    if not ended:
        return None
    return end_episode(counters, episode, step.env_steps, step.env, step.terminated)


def add_reward(episode: Episode, reward: float) -> None:
    """One step's reward to its episode (a NaN/inf one counted apart)."""
    if math.isfinite(reward):
        episode.episode_return += reward
    else:
        episode.non_finite_rewards += 1
    episode.length += 1


def end_episode(counters: Counters, episode: Episode, env_steps: int, env: int,
                terminated: bool) -> EpisodeEnd:
    """Count `episode`, which ended at env step `env_steps`, and return its end."""
    counters.episodes += 1
    counters.last_return = episode.episode_return
    counters.last_non_finite_rewards = episode.non_finite_rewards
    return EpisodeEnd(env_steps, env, episode.index, episode.episode_return,
                      episode.length, terminated, episode.non_finite_rewards,
                      dict(episode.reward_terms) or None)


def next_episode_index(counters: Counters, num_envs: int) -> int:
    """The index of the episode that starts now: `num_envs` episodes are always in
    progress, so it is the one after them."""
    return counters.episodes + num_envs - 1


def counters_status(counters: Counters, updates: int) -> dict[str, Any]:
    """The counters, as status.json shows them."""
    return {"env_steps": counters.env_steps, "episodes": counters.episodes,
            "updates": updates, "latest_episode_return": counters.last_return,
            "latest_episode_non_finite_rewards": counters.last_non_finite_rewards}


def make_diagnostics(config: TrainConfig, obs_dim: int, view: AgentView, buffer: Any,
                     paths: RunPaths, logger: RunLogger, say: Callable[[str], None],
                     observation: Callable[[Any], Any] | None = None,
                     ) -> Flow1Diagnostics | NoDiagnostics:
    """The flow-1 diagnostics of a run (none when `diagnostics.enabled` is false);
    `observation`: how the behaviour videos see an observation (normalize.*)."""
    if not config.diagnostics.enabled:
        return NoDiagnostics()
    extra = () if observation is None else (observation,)
    return Flow1Diagnostics(config, obs_dim, view, buffer, paths, logger, say,
                            derive_seed(config.seed, DIAGNOSTICS), *extra)


@dataclass
class RunHooks:
    """A run's hooks: built alike for every driver, told in `ordered()`'s order."""

    metrics: Hook
    health: HealthRules
    diagnostics: Flow1Diagnostics | NoDiagnostics
    rules: list[RuleHook]
    driver: list[Hook] = field(default_factory=list)  # progress, a sweep's reporter
    algo: str = "ddpg"  # the run's algorithm: which rules judge it

    @classmethod
    def build(cls, config: TrainConfig, obs_dim: int, action_dim: int, view: AgentView,
              metrics: Hook, diagnostics: Flow1Diagnostics | NoDiagnostics, device: Any,
              health: HealthRules | None = None) -> RunHooks:
        """`health`: the run's health rules where the driver made them already (the
        trainer checks them against a restored checkpoint before its first step)."""
        health = health if health is not None else HealthRules(config, obs_dim, device)
        # Rules that measure a statistic of their own log it with the diagnostics' logs.
        record = getattr(diagnostics, "record_rule", None)
        extra = {} if record is None else {"record": record}
        return cls(metrics, health, diagnostics,
                   rule_hooks(RuleContext(config, obs_dim, action_dim, view, extra=extra)),
                   algo=config.algo)

    def ordered(self) -> list[Hook]:
        return [self.metrics, *self.health.hooks, self.diagnostics, *self.rules,
                *self.driver]

    def unjudged(self) -> dict[str, str]:
        """Each rule that could not judge the run so far (too little data), and why."""
        found = self.diagnostics.unjudged()
        for rule in [*self.health.rules, *self.rules]:
            why = rule.unjudged()
            if why is not None:
                found[rule.spec.name] = why
        return found

    def record_unjudged(self, logger: Any, env_steps: int) -> None:
        """The rules that could not judge the run, for `rltrain diagnose` (flow1.jsonl,
        which a run with its diagnostics off leaves empty)."""
        if not isinstance(self.diagnostics, NoDiagnostics):
            logger.diagnostic("unjudged", env_steps, rules=self.unjudged(),
                              not_for_algo=not_judging(self.algo))

    def rule_states(self) -> HookList:
        """The rules' hooks (the health rules' too) as one list whose state_dict a
        checkpoint keeps."""
        return HookList([*self.health.hooks, *self.rules], report=lambda found: None)
