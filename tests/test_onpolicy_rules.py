"""The rules on PPO's and A2C's own statistics (utils/diagnosis/rules/on_policy_rules.py),
on fabricated series of what the SB3 callback hands them: one report per rollout,
repeated with each of its updates, and the training episodes' returns."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rltrain.utils.diagnosis.rules.on_policy_rules import (
    PolicyEntropyCollapse,
    PolicyStepSize,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.diagnosis.rules.value_fit import ValueFit
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.hook import EpisodeEnd, Update

from conftest import tiny_config

# What RltrainCallback records of a PPO CartPole run (SB3's names).
PPO_CARTPOLE = {"algorithm": "PPO", "learning_rate": 1e-3, "n_steps": 32, "n_envs": 8,
                "n_epochs": 20, "clip_range": 0.2, "ent_coef": 0.0, "vf_coef": 0.5}
ROLLOUT = 256  # env steps per rollout


def context(tmp_path: Path, discrete: int | None = 2, algo: str = "ppo",
            **library: Any) -> RuleContext:
    config = tiny_config(tmp_path, algo=algo, gamma=0.98,
                         library={**PPO_CARTPOLE, **library})
    view = AgentView(actor=None, critic=None, q_value=None, act=None, probe=None,
                     updates=lambda: 0, networks=dict, action_low=np.array([-0.5]),
                     action_high=np.array([1.5]), device=None, discrete_actions=discrete)
    return RuleContext(config, 4, 1, view)


def rollouts(hook: Any, reports: list[dict[str, float]], updates_each: int = 3,
             start: int = 0) -> list:
    """Each report handed on with each of its rollout's updates, as the callback does."""
    found, updates = [], 0
    for k, metrics in enumerate(reports, start=1):
        for _ in range(updates_each):
            updates += 1
            found += hook.on_update(Update(start + k * ROLLOUT, updates, metrics))
    return found


def episodes(hook: Any, returns: list[float], env_steps: int, length: int = 20) -> None:
    for k, value in enumerate(returns):
        hook.on_episode_end(EpisodeEnd(env_steps, 0, k, float(value), length, True, 0))


# ---------------------------------------------------------------- policy_step_size
@pytest.mark.parametrize("kl, clipped, fires", [
    (0.3, 0.6, True),     # far outside the trust region
    (0.06, 0.34, False),  # RL Zoo's Pendulum PPO at its largest
    (0.3, 0.2, False),    # a large KL alone (few ratios clipped)
])
def test_policy_step_size_judges_the_kl_and_the_clipped_share(tmp_path, kl, clipped, fires):
    hook = PolicyStepSize(context(tmp_path))
    found = rollouts(hook, [{"approx_kl": kl, "clip_fraction": clipped}] * 5)
    assert bool(found) is fires
    if fires:
        assert len(found) == 1 and found[0].value == kl
        assert found[0].suggested_set == {"learning_rate": 3e-4}


def test_policy_step_size_judges_each_rollout_once(tmp_path):
    """Five rollouts are needed; one rollout's report handed on with 40 updates is one."""
    hook = PolicyStepSize(context(tmp_path))
    assert rollouts(hook, [{"approx_kl": 0.5, "clip_fraction": 0.7}] * 4, updates_each=40) == []
    assert rollouts(hook, [{"approx_kl": 0.5, "clip_fraction": 0.7}], start=4 * ROLLOUT)


@pytest.mark.parametrize("library, proposed", [
    ({"n_epochs": 100}, {"n_epochs": 10}),
    ({"clip_range": 100.0}, {"clip_range": 0.2}),
    ({"learning_rate": {"schedule": "<function>", "start": 0.05}}, {"learning_rate": 0.015}),
])
def test_policy_step_size_names_the_setting_far_from_the_usual(tmp_path, library, proposed):
    hook = PolicyStepSize(context(tmp_path, **library))
    (found,) = rollouts(hook, [{"approx_kl": 0.4, "clip_fraction": 0.6}] * 5)
    assert found.suggested_set == proposed


def test_a_clip_range_that_never_clips_is_judged_on_the_kl_alone(tmp_path):
    hook = PolicyStepSize(context(tmp_path, clip_range=100.0))
    (found,) = rollouts(hook, [{"approx_kl": 0.4, "clip_fraction": 0.0}] * 5)
    assert found.suggested_set == {"clip_range": 0.2}


def test_policy_step_size_does_not_judge_a2c(tmp_path):
    """A2C reports no KL: the rule is PPO's."""
    hook = PolicyStepSize(context(tmp_path, algo="a2c"))
    assert hook.rule.action == "off"


# ----------------------------------------------------------------------- value_fit
def test_value_fit_fires_on_a_value_that_explains_nothing_after_the_warmup(tmp_path):
    hook = ValueFit(context(tmp_path))
    episodes(hook, [20.0] * 10, 0)  # rewards of 1 a step: values about 50
    reports = [{"explained_variance": -0.05}] * 50  # 50 rollouts, 12,800 env steps
    found = rollouts(hook, reports)
    assert len(found) == 1
    assert found[0].env_steps >= 10_000  # not in the warm-up
    assert found[0].value == pytest.approx(1.05)
    assert hook.unjudged() is None
    assert found[0].suggested_set == {}  # its settings are usual


