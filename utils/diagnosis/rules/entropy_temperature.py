"""`entropy_temperature`: SAC's temperature set against what its policy can do.

It judges every algorithm of the MAX_ENTROPY family (agents/families.py), reading the
run's own section (`sac.`, `crossq.`, ...); the keys below are named as SAC's.

SAC's temperature alpha weighs the policy's entropy against the return (Haarnoja et al.,
2018); learnt, it rises while the entropy (-mean log pi on each update's batch, in the
[-1, 1] action units the target entropy is stated in) is under `sac.target_entropy`
and falls while it is over. Three ways it goes wrong, judged every `every_updates`
updates once the policy has had `min_updates`:

- an unreachable target: no policy on [-1, 1]^d has more entropy than the uniform one,
  d ln 2 nats. A target at or above that keeps the entropy under it forever, and a
  learnt alpha rises without bound (judged at the first update: nothing to wait for);
- a runaway temperature: a learnt alpha `threshold` times its start or more while the
  entropy is still under the target: it keeps rising, the entropy bonus swamps the
  reward in the critic's targets, and their loss grows with it;
- a fixed temperature too high: the policy's entropy within `margin` nats per dimension
  of the uniform one's, `measurements` measurements in a row, while the most entropy
  bonus a step can pay, alpha d ln 2, is above what the rewards tell apart per step (the
  spread of the last `reward_window` training rewards, 5th to 95th percentile, or their
  mean size where they do not vary): the bonus outweighs the reward, so the policy stays
  random (a fixed ent_coef too large for the reward's scale). A random policy under a
  bonus smaller than that is the reward's doing (nothing in it to tell the actions
  apart yet, as in MountainCar before the goal is found), not the temperature's. A
  learnt one is not judged so: it falls while the entropy is over its target, and a
  healthy run starts near uniform.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from rltrain.agents.families import MAX_ENTROPY
from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE
from rltrain.utils.diagnosis.rules._settings import algorithm_option, option_key
from rltrain.utils.diagnosis.rules.entropy_collapse import target_entropy
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Update

UNIFORM = math.log(2.0)  # the entropy of the uniform distribution on [-1, 1], per dimension

SPECS = (RuleSpec(
    name="entropy_temperature", section="diagnostics", group="Training set-up",
    threshold=100.0, action="warn",
    fires_when="SAC's target entropy is at or above the uniform policy's (d ln 2), or its "
               "learnt temperature has grown to this many times its start while the entropy "
               "is under the target, or, with a fixed temperature whose bonus (alpha d ln 2 "
               "a step) is above the rewards' spread per step, the policy's entropy stays "
               "within `margin` nats per dimension of the uniform policy's for "
               "`measurements` measurements",
    hypothesis="if SAC's temperature is set against what its policy can do (a target entropy "
               "no policy reaches, a fixed ent_coef too large for the reward), then the "
               "temperature runs away or the policy stays as random as a policy can be, and "
               "the entropy bonus swamps what the reward tells apart (the critic's loss grows "
               "with a runaway temperature)",
    check="keep sac.target_entropy under d ln 2 (its default, -d, is what SAC's authors use); "
          "learn the temperature (sac.ent_coef: auto) rather than fixing it large",
    algorithms=(MAX_ENTROPY,),
    options=(Option("margin", 0.1, "nats per action dimension under the uniform policy's "
                    "entropy within which the policy counts as random", NON_NEGATIVE),
             Option("every_updates", 500, "updates between two measurements", AT_LEAST_ONE),
             Option("min_updates", 1000, "updates before the entropy is judged",
                    NON_NEGATIVE),
             Option("measurements", 3, "measurements in a row of a random policy before "
                    "the rule fires", AT_LEAST_ONE),
             Option("reward_window", 5000, "training rewards whose spread the entropy "
                    "bonus is weighed against", AT_LEAST_ONE),
             Option("start", 1.0, "the temperature a learnt `auto` starts at (SB3's and "
                    "rltrain's)", POSITIVE)),
),)


class EntropyTemperature(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        dims = context.action_dim
        self.dims = dims
        self.target = target_entropy(algorithm_option(context.config, "target_entropy"), dims)
        setting = algorithm_option(context.config, "ent_coef")
        self.learnt = isinstance(setting, str) and setting.startswith("auto")
        self.start = (float(setting[len("auto_"):]) if self.learnt and "_" in setting
                      else self.settings.start if self.learnt else float(setting))
        self.target_key = option_key(context.config, "target_entropy")
        self.ent_coef_key = option_key(context.config, "ent_coef")
        self.checked_target = False
        self.random = 0  # measurements in a row of a near-uniform policy
        self.measured = 0
        self.rewards: deque[float] = deque(maxlen=self.settings.reward_window)

    def on_step(self, step: Step) -> list[Finding]:
        if math.isfinite(step.reward):
            self.rewards.append(step.reward)
        return []

    def reward_spread(self) -> float:
        """What the rewards tell apart per step: their 5th-95th percentile spread, or
        their mean size where they do not vary (a constant alive bonus); 0 with none."""
        if not self.rewards:
            return 0.0
        rewards = np.fromiter(self.rewards, dtype=np.float64)
        low, high = np.percentile(rewards, [5, 95])
        return float(max(high - low, abs(rewards.mean())))

    def on_update(self, update: Update) -> list[Finding]:
        metrics = update.metrics
        if not self.checked_target:
            self.checked_target = True
            if self.target >= self.dims * UNIFORM:
                return self._unreachable(update.env_steps)
        every = self.settings.every_updates
        if ("entropy" not in metrics or update.updates % every
                or update.updates < self.settings.min_updates):
            return []
        self.measured += 1
        entropy, alpha = float(metrics["entropy"]), float(metrics.get("ent_coef", math.nan))
        self.record(update.env_steps, entropy=round(entropy, 4), ent_coef=float(f"{alpha:.4g}"))
        if self.learnt and alpha >= self.rule.threshold * self.start and entropy < self.target:
            return self._runaway(update.env_steps, entropy, alpha)
        # A learnt temperature falls while the entropy is over its target: a policy still
        # near uniform then is one it is still driving down (what goes wrong with a learnt
        # one is the target, judged above), so only a fixed temperature is judged here.
        near_uniform = entropy >= self.dims * (UNIFORM - self.settings.margin)
        outweighs = alpha * self.dims * UNIFORM > self.reward_spread()
        self.random = self.random + 1 if near_uniform and outweighs and not self.learnt else 0
        if self.random < self.settings.measurements:
            return []
        self.random = 0
        return self._too_random(update.env_steps, update.updates, entropy, alpha,
                                self.reward_spread())

    def _unreachable(self, env_steps: int) -> list[Finding]:
        fixed = -float(self.dims)
        return self.fire(
            env_steps, round(self.target, 3),
            f"{self.target_key} {self.target:g} is at or above the most entropy any policy "
            f"on {self.dims} action dimension(s) has ({self.dims * UNIFORM:.3g} nats, the "
            "uniform one's): the entropy stays under it forever and a learnt temperature "
            f"rises without bound; train with --set {self.target_key}={fixed:g} (SAC's "
            "default, -dim(A))", suggested_set={self.target_key: fixed})

    def _runaway(self, env_steps: int, entropy: float, alpha: float) -> list[Finding]:
        fixed = min(self.target, -float(self.dims))
        return self.fire(
            env_steps, round(alpha / self.start, 3),
            f"the learnt temperature is {alpha:.3g}, {alpha / self.start:.0f} times its start, "
            f"and the policy's entropy {entropy:.3g} is still under its target "
            f"{self.target:g}: the temperature runs away and the entropy bonus swamps the "
            f"reward in the critic's targets; lower {self.target_key} to {fixed:g}",
            suggested_set={self.target_key: fixed})

    def _too_random(self, env_steps: int, updates: int, entropy: float, alpha: float,
                    spread: float) -> list[Finding]:
        lower = float(f"{alpha / 10:.3g}")
        return self.fire(
            env_steps, round(entropy / self.dims, 3),
            f"after {updates} updates the policy's entropy is {entropy:.3g} nats, within "
            f"{self.settings.margin:g} per dimension of a uniform policy's "
            f"({self.dims * UNIFORM:.3g}), for {self.settings.measurements} measurements in "
            f"a row, with the temperature fixed at {alpha:.3g}: its bonus, up to "
            f"{alpha * self.dims * UNIFORM:.3g} a step, outweighs the {spread:.3g} the rewards "
            f"spread over a step, and the policy stays random; lower it to "
            f"{lower:g} (--set {self.ent_coef_key}={lower:g}) or learn it "
            f"({self.ent_coef_key}: auto)", suggested_set={self.ent_coef_key: lower})

    def unjudged(self) -> str | None:
        return self.waiting(self.measured, self.settings.measurements, "measurements",
                            f"one every {self.settings.every_updates} updates from update "
                            f"{self.settings.min_updates} on")

    def state_dict(self) -> dict[str, Any]:
        return {"checked_target": self.checked_target, "random": self.random,
                "measured": self.measured}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.checked_target = bool(state["checked_target"])
        self.random, self.measured = int(state["random"]), int(state["measured"])
