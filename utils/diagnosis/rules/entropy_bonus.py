"""`entropy_bonus` (PPO, A2C): an entropy bonus so large that it keeps the policy random.

The loss PPO and A2C minimise subtracts `ent_coef` times the policy's entropy: a small
bonus (RL Zoo's tuned entries use 0 to 0.01) keeps a policy exploring; one an order of
magnitude above that outweighs what the advantages teach, and the policy stays near
uniform while the return stops rising. The rule fires where `ent_coef` is at least
FAR_ENT_COEF, the entropy is still at least `threshold` of the uniform policy's (a
categorical policy; a Gaussian one: it has fallen less than `gaussian_drop` nats per
action dimension from its first rollout's), and the return has made no new best for
`stall_steps` env steps under half the way from the first episodes to the run's best
episode (the stall `policy_entropy_collapse` reads, utils/diagnosis/rules/
on_policy_rules.py). A run whose return goes on rising with a large bonus is not
judged (CartPole's PPO with ent_coef 1 balances to its time limit all the same).
"""

from __future__ import annotations

import math

from rltrain.agents.families import ON_POLICY
from rltrain.utils.config.fields import POSITIVE
from rltrain.utils.diagnosis.rules.on_policy_rules import (
    STALL_OPTIONS,
    USUAL_ENT_COEF,
    PolicyEntropyCollapse,
    library_setting,
)
from rltrain.utils.diagnosis.rules.spec import Option, RuleSpec
from rltrain.utils.hooks.findings import Finding

FAR_ENT_COEF = 0.1  # ten times RL Zoo's largest tuned entropy coefficient (0.01)

SPECS = (RuleSpec(
    name="entropy_bonus", section="diagnostics", threshold=0.5,
    algorithms=(ON_POLICY,),
    fires_when="ent_coef is 0.1 or more, a categorical policy's entropy is still at least "
               "this share of the uniform policy's (a Gaussian's: it fell less than "
               "`gaussian_drop` nats per action dimension) and the return has made no new "
               "best for `stall_steps` env steps, under half the way to the run's best "
               "episode",
    hypothesis="if the entropy bonus outweighs what the advantages teach (ent_coef an order "
               "of magnitude above the tuned 0-0.01), then the policy stays near random and "
               "the return levels off below what the run has shown reachable",
    check="lower ent_coef to 0.01 or 0 (RL Zoo's tuned PPO and A2C entries: 0 to 0.01)",
    options=(Option("gaussian_drop", 0.5, "a Gaussian policy's entropy fallen less than this "
                    "many nats per action dimension from its first rollout's counts as held "
                    "up", POSITIVE),
             *STALL_OPTIONS)),)


class EntropyBonus(PolicyEntropyCollapse):
    """`policy_entropy_collapse`'s return stall, with the entropy held up instead."""

    spec = SPECS[0]

    def report(self, env_steps: int, metrics: dict[str, float]) -> list[Finding]:
        ent_coef = library_setting(self.context.config, "ent_coef", 0.0)
        if not isinstance(ent_coef, (int, float)) or ent_coef < FAR_ENT_COEF:
            return []
        return super().report(env_steps, metrics)

    def _reach(self) -> float:
        """Here the mean of the recent episodes: a policy kept near random reaches a good
        episode now and then by chance; what it keeps is its mean."""
        return sum(self.recent) / len(self.recent)

    def _collapsed(self, entropy: float) -> bool:
        """Here: whether the entropy is held up (the stall is judged where it is)."""
        n = self.context.view.discrete_actions if self.context.view is not None else None
        if n is not None and n > 1:
            self.collapse = entropy / math.log(n)
            return self.collapse >= self.rule.threshold
        dims = max(self.context.action_dim, 1)
        self.collapse = (self.first_entropy - entropy) / dims
        return self.collapse < self.settings.gaussian_drop

    def _finding(self, env_steps: int, entropy: float, level: float,
                 stalled: int) -> list[Finding]:
        n = self.context.view.discrete_actions if self.context.view is not None else None
        how = (f"{self.collapse:.0%} of the uniform policy's ln {n}" if n
               else f"{self.collapse:.2f} nats per action dimension under its first "
                    f"rollout's {self.first_entropy:.2f}")
        ent_coef = library_setting(self.context.config, "ent_coef", 0.0)
        return self.fire(
            env_steps, round(self.collapse, 4),
            f"ent_coef {ent_coef:g} is an order of magnitude or more above the tuned 0-0.01: "
            f"the policy's entropy is still {entropy:.3g} ({how}) and the mean return of the "
            f"last {len(self.recent)} episodes, {level:.4g}, has made no new best for "
            f"{stalled} env steps, under half the way from the first episodes' "
            f"{self.first_level:.4g} to the run's best episode {self.best_episode:.4g}: the "
            f"bonus keeps the policy random; ent_coef {USUAL_ENT_COEF:g}",
            suggested_set={"ent_coef": USUAL_ENT_COEF})
