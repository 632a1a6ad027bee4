"""CrossQ's update maths (agents/crossq_update.py) on tiny networks and hand-made
batches."""

from __future__ import annotations

import copy

import numpy as np
import torch
from test_sac import HIGH, LOW, make_batch, params

from rltrain.agents.base import CommonSettings
from rltrain.agents.crossq_update import CrossQAgent
from rltrain.agents.registry import CrossQOptions
from rltrain.networks.batch_renorm import BatchRenorm
from rltrain.networks.mlp import NetworkSpec
from rltrain.utils.training.replay_buffer import Batch

TINY = NetworkSpec((16, 16))


def make_agent(seed: int = 0, **options) -> CrossQAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=TINY, critic_net=TINY,
                            seed=seed)
    return CrossQAgent(3, LOW, HIGH, common, CrossQOptions(**options), torch.device("cpu"))


def renorm_steps(net: torch.nn.Module) -> list[int]:
    return [int(m.steps) for m in net.modules() if isinstance(m, BatchRenorm)]


def test_it_keeps_no_target_and_batch_renormalises_actor_and_critic():
    agent = make_agent()
    assert agent.critic_target is None and set(agent.networks()) == {"actor", "critic"}
    assert len(renorm_steps(agent.actor)) == 3 and len(renorm_steps(agent.critic)) == 3
    assert agent.actor_opt.param_groups[0]["betas"] == (0.5, 0.999)  # the paper's
    assert agent.ent_coef_opt.param_groups[0]["betas"] == (0.9, 0.999)


def test_the_actor_and_temperature_step_every_policy_delay_updates():
    agent = make_agent(policy_delay=3)
    for update in range(1, 7):
        actor_before, alpha_before = params(agent.actor), agent.log_ent_coef.detach().clone()
        metrics = agent.update(make_batch(seed=update))
        stepped = update % 3 == 0
        assert ("actor_loss" in metrics) == ("entropy" in metrics) == stepped
        moved = any(not torch.equal(a, b) for a, b in zip(actor_before, params(agent.actor),
                                                           strict=True))
        assert moved == stepped and (not torch.equal(alpha_before, agent.log_ent_coef)) == \
            stepped
    # One training pass of the critic per update (current and next rows together), one
    # of the actor per actor step; the targets' passes ran in eval mode.
    assert renorm_steps(agent.critic) == [6, 6, 6] and renorm_steps(agent.actor) == [2, 2, 2]


def test_the_critics_statistics_cover_the_current_and_next_rows_together():
    agent = make_agent(batch_norm_momentum=1.0)  # the running statistics: the last batch's
    batch = make_batch(n=32)
    agent.update(batch)
    inputs = agent.critic.inputs(torch.cat([batch.obs, batch.next_obs]),
                                 torch.cat([batch.actions, torch.zeros(32, 2)]))
    mean = agent.critic.renorms[0].running_mean  # [2, 1, 5]
    # The observation columns: both halves' mean, not the current rows' alone.
    torch.testing.assert_close(mean[0, 0, :3], inputs[:, :3].mean(0))
    assert not torch.allclose(mean[0, 0, :3], batch.obs.mean(0))


def test_a_state_dict_continues_bit_for_bit():
    agent, batches = make_agent(policy_delay=2), [make_batch(seed=s) for s in range(7)]
    for batch in batches[:3]:
        agent.update(batch)
    restored = make_agent(seed=7, policy_delay=2)
    assert restored.load_state_dict(copy.deepcopy(agent.state_dict()))
    for batch in batches[3:]:
        ours, theirs = agent.update(batch), restored.update(batch)
        assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in theirs.items()}
    for net in ("actor", "critic"):
        ours, theirs = agent.networks()[net].state_dict(), restored.networks()[net].state_dict()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), net


def test_crossq_learns_a_one_step_task():
    """A contextual bandit: reward -(a0 - 2)^2 - (a1 - 0.25)^2, every episode one step;
    half of each batch the policy's own exploring actions, as in a replay buffer (with
    uniform actions alone, a critic that sees its policy's actions only through its
    statistics is a fixed data set's, whose errors the actor exploits)."""
    torch.manual_seed(0)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=NetworkSpec((32, 32)),
                            critic_net=NetworkSpec((32, 32)), seed=0)
    agent = CrossQAgent(3, LOW, HIGH, common, CrossQOptions(ent_coef=0.01,
                                                            renorm_warmup_steps=100),
                        torch.device("cpu"))
    g = torch.Generator().manual_seed(3)
    for _ in range(600):
        obs = torch.randn(64, 3, generator=g)
        actions = torch.rand(64, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
        actions[:32] = torch.as_tensor(agent.act(obs[:32].numpy(), deterministic=False))
        rewards = -((actions - torch.tensor([2.0, 0.25])).square().sum(-1, keepdim=True))
        agent.update(Batch(obs, actions, rewards, obs, torch.ones(64, 1)))
    chosen = agent.act(np.zeros((16, 3), np.float32))
    np.testing.assert_allclose(chosen.mean(0), [2.0, 0.25], atol=0.2)
