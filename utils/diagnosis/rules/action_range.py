"""`action_range_unused`: the policy's actions stop at a limit well inside the env's
action bounds.

A policy whose output is squashed (tanh) and then scaled to the bounds saturates, when
the critic keeps asking for more, at the bounds themselves (`action_saturation` counts
that). A loop that forgets the scaling sends the squashed output as it is: on
Pendulum's [-2, 2] the actions then stop at +-1, and a share of them piles up at that
limit on both sides of the range's middle while no action ever goes beyond it. Every
`every_steps` env steps after the warm-up the rule runs the deterministic policy on the
newest visited states and measures, per action dimension, the largest distance of an
action from the middle of the range (as a share of the half-range, the `reach`) and
the share of actions within 1% of the half-range of that largest distance, on the
high and on the low side. A reach below `max_reach` (and not below MIN_REACH: a policy that
barely acts) with at least `threshold` of the actions at that limit, some on each side,
is a limit of the policy's own inside the bounds: its output is not scaled to the env's
range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, UNIT_INTERVAL
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Step

STATES = 512  # the newest visited states the policy is run on
MARGIN = 0.01  # "at the limit": within this share of the half-range of it
MIN_SIDE = 0.05  # the share of the actions at the limit that each side must have
# A limit nearer the middle than this (of the half-range) is a policy that barely acts
# (a healthy MountainCar SAC standing still early: reach 0.005), no_learning's matter:
# an unscaled tanh reaches 1/10 of bounds ten times wider than +-1.
MIN_REACH = 0.1

SPECS = (RuleSpec(
    name="action_range_unused", section="diagnostics", group="Critic checks",
    algorithms=ACTOR_Q_CRITICS,
    threshold=0.2, action="warn",
    fires_when="at least this share of the policy's actions sit at a limit of its own "
               "(on both sides) that lies within `max_reach` of the action bounds' "
               "half-range",
    hypothesis="if the loop sends the actor's squashed output (tanh, in [-1, 1]) to an env "
               "whose bounds are wider without scaling it, then the actions pile up at "
               "+-1 and never reach further: the env's range is partly unused",
    check="scale the actor's output to the env's bounds: action = low + (tanh(x) + 1) / 2 "
          "* (high - low), as CleanRL's action_scale and action_bias do",
    options=(Option("max_reach", 0.6, "a limit within this share of the half-range of the "
                    "bounds counts as inside them", UNIT_INTERVAL),
             Option("every_steps", 1000, "env steps between two measurements after the "
                    "warm-up", AT_LEAST_ONE)),
),)


def limit_piles(actions: np.ndarray, low: np.ndarray,
                high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per action dimension of `actions` [N, action_dim]: the reach (the largest
    |action - middle| over the half-range) and the shares of actions within MARGIN of
    that reach above and below the middle."""
    middle, half = (high + low) / 2.0, (high - low) / 2.0
    relative = (np.asarray(actions, np.float64) - middle) / half  # [N, action_dim]
    reach = np.abs(relative).max(axis=0)
    high_side = (relative >= reach - MARGIN).mean(axis=0)
    low_side = (relative <= -(reach - MARGIN)).mean(axis=0)
    return reach, high_side, low_side


class ActionRangeUnused(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.states = np.zeros((STATES, context.obs_dim), np.float32)
        self.kept = 0  # states written so far (the ring's newest are judged)

    def on_step(self, step: Step) -> list[Finding]:
        self.states[self.kept % STATES] = step.obs
        self.kept += 1
        start = self.context.config.learning_starts
        every = self.settings.every_steps
        view = self.context.view
        if (view is None or step.env_steps < start + every or step.env_steps % every
                or step.env != 0 or self.kept < STATES):
            return []
        return self._judge(step.env_steps, view.act(self.states), view.action_low,
                           view.action_high)

    def _judge(self, env_steps: int, actions: np.ndarray, low: np.ndarray,
               high: np.ndarray) -> list[Finding]:
        reach, high_side, low_side = limit_piles(actions, low, high)
        piled = ((reach >= MIN_REACH) & (reach <= self.settings.max_reach)
                 & (high_side >= MIN_SIDE)
                 & (low_side >= MIN_SIDE) & (high_side + low_side >= self.rule.threshold))
        if not piled.any():
            return []
        dim = int(np.argmax(np.where(piled, high_side + low_side, -1.0)))
        share = float(high_side[dim] + low_side[dim])
        return self.rule.fire(
            env_steps, {"reach": round(float(reach[dim]), 3), "at_limit": round(share, 3)},
            f"the policy's actions use only {reach[dim]:.0%} of the env's range in action "
            f"dimension {dim} (up to {reach[dim] * (high[dim] - low[dim]) / 2:.3g} from "
            f"its middle, bounds [{low[dim]:.3g}, {high[dim]:.3g}]), and {share:.0%} of "
            "them sit at that limit on both sides: the actor's squashed output goes to the "
            "env unscaled; rescale it to the bounds (low + (tanh + 1) / 2 * (high - low))",
            suggested_set={})
