"""Which findings come first: causes before their consequences, then the most severe;
and which finding is the most likely cause of the others.

A run that goes wrong sets off rules in a chain (too high a learning rate, then the
critic's loss and its Q explode, the actor stalls, then NaN), so the report, `rltrain
diagnose --json` and `diagnose --verify` (which tries the top findings' fixes) list the
findings from cause to consequence. Two things decide the order:

- `SETS_OFF`: per rule, the rules whose findings it explains when both are present
  (a mechanism: too high a learning rate makes the losses explode and the actor
  saturate; a hidden state makes the critic miss its targets). A finding that another
  present finding explains is its symptom (`caused_by`); a symptom's proposed change is
  withdrawn where its cause proposes the same key the other way (its advice would
  contradict the run's own figures);
- the rule's group (its spec's `group`) in `CAUSE_ORDER`, among findings that explain
  one another or none.

The most likely cause is the first warning or pause that no other explains.
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

# What a finding of each family can set off.
EXPLOSIONS = ("critic_loss_explosion", "q_explosion", "grad_explosion", "non_finite",
              "q_divergence", "exploding_gradient")
NETWORKS = ("dead_relu", "broken_gradient", "vanishing_gradient", "action_saturation",
            "value_policy_imbalance", "actor_stalled", "actor_pace", "q_overestimation")
OUTCOMES = ("eval_collapse", "early_stopping", "catastrophic_reward", "no_learning",
            "fixated_cluster", "blind_cluster", "chaotic_cluster", "reward_drop")
FIT = ("critic_fit", "actor_fit")
EVERYTHING_DOWNSTREAM = EXPLOSIONS + NETWORKS + OUTCOMES + FIT

# rule -> the rules whose findings it explains when both are present.
SETS_OFF: dict[str, tuple[str, ...]] = {
    # set-up faults that make the networks' steps too large or their inputs too large
    "learning_rate": EVERYTHING_DOWNSTREAM + ("actor_direction",),
    "reward_scale": EVERYTHING_DOWNSTREAM + ("learning_rate", "value_fit", "q_beyond_returns"),
    "observation_scale": EVERYTHING_DOWNSTREAM + ("learning_rate",),
    "entropy_temperature": EVERYTHING_DOWNSTREAM + ("learning_rate", "entropy_collapse"),
    "gradients_not_zeroed": EVERYTHING_DOWNSTREAM + ("learning_rate",),
    "actor_loss_steps_critic": EVERYTHING_DOWNSTREAM + ("learning_rate",),
    "transition_integrity": EVERYTHING_DOWNSTREAM + ("learning_rate", "time_limit_terminal"),
    "sample_recency": EVERYTHING_DOWNSTREAM + ("learning_rate",),
    "gradient_noise": EVERYTHING_DOWNSTREAM,
    "target_update": EVERYTHING_DOWNSTREAM,
    # TD3 updates its targets with its actor: a rare actor step makes both crawl
    "update_ratio": EVERYTHING_DOWNSTREAM + ("target_update", "learning_rate"),
    "target_smoothing": EVERYTHING_DOWNSTREAM,
    "small_replay": EVERYTHING_DOWNSTREAM,
    "excess_noise": OUTCOMES + NETWORKS + FIT,
    # what the agent is given to learn from
    "partial_observability": OUTCOMES + FIT + ("ignored_action", "actor_stalled"),
    "short_episodes": OUTCOMES + FIT + ("short_horizon", "time_limit_terminal",
                                        "sparse_reward"),
    "ignored_action": OUTCOMES + FIT + NETWORKS,
    "frozen_observation": OUTCOMES + FIT + NETWORKS + ("ignored_action",
                                                       "partial_observability"),
    "time_limit_terminal": OUTCOMES + FIT,
    "short_horizon": OUTCOMES + FIT,
    "long_horizon": OUTCOMES + FIT + EXPLOSIONS,
    # a reward paid at the end is not a function of the step's observation either
    "sparse_reward": OUTCOMES + FIT + ("reward_spikes", "partial_observability"),
    "constant_reward": OUTCOMES + FIT + ("sparse_reward",),
    "reward_terms": OUTCOMES + FIT + ("action_saturation",),
    # rare penalties teach the agent to avoid them; not a cause of too little exploration
    "reward_spikes": ("eval_collapse", "early_stopping", "catastrophic_reward", "reward_drop"),
    "action_range_unused": OUTCOMES + ("action_saturation",),
    # the networks at their jobs, and what follows from them
    "actor_direction": OUTCOMES + NETWORKS + ("actor_fit",),
    "critic_fit": OUTCOMES + ("actor_fit", "q_overestimation", "actor_stalled"),
    "actor_fit": OUTCOMES + ("actor_stalled", "action_saturation"),
    "entropy_collapse": OUTCOMES,
    "no_learning": tuple(r for r in OUTCOMES if r != "no_learning"),
    # PPO's, A2C's and DQN's set-up: steps too large jump to a deterministic policy; a
    # value or Q network that cannot fit, or an exploration over too soon, leave their mark
    # on the outcomes and the networks' gradients
    "policy_step_size": EVERYTHING_DOWNSTREAM + ("policy_entropy_collapse", "value_fit"),
    "policy_entropy_collapse": OUTCOMES + NETWORKS,
    "value_fit": OUTCOMES + NETWORKS,
    "exploration_schedule": OUTCOMES + NETWORKS,
    # a Q network that diverges leaves the return where it started, explored or not
    "q_beyond_returns": OUTCOMES + NETWORKS + EXPLOSIONS + ("exploration_schedule",),
}

# A finding's severity, the most severe first (`diagnose --fail-on` counts down from it).
SEVERITY_ORDER = {"pause": 0, "warning": 1, "info": 2}


def cause_rank(rule: str) -> int:
    """Where `rule` stands from cause to consequence (an unknown rule: last)."""
    spec = all_specs().get(rule)
    if spec is None or spec.group not in CAUSE_ORDER:
        return len(CAUSE_ORDER)
    return CAUSE_ORDER.index(spec.group)


def finding_rank(finding: dict[str, Any]) -> tuple[bool, bool, int, int, int, str]:
    """The report's sort key: warnings and pauses before notes; among them findings no
    other explains first (see `link`), then causes before consequences by group, then
    the most severe, then in the order they first appeared."""
    return (finding["severity"] == "info", bool(finding.get("caused_by")),
            cause_rank(finding["rule"]), SEVERITY_ORDER[finding["severity"]],
            finding["first_step"], finding["rule"])


def explains(cause: str, symptom: str) -> bool:
    return symptom in SETS_OFF.get(cause, ())


def link(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings (dicts as the report reads them) with `caused_by`: the present
    warnings and pauses that explain each warning or pause; a symptom whose proposed
    change moves a key the other way than its cause's proposal has it withdrawn
    (`withdrawn_set`). Sorted by `finding_rank`."""
    problems = [f for f in findings if f["severity"] != "info"]
    for finding in findings:
        causes = [c for c in problems if c is not finding and finding["severity"] != "info"
                  and explains(c["rule"], finding["rule"])]
        finding["caused_by"] = sorted({c["rule"] for c in causes})
        conflicting = _conflicts(finding["suggested_set"], causes)
        if conflicting:
            finding["withdrawn_set"] = {k: finding["suggested_set"].pop(k)
                                        for k in sorted(conflicting)}
        _withdraw_earlier(finding, causes)
    return sorted(findings, key=finding_rank)


