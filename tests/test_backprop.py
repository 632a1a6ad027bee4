"""The hand-written forward/backward passes (agents/backprop.py) agree with autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.agents import backprop
from rltrain.agents.ddpg import DDPGAgent
from rltrain.utils.config_loader import config_from_dict
from rltrain.utils.replay_buffer import Batch

from conftest import DEVICE

# Asymmetric bounds: the actor's scale and offset must cancel in what the critic sees.
LOW, HIGH = np.array([-1.0, 0.0], dtype=np.float32), np.array([3.0, 0.5], dtype=np.float32)
HIDDEN = [[8, 8], [7, 5, 6]]


def make_agent(hidden: list[int]) -> DDPGAgent:
    torch.manual_seed(0)
    config = config_from_dict({"hidden_sizes": hidden, "seed": 0})
    return DDPGAgent(3, LOW, HIGH, config, DEVICE)


def make_batch(n: int = 32) -> Batch:
    g = torch.Generator().manual_seed(1)
    actions = torch.rand(n, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
    columns = (torch.randn(n, 3, generator=g), actions, torch.randn(n, 1, generator=g),
               torch.randn(n, 3, generator=g), (torch.rand(n, 1, generator=g) < 0.3).float())
    return Batch(*(column.to(DEVICE) for column in columns))


def autograd_critic_loss(agent: DDPGAgent, batch: Batch) -> torch.Tensor:
    with torch.no_grad():
        next_q = agent.critic_target(batch.next_obs, agent.actor_target(batch.next_obs))
        target = batch.rewards + agent.config.gamma * (1 - batch.terminated) * next_q.min(0).values
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
    assert torch.allclose(agent._td_target(batch), expected, atol=1e-5)


@pytest.mark.parametrize("hidden", HIDDEN)
def test_critic_gradients_equal_autograd(hidden):
    agent = make_agent(hidden)
    batch = make_batch()
    loss = autograd_critic_loss(agent, batch)
    expected = torch.autograd.grad(loss, list(agent.critic.parameters()))
    ours, q = agent.critic_gradients(batch)
    assert torch.allclose(ours, loss, rtol=1e-5)
    assert torch.allclose(torch.stack(q), agent.critic(batch.obs, batch.actions), atol=1e-6)
    assert_close([p.grad for p in agent.critic.parameters()], expected)


@pytest.mark.parametrize("hidden", HIDDEN)
def test_actor_gradients_equal_autograd_and_leave_the_critic_alone(hidden):
    agent = make_agent(hidden)
    batch = make_batch()
    critic_grads = [p.grad.clone() for p in agent.critic.parameters()]
    loss = -agent.critic.q1(batch.obs, agent.actor(batch.obs)).mean()
    expected = torch.autograd.grad(loss, list(agent.actor.parameters()))
    ours = agent.actor_gradients(batch.obs)
    assert torch.allclose(ours, loss, rtol=1e-5)
    assert_close([p.grad for p in agent.actor.parameters()], expected)
    critic_after = [p.grad for p in agent.critic.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(critic_after, critic_grads, strict=True))


def test_a_dead_layer_gets_exactly_zero_gradient():
    agent = make_agent([8, 8])
    with torch.no_grad():
        agent.actor.net[0].bias.fill_(-1e3)  # every first-layer ReLU is off
    agent.actor_gradients(make_batch().obs)
    grads = [p.grad for p in agent.actor.parameters()]
    assert all(torch.count_nonzero(g) == 0 for g in grads[:3])  # layer 0, and layer 1's weight
    assert torch.count_nonzero(grads[-1]) > 0  # the output bias still learns


def test_backward_returns_the_input_gradient_without_weight_buffers():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    x = torch.randn(10, 4, requires_grad=True)
    grad_out = torch.randn(10, 2)
    (expected,) = torch.autograd.grad(net(x), x, grad_out)
    layers = backprop.as_layers(list(net.parameters()), transposed=True)
    with torch.no_grad():
        out, inputs = backprop.forward(layers, x.detach())
        assert torch.allclose(out, net(x), atol=1e-6)
        assert torch.allclose(backprop.backward(layers, inputs, grad_out), expected, atol=1e-6)
