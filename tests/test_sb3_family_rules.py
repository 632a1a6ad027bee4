"""The rules of the watched families on short real SB3 runs (CartPole-v1, RL Zoo's
settings with one fault planted, as benchmarks/onpolicy_calibration.py plants them):
each named by its rule with a change in SB3's own names, and the statistics each family
reports recorded under train/ in TensorBoard."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_sb3_onpolicy import ZOO

from rltrain.integrations.sb3 import RltrainCallback
from rltrain.utils.run.log_files import read_jsonl

# The health rules warn instead of pausing, so that the run goes on to what is judged.
WARN_ONLY = {"monitor": {"critic_loss_explosion": {"action": "warn"},
                         "grad_explosion": {"action": "warn"}}}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train(case: str, steps: int, **change) -> tuple[list[dict], set[str]]:
    """The run's warnings (events.jsonl) and its TensorBoard tags."""
    cls, env, n_envs, settings = ZOO[case]
    model = cls("MlpPolicy", make_vec_env(env, n_envs=n_envs, seed=0), seed=0, device="cpu",
                **{**settings, **change})
    model.learn(steps, callback=RltrainCallback("run", config=WARN_ONLY))
    warned = [e for e in read_jsonl(Path("logs/run/events.jsonl")) if e.get("action") == "warn"]
    events = EventAccumulator("logs/run", size_guidance={"scalars": 0})
    events.Reload()
    return warned, set(events.Tags()["scalars"])


def test_ppo_whose_clip_range_never_clips_takes_steps_too_large():
    warned, tags = train("ppo_cartpole", 3072, clip_range=100.0)
    steps = [e for e in warned if e["rule"] == "policy_step_size"]
    assert steps and steps[0]["value"] > 0.15
    assert steps[0]["suggested_set"] == {"clip_range": 0.2}  # SB3's name, as it is
    assert "(in SB3: clip_range=0.2)" in steps[0]["message"]
    assert {"train/approx_kl", "train/clip_fraction", "train/explained_variance",
            "train/entropy_loss", "train/learning_rate", "train/clip_range"} <= tags


def test_healthy_ppo_takes_usual_steps():
    warned, _ = train("ppo_cartpole", 3072)
    assert [e["rule"] for e in warned] == []
    measured = [d for d in read_jsonl(Path("logs/run/flow1.jsonl"))
                if d.get("rule") == "policy_step_size"]
    assert measured and all(d["approx_kl"] < 0.15 for d in measured)


def test_a2c_with_a_learning_rate_of_0_01_collapses_its_entropy():
    # The return's last best came by step 2,000 on one CPU and at 10,500 on another (SB3's
    # update rounds as the CPU's BLAS does): a stall of stall_steps (10,000) ends by 24,000.
    warned, tags = train("a2c_cartpole", 24_000, learning_rate=0.01)
    (collapse,) = [e for e in warned if e["rule"] == "policy_entropy_collapse"]
    # 0.01 is 14 times SB3's A2C default: the rate that collapsed it is the change
    assert collapse["value"] < 0.1 and collapse["suggested_set"] == {"learning_rate": 7e-4}
    assert {"train/explained_variance", "train/entropy_loss"} <= tags
    assert "train/approx_kl" not in tags  # A2C reports none


def test_dqn_with_its_target_synced_every_update_climbs_past_the_returns():
    warned, tags = train("dqn_cartpole", 2500, train_freq=1, gradient_steps=1,
                         target_update_interval=1)
    beyond = [e for e in warned if e["rule"] == "q_beyond_returns"]
    assert beyond and beyond[0]["suggested_set"] == {"target_update_interval": 100}
    assert "synced every 1 updates" in beyond[0]["message"]
    assert {"train/exploration_rate", "train/critic_loss", "train/learning_rate"} <= tags


def test_healthy_dqn_q_values_stay_inside_the_returns():
    """RL Zoo's CartPole DQN: its Q values are measured and stay quiet."""
    warned, _ = train("dqn_cartpole", 3072)
    assert [e["rule"] for e in warned] == []
    measured = [d for d in read_jsonl(Path("logs/run/flow1.jsonl")) if d["kind"] == "q_values"]
    assert measured and all(d["q_mean"] <= 100.0 for d in measured)  # 1..100 reachable