def test_value_fit_does_not_judge_rollouts_of_a_few_steps(tmp_path):
    """A2C's 5-step rollouts: returns mostly bootstrapped, the explained variance noise."""
    hook = ValueFit(context(tmp_path, algo="a2c", n_steps=5))
    assert rollouts(hook, [{"explained_variance": -0.05}] * 50) == []
    assert hook.unjudged().startswith("rollouts of 5 steps per env")


def test_value_fit_does_not_judge_returns_that_hardly_vary(tmp_path):
    """A CartPole policy at the time limit: returns of about 50 everywhere, V fit to them
    within 0.07 (a value loss of 0.005), its explained variance swinging around 0."""
    hook = ValueFit(context(tmp_path))
    episodes(hook, [500.0] * 10, 0, length=500)
    reports = [{"explained_variance": 0.001, "critic_loss": 0.005}] * 50
    assert rollouts(hook, reports) == []
    # the same explained variance with returns that vary (a value loss of 50): judged
    # a window of mostly flat rollouts with a few judgeable ones is not judged either
    mixed = ValueFit(context(tmp_path))
    episodes(mixed, [500.0] * 10, 0, length=500)
    flat = {"explained_variance": 0.001, "critic_loss": 0.005}
    varying = {"explained_variance": 0.001, "critic_loss": 50.0}
    assert rollouts(mixed, ([flat] * 4 + [varying]) * 10) == []
    varied = ValueFit(context(tmp_path))
    episodes(varied, [500.0] * 10, 0, length=500)
    assert rollouts(varied, [{"explained_variance": 0.001, "critic_loss": 50.0}] * 50)


def test_value_fit_is_quiet_on_a_value_that_learns(tmp_path):
    hook = ValueFit(context(tmp_path))
    assert rollouts(hook, [{"explained_variance": 0.9}] * 80) == []


def test_value_fit_is_quiet_while_the_value_loss_falls(tmp_path):
    """RL Zoo's LunarLander PPO: an explained variance of about 0 for 100k steps while
    its value loss falls from 5,200 to 330 (returns that hinge on a crash V cannot
    foresee yet); the same explained variance with a loss that stays put is named."""
    falling = ValueFit(context(tmp_path))
    episodes(falling, [-150.0] * 10, 0, length=100)
    losses = [5200.0 * 0.93 ** k for k in range(50)]  # down to 150 over 50 rollouts
    assert rollouts(falling, [{"explained_variance": 0.0002, "critic_loss": x}
                              for x in losses]) == []
    assert falling.peak_loss == 5200.0
    flat = ValueFit(context(tmp_path))
    episodes(flat, [-150.0] * 10, 0, length=100)
    found = rollouts(flat, [{"explained_variance": 0.0002, "critic_loss": 1950.0 + k % 3}
                            for k in range(50)])
    assert len(found) == 1


@pytest.mark.parametrize("library, reward, proposed", [
    ({}, 1000.0, {"normalize.rewards": True}),  # values about 50,000
    ({"learning_rate": 1e-6}, 1.0, {"learning_rate": 3e-4}),
    ({"vf_coef": 0.001}, 1.0, {"vf_coef": 0.5}),
])
def test_value_fit_names_what_keeps_the_value_from_learning(tmp_path, library, reward,
                                                            proposed):
    hook = ValueFit(context(tmp_path, **library))
    episodes(hook, [20 * reward] * 10, 0)
    (found,) = rollouts(hook, [{"explained_variance": 0.0}] * 50)
    assert found.suggested_set == proposed


# --------------------------------------------------------- policy_entropy_collapse
def collapse_run(hook: Any, entropy: float, level: float, best: float) -> list:
    """Random-policy episodes (about 20), one lucky episode (`best`), then `level` while
    the entropy is `entropy`, for 60 rollouts (15,360 env steps)."""
    episodes(hook, [18.0, 22.0] * 10 + [best], ROLLOUT)
    found = rollouts(hook, [{"entropy_loss": -0.69}])
    for k in range(2, 62):
        episodes(hook, [level] * 2, k * ROLLOUT)
        found += hook.on_update(Update(k * ROLLOUT, k, {"entropy_loss": -entropy}))
    return found


def test_entropy_collapse_fires_on_a_deterministic_policy_stuck_below_its_best(tmp_path):
    hook = PolicyEntropyCollapse(context(tmp_path))
    found = collapse_run(hook, entropy=0.01, level=9.0, best=80.0)
    assert len(found) == 1
    assert found[0].value == pytest.approx(0.01 / math.log(2), abs=1e-3)
    assert found[0].suggested_set == {"ent_coef": 0.01}
    assert "no new best" in found[0].message


