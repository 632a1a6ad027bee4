"""The health rules: early stopping, bad returns, NaN/inf, explosions, memory, bounds,
and the pace of env runners and learner.

One module per rule (the three explosion rules are one family module), each with the
rule's spec, its check and its words, as a `RuleHook`. They are checked on values the
loop has anyway, by one hook, `HealthRules` (utils/run/health.py), which calls them in
`CHECKS` order.
"""

from __future__ import annotations

from rltrain.utils.diagnosis.rules.health import (
    catastrophic_reward,
    early_stopping,
    explosions,
    memory,
    non_finite,
    state_bounds,
    worker_starvation,
)

# In the order of the config section, the rule reference and `rltrain diagnose`.
SPECS = (*early_stopping.SPECS, *catastrophic_reward.SPECS, *non_finite.SPECS,
         *explosions.SPECS, *memory.SPECS, *state_bounds.SPECS,
         *worker_starvation.SPECS)

# The order the rules are checked in, within one hook call: a NaN/inf is reported before
# what it sets off (an evaluation with a NaN return also counts against patience).
CHECKS = (non_finite.NonFinite, explosions.CriticLossExplosion, explosions.QExplosion,
           explosions.GradExplosion, early_stopping.EarlyStopping,
           catastrophic_reward.CatastrophicReward, memory.Memory, state_bounds.StateBounds,
           worker_starvation.WorkerStarvation)
