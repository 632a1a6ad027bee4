"""How the policy moves against the critic: `actor_stalled` and `actor_pace`.

Measured every `every_updates` updates: the policy's deterministic actions on a fixed
set of visited states (see _probe.py), in units of the action half-range; their mean
absolute change since the last measurement, per update, is the policy's change per
update. The critic's update-to-weight change over the same updates says how fast it
learns.

- `actor_stalled`: a policy whose change per update stays below the threshold for
  `measurements` measurements in a row while the critic moves more than
  `critic_floor` per update gets nothing from the critic: too low an actor learning
  rate, a gradient cut before the actor, or a tanh saturated at the action bounds.
  Not where `saturated` or more of the policy's actions sit at a bound of the range
  (_probe.py): their tanh is saturated, which no actor_lr mends; what pushed them there
  is other rules' (learning_rate, reward_scale, observation_scale; action_saturation
  notes it). Healthy TD3 on Hopper starts so for about 2,250 updates.
- `actor_pace`: the policy's change per critic update over the critic's own (its pace)
  above `threshold` or below `low` for `measurements` measurements in a row: the actor
  runs ahead of a critic that cannot keep up with what it now does (an actor rate far
  above the critic's, several actor steps per critic step), and climbs its errors; or
  it crawls behind a critic that has long moved on (updates far rarer than the
  critic's: a policy delay of tens), and the run learns at a fraction of its pace. A
  slow pace with `saturated` of the actions at a bound is not judged, as for
  `actor_stalled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules._probe import SATURATED, ProbeStates, saturated
from rltrain.utils.diagnosis.rules._settings import (
    MAX_DELAY,
    USUAL_DELAY,
    algorithm_option,
    option_key,
)
from rltrain.utils.diagnosis.rules._weights import USUAL_LR, flat, relative_change, toward_usual
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Update

if TYPE_CHECKING:
    import torch

SPECS = (RuleSpec(
    name="actor_stalled", section="diagnostics", threshold=1e-6, action="warn",
    algorithms=ACTOR_Q_CRITICS,
    fires_when="the policy's actions change less than this (share of the action half-range) "
               "per update, while the critic's weights change more than `critic_floor`",
    hypothesis="if the actor gets no usable gradient (too low actor_lr, a cut graph, a tanh "
               "saturated at the bounds), then its actions stay where they are while the "
               "critic keeps learning",
    check="move actor_lr into the usual 1e-4..1e-3 (the finding proposes a value); if it is "
          "already there, read the broken_gradient and action_saturation findings",
    options=(SATURATED,
             Option("critic_floor", 1e-5, "the critic's change per update (share of its "
                    "weight norm) above which it counts as learning", POSITIVE),
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 4, "measurements in a row before the rule fires",
                    AT_LEAST_ONE)),
), RuleSpec(
    name="actor_pace", section="diagnostics", group="Training set-up", threshold=100.0,
    algorithms=ACTOR_Q_CRITICS,
    action="warn",
    fires_when="the policy's change per critic update (share of the action half-range) over "
               "the critic's weight change per update (share of its norm) is above this or "
               "below `low`, `measurements` measurements in a row",
    hypothesis="if the actor moves far faster than its critic learns (an actor rate far above "
               "the critic's, several actor steps per critic step), then it climbs the "
               "critic's errors before they are corrected; if far slower (updates much rarer "
               "than the critic's), it crawls behind what the critic already knows",
    check="keep actor_lr near critic_lr and one actor step per critic step (or per "
          "policy_delay of 2-3): the finding names what of the run sets the pace",
    options=(Option("low", 0.02, "a pace below this: the actor crawls", POSITIVE),
             SATURATED,
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 4, "measurements in a row before the rule fires",
                    AT_LEAST_ONE)),
))


class _ActorMovement(RuleHook):
    """The policy's and the critic's change per update, every `every_updates` updates,
    handed to `judge`."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.probe = ProbeStates()
        self.actions: np.ndarray | None = None
        self.critic: torch.Tensor | None = None
        self.stalled = 0  # measurements in a row
        self.measured = 0  # measurements so far (the first is only a start)
        self.way: str | None = None  # actor_pace: the newest measurement's (fast, slow)
        self.saturation = 0.0  # the newest measurement's share of actions at a bound

    def on_step(self, step: Step) -> list[Finding]:
        self.probe.offer(step.env_steps, step.obs)
        return []

    def on_update(self, update: Update) -> list[Finding]:
        every = max(1, self.settings.every_updates)
        view = self.context.view
        if view is None or update.updates % every or not self.probe.ready:
            return []
        actions, critic = self.probe.actions(view), flat(view.critic)
        found: list[Finding] = []
        self.measured += 1
        if self.actions is not None and self.critic is not None:
            change = float(np.abs(actions - self.actions).mean()) / every
            critic_change = relative_change(self.critic, critic) / every
            self.saturation = saturated(actions)
            self.record(update.env_steps, policy_change=float(f"{change:.4g}"),
                        critic_change=float(f"{critic_change:.4g}"),
                        saturated=round(self.saturation, 4))
            found = self.judge(update.env_steps, change, critic_change)
        self.actions, self.critic = actions, critic
        return found

    def judge(self, env_steps: int, change: float, critic_change: float) -> list[Finding]:
        raise NotImplementedError

    def saturated(self) -> bool:
        """Whether `saturated` or more of the newest measured actions sit at a bound."""
        return self.saturation >= self.settings.saturated

    def unjudged(self) -> str | None:
        return self.waiting(max(self.measured - 1, 0), self.settings.measurements,
                            "measurements", f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"stalled": self.stalled, "measured": self.measured}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stalled = int(state["stalled"])
        self.measured = int(state.get("measured", 0))  # not kept before it was reported


