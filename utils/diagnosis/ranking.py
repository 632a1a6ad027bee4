"""Which findings come first: causes before their consequences, then the most severe.

A run that goes wrong sets off rules in a chain (too high a learning rate, then the
critic's loss and its Q explode, then NaN), so the report, `rltrain diagnose --json` and
`diagnose --verify` (which tries the top findings' fixes) list the findings from cause to
consequence: by the rule's group (its spec's `group`) in `CAUSE_ORDER`.
"""

from __future__ import annotations

from typing import Any

from rltrain.utils.diagnosis.rules.registry import all_specs

# The rules' groups from causes to their consequences: what stopped a run from outside,
# what goes into learning and the set-up come before the reward's shape, the policy's
# map, the gradients and the health rules, which see what the causes lead to.
CAUSE_ORDER = ("Runs stopped from outside the training", "What goes into learning",
               "Training set-up", "Reward signal", "State-action map", "Gradient flow",
               "Critic checks", "Health rules")

# A finding's severity, the most severe first (`diagnose --fail-on` counts down from it).
SEVERITY_ORDER = {"pause": 0, "warning": 1, "info": 2}


def cause_rank(rule: str) -> int:
    """Where `rule` stands from cause to consequence (an unknown rule: last)."""
    spec = all_specs().get(rule)
    if spec is None or spec.group not in CAUSE_ORDER:
        return len(CAUSE_ORDER)
    return CAUSE_ORDER.index(spec.group)


def finding_rank(finding: dict[str, Any]) -> tuple[bool, int, int, int, str]:
    """The report's sort key: warnings and pauses before notes; among them causes first,
    then the most severe, then in the order they first appeared."""
    return (finding["severity"] == "info", cause_rank(finding["rule"]),
            SEVERITY_ORDER[finding["severity"]], finding["first_step"], finding["rule"])
