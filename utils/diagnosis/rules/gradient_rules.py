"""The gradient flow's rules: broken, vanishing and exploding layers, and the critic's
updates dwarfing the actor's.

utils/diagnosis/measure/gradients.py reads the per-layer gradient norms (every `grad_freq`
updates, and in a trace after a reward drop) and asks the layer rules here for each
layer's verdict (`verdict`); the findings and their words are these rules'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.diagnosis.rules._probe import SATURATED
from rltrain.utils.diagnosis.rules._remedies import clip_norm
from rltrain.utils.diagnosis.rules.spec import RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

SPECS = (
    RuleSpec(
        name='vanishing_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when="a weight's gradient norm below this share of its network's strongest one, "
                   'at two gradient reads in a row (or in a trace after a reward drop)',
        threshold=0.001,
        action='warn',
        hypothesis='if the gradient does not reach a layer, then its norm is a tiny fraction of '
                   "the network's strongest layer",
        check='check input scaling, saturated activations, and detach() calls'),
    RuleSpec(
        name='exploding_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when="a layer's gradient norm above this many times its own recent median, both "
                   'over the largest |reward| seen so far (a new reward scale is not an '
                   'explosion)',
        threshold=100.0,
        action='warn',
        hypothesis="if a layer's gradient explodes, then its norm jumps far above its own "
                   'history',
        check='clip gradients, lower the learning rate, check reward scale',
        remedy=lambda c: {"grad_clip_norm": clip_norm(c)}),
    RuleSpec(
        name='value_policy_imbalance',
        # Calibrated on an actor stepped through its Q critic: PPO's value loss on raw
        # returns against its normalised advantages makes 1000x the usual ratio.
        algorithms=ACTOR_Q_CRITICS,
        section='diagnostics',
        group='Gradient flow',
        fires_when="the critic's relative gradient (norm / weight norm) over the actor's",
        threshold=1000.0,
        action='warn',
        hypothesis="if the critic's updates dominate, then its relative gradient is many times "
                   "the actor's",
        check='read it with the learning_rate finding: a learning rate far outside the usual '
              'range (of either network) is the usual cause; else the actor may get little '
              'gradient (actor_stalled, broken_gradient, action_saturation). The two networks '
              'have their own optimisers: a ratio alone is no fault',
        options=(SATURATED,)),
    RuleSpec(
        name='broken_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when='a layer whose gradient is zero or None',
        action='warn',
        hypothesis="if nothing reaches a layer (the actor's tanh saturated at the action bounds, "
                   'every ReLU feeding it off, its input all zero, or the graph cut), then the '
                   'layer gets a gradient of exactly zero or none',
        check='if action_saturation fired too, every actor layer is cut off by the saturated '
              'tanh: find why the policy is pushed to the bounds (see that finding); else check '
              'the dead_relu finding, input scaling and bias initialisation; in custom code '
              'check requires_grad, detach() calls and in-place ops',
        fixed_threshold='nothing: any layer without gradient fires it'),
)


def verdict(settings: Any, name: str, norm: float | None, strongest: float,
            past: Sequence[float] | None, reward_scale: float) -> str:
    """One layer's verdict: broken, vanishing, exploding or ok. `settings`: the
    diagnostics config; `strongest`: the largest weight-matrix gradient norm of the same
    network; `past`: the layer's recent norms over the reward scale; `reward_scale`: the
    largest |reward| so far (1 before any reward)."""
    if norm is None or norm == 0.0:
        return "broken"
    if (name.endswith("weight") and strongest > 0
            and norm / strongest < settings.vanishing_gradient.threshold):
        return "vanishing"
    if (past and len(past) >= 5 and norm > settings.exploding_gradient_min_norm
            and norm / reward_scale > settings.exploding_gradient.threshold * np.median(past)):
        return "exploding"
    return "ok"


class LayerRule(RuleCheck):
    """The layers whose verdict is this rule's `verdict`."""

    verdict = ""
    in_trace = True  # also reported from a trace after a reward drop

    def check(self, env_steps: int, layers: dict[str, float | None]) -> list[Finding]:
        """`layers`: "network.layer" -> its norm, for the layers with this verdict."""
        if not layers:
            return []
        return self.fire(env_steps, layers, f"{self.verdict} gradient in {', '.join(layers)}")

    def check_trace(self, env_steps: int, layers: list[str], reason: str) -> list[Finding]:
        """The layers with this verdict in a trace after a reward drop (`reason`)."""
        if not layers:
            return []
        return self.fire(env_steps, layers, f"gradient trace after a reward drop "
                                            f"({reason}): {', '.join(layers)}")


class VanishingGradient(LayerRule):
    spec = SPECS[0]
    verdict = "vanishing"


class ExplodingGradient(LayerRule):
    spec = SPECS[1]
    verdict = "exploding"
    in_trace = False


class ValuePolicyImbalance(RuleCheck):
    spec = SPECS[2]

    def check(self, env_steps: int, balance: float,
              saturation: Callable[[], float] = lambda: 0.0) -> list[Finding]:
        """`balance`: the critic's relative gradient over the actor's (inf: the actor has
        none); `saturation`: the share of the policy's actions at a bound (_probe.py
        `saturated_share`), asked only when the balance is over the threshold. From
        `saturated` of them on, the actor's small gradient is its saturated tanh's, whose
        cause is other rules' to name: not judged."""
        if (self.rule.action == "off" or not balance > self.rule.threshold
                or saturation() >= self.settings.saturated):
            return []
        return self.fire(env_steps, round(balance, 3),
                         f"the critic's relative gradient is {balance:.1f}x the actor's"
                         if math.isfinite(balance) else "the actor gets no gradient at all")


class BrokenGradient(LayerRule):
    spec = SPECS[3]
    verdict = "broken"


# The layer rules in the order their findings are reported.
LAYER_RULES = (BrokenGradient, VanishingGradient, ExplodingGradient)
