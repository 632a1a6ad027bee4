"""What the env and the config give the agent to learn from.

- `observation_scale`: an observation dimension orders of magnitude from unit scale:
  its RMS over the newest transitions, over sqrt(obs_dim), above 10^threshold. That is
  what the dimension adds to a first-layer unit at the default initialisation (weights
  of scale 1/sqrt(fan_in)), so many large dimensions among many (Humanoid's contact
  forces, RMS up to about 570 among 348: 31) count less than one among three (Pendulum's
  velocity x1000: 3685). Such a dimension drives the first layers alone, and the
  critic's targets with it; unnormalised velocities or positions in millimetres.
- `frozen_observation`: no env step changed any observation dimension over the newest
  `threshold` transitions: a `step` that returns a stale observation. Some dimensions
  unchanged are only noted (info): standard envs have them by design (Reacher's and
  Pusher's goals within an episode, Ant's and Humanoid's contact forces of bodies not
  touching anything), though a stuck sensor looks the same.
- `time_limit_terminal`: `threshold` episodes in a row ended `terminated` at one and
  the same length. A time limit reported as the task's end (instead of `truncated`) tells
  the critic that those states are worth nothing more: code that stores
  `done = terminated or truncated` does this. A watched loop that hands its batches to
  the Watcher (`after_update(batch=...)`) is judged on them too: once they have held
  `threshold` rows stored as done whose step the env ended by its time limit only
  (truncated, not terminated), looked up among the env's steps
  (integrations/sampled_batches.py).
- `short_horizon`: the discount's horizon 1/(1-gamma) below `threshold` of the mean
  episode length: rewards more than a few steps ahead barely count.
- `small_replay`: a replay buffer of fewer than `threshold` batches: every batch is a
  large sample of the same few, newest, correlated transitions.
- `ignored_action`: the warm-up's random actions changed neither the observations nor
  the reward by more than chance would (`action_effect.py`): the env does not apply them.
  After a warm-up under 1000 steps, the exploration noise of the first 1000 steps after
  it whose noise reached the env is judged instead (docs/diagnosing.md has the figures).

The statistics are utils/diagnosis/measure/inputs.py's (the replay buffer's newest rows,
the episode ends) and action_effect.py's (the warm-up's random actions); the flow-1 hook
hands them to the checks here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.agents.families import ACTOR_Q_CRITICS, REPLAYED
from rltrain.utils.diagnosis.rules.spec import RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

# `ignored_action` counts an effect that shows up to this many steps after the action
# (an action that shows a few steps late: through a velocity the observation leaves out,
# or a sensor that lags); measure/action_effect.py sums that far.
MAX_LAG = 4

USUAL_REPLAY = 100_000  # small_replay's fix: the low end of off-policy control's usual sizes

SPECS = (
    RuleSpec(
        name='observation_scale',
        section='diagnostics',
        group='What goes into learning',
        fires_when="an observation dimension's RMS over the newest 1000 transitions, over "
                   'sqrt(obs_dim), is above 10^threshold',
        threshold=2.0,
        action='warn',
        hypothesis='if an observation dimension is far from unit scale, then it drives the '
                   "networks' first layers alone, the critic's loss explodes from the first "
                   'updates and the policy saturates',
        check='divide that dimension by its typical range in the env (a fixed scale: running '
              "normalisation changes what the replay buffer's older observations mean)",
        hint='scale that dimension in the env and train a new run (the replay buffer holds the '
             'old scale), or --set diagnostics.observation_scale.action=warn'),
    RuleSpec(
        name='frozen_observation',
        section='diagnostics',
        group='What goes into learning',
        fires_when='no env step changed any observation dimension over this many newest '
                   'transitions (some dimensions: info)',
        threshold=1000.0,
        action='warn',
        hypothesis='if step() returns a stale observation (or a sensor is stuck), then the '
                   'observation (or that dimension) does not change at all while the agent acts, '
                   'and nothing can be learned from it',
        check='print the observations of a few steps with random actions; check that step() '
              'returns the new state, not a copy of the reset one; some dimensions only (info): '
              'a goal fixed within an episode, a constant by design or an event that has not '
              'happened yet is harmless, a sensor that should move is stuck',
        hint="fix the env's step() and train a new run, or --set "
             'diagnostics.frozen_observation.action=warn'),
    RuleSpec(
        name='time_limit_terminal',
        section='diagnostics',
        group='What goes into learning',
        fires_when='this many episodes in a row ended `terminated` at one same length (of at '
                   "least 50 steps): a time limit reported as the task's end? Or a watched "
                   "loop's batches held this many rows stored as done whose step the env "
                   'ended by its time limit only (truncated, not terminated)',
        threshold=10.0,
        action='warn',
        hypothesis='if a time limit is reported as `terminated` (the task ended) instead of '
                   '`truncated`, then episodes end `terminated` at one same length, and the '
                   'critic learns that nothing follows those states: it does not bootstrap there',
        check='return truncated=True at the time limit (or register the env with '
              "max_episode_steps and let Gymnasium's TimeLimit do it); if the task really ends "
              'there (the observation says the time left), or a deterministic policy fails at '
              'the same step every episode, this is no fault',
        hint='report the time limit as truncated and train a new run (the stored transitions say '
             'terminated), or --set diagnostics.time_limit_terminal.action=warn'),
    RuleSpec(
        name='short_horizon',
        section='diagnostics',
        group='What goes into learning',
        fires_when="gamma's horizon 1/(1-gamma) is below this share of the mean episode length",
        threshold=0.045,
        action='warn',
        hypothesis='if gamma is too small for the task, then the agent values only the next few '
                   'rewards (1/(1-gamma) steps) and never learns what pays off later in the '
                   'episode',
        check='raise gamma (0.99 looks about 100 steps ahead); below 1, so that Q stays bounded',
        hint='--set gamma=0.99 (or what the task needs)',
        remedy=lambda c: {"gamma": 0.99}),
    RuleSpec(
        name='small_replay',
        algorithms=REPLAYED,
        section='diagnostics',
        group='What goes into learning',
        fires_when='the replay buffer holds fewer than this many batches',
        threshold=10.0,
        action='warn',
        hypothesis='if the replay buffer is barely larger than a batch, then every update sees '
                   'nearly the same, newest, correlated transitions; the critic fits them and '
                   'forgets the rest',
        check='raise replay_buffer_size (1e5-1e6 is usual for off-policy continuous control)',
        hint='replay_buffer_size cannot change on resume: train a new run with a larger one '
             '(its suggested_set), or --set diagnostics.small_replay.action=warn'),
    RuleSpec(
        name='ignored_action',
        algorithms=ACTOR_Q_CRITICS,
        section='diagnostics',
        group='What goes into learning',
        fires_when="the warm-up's random actions changed the observations and the reward no more "
                   "than chance: each action dimension's strongest link, in units of chance's "
                   'strongest, below this (all dimensions: warning, some: info; judged on the '
                   'newest 5000 warm-up steps, or all of a shorter one; after one under 1000, '
                   'the exploration noise of the first 1000 steps after it that it reached '
                   'the env in)',
        threshold=1.5,
        action='warn',
        hypothesis='if the env does not apply the action (a wrapper that drops or overwrites it, '
                   'an action scaled to nothing, actions sent to another env), then neither the '
                   'next observations nor the rewards depend on it, and there is nothing to '
                   'learn',
        check='step the env twice from one state (reset with the same seed) with opposite '
              "actions and compare the observations; check every wrapper's step() and the "
              "action's scale; action_effect in flow1.jsonl names the strongest link found",
        hint='make the env apply the action and train a new run (the replay buffer holds what '
             'the broken env gave), or --set diagnostics.ignored_action.action=warn'),
)


class ObservationScale(RuleCheck):
    spec = SPECS[0]

    def check(self, env_steps: int, stats: dict[str, Any], rows: int,
              scale_rows: int) -> list[Finding]:
        """`stats`: inputs.observation_stats of the newest `rows` transitions, their RMS
        over the newest `scale_rows`."""
        rms = stats["rms"]
        if not stats["scale"] > 10.0 ** self.rule.threshold:
            return []
        worst = int(np.argmax(rms))
        message = (f"observation dimension {worst} has RMS {rms[worst]:.3g} over the newest "
                   f"{min(rows, scale_rows)} transitions ({stats['scale']:.3g} over "
                   f"sqrt({len(rms)}) dimensions): it drives the first layers and the "
                   "critic's targets alone")
        if self.context.config.normalize.observations:
            return self.fire(env_steps, round(stats["scale"], 4), message)
        # A fixed scale in the env is best; running normalisation is the fix a new run can
        # take from its config (a resume cannot: the buffer holds unscaled observations).
        return self.fire(env_steps, round(stats["scale"], 4),
                         f"{message}; scale it in the env, or train a new run with --set "
                         "normalize.observations=true",
                         suggested_set={"normalize.observations": True})


class FrozenObservation(RuleCheck):
    spec = SPECS[1]

    def rows(self, capacity: int) -> int:
        """The newest transitions judged: `threshold` of them, or the whole buffer where
        it holds fewer (judged once it is full)."""
        return max(1, min(int(self.rule.threshold), capacity))

    def check(self, env_steps: int, frozen: list[int], dims: int,
              rows: int) -> list[Finding]:
        """`frozen`: the dimensions (of `dims`) no step changed over the newest `rows`."""
        if len(frozen) == dims:
            return self.fire(env_steps, frozen,
                             f"no env step changed any of the {dims} observation dimensions "
                             f"over the newest {rows} transitions: the agent cannot see "
                             "its state move")
        if not frozen:
            return []
        # Goals, contact forces of bodies not touching anything: often by design.
        named = f"{frozen[:10]}" + (f" and {len(frozen) - 10} more" if len(frozen) > 10
                                    else "")
        return self.fire(env_steps, frozen,
                         f"observation dimension(s) {named} of {dims}: no env step "
                         f"changed them over the newest {rows} transitions",
                         observation=True)


class TimeLimitTerminal(RuleCheck):
    spec = SPECS[2]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.stored_fired = False  # the loop's done flags: named once

    def stored(self, env_steps: int, rows: dict[str, int],
               fix: str | None = None) -> list[Finding]:
        """`rows`: a watched loop's batch rows stored as done, by how the env ended their
        step ("terminated", "truncated": a time limit only, "continued"). Flags set on
        more rows that did not end an episode than on rows that did are not episode ends
        (a not-done mask, or a flag that marks an episode's first step): not judged."""
        if self.stored_fired or not rows["truncated"] >= self.rule.threshold:
            return []
        if rows["continued"] > rows["terminated"] + rows["truncated"]:
            return []
        self.stored_fired = True
        if fix is not None:  # a library's replay buffer: one of its settings
            return self.fire(
                env_steps, rows["truncated"],
                f"{rows['truncated']} transitions where the env ended the episode by its "
                "time limit only (truncated, not terminated) were stored as the task's end: "
                f"the critic does not bootstrap at the time limit; {fix}",
                suggested_set={})
        return self.fire(
            env_steps, rows["truncated"],
            f"{rows['truncated']} rows of the loop's batches were stored as done where the "
            "env ended the episode by its time limit only (truncated, not terminated; "
            f"{rows['terminated']} done rows the env did end): the loop stores "
            "done = terminated or truncated, so its critic does not bootstrap at the time "
            "limit; store `terminated` as the done flag and reset the env on either",
            suggested_set={})

    def check(self, env_steps: int, streak: int, length: int) -> list[Finding]:
        """`streak` episodes in a row ended `terminated` at `length` steps."""
        if not streak >= self.rule.threshold:
            return []
        return self.fire(env_steps, streak,
                         f"the last {streak} episodes all ended `terminated` at exactly "
                         f"{length} steps: if that is a time limit, the critic learns that "
                         "nothing follows those states")


class ShortHorizon(RuleCheck):
    spec = SPECS[3]

    def check(self, env_steps: int, share: float | None,
              lengths: Sequence[int]) -> list[Finding]:
        """`share`: 1/(1-gamma) over the mean of the last episodes' `lengths` (None: not
        judged yet)."""
        if share is None or not share < self.rule.threshold:
            return []
        gamma = self.context.config.gamma
        return self.fire(env_steps, round(share, 4),
                         f"gamma {gamma:g} looks about {1.0 / (1.0 - gamma):.3g} steps ahead, "
                         f"{share:.1%} of the mean episode length {np.mean(lengths):.0f}")


class SmallReplay(RuleCheck):
    spec = SPECS[4]

    def check(self, env_steps: int) -> list[Finding]:
        config = self.context.config
        batches = config.replay_buffer_size / config.batch_size
        if not batches < self.rule.threshold:
            return []
        larger = max(USUAL_REPLAY, math.ceil(self.rule.threshold) * config.batch_size)
        return self.fire(env_steps, round(batches, 2),
                         f"the replay buffer's capacity is {config.replay_buffer_size} "
                         f"transitions, {batches:.3g} batches of {config.batch_size}: "
                         "the batches keep drawing on the same few, newest transitions; "
                         f"train a new run with --set replay_buffer_size={larger}",
                         suggested_set={"replay_buffer_size": larger})


class IgnoredAction(RuleCheck):
    spec = SPECS[5]

    def check(self, env_steps: int, effect: dict[str, Any] | None) -> list[Finding]:
        """`effect`: action_effect.action_effect of the warm-up (None: not measured)."""
        if effect is None or not effect["observations_moved"]:  # frozen_observation's case
            return []
        idle = [d for d, e in enumerate(effect["per_dimension"]) if e < self.rule.threshold]
        echoed = (f"; observation(s) {effect['echoes']} repeat the action and do not count"
                  if effect["echoes"] else "")
        noise = effect.get("judged_on") == "exploration noise"
        what = (f"the exploration noise of {effect['rows']} actions after the warm-up"
                if noise else f"the warm-up's {effect['rows']} random actions")
        if len(idle) == len(effect["per_dimension"]):
            return self.fire(env_steps, effect["action_effect"],
                             f"{what} changed neither "
                             f"the observations nor the reward more than chance would, "
                             f"within {MAX_LAG} steps (strongest link "
                             f"{effect['action_effect']:.2f} of chance's){echoed}: does the "
                             "env apply the action?")
        if not idle:
            return []
        # An action input unused by design looks the same.
        return self.fire(env_steps, idle,
                         f"action dimension(s) {idle} of {len(effect['per_dimension'])} "
                         "changed neither the observations nor the reward more than chance "
                         f"would in {what}{echoed}", observation=True)


# The checks the flow-1 hook calls, by name.
CHECKS = (ObservationScale, FrozenObservation, TimeLimitTerminal, ShortHorizon,
          SmallReplay, IgnoredAction)