def _withdraw_earlier(finding: dict[str, Any], causes: list[dict[str, Any]]) -> None:
    """A finding's `last_proposal` (report/findings.py) loses the keys its causes'
    proposals contradict, as its own `suggested_set` does; none left, it goes."""
    earlier = finding.get("last_proposal")
    if earlier is None:
        return
    conflicting = _conflicts(earlier["suggested_set"], causes)
    kept = {k: v for k, v in earlier["suggested_set"].items() if k not in conflicting}
    if kept:
        finding["last_proposal"] = {**earlier, "suggested_set": kept}
    else:
        del finding["last_proposal"]


def _conflicts(proposal: dict[str, Any], causes: list[dict[str, Any]]) -> set[str]:
    """The keys of a symptom's `proposal` that one of its causes' proposals contradicts."""
    return {key for c in causes for key in proposal
            if _against(proposal, c["suggested_set"], key)}


def _against(symptom: dict[str, Any], cause: dict[str, Any], key: str) -> bool:
    """Whether a symptom's value for `key` contradicts its cause's: the cause changes
    the key too, to another value (the cause's figures decide)."""
    return key in cause and cause[key] != symptom[key]


def most_likely_cause(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first warning or pause that no other present finding explains (linked and
    sorted by `link`); None where there is none."""
    problems = [f for f in findings if f["severity"] != "info"]
    roots = [f for f in problems if not f.get("caused_by")]
    return (roots or problems or [None])[0]
