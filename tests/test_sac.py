"""SAC's update maths (agents/sac.py) and its policy (networks/gaussian_actor.py), on tiny
networks and hand-made batches."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from rltrain.agents.base import CommonSettings
from rltrain.agents.registry import SACOptions
from rltrain.agents.sac import build
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_update import SACAgent, Temperature
from rltrain.networks.gaussian_actor import GaussianActor
from rltrain.networks.mlp import NetworkSpec
from rltrain.utils.training.replay_buffer import Batch

LOW, HIGH = np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32)
TINY = NetworkSpec((16, 16))


def make_agent(seed: int = 0, **options) -> SACAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=TINY, critic_net=TINY,
                            seed=seed)
    return SACAgent(3, LOW, HIGH, common, SACOptions(**options), torch.device("cpu"))


def make_batch(n: int = 32, seed: int = 1) -> Batch:
    g = torch.Generator().manual_seed(seed)
    actions = torch.rand(n, 2, generator=g) * torch.tensor(HIGH - LOW) + torch.tensor(LOW)
    return Batch(torch.randn(n, 3, generator=g), actions, torch.randn(n, 1, generator=g),
                 torch.randn(n, 3, generator=g), (torch.rand(n, 1, generator=g) < 0.3).float())


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_actions_lie_inside_asymmetric_bounds():
    actor = GaussianActor(3, LOW, HIGH, TINY)
    obs = torch.randn(500, 3) * 10  # large inputs saturate the tanh
    for action in (actor(obs), actor.sample(obs)[0]):
        assert bool((action >= torch.tensor(LOW)).all() and (action <= torch.tensor(HIGH)).all())


def test_log_prob_is_the_squashed_gaussians_in_unit_action_space():
    actor = GaussianActor(3, LOW, HIGH, TINY)
    obs = torch.randn(8, 3)
    action, log_prob = actor.sample(obs, torch.Generator().manual_seed(5))
    mean, log_std = actor.distribution(obs)
    unit = (action - actor.action_bias) / actor.action_scale  # tanh(u)
    u = torch.atanh(unit.clamp(-1 + 1e-6, 1 - 1e-6))
    expected = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1) \
        - torch.log(1 - unit.square() + 1e-6).sum(-1)
    torch.testing.assert_close(log_prob.squeeze(-1), expected, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("setting, learnt, start", [
    ("auto", True, 1.0), ("auto_0.1", True, 0.1), (0.05, False, 0.05)])
def test_temperature_settings(setting, learnt, start):
    assert Temperature.parse(setting) == Temperature(learnt, start)


@pytest.mark.parametrize("setting", ["autox", "auto_", "auto_-1", "auto_nan", 0.0, -1.0])
def test_a_bad_temperature_is_a_value_error(setting):
    with pytest.raises(ValueError, match="ent_coef"):
        Temperature.parse(setting)


def test_the_default_target_entropy_is_minus_the_action_dimension():
    assert make_agent().target_entropy == -2.0
    assert make_agent(target_entropy=-0.5).target_entropy == -0.5


def test_one_update_uses_the_temperature_from_before_its_own_step():
    agent = make_agent()
    before = float(agent.log_ent_coef.detach().exp())
    metrics = agent.update(make_batch())
    assert float(metrics["ent_coef"]) == pytest.approx(before)
    assert float(agent.log_ent_coef.detach().exp()) != before  # then it was stepped
    assert {"critic_loss", "actor_loss", "entropy", "ent_coef_loss"} <= set(metrics)


def test_a_fixed_temperature_never_moves_and_has_no_optimiser():
    agent = make_agent(ent_coef=0.05)
    for _ in range(3):
        metrics = agent.update(make_batch())
    assert float(metrics["ent_coef"]) == pytest.approx(0.05)
    assert "ent_coef" not in agent.optimizers() and "ent_coef_loss" not in metrics


@pytest.mark.parametrize("interval", [1, 2])
def test_the_target_critic_moves_tau_toward_the_critic_every_interval(interval):
    agent = make_agent(target_update_interval=interval)
    target_before = params(agent.critic_target)
    agent.update(make_batch())
    after = list(zip(target_before, params(agent.critic), params(agent.critic_target),
                     strict=True))
    for old, online, new in after:
        expected = old.lerp(online, 0.005) if interval == 1 else old
        torch.testing.assert_close(new, expected)


def test_the_actor_loss_puts_no_gradient_into_the_critics():
    agent = make_agent()
    batch = make_batch()
    agent.update(batch)  # the critics' .grad hold their own loss's gradient
    agent.critic.zero_grad()
    ent_coef = agent.log_ent_coef.detach().exp()
    agent.actor_loss(batch.obs, *agent.actor.sample(batch.obs), ent_coef).backward()
    assert all(p.grad is None or not p.grad.any() for p in agent.critic.parameters())
    assert all(p.grad is not None and p.grad.any() for p in agent.actor.parameters())


def test_probing_draws_nothing_from_the_agents_random_stream():
    agent = make_agent()
    state = agent.generator.get_state()
    critic_loss, actor_loss, q = agent.probe_losses(make_batch())
    assert torch.equal(agent.generator.get_state(), state)
    assert critic_loss.requires_grad and actor_loss.requires_grad and q.shape == (2, 32, 1)


def test_a_non_finite_reward_leaves_the_critics_untouched():
    agent = make_agent()
    agent.update(make_batch())
    batch = make_batch(seed=2)
    bad = Batch(batch.obs, batch.actions, torch.full_like(batch.rewards, math.nan),
                batch.next_obs, batch.terminated)
    critic, moments = params(agent.critic), copy.deepcopy(agent.critic_opt.state_dict())
    metrics = agent.update(bad)
    assert math.isnan(float(metrics["critic_loss"]))
    assert all(torch.equal(a, b) for a, b in zip(critic, params(agent.critic), strict=True))
    for index, state in moments["state"].items():  # Adam's moments and step count too
        for name, value in state.items():
            assert torch.equal(value, agent.critic_opt.state_dict()["state"][index][name])
    assert agent.parameters_finite()


def test_a_state_dict_continues_bit_for_bit():
    agent, batches = make_agent(), [make_batch(seed=s) for s in range(6)]
    for batch in batches[:3]:
        agent.update(batch)
    restored = make_agent(seed=7)
    assert restored.load_state_dict(copy.deepcopy(agent.state_dict()))
    for batch in batches[3:]:
        ours, theirs = agent.update(batch), restored.update(batch)
        assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in theirs.items()}
    assert all(torch.equal(a, b) for a, b in zip(params(agent.actor), params(restored.actor),
                                                 strict=True))
    assert torch.equal(agent.log_ent_coef, restored.log_ent_coef)


def test_sac_learns_a_one_step_task():
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


@pytest.mark.parametrize("saved, now, expected", [
    ("auto", "auto", None),        # continues: the learnt value
    ("auto", 0.05, 0.05),          # now fixed: the config's value
    (0.001, "auto", 1.0),          # now learnt, was fixed: from auto's start
    (0.001, "auto_0.2", 0.2),
])
def test_a_resume_that_changes_the_temperature_starts_from_the_configs(saved, now, expected):
    agent = make_agent(ent_coef=saved)
    for seed in range(3):
        agent.update(make_batch(seed=seed))
    restored = make_agent(ent_coef=now)
    restored.load_state_dict(copy.deepcopy(agent.state_dict()))
    value = float(restored.log_ent_coef.detach().exp())
    if expected is None:
        assert value == pytest.approx(float(agent.log_ent_coef.detach().exp()))
        assert value != pytest.approx(1.0)
    else:
        assert value == pytest.approx(expected)
    restored.update(make_batch(seed=5))  # and it trains on from there


def make_flat(seed: int = 0, **options) -> FlatSACAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=TINY, critic_net=TINY,
                            seed=seed, grad_clip_norm=options.pop("clip", None))
    return FlatSACAgent(3, LOW, HIGH, common, SACOptions(**options), torch.device("cpu"))


@pytest.mark.parametrize("options", [{}, {"ent_coef": 0.05}, {"clip": 0.5}])
def test_the_flat_adam_gives_the_same_update_bit_for_bit(options):
    clip = options.get("clip")
    torch.manual_seed(0)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=TINY, critic_net=TINY,
                            seed=0, grad_clip_norm=clip)
    reference = SACAgent(3, LOW, HIGH, common,
                         SACOptions(**{k: v for k, v in options.items() if k != "clip"}),
                         torch.device("cpu"))
    flat = make_flat(**dict(options))
    for seed in range(5):
        ours, theirs = flat.update(make_batch(seed=seed)), reference.update(make_batch(seed=seed))
        assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in theirs.items()}
    for a, b in zip([*params(flat.actor), *params(flat.critic), flat.log_ent_coef],
                    [*params(reference.actor), *params(reference.critic),
                     reference.log_ent_coef], strict=True):
        assert torch.equal(a.detach(), b.detach())


def test_a_checkpoint_moves_between_the_two_optimisers():
    flat, reference = make_flat(), make_agent()
    for seed in range(3):
        flat.update(make_batch(seed=seed))
    reference.load_state_dict(copy.deepcopy(flat.state_dict()))
    again = make_flat(seed=4)
    again.load_state_dict(copy.deepcopy(reference.state_dict()))
    for seed in range(3, 6):
        a, b = again.update(make_batch(seed=seed)), reference.update(make_batch(seed=seed))
        assert {k: float(v) for k, v in a.items()} == {k: float(v) for k, v in b.items()}


def test_auto_on_the_cpu_is_the_flat_adam_for_other_networks_and_autograd_is_torchs():
    cpu = torch.device("cpu")
    normed = CommonSettings(critic_net=NetworkSpec((16,), layer_norm=True))
    auto, _ = build(3, LOW, HIGH, normed, SACOptions(), cpu, "auto")
    plain, _ = build(3, LOW, HIGH, CommonSettings(), SACOptions(), cpu, "autograd")
    assert type(auto) is FlatSACAgent and type(plain) is SACAgent
