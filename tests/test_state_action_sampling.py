"""The state-action map samples every algorithm's acting pass: a SAC, CrossQ or TQC run,
whose policy explores by sampling itself, writes its heatmaps as DDPG and TD3 runs do,
and what the map keeps of an exploring step is the policy's deterministic action."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rltrain.agents.base import CommonSettings
from rltrain.agents.registry import SACOptions
from rltrain.agents.sac_update import SACAgent
from rltrain.networks.mlp import NetworkSpec
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.diagnosis.measure.state_action import StateActionMap
from rltrain.utils.run.folders import create_run

from conftest import DEVICE, tiny_config


@pytest.mark.parametrize("algo", ["sac", "crossq", "tqc", "td3"])
def test_a_run_writes_its_state_action_heatmaps(tmp_path, algo):
    config = tiny_config(tmp_path, run_name=algo, algo=algo, max_timesteps=600,
                         diagnostics={"heatmap_freq": 400})
    Trainer(config, DEVICE, interactive=False).run(create_run(config))
    heatmaps = tmp_path / "logs" / algo / "heatmaps"
    assert (heatmaps / "heatmap_step_400.png").stat().st_size > 1000
    clusters = json.loads((heatmaps / "clusters_step_400.json").read_text())["clusters"]
    # Every training step from learning_starts (100) on was sampled at a rate near 1.
    assert sum(c["samples"] for c in clusters.values()) >= 200


def test_the_map_keeps_the_deterministic_action_of_an_exploring_step(tmp_path):
    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    common = CommonSettings(actor_net=NetworkSpec((16, 16)), critic_net=NetworkSpec((16, 16)))
    agent = SACAgent(3, low, high, common, SACOptions(), DEVICE)
    sampled = StateActionMap(3, low, high, tiny_config(tmp_path).diagnostics, 0.99, seed=0)
    agent.actor.register_forward_hook(sampled.hook)
    obs = np.array([[0.3, -0.2, 0.5]], np.float32)
    action = agent.act(obs, deterministic=False)
    assert sampled.size == 1  # the exploring step's pass, not the one below
    with torch.no_grad():
        mode = agent.actor(torch.as_tensor(obs, device=DEVICE)).cpu().numpy()
    np.testing.assert_allclose(sampled.states[0], obs[0])
    np.testing.assert_allclose(sampled.actions[0], mode[0], rtol=1e-6)
    assert not np.allclose(action, mode)  # the action taken is a sample, not the mode
    np.testing.assert_allclose(agent.drawn[1], mode, rtol=1e-6)


def test_each_kept_state_gets_its_discounted_return_to_go_at_its_episodes_end(tmp_path):
    """A kept state's return-to-go is the discounted sum of its episode's rewards from
    its step on; where the ring of kept rows wraps within one episode, a row holds the
    later state, and its value (a ring of 50 rows, episodes of 80 kept steps)."""
    settings = tiny_config(tmp_path, diagnostics={"max_samples": 50}).diagnostics
    sampled = StateActionMap(2, np.array([-1.0]), np.array([1.0]), settings, 0.9, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(3):
        rewards = rng.normal(size=80)
        for step in range(80):
            sampled.keep_row(0, rng.normal(size=2), rng.normal(size=1))
            sampled.on_step(step + 1, 0)
        sampled.end_episode(rewards, 0)
    # the last episode began at ring row 160 % 50 = 10: its steps 30..79 hold the 50
    # rows now, step s in row (10 + s) % 50 (steps 0..29 were overwritten)
    expected = [sum(0.9 ** k * r for k, r in enumerate(rewards[step:]))
                for step in range(30, 80)]
    rows = [(10 + step) % 50 for step in range(30, 80)]
    assert np.allclose(sampled.return_to_go[rows], expected)
