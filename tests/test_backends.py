"""The two update backends: the fused one computes the autograd update, and each
continues bit for bit from its own state_dict."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rltrain.agents import gemm
from rltrain.agents.deterministic import DDPGAgent
from rltrain.agents.fused import FusedDDPGAgent
from rltrain.scripts.training.agent_setup import build_agent
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.errors import ConfigError
from rltrain.utils.training.replay_buffer import Batch

from conftest import DEVICE, agent_settings, assert_updates_agree

LOW, HIGH = np.array([-1.0, 0.0], dtype=np.float32), np.array([3.0, 0.5], dtype=np.float32)
ALGOS = [{"algo": "ddpg"}, {"algo": "td3", "td3": {"policy_delay": 2}},
         {"algo": "ddpg", "grad_clip_norm": 0.5}]


def batches(n: int, seed: int = 1) -> list[Batch]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        actions = torch.rand(32, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
        columns = (torch.randn(32, 3, generator=g), actions, torch.randn(32, 1, generator=g),
                   torch.randn(32, 3, generator=g), (torch.rand(32, 1, generator=g) < 0.1).float())
        out.append(Batch(*(c.to(DEVICE) for c in columns)))
    return out


def make(backend: str, **overrides) -> DDPGAgent:
    torch.manual_seed(0)
    config = config_from_dict({"hidden_sizes": [16, 16], "seed": 0, "critic_lr": 1e-3,
                               "actor_lr": 1e-3, "update_backend": backend, **overrides})
    return build_agent(config, 3, LOW, HIGH, DEVICE)[0]


def weights(agent: DDPGAgent) -> list[torch.Tensor]:
    return [p.detach().clone() for name in ("actor", "critic", "actor_target", "critic_target")
            for p in getattr(agent, name).parameters()]


@pytest.mark.parametrize("kernel", gemm.available())
@pytest.mark.parametrize("overrides", ALGOS)
def test_fused_and_autograd_agree_after_many_updates(overrides, kernel):
    # 48-wide layers: every hidden product at least gemm.THIN wide, oneDNN's where it runs
    overrides = {"hidden_sizes": [48, 48], **overrides}
    fused = make("fused", matmul_kernel=kernel, **overrides)
    reference = make("autograd", **overrides)
    assert fused.products.kind == kernel
    assert type(fused) is FusedDDPGAgent and type(reference) is DDPGAgent
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(reference),
                                                strict=True))  # the same initial weights
    assert_updates_agree(fused, reference, batches(200), weights)
    moved = max(float((a - b).abs().max()) for a, b in
                zip(weights(reference), weights(make("autograd", **overrides)), strict=True))
    assert moved > 1e-2  # they agree after real learning, not because nothing moved


@pytest.mark.parametrize("backend, networks", [
    ("fused", {}), ("autograd", {}),
    ("autograd", {"actor": {"layer_norm": True}, "critic": {"activation": "elu",
                                                           "layer_norm": True}})])
def test_each_backend_continues_bit_for_bit_from_its_state_dict(backend, networks):
    overrides = {"algo": "td3", "networks": networks}
    straight, first = make(backend, **overrides), make(backend, **overrides)
    data = batches(30)
    for batch in data:
        straight.update(batch)
    for batch in data[:12]:
        first.update(batch)
    resumed = make(backend, **{**overrides, "seed": 0})
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    for batch in data[12:]:
        resumed.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(weights(straight), weights(resumed),
                                                strict=True))


def test_a_checkpoint_of_one_backend_loads_into_the_other():
    fused = make("fused")
    for batch in batches(5):
        fused.update(batch)
    reference = make("autograd")
    reference.load_state_dict(copy.deepcopy(fused.state_dict()))
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(reference),
                                                strict=True))
    batch = batches(1, seed=7)[0]
    ours, theirs = fused.update(batch), reference.update(batch)
    assert torch.allclose(ours["critic_loss"], theirs["critic_loss"], rtol=1e-4)
    assert reference.critic_opt.param_groups[0]["lr"] == 1e-3


def test_auto_takes_fused_for_the_stock_networks_on_the_cpu_and_autograd_otherwise():
    config = config_from_dict({"hidden_sizes": [8]})
    assert type(build_agent(config, 3, LOW, HIGH, torch.device("cpu"))[0]) is FusedDDPGAgent
    custom = config_from_dict({"hidden_sizes": [8], "networks": {"critic": {"layer_norm": True}}})
    assert type(build_agent(custom, 3, LOW, HIGH, torch.device("cpu"))[0]) is DDPGAgent
    assert agent_settings(custom).critic_net.layer_norm
    assert agent_settings(custom).actor_net.hidden_sizes == (8,)


def test_fused_with_a_custom_network_is_one_config_error():
    config = config_from_dict({"update_backend": "fused",
                               "networks": {"actor": {"activation": "tanh"}}})
    with pytest.raises(ConfigError, match="stock ReLU networks only"):
        build_agent(config, 3, LOW, HIGH, DEVICE)


def test_per_network_hidden_sizes_override_the_top_level_ones():
    config = config_from_dict({"hidden_sizes": [8, 8], "networks": {"critic": {
        "hidden_sizes": [32]}}})
    settings = agent_settings(config)
    assert settings.actor_net.hidden_sizes == (8, 8)
    assert settings.critic_net.hidden_sizes == (32,)


def test_a_run_whose_torch_lacks_a_private_op_trains_through_autograd_and_says_so(
        tmp_path, monkeypatch):
    from rltrain.agents import fused_ops
    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.run.folders import create_run
    from rltrain.utils.run.log_files import read_jsonl

    from conftest import tiny_config

    monkeypatch.setitem(fused_ops._OPS, "torch.ops.aten.threshold_backward", None)
    config = tiny_config(tmp_path, max_timesteps=150, run_name="r")
    trainer = Trainer(config, torch.device("cpu"), interactive=False)
    assert type(trainer.state.agent) is DDPGAgent
    assert trainer.run(create_run(config)).status == "finished"
    [warning] = [e for e in read_jsonl(tmp_path / "logs" / "r" / "events.jsonl")
                 if e["rule"] == "update_backend"]
    assert warning["action"] == "warn" and "threshold_backward" in warning["message"]
