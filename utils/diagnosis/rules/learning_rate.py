"""`learning_rate`: a network's learning rate far above or below what it can learn with.

Measured per network (actor, critic) every `every_updates` updates: the update-to-weight
ratio ||dw|| / ||w|| of one update, from a copy of the parameters before it (see
_weights.py). The median of the newest `measurements` ratios is judged (of
`far_measurements` where the network's rate is an order of magnitude or more outside the
usual range: the setting itself is evidence, and such a rate does its harm in the first
few hundred updates): above the
threshold, each update rewrites a large share of the weights (the TD error then jumps
about or grows instead of falling); below `low`, the weights hardly move (the critic's
loss and the actor's loss stay where they started). The finding gives the TD error's
trend and the actor loss's movement over the same measurements as corroboration, and
proposes the learning rate moved into the usual range. "Too low" is said only of a rate
under the usual range: Adam moves each weight by about its rate whatever the gradient's
scale, so weights that barely move at a usual rate get (almost) no gradient (a tanh
saturated at the action bounds, a cut graph: action_saturation, broken_gradient), and a
higher rate would not mend that.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules._weights import (
    USUAL_LR,
    flat,
    orders_of_magnitude,
    relative_change,
    toward_usual,
)
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Update

if TYPE_CHECKING:
    import torch

NETS = ("actor", "critic")
FAR = 1.0  # orders of magnitude beyond the usual learning rates that need less evidence
GREW = 1.5  # a loss this many times its first measurement grew

SPECS = (RuleSpec(
    name="learning_rate", section="diagnostics", threshold=0.03, action="warn",
    algorithms=ACTOR_Q_CRITICS,
    fires_when="the median update-to-weight ratio (||dw||/||w|| of one update) of the actor "
               "or the critic is above this (too high a learning rate) or below `low`",
    hypothesis="if a network's learning rate is far too high, then each update rewrites a "
               "large share of its weights and its loss jumps about or grows; if far too "
               "low, its weights barely move and its loss stays where it started",
    check="move actor_lr / critic_lr into the usual 1e-4..1e-3 (the finding proposes the "
          "values); healthy runs measure an update-to-weight ratio of about 1e-4..5e-4",
    options=(Option("low", 3e-5, "a median update-to-weight ratio below this: too low a "
                    "learning rate", POSITIVE),
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 5, "newest measurements whose median is judged",
                    AT_LEAST_ONE),
             Option("far_measurements", 3, "the same for a network whose rate is an order "
                    "of magnitude or more outside the usual range", AT_LEAST_ONE)),
),)


class LearningRate(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.ratios: dict[str, list[float]] = {net: [] for net in NETS}
        self.losses: dict[str, list[float]] = {net: [] for net in NETS}
        self.before: dict[str, torch.Tensor] = {}  # the snapshot awaiting its update

    def on_update(self, update: Update) -> list[Finding]:
        view = self.context.view
        if view is None:
            return []
        for net in NETS:
            if net in self.before and f"{net}_loss" in update.metrics:
                self._measure(net, getattr(view, net), update.metrics[f"{net}_loss"])
        if update.updates % max(1, self.settings.every_updates) == 0:
            self.before = {net: flat(getattr(view, net)) for net in NETS}
            return self._judge(update.env_steps)
        return []

    def _measure(self, net: str, module: torch.nn.Module, loss: float) -> None:
        keep = max(self.settings.measurements, self.settings.far_measurements)
        ratio = relative_change(self.before.pop(net), flat(module))
        self.ratios[net] = [*self.ratios[net], ratio][-keep:]
        self.losses[net] = [*self.losses[net], loss][-keep:]

    def _verdict(self, net: str) -> tuple[str, float] | None:
        """"high", "low" or None, with the median ratio. A ratio of exactly 0 with a
        learning rate above the usual range is a network that too large steps left dead
        (saturated, or every unit off); one far above it whose loss grew over the
        measurements is too high even where its weights grew as fast as its steps."""
        orders = orders_of_magnitude(getattr(self.context.config, f"{net}_lr"), USUAL_LR)
        need = self._window(net)
        ratios, losses = self.ratios[net][-need:], self.losses[net][-need:]
        if len(ratios) < need:
            return None
        median = statistics.median(ratios)
        grew = abs(losses[-1]) > GREW * abs(losses[0])
        if median > self.rule.threshold or (orders > 0 and median == 0) or (
                orders >= FAR and grew):
            return "high", median
        # Adam moves every weight by about its rate whatever the gradient's scale: weights
        # that barely move at a usual rate have (almost) no gradient (a tanh saturated at
        # the bounds, a cut graph), which a higher rate would not mend.
        if orders < 0 and (0 < median < self.settings.low
                           or (orders <= -FAR and median < self.settings.low)):
            return "low", median
        return None

    def _window(self, net: str) -> int:
        """The measurements judged for `net`: fewer for a rate far outside the usual."""
        orders = orders_of_magnitude(getattr(self.context.config, f"{net}_lr"), USUAL_LR)
        return (self.settings.far_measurements if abs(orders) >= FAR
                else self.settings.measurements)

    def _judge(self, env_steps: int) -> list[Finding]:
        verdicts = {net: v for net in NETS if (v := self._verdict(net)) is not None}
        if not verdicts:
            return []
        parts, suggested = [], {}
        for net, (way, median) in verdicts.items():
            key = f"{net}_lr"
            parts.append(self._describe(net, way, median))
            suggested[key] = _proposal(getattr(self.context.config, key), way)
        for net in (n for n in NETS if n not in verdicts):
            # As far outside the usual range the same way as a judged one: the same
            # mistake (both set at once), moved with it, or the fix would leave half of it.
            key, ways = f"{net}_lr", {way for way, _ in verdicts.values()}
            orders = orders_of_magnitude(getattr(self.context.config, key), USUAL_LR)
            way = "high" if orders >= FAR else "low" if orders <= -FAR else None
            if way in ways:
                parts.append(f"{key} {getattr(self.context.config, key):g} is as far "
                             f"outside the usual range: moved with it")
                suggested[key] = _proposal(getattr(self.context.config, key), way)
        change = " ".join(f"--set {k}={v:g}" for k, v in suggested.items())
        value = {net: float(f"{m:.3g}") for net, (_, m) in verdicts.items()}
        return self.rule.fire(env_steps, value, "; ".join(parts) + f"; resume with {change}",
                         suggested_set=suggested)

    def _describe(self, net: str, way: str, median: float) -> str:
        lr = getattr(self.context.config, f"{net}_lr")
        orders = abs(orders_of_magnitude(lr, USUAL_LR))
        where = (f"{orders:.1f} orders of magnitude {'above' if way == 'high' else 'below'} "
                 f"the usual {USUAL_LR[0]:g}..{USUAL_LR[1]:g}" if orders else
                 "inside the usual range (the weights' scale makes it too "
                 f"{'large' if way == 'high' else 'small'})")
        losses = self.losses[net][-self._window(net):]
        trend = (f"its loss went {losses[0]:.3g} -> {losses[-1]:.3g}" if losses else "")
        stopped = ("dead or saturated after too large steps" if way == "high" else
                   "steps too small to change a float32 weight")
        moved = (f"its weights stopped moving ({stopped})"
                 if median == 0 else f"each update changes {median:.2g} of its weights' norm")
        judged = len(self.ratios[net][-self._window(net):])
        return (f"{net}: {moved} (median of {judged} measurements; healthy "
                f"runs measure about 1e-4..5e-4), so {net}_lr {lr:g} is too {way}: {where}; "
                f"{trend}")

    def unjudged(self) -> str | None:
        return self.waiting(min(len(r) for r in self.ratios.values()),
                            max(self._window(net) for net in NETS), "measurements",
                            f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"ratios": self.ratios, "losses": self.losses}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ratios = {net: [float(r) for r in state["ratios"][net]] for net in NETS}
        self.losses = {net: [float(r) for r in state["losses"][net]] for net in NETS}


def _proposal(lr: float, way: str) -> float:
    """The learning rate to try: moved into the usual range, or by 10x when inside it."""
    moved = toward_usual(lr, USUAL_LR)
    if moved == lr:
        moved = lr / 10 if way == "high" else lr * 10
    return float(f"{moved:.3g}")