class ActorStalled(_ActorMovement):
    spec = SPECS[0]

    def judge(self, env_steps: int, change: float, critic_change: float) -> list[Finding]:
        learning = critic_change > self.settings.critic_floor
        still = change < self.rule.threshold and learning and not self.saturated()
        self.stalled = self.stalled + 1 if still else 0
        if self.stalled < self.settings.measurements:
            return []
        self.stalled = 0
        return self._finding(env_steps, change, critic_change)

    def _finding(self, env_steps: int, change: float, critic_change: float) -> list[Finding]:
        lr = self.context.config.actor_lr
        proposed = toward_usual(lr, USUAL_LR)
        proposed = float(f"{proposed if proposed != lr else lr * 10:.3g}")
        return self.rule.fire(
            env_steps, float(f"{change:.3g}"),
            f"the policy's actions changed {change:.2g} of the action half-range per update "
            f"for {self.settings.measurements} measurements in a row while the critic's "
            f"weights changed {critic_change:.2g} of their norm per update: the actor does "
            f"not follow the critic; resume with --set actor_lr={proposed:g} (today {lr:g})",
            suggested_set={"actor_lr": proposed})


class ActorPace(_ActorMovement):
    spec = SPECS[1]

    def judge(self, env_steps: int, change: float, critic_change: float) -> list[Finding]:
        """`stalled` counts measurements in a row out of pace, the same way (`way`)."""
        if critic_change <= 0 or change <= 0:
            # A critic or an actor that does not move at all (actor_stalled's): no pace.
            self.stalled, self.way = 0, None
            return []
        pace = change / critic_change
        way = "fast" if pace > self.rule.threshold else "slow" if pace < self.settings.low \
            else None
        if way == "slow" and self.saturated():
            way = None
        self.stalled = self.stalled + 1 if way is not None and way == self.way else \
            (1 if way is not None else 0)
        self.way = way
        if self.stalled < self.settings.measurements:
            return []
        self.stalled = 0
        proposed, why = self._cause(way)
        return self.fire(
            env_steps, float(f"{pace:.3g}"),
            f"the policy moves {change:.2g} of the action half-range per critic update while "
            f"the critic's weights move {critic_change:.2g} of their norm: a pace of "
            f"{pace:.3g}, {self.settings.measurements} measurements in a row "
            f"({'far above' if way == 'fast' else 'far below'} what healthy runs measure): "
            f"the actor {'runs ahead of' if way == 'fast' else 'crawls behind'} its critic; "
            f"{why}", suggested_set=proposed)

    def _cause(self, way: str) -> tuple[dict[str, Any], str]:
        """What of the run's settings sets the pace, and the change to try."""
        config = self.context.config
        ratio = config.actor_lr / config.critic_lr
        delay = algorithm_option(config, "policy_delay")
        if way == "fast" and ratio > 10:
            return ({"actor_lr": config.critic_lr},
                    f"actor_lr {config.actor_lr:g} is {ratio:.0f} times critic_lr "
                    f"{config.critic_lr:g}: --set actor_lr={config.critic_lr:g}")
        if way == "slow" and delay is not None and delay > MAX_DELAY:
            return ({option_key(config, "policy_delay"): USUAL_DELAY},
                    f"the actor is updated once per {delay} critic updates: --set "
                    f"{option_key(config, 'policy_delay')}={USUAL_DELAY}")
        if way == "slow" and ratio < 0.1:
            return ({"actor_lr": config.critic_lr},
                    f"actor_lr {config.actor_lr:g} is {1 / ratio:.0f} times under critic_lr: "
                    f"--set actor_lr={config.critic_lr:g}")
        return ({}, "the rates and delays are usual: check how many optimiser steps the "
                    "actor takes per critic step")
