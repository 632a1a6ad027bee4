"""TQC's update maths (agents/tqc_update.py, networks/quantile_critic.py) on tiny networks and
hand-made batches."""

from __future__ import annotations

import copy

import numpy as np
import torch
from test_sac import HIGH, LOW, make_batch, params

from rltrain.agents.base import CommonSettings
from rltrain.agents.registry import TQCOptions
from rltrain.agents.tqc_update import TQCAgent, quantile_huber_loss
from rltrain.networks.mlp import NetworkSpec
from rltrain.utils.training.replay_buffer import Batch

TINY = NetworkSpec((16, 16))


def make_agent(seed: int = 0, **options) -> TQCAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=TINY, critic_net=TINY,
                            seed=seed)
    return TQCAgent(3, LOW, HIGH, common, TQCOptions(**options), torch.device("cpu"))


def test_the_quantile_huber_loss_weighs_each_side_by_the_quantiles_level():
    # One critic, two quantiles (levels 0.25, 0.75), one row, one target atom at 0.
    quantiles = torch.tensor([[[0.5, -3.0]]])
    loss = quantile_huber_loss(quantiles, torch.zeros(1, 1))
    # atom - 0.5 = -0.5 < 0: weight 1 - 0.25, Huber 0.125; atom + 3 = 3 > 0: weight 0.75,
    # Huber 3 - 0.5.
    torch.testing.assert_close(loss, torch.tensor((0.75 * 0.125 + 0.75 * 2.5) / 2))


def test_the_target_drops_the_highest_pooled_quantiles():
    agent = make_agent(n_quantiles=3, n_critics=2, top_quantiles_to_drop_per_net=1)
    batch = make_batch(n=4)
    atoms = torch.tensor([[1.0, 5.0, 3.0], [2.0, 6.0, 4.0]])  # per critic
    agent.critic_target.quantiles = lambda obs, a: atoms[:, None, :].expand(2, 4, 3)
    agent.actor.sample = lambda obs, g=None: (torch.zeros(4, 2), torch.zeros(4, 1))
    target = agent.td_target(batch, torch.tensor([0.1]))
    kept = torch.tensor([1.0, 2.0, 3.0, 4.0])  # 6 pooled, the 2 highest dropped
    expected = batch.rewards + 0.99 * (1 - batch.terminated) * kept
    torch.testing.assert_close(target, expected)


def test_the_critics_give_their_mean_quantile_as_q():
    agent = make_agent(n_quantiles=5, n_critics=3)
    batch = make_batch()
    quantiles = agent.critic.quantiles(batch.obs, batch.actions)
    assert quantiles.shape == (3, 32, 5)
    torch.testing.assert_close(agent.critic(batch.obs, batch.actions),
                               quantiles.mean(-1, keepdim=True))
    torch.testing.assert_close(agent.critic.q1(batch.obs, batch.actions),
                               quantiles[0].mean(-1, keepdim=True))


def test_the_actor_loss_puts_no_gradient_into_the_critics():
    agent = make_agent()
    batch = make_batch()
    agent.critic.zero_grad(set_to_none=True)
    actions_pi, log_prob = agent.actor.sample(batch.obs)
    agent.actor_loss(batch.obs, actions_pi, log_prob, torch.tensor([0.1])).backward()
    assert all(p.grad is None for p in agent.critic.parameters())
    assert any(p.grad is not None for p in agent.actor.parameters())


def test_a_state_dict_continues_bit_for_bit():
    agent, batches = make_agent(), [make_batch(seed=s) for s in range(6)]
    for batch in batches[:3]:
        agent.update(batch)
    restored = make_agent(seed=7)
    assert restored.load_state_dict(copy.deepcopy(agent.state_dict()))
    for batch in batches[3:]:
        ours, theirs = agent.update(batch), restored.update(batch)
        assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in theirs.items()}
    for a, b in ((agent.critic, restored.critic), (agent.critic_target, restored.critic_target)):
        assert all(torch.equal(x, y) for x, y in zip(params(a), params(b), strict=True))


def test_tqc_learns_a_one_step_task():
    """A contextual bandit: reward -(a0 - 2)^2 - (a1 - 0.25)^2, every episode one step."""
    agent = make_agent(ent_coef=0.01)
    g = torch.Generator().manual_seed(3)
    for _ in range(800):
        obs = torch.randn(64, 3, generator=g)
        actions = torch.rand(64, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
        rewards = -((actions - torch.tensor([2.0, 0.25])).square().sum(-1, keepdim=True))
        agent.update(Batch(obs, actions, rewards, obs, torch.ones(64, 1)))
    chosen = agent.act(np.zeros((16, 3), np.float32))
    np.testing.assert_allclose(chosen.mean(0), [2.0, 0.25], atol=0.2)
