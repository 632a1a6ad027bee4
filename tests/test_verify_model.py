"""`rltrain.verify`: the A/B of a change on a user's own model factory, over seeds, judged
with `diagnose --verify`'s statistics."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3 import TD3

import rltrain
from rltrain.utils.errors import UserError


def plain_loop(seed: int, learning_rate: float = 1.0):
    """A stand-in for a training loop: its final evaluation returns depend on the
    learning rate (far too high: -100 on average) and the seed."""

    def train(steps: int) -> list[float]:
        rng = np.random.default_rng(seed)
        mean = -100.0 if learning_rate > 0.1 else -20.0
        return list(mean + 5.0 * rng.standard_normal(10))

    return train


def test_lowering_a_far_too_high_learning_rate_is_confirmed_on_a_plain_loop():
    result = rltrain.verify(plain_loop, {"learning_rate": 1e-3}, steps=100, seeds=[0, 1, 2])
    assert result.verdict == "confirmed"
    assert result.seeds == [0, 1, 2] and [len(r) for r in result.fix] == [10, 10, 10]
    assert result.difference == pytest.approx(80.0)  # same seeds: the same noise
    assert 0 < result.low <= result.difference <= result.high


def test_a_change_that_does_nothing_is_not_confirmed():
    result = rltrain.verify(plain_loop, {"learning_rate": 0.5}, steps=100, seeds=[0, 1])
    assert result.difference == 0.0 and result.verdict == "not confirmed"


def test_an_sb3_factory_is_trained_per_seed_and_branch_and_evaluated():
    made = []

    def make_model(seed: int, learning_rate: float = 1e-3) -> TD3:
        made.append((seed, learning_rate))
        return TD3("MlpPolicy", "fake_envs:FakePoint-v0", learning_rate=learning_rate,
                   learning_starts=50, batch_size=16, policy_kwargs={"net_arch": [8]},
                   seed=seed, device="cpu")

    result = rltrain.verify(make_model, {"learning_rate": 1e-4}, steps=80, seeds=[0, 1],
                            eval_episodes=3)
    assert made == [(0, 1e-3), (0, 1e-4), (1, 1e-3), (1, 1e-4)]
    assert [len(r) for r in result.control + result.fix] == [3, 3, 3, 3]
    assert result.verdict in ("confirmed", "not confirmed", "inconclusive")
    assert result.low <= result.difference <= result.high


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_a_ppo_or_dqn_factory_on_discrete_actions_is_verified(algo):
    """The families the SB3 callback watches: a discrete policy's predict is what the
    evaluation steps with (CartPole's actions 0 and 1)."""
    import stable_baselines3

    made = []

    def make_model(seed: int, learning_rate: float = 1e-3):
        made.append((seed, learning_rate))
        extra = ({"n_steps": 32, "batch_size": 32} if algo == "PPO"
                 else {"learning_starts": 32, "batch_size": 16})
        return getattr(stable_baselines3, algo)(
            "MlpPolicy", "CartPole-v1", learning_rate=learning_rate,
            policy_kwargs={"net_arch": [8]}, seed=seed, device="cpu", **extra)

    result = rltrain.verify(make_model, {"learning_rate": 1e-4}, steps=64, seeds=[0, 1],
                            eval_episodes=2)
    assert made == [(0, 1e-3), (0, 1e-4), (1, 1e-3), (1, 1e-4)]
    assert all(len(r) == 2 and all(x >= 1 for x in r) for r in result.control + result.fix)
    assert result.low <= result.difference <= result.high


@pytest.mark.parametrize("factory, change, message", [
    (plain_loop, {}, "verify needs a change to test"),
    (lambda seed, **kw: 3, {"x": 1}, "make_model returned int: verify needs a model"),
    (lambda seed, **kw: (lambda steps: []), {"x": 1}, "plain loop returned no evaluation"),
])
def test_what_verify_cannot_run_is_one_clear_error(factory, change, message):
    with pytest.raises(UserError, match=message):
        rltrain.verify(factory, change, steps=10, seeds=[0])
