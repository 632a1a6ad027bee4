"""`target_update`: target networks that are frozen, or that chase the online ones.

Measured every `every_updates` updates on the critic and its target (the networks the
agent's view names `critic_target`; an integration without targets is not judged): the
distance ||target - online|| / ||online||, in units of one update's own step
||dw||/||w||, a lag in updates. Soft updates with the usual tau (0.001..0.05) keep the
target some tens to hundreds of updates behind. A lag below the threshold means the
target follows within an update or two (tau near 1): the TD target moves with every
update and the critic chases itself. A distance above `frozen` (a share of the weights'
norm) means the target stayed near where it started (tau near 0) while the online
critic moved on: the TD targets come from a critic that no longer exists.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Update
from rltrain.utils.rules._weights import USUAL_TAU, flat, relative_change
from rltrain.utils.rules.spec import Option, RuleHook, RuleSpec

if TYPE_CHECKING:
    import torch

PROPOSED_TAU = 0.005

SPECS = (RuleSpec(
    name="target_update", section="diagnostics", threshold=2.0, action="warn",
    fires_when="the critic's target is fewer than this many updates' steps behind the "
               "online critic (chasing), or further than `frozen` of its norm (frozen)",
    hypothesis="if tau is far too high, then the target network equals the online one "
               "within an update or two and the TD targets move with every update; if far "
               "too low, the target stays near its start while the online critic moves away",
    check="set tau into the usual 0.001..0.05 (0.005 is common)",
    options=(Option("frozen", 0.5, "a target further than this share of the online "
                    "critic's weight norm counts as frozen", POSITIVE),
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 5, "newest measurements whose median is judged",
                    AT_LEAST_ONE)),
),)


class TargetUpdate(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.lags: list[float] = []
        self.distances: list[float] = []
        self.before: torch.Tensor | None = None

    def _networks(self) -> tuple[Any, Any] | None:
        view = self.context.view
        if view is None:
            return None
        target = view.networks().get("critic_target")
        return None if target is None else (view.critic, target)

    def on_update(self, update: Update) -> list[Finding]:
        nets = self._networks()
        if nets is None:
            return []
        online, target = nets
        if self.before is not None and "actor_loss" in update.metrics:  # targets moved too
            after = flat(online)
            step = relative_change(self.before, after)
            distance = relative_change(after, flat(target))
            keep = self.settings.measurements
            self.lags = [*self.lags, distance / step if step > 0 else float("inf")][-keep:]
            self.distances = [*self.distances, distance][-keep:]
            self.before = None
        if update.updates % max(1, self.settings.every_updates) == 0:
            self.before = flat(online)
            return self._judge(update.env_steps)
        return []

    def _judge(self, env_steps: int) -> list[Finding]:
        if len(self.lags) < self.settings.measurements:
            return []
        lag, distance = statistics.median(self.lags), statistics.median(self.distances)
        tau = self.context.config.tau
        if lag < self.rule.threshold:
            what = (f"the critic's target is {lag:.2g} updates' steps behind the online "
                    f"critic (distance {distance:.2g} of its norm): it chases it, tau {tau:g}")
        elif distance > self.settings.frozen:
            what = (f"the critic's target is {distance:.2g} of the online critic's norm away "
                    f"({lag:.3g} updates' steps): it is frozen near its start, tau {tau:g}")
        else:
            return []
        return self.rule.fire(env_steps, {"lag_updates": float(f"{lag:.3g}"),
                                     "distance": float(f"{distance:.3g}")},
                         f"{what}; the usual tau is {USUAL_TAU[0]:g}..{USUAL_TAU[1]:g}: "
                         f"resume with --set tau={PROPOSED_TAU}",
                         suggested_set={"tau": PROPOSED_TAU})

    def unjudged(self) -> str | None:
        if self._networks() is None:
            return None
        return self.waiting(len(self.lags), self.settings.measurements, "measurements",
                            f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"lags": self.lags, "distances": self.distances}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lags = [float(x) for x in state["lags"]]
        self.distances = [float(x) for x in state["distances"]]
