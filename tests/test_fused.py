"""The fused backend (agents/fused.py, agents/fused_ops.py): its hand-written forward and
backward passes agree with autograd, and its parameters stay views of flat buffers."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch

from rltrain.agents import fused_ops
from rltrain.agents.fused import FusedDDPGAgent
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.training.replay_buffer import Batch

from conftest import DEVICE, agent_settings

# Asymmetric bounds: the actor's scale and offset must cancel in what the critic sees.
LOW, HIGH = np.array([-1.0, 0.0], dtype=np.float32), np.array([3.0, 0.5], dtype=np.float32)
HIDDEN = [[8, 8], [7, 5, 6]]


def make_agent(hidden: list[int] = (8, 8), **overrides) -> FusedDDPGAgent:
    torch.manual_seed(0)
    config = config_from_dict({"hidden_sizes": list(hidden), "seed": 0, **overrides})
    return FusedDDPGAgent(3, LOW, HIGH, agent_settings(config), DEVICE)


def make_batch(n: int = 32) -> Batch:
    g = torch.Generator().manual_seed(1)
    actions = torch.rand(n, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
    columns = (torch.randn(n, 3, generator=g), actions, torch.randn(n, 1, generator=g),
               torch.randn(n, 3, generator=g), (torch.rand(n, 1, generator=g) < 0.3).float())
    return Batch(*(column.to(DEVICE) for column in columns))


def autograd_critic_loss(agent: FusedDDPGAgent, batch: Batch) -> torch.Tensor:
    with torch.no_grad():
        next_q = agent.critic_target(batch.next_obs, agent.actor_target(batch.next_obs))
        target = batch.rewards + agent.settings.gamma * (1 - batch.terminated) * \
            next_q.min(0).values
    q = agent.critic(batch.obs, batch.actions)
    return ((q - target) ** 2).mean(dim=(1, 2)).sum()


def assert_close(ours: list[torch.Tensor], theirs: tuple[torch.Tensor, ...]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), (a - b).abs().max()


@pytest.mark.parametrize("hidden", HIDDEN)
def test_td_target_equals_the_module_formula(hidden):
    agent = make_agent(hidden)
    batch = make_batch()
    with torch.no_grad():
        next_q = agent.critic_target(batch.next_obs, agent.actor_target(batch.next_obs))
        expected = batch.rewards + 0.99 * (1 - batch.terminated) * next_q.min(0).values
    assert torch.allclose(agent.td_target(batch), expected, atol=1e-5)


@pytest.mark.parametrize("hidden", HIDDEN)
def test_critic_gradients_equal_autograd(hidden):
    agent = make_agent(hidden)
    batch = make_batch()
    loss = autograd_critic_loss(agent, batch)
    expected = torch.autograd.grad(loss, list(agent.critic.parameters()))
    q = agent.critic(batch.obs, batch.actions)
    metrics = agent._critic_step(batch)  # the gradient stays in `.grad` after the step
    assert torch.allclose(metrics["critic_loss"], loss, rtol=1e-5)
    assert torch.allclose(metrics["q_mean"], q[0].mean(), atol=1e-6)
    assert_close([p.grad for p in agent.critic.parameters()], expected)


@pytest.mark.parametrize("hidden", HIDDEN)
def test_actor_gradients_equal_autograd_and_leave_the_critic_alone(hidden):
    agent = make_agent(hidden)
    batch = make_batch()
    critic_grads = [p.grad.clone() for p in agent.critic.parameters()]
    reference = copy.deepcopy(agent.critic)
    loss = -reference.q1(batch.obs, agent.actor(batch.obs)).mean()
    expected = torch.autograd.grad(loss, list(agent.actor.parameters()))
    metrics = agent._actor_step(batch.obs)
    assert torch.allclose(metrics["actor_loss"], loss, rtol=1e-5)
    assert_close([p.grad for p in agent.actor.parameters()], expected)
    critic_after = [p.grad for p in agent.critic.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(critic_after, critic_grads, strict=True))


def test_a_dead_layer_gets_exactly_zero_gradient():
    agent = make_agent([8, 8])
    with torch.no_grad():
        agent.actor.net[0].bias.fill_(-1e3)  # every first-layer ReLU is off
    agent._actor_step(make_batch().obs)
    grads = [p.grad for p in agent.actor.parameters()]
    assert all(torch.count_nonzero(g) == 0 for g in grads[:3])  # layer 0, and layer 1's weight
    assert torch.count_nonzero(grads[-1]) > 0  # the output bias still learns


def test_backward_returns_the_input_gradient_without_weight_buffers():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    x = torch.randn(10, 4, requires_grad=True)
    grad_out = torch.randn(10, 2)
    (expected,) = torch.autograd.grad(net(x), x, grad_out)
    layers = fused_ops.as_layers(list(net.parameters()), transposed=True)
    with torch.no_grad():
        out, inputs = fused_ops.forward(layers, x.detach())
        assert torch.allclose(out, net(x), atol=1e-6)
        assert torch.allclose(fused_ops.backward(layers, inputs, grad_out), expected, atol=1e-6)


def test_parameters_stay_views_of_the_flat_buffers_through_a_checkpoint():
    """Adam and Polyak averaging update the flat buffers; a network whose parameters no
    longer shared them would silently stop learning."""
    agent = make_agent()
    saved = io.BytesIO()
    torch.save(agent.state_dict(), saved)
    saved.seek(0)
    agent.load_state_dict(torch.load(saved, weights_only=True))
    flats = {"actor": agent.actor_opt.param, "critic": agent.critic_opt.param,
             "actor_target": agent._targets[0], "critic_target": agent._targets[1]}
    for name, flat in flats.items():
        for p in getattr(agent, name).parameters():
            assert p.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr(), name
    actor_before, target_before = params(agent.actor), params(agent.critic_target)
    agent.update(make_batch())
    assert not same(actor_before, params(agent.actor))
    assert not same(target_before, params(agent.critic_target))




def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("networks", [{"actor": {"layer_norm": True}},
                                      {"critic": {"activation": "tanh"}}])
def test_networks_beyond_the_stock_mlp_are_refused(networks):
    with pytest.raises(ValueError, match="stock ReLU networks only"):
        make_agent(networks=networks)


def test_a_torch_without_the_private_ops_refuses_fused_and_auto_falls_back(monkeypatch):
    from rltrain.agents.backends import make_agent as make_backend_agent

    monkeypatch.setitem(fused_ops._OPS, "torch._fused_adam_", None)
    settings = agent_settings(config_from_dict({"hidden_sizes": [8]}))
    with pytest.raises(ValueError, match="torch._fused_adam_"):
        make_backend_agent(3, LOW, HIGH, settings, torch.device("cpu"), "fused")
    agent, warning = make_backend_agent(3, LOW, HIGH, settings, torch.device("cpu"), "auto")
    assert type(agent).__name__ == "DDPGAgent"
    assert "torch._fused_adam_" in warning and "autograd" in warning
