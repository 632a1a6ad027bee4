"""`early_stopping`: no new best evaluation for `patience` evaluations in a row.

The evaluations since the best are the monitor's count (kept in its checkpoint state);
the limit is the top-level key `patience`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Evaluation

SPECS = (RuleSpec(
    name='early_stopping',
    section='monitor',
    group='Health rules',
    fires_when='no new best evaluation for `patience` evaluations (threshold: patience)',
    action='pause',
    hypothesis='if learning has plateaued, then evaluations stay below the best for many in '
               'a row',
    check='look at eval/mean_reward; raise patience, lower the learning rates, or stop',
    fixed_threshold='the top-level key patience',
    hint='--set patience=N (N larger than now) to keep training'),)


class EarlyStopping(RuleHook):
    spec = SPECS[0]

    def configured(self) -> tuple[Any, str]:
        return self.context.config.patience, self.settings.action

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        return self.check(evaluation.env_steps, evaluation.evals_since_best)

    def check(self, env_steps: int, evals_since_best: int) -> list[Finding]:
        patience = self.rule.threshold
        if evals_since_best < patience:
            return []
        return self.fire(env_steps, evals_since_best,
                         f"no new best evaluation for {evals_since_best} evaluations "
                         f"(patience {patience})")
