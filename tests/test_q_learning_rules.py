"""The rules on DQN's epsilon and Q values (utils/diagnosis/rules/q_learning_rules.py) and
the measurement of the taken actions' Q (utils/diagnosis/measure/q_values.py), on
fabricated series and a small Q network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rltrain.utils.diagnosis.measure.q_values import taken_q
from rltrain.utils.diagnosis.rules.q_learning_rules import (
    ExplorationSchedule,
    QBeyondReturns,
    updates_per_sync,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.hook import EpisodeEnd, Update
from rltrain.utils.training.replay_buffer import Batch

from conftest import tiny_config

# What RltrainCallback records of RL Zoo's CartPole DQN (SB3's names).
DQN_CARTPOLE = {"algorithm": "DQN", "learning_rate": 2.3e-3, "learning_starts": 1000,
                "target_update_interval": 10, "train_freq": [256, "step"],
                "gradient_steps": 128, "exploration_fraction": 0.16,
                "exploration_final_eps": 0.04, "n_envs": 1}


def context(tmp_path: Path, critic: Any = None, **library: Any) -> RuleContext:
    config = tiny_config(tmp_path, algo="dqn", gamma=0.99, learning_starts=1000,
                         max_timesteps=50_000,
                         library={**DQN_CARTPOLE, **library})
    view = AgentView(actor=None, critic=critic, q_value=None, act=None, probe=None,
                     updates=lambda: 0, networks=dict, action_low=np.array([-0.5]),
                     action_high=np.array([1.5]), device=None, discrete_actions=2)
    return RuleContext(config, 4, 1, view)


@pytest.mark.parametrize("library, updates", [
    ({}, 128),  # RL Zoo's CartPole: every train phase starts from a fresh copy
    ({"train_freq": [1, "step"], "gradient_steps": 1, "target_update_interval": 1}, 1),
    ({"train_freq": [4, "step"], "gradient_steps": 1, "target_update_interval": 10_000},
     2500),  # SB3's defaults
    ({"train_freq": [1, "episode"]}, None),
])
def test_updates_per_target_sync(library, updates):
    assert updates_per_sync({**DQN_CARTPOLE, **library}) == updates


# ------------------------------------------------------------- exploration_schedule
def run(hook: ExplorationSchedule, returns: list[float], epsilon_end: int,
        final: float = 0.04) -> list:
    """Episodes of 20 steps with these returns; epsilon falls from 1 to `final` by
    env step `epsilon_end`, an update every 4 steps."""
    found, steps = [], 0
    for k, value in enumerate(returns):
        for _ in range(5):
            steps += 4
            rate = max(final, 1.0 - (1.0 - final) * steps / epsilon_end)
            found += hook.on_update(Update(steps, steps // 4, {"exploration_rate": rate}))
        found += hook.on_episode_end(EpisodeEnd(steps, 0, k, value, 20, True, 0))
    return found


def test_exploration_over_before_the_return_moved_is_named(tmp_path):
    hook = ExplorationSchedule(context(tmp_path, exploration_fraction=0.001,
                                       exploration_final_eps=0.0))
    noise = np.random.default_rng(0).normal(0, 5, 800)
    found = run(hook, list(20 + noise), epsilon_end=40, final=0.0)
    assert len(found) == 1 and found[0].action == "warn"
    assert found[0].env_steps >= 1000 + 10_000  # learning started, then the patience
    assert found[0].suggested_set == {"exploration_fraction": 0.1,
                                      "exploration_final_eps": 0.05}


def test_a_flat_return_under_a_usual_schedule_is_a_note_not_a_warning(tmp_path):
    """A usual schedule (here 0.16 of the run to 0.04) explores what it should: a slow
    task's return may move later than `patience_steps`, so the schedule is not blamed."""
    hook = ExplorationSchedule(context(tmp_path, exploration_fraction=0.16,
                                       exploration_final_eps=0.04))
    noise = np.random.default_rng(0).normal(0, 5, 800)
    found = run(hook, list(20 + noise), epsilon_end=4000)
    assert len(found) == 1 and found[0].action == "info"
    assert found[0].suggested_set == {"exploration_fraction": 0.32}


def test_exploration_is_not_judged_once_the_return_has_moved(tmp_path):
    hook = ExplorationSchedule(context(tmp_path))
    noise = np.random.default_rng(0).normal(0, 5, 800)
    rising = [20 + 0.3 * k + x for k, x in enumerate(noise)]
    assert run(hook, rising, epsilon_end=6400) == []
    assert hook.moved > 1.0


def test_exploration_still_going_is_not_judged(tmp_path):
    hook = ExplorationSchedule(context(tmp_path, exploration_final_eps=0.04))
    assert run(hook, [20.0] * 800, epsilon_end=10**9) == []


# ---------------------------------------------------------------- q_beyond_returns
def measure(rule: QBeyondReturns, qs: list[float], reward: float = 1.0) -> list:
    found = []
    for k, q in enumerate(qs, start=1):
        found += rule.check(k * 250, {"q_mean": q, "reward_low": reward,
                                      "reward_high": reward})
    return found


def test_q_values_climbing_past_the_returns_name_a_target_synced_every_update(tmp_path):
    rule = QBeyondReturns(context(tmp_path, train_freq=[1, "step"], gradient_steps=1,
                                  target_update_interval=1))
    # rewards of 1, gamma 0.99: returns in 1..100
    found = measure(rule, [90.0, 115.0, 130.0, 150.0, 180.0])
    assert len(found) == 1
    assert found[0].suggested_set == {"target_update_interval": 100}
    assert "synced every 1 updates" in found[0].message


def test_diverging_q_values_with_a_usual_sync_name_the_learning_rate(tmp_path):
    found = measure(QBeyondReturns(context(tmp_path)), [120.0, 140.0, 170.0, 220.0])
    assert [f.suggested_set for f in found] == [{"learning_rate": 2.3e-4}]


@pytest.mark.parametrize("qs", [
    [60.0, 80.0, 95.0, 101.0],     # healthy: near the top of 1..100
    [140.0, 130.0, 120.0, 115.0],  # outside but coming back
])
def test_q_values_inside_the_returns_or_coming_back_are_not_named(tmp_path, qs):
    assert measure(QBeyondReturns(context(tmp_path)), qs) == []


def test_the_taken_actions_q_is_read_from_every_actions_q():
    net = torch.nn.Linear(4, 2)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.copy_(torch.tensor([3.0, 7.0]))  # Q(s, 0) = 3, Q(s, 1) = 7
    view = AgentView(actor=None, critic=net, q_value=None, act=None, probe=None,
                     updates=lambda: 0, networks=dict, action_low=np.array([-0.5]),
                     action_high=np.array([1.5]), device=None, discrete_actions=2)
    actions = torch.tensor([[0.0], [1.0], [1.0], [1.0]])
    batch = Batch(torch.zeros(4, 4), actions, torch.tensor([[1.0], [1.0], [0.0], [2.0]]),
                  torch.zeros(4, 4), torch.zeros(4, 1))
    assert taken_q(view, batch) == {"q_mean": 6.0, "reward_low": 0.0, "reward_high": 2.0}


@pytest.mark.parametrize("cls", [ExplorationSchedule, QBeyondReturns])
def test_state_round_trips(tmp_path, cls):
    rule = cls(context(tmp_path))
    if cls is QBeyondReturns:
        measure(rule, [50.0, 60.0])
    else:
        run(rule, [20.0] * 30, epsilon_end=40)
    again = cls(context(tmp_path))
    again.load_state_dict(rule.state_dict())
    assert again.state_dict() == rule.state_dict()
