"""`q_divergence`: the critic's Q rising without bound, past every return it can reach.

No policy's discounted return can leave [min r, max r] / (1 - gamma) (the smallest and
largest rewards seen so far). The mean Q of the updates is sampled every `every_updates`
updates; when it lies outside that interval by more than the threshold times the
interval's width at each of the newest `measurements` samples, and further out at the
newest than at the first, the TD targets feed on themselves: the critic diverges, long
before the explosion rules (|Q| around 1e6) see it.
"""

from __future__ import annotations

import math
from typing import Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, Range
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Update

LR_FACTOR = 0.1  # the critic_lr proposed, relative to today's
LR_FLOOR = 1e-5

SPECS = (RuleSpec(
    name="q_divergence", section="diagnostics", threshold=0.05, action="warn",
    algorithms=ACTOR_Q_CRITICS,
    fires_when="mean Q lies outside [min r, max r] / (1 - gamma), the discounted returns "
               "any policy could reach, by more than this share of its width, at each of "
               "the newest measurements and further out at the newest",
    hypothesis="if the critic's TD targets feed on themselves (too high a critic learning "
               "rate, or overestimation that nothing corrects), then |Q| rises past every "
               "return the agent can reach and keeps rising",
    check="lower critic_lr (the finding proposes a value) and clip gradients; a new run "
          "with algo: td3 (clipped double Q, delayed actor) corrects the overestimation",
    options=(Option("every_updates", 250, "updates between two samples of mean Q",
                    AT_LEAST_ONE),
             # Growth is judged from the first sample kept to the last: two at least.
             Option("measurements", 4, "newest samples that must each have grown",
                    Range(2))),
),)


class QDivergence(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.low, self.high = math.inf, -math.inf  # the rewards seen
        self.excess: list[float] = []  # outside the reachable interval, share of its width

    def on_step(self, step: Step) -> list[Finding]:
        reward = step.reward
        if math.isfinite(reward) and not self.low <= reward <= self.high:
            self.low, self.high = min(self.low, reward), max(self.high, reward)
        return []

    def reachable(self) -> tuple[float, float]:
        gamma = self.context.config.gamma
        scale = 1 / (1 - gamma) if gamma < 1 else math.inf
        return self.low * scale, self.high * scale

    def on_update(self, update: Update) -> list[Finding]:
        if update.updates % max(1, self.settings.every_updates) or "q_mean" not in update.metrics:
            return []
        low, high = self.reachable()
        width, q = high - low, update.metrics["q_mean"]
        if not (math.isfinite(width) and width > 0 and math.isfinite(q)):
            return []
        keep = self.settings.measurements
        self.excess = [*self.excess, max(q - high, low - q) / width][-keep:]
        if len(self.excess) < keep or min(self.excess) <= self.rule.threshold or (
                self.excess[-1] <= self.excess[0]):
            return []
        return self._finding(update.env_steps, q, low, high)

    def _finding(self, env_steps: int, q: float, low: float, high: float) -> list[Finding]:
        lr = self.context.config.critic_lr
        proposed = float(f"{max(lr * LR_FACTOR, LR_FLOOR):.3g}")
        gamma = self.context.config.gamma
        return self.rule.fire(
            env_steps, float(f"{self.excess[-1]:.3g}"),
            f"mean Q {q:.4g} lies outside the discounted returns any policy could reach "
            f"({low:.4g}..{high:.4g}: rewards {self.low:.3g}..{self.high:.3g} over "
            f"1 - gamma {gamma:g}) by {self.excess[-1]:.2g} of their width, outside at each "
            f"of the last {len(self.excess)} samples and up from {self.excess[0]:.2g}: the "
            f"critic diverges; resume with --set critic_lr={proposed:g} "
            f"(today {lr:g}), or start a new run with algo: td3",
            suggested_set={"critic_lr": proposed})

    def state_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "excess": self.excess}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.low, self.high = float(state["low"]), float(state["high"])
        self.excess = [float(x) for x in state["excess"]]
