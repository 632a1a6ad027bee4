"""Noise that swamps what it is added to: `excess_noise` (exploration) and
`target_smoothing` (TD3's target policy smoothing).

Both are judged from the run's settings at its first update, since the harm is set
before any learning, by what the noise does to an action in the middle of the range:

- `excess_noise`: exploration noise of std s (in units of the action half-range; an
  Ornstein-Uhlenbeck process's stationary std, sigma / sqrt(2 theta)) pushes a share
  erfc(1 / (s sqrt 2)) of the actions past the bounds, where they are clipped: past
  `threshold` of them, the executed actions are mostly the bounds, chosen by the noise,
  and the transitions say little about the policy's own actions. RL Zoo's settings
  stay under a third (MountainCarContinuous's OU 0.5: about 27%).
- `target_smoothing`: TD3 adds clipped noise N(0, sigma) to the target policy's action
  (Fujimoto et al., 2018: sigma 0.2, clipped at 0.5). Smoothing of std at least
  `threshold` of the half-range averages the target over actions far from the policy's,
  mostly at the bounds: the target values nearly random actions.
"""

from __future__ import annotations

import math
from typing import Any

from rltrain.agents.families import ACTION_NOISE
from rltrain.agents.registry import algorithm
from rltrain.utils.diagnosis.rules._settings import algorithm_option, option_key
from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Update

USUAL_NOISE = 0.1  # RL Zoo's exploration noise on Pendulum and LunarLander (gaussian)
USUAL_SMOOTHING = (0.2, 0.5)  # TD3's target_policy_noise and target_noise_clip

SPECS = (
    RuleSpec(
        name="excess_noise", section="diagnostics", group="Training set-up", threshold=0.5,
        algorithms=(ACTION_NOISE,),
        action="warn",
        fires_when="the exploration noise would push more than this share of the actions in "
                   "the middle of the range past the action bounds (judged at the first "
                   "update, for algorithms that add action noise)",
        hypothesis="if the exploration noise is large against the action range, then most "
                   "executed actions are clipped at the bounds, chosen by the noise rather "
                   "than the policy, and the critic learns about the bounds only",
        check="an exploration noise of 0.1-0.3 of the half-range is usual (MountainCar's OU "
              "0.5 is RL Zoo's largest); lower exploration_noise"),
    RuleSpec(
        name="target_smoothing", section="diagnostics", group="Training set-up",
        algorithms=(ACTION_NOISE,),
        threshold=0.5, action="warn",
        fires_when="the target policy smoothing noise's std (clipped at target_noise_clip), "
                   "in units of the action half-range, is at least this (judged at the first "
                   "update, for algorithms that smooth their target)",
        hypothesis="if the target policy smoothing noise is large against the action range, "
                   "then the critic's targets average over actions far from the policy's, "
                   "mostly at the bounds, and value nearly random actions",
        check="TD3's own smoothing is 0.2 of the half-range, clipped at 0.5: lower "
              "target_policy_noise and target_noise_clip"),
)


def clipped_share(std: float) -> float:
    """The share of N(0, std) beyond +/-1: actions in the middle pushed past the bounds."""
    return math.erfc(1.0 / (std * math.sqrt(2.0))) if std > 0 else 0.0


def smoothing_std(sigma: float, clip: float) -> float:
    """The std of N(0, sigma) clipped to [-clip, clip] (by quadrature over a fine grid)."""
    if sigma <= 0 or clip <= 0:
        return 0.0
    steps = 2000
    total = 0.0
    for k in range(steps):  # E[min(|x|, clip)^2] for x ~ N(0, sigma): midpoint rule
        x = (k + 0.5) / steps * 8 * sigma
        density = 2 * math.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
        total += min(x, clip) ** 2 * density * 8 * sigma / steps
    return math.sqrt(total)


class _AtFirstUpdate(RuleHook):
    """A rule judged once, on the run's settings, at the first update of this process."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.judged = False

    def on_update(self, update: Update) -> list[Finding]:
        if self.judged:
            return []
        self.judged = True
        return self.judge(update.env_steps)

    def judge(self, env_steps: int) -> list[Finding]:
        raise NotImplementedError


class ExcessNoise(_AtFirstUpdate):
    spec = SPECS[0]

    def judge(self, env_steps: int) -> list[Finding]:
        config = self.context.config
        if not algorithm(config.algo).adds_action_noise:
            return []  # it samples its own policy: no added noise to judge
        std = config.exploration_noise
        if config.noise_type == "ou":
            std /= math.sqrt(2 * config.ou_theta)
        share = clipped_share(std)
        if not share > self.rule.threshold:
            return []
        proposed = (USUAL_NOISE if config.noise_type == "gaussian"
                    else float(f"{3 * USUAL_NOISE * math.sqrt(2 * config.ou_theta):.3g}"))
        return self.fire(
            env_steps, round(share, 3),
            f"exploration noise of std {std:.3g} of the action half-range pushes {share:.0%} "
            "of the actions in the middle of the range past the bounds: the executed actions "
            "are mostly the bounds, chosen by the noise; lower it, e.g. --set "
            f"exploration_noise={proposed:g}", suggested_set={"exploration_noise": proposed})


class TargetSmoothing(_AtFirstUpdate):
    spec = SPECS[1]

    def judge(self, env_steps: int) -> list[Finding]:
        config = self.context.config
        sigma = algorithm_option(config, "target_policy_noise")
        clip = algorithm_option(config, "target_noise_clip")
        if sigma is None or clip is None:
            return []  # the algorithm does not smooth its target
        std = smoothing_std(sigma, clip)
        if not std >= self.rule.threshold:
            return []
        section = option_key(config, "").rstrip(".")
        noise, noise_clip = USUAL_SMOOTHING
        return self.fire(
            env_steps, round(std, 3),
            f"the target policy smoothing noise (std {sigma:g}, clipped at {clip:g}) moves "
            f"the target action by {std:.2g} of the half-range (std): the critic's targets "
            f"average over actions far from the policy's; --set "
            f"{section}.target_policy_noise={noise:g} {section}.target_noise_clip="
            f"{noise_clip:g} (TD3's own)",
            suggested_set={f"{section}.target_policy_noise": noise,
                           f"{section}.target_noise_clip": noise_clip})


CHECKS = (ExcessNoise, TargetSmoothing)
