"""`gradient_noise`: batches too small for the networks' gradient noise.

utils/diagnosis/measure/gradient_noise.py estimates the critic's and the actor's noise
scale, the batch size at which a batch gradient's noise equals its signal (McCandlish et
al., 2018), from the summed measurements of the run so far. The rule fires when the
larger is more than `threshold` times the run's batch size, once `measurements`
measurements are in: each update then steps mostly on the noise of a few transitions
(the critic's values wander; the actor walks at random, often into its saturated tanh).

It warns only where the batch itself is far under the usual (under `MIN_BATCH`; RL
Zoo's off-policy batches are 64 to 2048): at a usual batch it is a note, since healthy
runs measure noise scales far above their batch too (LunarLander TD3 199 times its 256,
HalfCheetah SAC 18-40 times), where the tune half's healthy runs had put the line at 10
with their largest at 7.9.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

USUAL_BATCH = 256  # RL Zoo's batch size for off-policy continuous control
MIN_BATCH = 32  # a batch under this is far under any RL Zoo off-policy batch
# At a usual batch only a note is written, from this ratio: healthy runs at batch 256 reach
# 7.9 on the `tune` half, and a note's proposal is one that `diagnose --verify` may try.
NOTE_RATIO = 10.0

SPECS = (RuleSpec(
    name="gradient_noise", section="diagnostics", group="Training set-up", threshold=4.0,
    algorithms=ACTOR_Q_CRITICS,
    action="warn",
    fires_when="the critic's or the actor's gradient noise scale (the batch size at which a "
               "batch gradient's noise equals its signal) is more than this many times "
               "batch_size, and batch_size is under 32 (a note at a usual batch, from 10 "
               "times)",
    hypothesis="if the batches are far smaller than the networks' gradient noise scale, then "
               "each update steps mostly on the noise of a few transitions: the critic's "
               "values wander instead of settling, and the actor walks at random (often into "
               "the saturated ends of its tanh)",
    check="raise batch_size (256 is usual for off-policy control); the finding gives the "
          "noise scale measured",
    options=(Option("every_updates", 1000, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 2, "measurements (summed) before the rule judges",
                    AT_LEAST_ONE)),
),)


class GradientNoise(RuleCheck):
    spec = SPECS[0]

    def check(self, env_steps: int, ratio: float, scale: float, measured: int,
              net: str = "critic") -> list[Finding]:
        """`ratio`: `net`'s noise scale `scale` over the batch size, from `measured`
        measurements."""
        batch = self.context.config.batch_size
        usual = batch >= MIN_BATCH
        limit = max(self.rule.threshold, NOTE_RATIO) if usual else self.rule.threshold
        if measured < self.settings.measurements or not ratio > limit:
            return []
        proposed = max(USUAL_BATCH, 2 * batch)
        return self.fire(
            env_steps, round(ratio, 2),
            f"the {net}'s gradient noise scale is about {scale:.3g} transitions, "
            f"{ratio:.3g} times the batch of {batch}: each update steps mostly on the noise "
            f"of a few transitions; --set batch_size={proposed}",
            observation=usual, suggested_set={"batch_size": proposed})


CHECKS = (GradientNoise,)