def test_an_entropy_collapse_at_a_far_too_high_learning_rate_names_the_rate(tmp_path):
    """A2C at 0.01, 14 times SB3's 7e-4: its steps made the policy deterministic."""
    hook = PolicyEntropyCollapse(context(tmp_path, algo="a2c", algorithm="A2C",
                                         learning_rate=0.01, n_steps=5))
    (found,) = collapse_run(hook, entropy=0.0001, level=9.0, best=80.0)
    assert found.suggested_set == {"learning_rate": 7e-4}
    assert "14 times SB3's" in found.message


@pytest.mark.parametrize("entropy, level, best", [
    (0.01, 500.0, 500.0),  # converged: the return holds its best
    (0.5, 9.0, 80.0),      # stuck, but still exploring: not the entropy's doing
])
def test_entropy_collapse_is_quiet_otherwise(tmp_path, entropy, level, best):
    assert collapse_run(PolicyEntropyCollapse(context(tmp_path)), entropy, level, best) == []


def test_a_converged_policy_whose_returns_vary_with_the_start_is_not_a_collapse(tmp_path):
    """MountainCar solved: the mean of the last episodes (-140) stays under half the way
    from the first (-200) to the run's luckiest episode (-83), but some of its episodes
    (-88) still come near it: the policy reaches what its best episodes did."""
    hook = PolicyEntropyCollapse(context(tmp_path, discrete=3))
    episodes(hook, [-200.0] * 20 + [-83.0], ROLLOUT)
    found = rollouts(hook, [{"entropy_loss": -1.1}])
    for k in range(2, 62):
        episodes(hook, [-160.0, -172.0, -150.0, -88.0] if k % 5 == 0 else [-160.0, -150.0],
                 k * ROLLOUT)
        found += hook.on_update(Update(k * ROLLOUT, k, {"entropy_loss": -0.05}))
    assert found == []


def test_a_gaussian_policys_collapse_is_its_drop_in_nats(tmp_path):
    hook = PolicyEntropyCollapse(context(tmp_path, discrete=None))
    # from 1.4 nats to -1.0: 2.4 nats per action dimension
    episodes(hook, [-1200.0, -1300.0] * 10 + [-700.0], ROLLOUT)
    found = rollouts(hook, [{"entropy_loss": -1.4}])
    for k in range(2, 62):
        episodes(hook, [-1250.0] * 2, k * ROLLOUT)
        found += hook.on_update(Update(k * ROLLOUT, k, {"entropy_loss": 1.0}))
    assert [f.value for f in found] == [pytest.approx(2.4)]


# ------------------------------------------------------------------- entropy_bonus
@pytest.mark.parametrize("ent_coef, level, fires", [
    (1.0, 9.0, True),     # near-uniform and stuck under its best: the bonus's doing
    (0.01, 9.0, False),   # a tuned bonus: the stall is some other rule's
    (1.0, 500.0, False),  # a large bonus whose return still reaches its best
])
def test_an_entropy_bonus_that_keeps_the_policy_random_is_named(tmp_path, ent_coef, level,
                                                                fires):
    from rltrain.utils.diagnosis.rules.entropy_bonus import EntropyBonus

    hook = EntropyBonus(context(tmp_path, ent_coef=ent_coef))
    found = collapse_run(hook, entropy=0.6, level=level, best=max(level, 80.0))
    assert [f.suggested_set for f in found] == ([{"ent_coef": 0.01}] if fires else [])
    if fires:
        assert found[0].value == pytest.approx(0.6 / math.log(2), abs=1e-3)


def test_an_entropy_bonus_judges_the_mean_of_the_recent_episodes(tmp_path):
    """A policy kept near random by ent_coef 1 reaches a good episode by chance now and
    then (80 among 9s): what it keeps is its mean, which stays under half the way."""
    from rltrain.utils.diagnosis.rules.entropy_bonus import EntropyBonus

    hook = EntropyBonus(context(tmp_path, ent_coef=1.0))
    episodes(hook, [18.0, 22.0] * 10 + [80.0], ROLLOUT)
    found = rollouts(hook, [{"entropy_loss": -0.69}])
    for k in range(2, 62):
        episodes(hook, [9.0, 75.0 if k % 4 == 0 else 9.0], k * ROLLOUT)
        found += hook.on_update(Update(k * ROLLOUT, k, {"entropy_loss": -0.6}))
    assert [f.suggested_set for f in found] == [{"ent_coef": 0.01}]


@pytest.mark.parametrize("cls", [PolicyEntropyCollapse, PolicyStepSize, ValueFit])
def test_state_round_trips(tmp_path, cls):
    hook = cls(context(tmp_path))
    episodes(hook, [20.0] * 25, ROLLOUT)
    rollouts(hook, [{"entropy_loss": -0.6, "approx_kl": 0.01, "clip_fraction": 0.1,
                     "explained_variance": 0.5}] * 3)
    again = cls(context(tmp_path))
    again.load_state_dict(hook.state_dict())
    assert again.state_dict() == hook.state_dict()
