"""Same seed -> identical weights and metrics; a different seed -> different ones."""

from __future__ import annotations

import json

import pytest
import torch

from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.run.folders import create_run

from conftest import DEVICE, tiny_config


def train(tmp_path, name: str, **overrides) -> tuple[Trainer, list[dict]]:
    config = tiny_config(tmp_path, run_name=name, **overrides)
    trainer = Trainer(config, DEVICE, interactive=False)
    paths = create_run(config)
    outcome = trainer.run(paths)
    assert outcome.status == "finished" and outcome.env_steps == config.max_timesteps
    lines = [json.loads(line) for line in paths.metrics_file.read_text().splitlines()]
    for line in lines:
        line.pop("time")
    return trainer, lines


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    state = trainer.state.agent.state_dict()
    return {f"{net}.{k}": v for net in ("actor", "critic", "actor_target", "critic_target")
            for k, v in state[net].items()}


@pytest.mark.parametrize("algo, noise", [("ddpg", "gaussian"), ("td3", "ou")])
def test_same_seed_gives_identical_weights_and_metrics(tmp_path, algo, noise):
    a, metrics_a = train(tmp_path, "a", algo=algo, noise_type=noise)
    b, metrics_b = train(tmp_path, "b", algo=algo, noise_type=noise)
    wa, wb = weights(a), weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert metrics_a == metrics_b and len(metrics_a) > 2
    assert a.state.agent.updates == b.state.agent.updates == 300 - 100 + 1


def test_a_different_seed_gives_different_weights(tmp_path):
    a, _ = train(tmp_path, "a")
    c, _ = train(tmp_path, "c", seed=4)
    wa, wc = weights(a), weights(c)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)


def test_an_env_drawing_from_the_global_generators_is_reproducible(tmp_path):
    env = "fake_envs:FakeGlobalRandomPendulum-v0"
    _, metrics_a = train(tmp_path, "a", env_name=env, max_timesteps=250)
    _, metrics_b = train(tmp_path, "b", env_name=env, max_timesteps=250)
    assert metrics_a == metrics_b and len(metrics_a) > 2
