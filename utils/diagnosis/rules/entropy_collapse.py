"""`entropy_collapse`: SAC's exploration dies out before the returns have grown.

It judges every algorithm of the MAX_ENTROPY family (agents/families.py), whose
options `ent_coef` and `target_entropy` it reads in the algorithm's own section. SAC
explores by the entropy of its own policy, kept up by the temperature alpha
(Haarnoja et al., 2018). When alpha is fixed too small, or a learnt alpha is driven to
about 0, the policy turns near-deterministic: its entropy (estimated on each update's
batch as -mean log pi, in the [-1, 1] action units SAC's target entropy is stated in)
falls far under the target entropy, and the returns stop improving. The rule judges
both signs at each evaluation: the newest update's entropy more than `threshold` nats
per action dimension under the target, or alpha under `min_ent_coef`, while the
evaluations have made no new best for `evaluations` evaluations in a row.
"""

from __future__ import annotations

import math
from typing import Any

from rltrain.agents.families import MAX_ENTROPY
from rltrain.agents.registry import algorithm, section_of
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Evaluation, Update

SPECS = (RuleSpec(
    name="entropy_collapse", section="diagnostics", threshold=1.0, action="warn",
    fires_when="SAC's policy entropy is more than this many nats per action dimension "
               "under its target entropy, or its temperature under `min_ent_coef`, while "
               "`evaluations` evaluations in a row make no new best return",
    hypothesis="if the entropy temperature collapses (a fixed ent_coef too small, or a learnt "
               "one driven to about 0), then the policy turns near-deterministic before it "
               "has found what the reward pays for: its entropy falls far under its target "
               "and the returns stall",
    check="let the algorithm learn its temperature (<algo>.ent_coef: auto, e.g. "
          "sac.ent_coef) or raise a fixed one; with a learnt temperature, raise "
          "<algo>.target_entropy so that it keeps exploring",
    group="Training set-up",
    algorithms=(MAX_ENTROPY,),
    options=(Option("evaluations", 3, "evaluations in a row without a new best before the "
                    "rule fires", AT_LEAST_ONE),
             Option("min_ent_coef", 1e-4, "a temperature under this counts as collapsed",
                    POSITIVE)),
),)


def target_entropy(setting: Any, action_dim: int) -> float:
    """The target entropy a `sac.target_entropy` setting means (auto: -dim(A))."""
    return -float(action_dim) if setting == "auto" else float(setting)


class EntropyCollapse(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.entropy: float | None = None  # the newest update's
        self.ent_coef: float | None = None
        self.stalled = 0  # evaluations in a row without a new best

    def on_update(self, update: Update) -> list[Finding]:
        metrics = update.metrics
        if "entropy" in metrics:  # only updates that stepped the actor measure it
            self.entropy, self.ent_coef = metrics["entropy"], metrics.get("ent_coef")
        return []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        self.stalled = 0 if evaluation.evals_since_best == 0 else self.stalled + 1
        if self.entropy is None or self.stalled < self.settings.evaluations:
            return []
        dims = self.context.action_dim
        target = target_entropy(section_of(self.context.config).target_entropy, dims)
        gap = (target - self.entropy) / dims  # nats per action dimension under the target
        alpha = self.ent_coef if self.ent_coef is not None else math.nan
        collapsed = alpha < self.settings.min_ent_coef
        if gap <= self.rule.threshold and not collapsed:
            return []
        self.stalled = 0  # the next finding needs as many evaluations again
        return self._finding(evaluation.env_steps, gap, target, alpha)

    def _finding(self, env_steps: int, gap: float, target: float,
                 alpha: float) -> list[Finding]:
        setting = section_of(self.context.config).ent_coef
        section = algorithm(self.context.config.algo).section
        if isinstance(setting, str) and setting.startswith("auto"):
            raised = round(target + 0.5 * self.context.action_dim, 3)
            suggested: dict[str, Any] = {f"{section}.target_entropy": raised}
            fix = f"raise {section}.target_entropy from {target:g} to {raised:g}"
        else:
            suggested = {f"{section}.ent_coef": "auto"}
            fix = (f"learn the temperature ({section}.ent_coef: auto) instead of the fixed "
                   f"{setting}")
        return self.rule.fire(
            env_steps, round(gap, 3),
            f"policy entropy {self.entropy:.2f} is {gap:.2f} nats per action dimension under "
            f"its target {target:g}, temperature {alpha:.2g}, and no new best return for "
            f"{self.settings.evaluations} evaluations: the policy stopped exploring; {fix}",
            suggested_set=suggested)

    def state_dict(self) -> dict[str, Any]:
        return {"entropy": self.entropy, "ent_coef": self.ent_coef, "stalled": self.stalled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.entropy, self.ent_coef = state["entropy"], state["ent_coef"]
        self.stalled = int(state["stalled"])
