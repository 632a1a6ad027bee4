"""`actor_stalled`: the policy does not move while the critic learns.

Measured every `every_updates` updates: the policy's deterministic actions on a fixed
set of visited states (see _probe.py), in units of the action half-range; their mean
absolute change since the last measurement, per update, is the policy's change per
update. The critic's update-to-weight change over the same updates says whether it
learns. A policy whose change per update stays below the threshold for `measurements`
measurements in a row while the critic moves more than `critic_floor` per update gets
nothing from the critic: too low an actor learning rate, a gradient cut before the
actor, or a tanh saturated at the action bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules._probe import ProbeStates
from rltrain.utils.diagnosis.rules._weights import USUAL_LR, flat, relative_change, toward_usual
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Update

if TYPE_CHECKING:
    import torch

SPECS = (RuleSpec(
    name="actor_stalled", section="diagnostics", threshold=1e-6, action="warn",
    fires_when="the policy's actions change less than this (share of the action half-range) "
               "per update, while the critic's weights change more than `critic_floor`",
    hypothesis="if the actor gets no usable gradient (too low actor_lr, a cut graph, a tanh "
               "saturated at the bounds), then its actions stay where they are while the "
               "critic keeps learning",
    check="move actor_lr into the usual 1e-4..1e-3 (the finding proposes a value); if it is "
          "already there, read the broken_gradient and action_saturation findings",
    options=(Option("critic_floor", 1e-5, "the critic's change per update (share of its "
                    "weight norm) above which it counts as learning", POSITIVE),
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 4, "measurements in a row before the rule fires",
                    AT_LEAST_ONE)),
),)


class ActorStalled(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.probe = ProbeStates()
        self.actions: np.ndarray | None = None
        self.critic: torch.Tensor | None = None
        self.stalled = 0  # measurements in a row
        self.measured = 0  # measurements so far (the first is only a start)

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
            learning = critic_change > self.settings.critic_floor
            self.stalled = self.stalled + 1 if change < self.rule.threshold and learning else 0
            if self.stalled >= self.settings.measurements:
                self.stalled = 0
                found = self._finding(update.env_steps, change, critic_change)
        self.actions, self.critic = actions, critic
        return found

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

    def unjudged(self) -> str | None:
        return self.waiting(max(self.measured - 1, 0), self.settings.measurements,
                            "measurements", f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"stalled": self.stalled, "measured": self.measured}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stalled = int(state["stalled"])
        self.measured = int(state.get("measured", 0))  # not kept before it was reported
