"""The algorithm families (agents/families.py): what each is made of, and which rules
judge whose runs (RuleSpec.algorithms), for rltrain's own algorithms and the watched-only
ones (SB3's PPO, A2C, DQN)."""

from __future__ import annotations

import pytest

from rltrain.agents.families import (
    ACTION_NOISE,
    ACTOR_Q_CRITICS,
    FAMILY_TRAITS,
    MAX_ENTROPY,
    ON_POLICY,
    Q_LEARNING,
    REPLAYED,
    families_where,
)
from rltrain.agents.registry import algorithm
from rltrain.utils.diagnosis.rules.registry import all_specs, not_judging

WATCHED = ("ppo", "a2c", "dqn")
OWN = ("ddpg", "td3", "sac", "crossq", "tqc")
# Rules that read a critic's Q of a Box action, the actor's outputs in the action range,
# the exploration noise or the entropy temperature: not built for PPO, A2C or DQN.
ACTOR_CRITIC_ONLY = (
    "action_range_unused", "actor_stalled", "actor_pace", "actor_loss_steps_critic",
    "action_saturation", "q_overestimation", "dead_relu", "entropy_collapse",
    "entropy_temperature", "critic_fit", "actor_fit", "actor_direction", "gradient_noise",
    "learning_rate", "long_horizon", "no_learning", "excess_noise", "target_smoothing",
    "partial_observability", "q_divergence", "ignored_action", "value_policy_imbalance")
# Rules about the reward, the observations, the episodes' ends, the gradients (a
# loop's optimiser that never clears them among them) and the run's health: every family.
EVERY_FAMILY = (
    "reward_spikes", "sparse_reward", "reward_scale", "constant_reward", "reward_terms",
    "observation_scale", "frozen_observation", "time_limit_terminal", "short_horizon",
    "short_episodes", "vanishing_gradient", "exploding_gradient", "broken_gradient",
    "gradients_not_zeroed", "blind_cluster", "chaotic_cluster", "fixated_cluster",
    "eval_collapse", "catastrophic_reward", "non_finite", "critic_loss_explosion",
    "grad_explosion", "state_bounds", "early_stopping")


def test_each_family_says_its_policy_value_and_data():
    assert FAMILY_TRAITS[ON_POLICY].describe() == (
        "a Gaussian policy or a categorical policy, a state value V, on-policy rollouts")
    assert FAMILY_TRAITS[Q_LEARNING].describe() == (
        "an epsilon-greedy choice over Q values, a Q network, a replay buffer")
    assert ACTOR_Q_CRITICS == (ACTION_NOISE, MAX_ENTROPY)
    assert REPLAYED == (ACTION_NOISE, MAX_ENTROPY, Q_LEARNING)
    assert families_where(box_actions=False) == (ON_POLICY, Q_LEARNING)
    assert [algorithm(name).family for name in WATCHED] == [ON_POLICY, ON_POLICY, Q_LEARNING]
    assert [algorithm(name).sb3_class for name in WATCHED] == ["PPO", "A2C", "DQN"]
    assert not any(algorithm(name).trained for name in WATCHED)


@pytest.mark.parametrize("rule", ACTOR_CRITIC_ONLY)
def test_a_rule_about_an_actor_and_q_critics_judges_no_watched_only_family(rule):
    spec = all_specs()[rule]
    assert not any(spec.judges(algo) for algo in WATCHED)
    assert any(spec.judges(algo) for algo in OWN)


@pytest.mark.parametrize("rule", EVERY_FAMILY)
def test_a_rule_about_rewards_observations_episodes_or_gradients_judges_every_one(rule):
    assert all(all_specs()[rule].judges(algo) for algo in (*OWN, *WATCHED))


def test_the_replay_rules_judge_dqn_and_not_ppo():
    for rule in ("small_replay", "transition_integrity", "sample_recency"):
        assert all_specs()[rule].judges("dqn") and not all_specs()[rule].judges("a2c")


def test_target_update_judges_the_q_critics_and_dqns_target_not_ppos():
    judged = {algo for algo in (*OWN, *WATCHED) if all_specs()["target_update"].judges(algo)}
    assert judged == {*OWN, "dqn"}


def test_diagnose_is_told_which_rules_do_not_judge_an_algorithm():
    ppo = not_judging("ppo")
    assert ppo["algo"] == "ppo" and ppo["family"].startswith("a Gaussian policy or")
    assert set(ACTOR_CRITIC_ONLY) <= set(ppo["rules"])
    assert not set(EVERY_FAMILY) & set(ppo["rules"])
    assert set(not_judging("td3")["rules"]) == {"entropy_collapse", "entropy_temperature",
                                               *ON_POLICY_ONLY, *Q_LEARNING_ONLY}


# The rules on PPO's and A2C's statistics (A2C reports no KL), and on DQN's.
ON_POLICY_ONLY = ("policy_entropy_collapse", "policy_step_size", "value_fit", "entropy_bonus")
Q_LEARNING_ONLY = ("exploration_schedule", "q_beyond_returns")


@pytest.mark.parametrize("rule", ON_POLICY_ONLY + Q_LEARNING_ONLY)
def test_the_watched_families_rules_judge_their_own_family_only(rule):
    judged = {algo for algo in (*OWN, *WATCHED) if all_specs()[rule].judges(algo)}
    expected = {"ppo"} if rule == "policy_step_size" else (
        {"ppo", "a2c"} if rule in ON_POLICY_ONLY else {"dqn"})
    assert judged == expected
