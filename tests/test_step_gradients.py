"""Gradients read where each optimiser steps (integrations/views.py `StepGradients`),
pinned against autograd on a hand-made loop that, as SB3 and CleanRL do, runs the
actor's loss through the critic after the critic's step without clearing its `.grad`."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rltrain.integrations.views import LeftGradients, StepGradients


def nets() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return (nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)),   # actor
            nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))   # critic


def losses(actor: nn.Module, critic: nn.Module, obs: torch.Tensor, actions: torch.Tensor,
           target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    critic_loss = (critic(torch.cat([obs, actions], 1)) - target).square().mean()
    actor_loss = -critic(torch.cat([obs, actor(obs)], 1)).mean()
    return critic_loss, actor_loss


def test_each_network_is_recorded_with_the_gradient_its_optimiser_stepped_with():
    actor, critic = nets()
    g = torch.Generator().manual_seed(1)
    obs, actions, target = (torch.randn(16, 3, generator=g), torch.randn(16, 1, generator=g),
                            torch.randn(16, 1, generator=g))
    # What autograd says each loss gives its own network, on copies of the same weights
    a_copy, c_copy = copy.deepcopy(actor), copy.deepcopy(critic)
    critic_loss, _ = losses(a_copy, c_copy, obs, actions, target)
    expected_critic = torch.autograd.grad(critic_loss, list(c_copy.parameters()))
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    steps = StepGradients({"actor": actor, "critic": critic})
    try:
        critic_loss, _ = losses(actor, critic, obs, actions, target)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        # the actor's gradient through the critic as it is after its step
        _, actor_loss = losses(actor, critic, obs, actions, target)
        expected_actor = torch.autograd.grad(actor_loss, list(actor.parameters()),
                                             retain_graph=True)
        actor_opt.zero_grad()
        actor_loss.backward()  # into the critic's .grad too: the loops' habit
        actor_opt.step()
        recorded = steps.gradients("critic")
        for (name, p), want in zip(critic.named_parameters(), expected_critic, strict=True):
            torch.testing.assert_close(recorded[name], want)
            assert not torch.allclose(p.grad, want)  # .grad now holds more than its own
        for (name, _), want in zip(actor.named_parameters(), expected_actor, strict=True):
            torch.testing.assert_close(steps.gradients("actor")[name], want)
        norms = steps.norms()
        own = torch.linalg.vector_norm(torch.stack([w.norm() for w in expected_critic]))
        assert abs(norms["critic_grad_norm"] - float(own)) < 1e-5
    finally:
        steps.close()


def test_a_closed_recorder_records_nothing_more():
    actor, critic = nets()
    opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    steps = StepGradients({"actor": actor, "critic": critic})
    steps.close()
    critic(torch.randn(2, 4)).sum().backward()
    opt.step()
    assert steps.gradients("critic") is None and steps.norms() == {}


def test_each_step_is_copied_anew_and_an_added_parameter_group_is_seen():
    """The copies are kept in buffers that the next step overwrites: each read holds
    that step's gradients, a parameter whose gradient appears or goes is followed, and
    a parameter group added to an optimiser after its first step is watched too."""
    actor, critic = nets()
    first, last = list(critic.parameters())[:2], list(critic.parameters())[2:]
    opt = torch.optim.SGD(first, lr=0.1)
    steps = StepGradients({"actor": actor, "critic": critic}, trace_backwards=False)
    try:
        for value in (1.0, 2.0):
            for p in first:
                p.grad = torch.full_like(p, value)
            opt.step()
            assert all(g is None for g in list(steps.gradients("critic").values())[2:])
            assert all(torch.all(g == value) for g in list(
                steps.gradients("critic").values())[:2])
        opt.add_param_group({"params": last})
        for p in critic.parameters():
            p.grad = torch.full_like(p, 3.0)
        opt.step()
        assert all(torch.all(g == 3.0) for g in steps.gradients("critic").values())
        assert steps.gradients("actor") is None  # no optimiser stepped it
        counts = steps.sources.counts()
        assert counts.steps == {"critic": 3} and counts.stale == {"critic": 0}
        for p in critic.parameters():
            p.grad = None
        opt.step()  # nothing to step with: not a step of the critic
        assert steps.sources.counts().steps == {"critic": 3}
    finally:
        steps.close()


def test_gradients_kept_by_reference_until_one_changes_after_its_step():
    """A network kept by reference reads the `.grad` tensors it stepped with, also after
    `zero_grad()` set them to None; one whose stepped gradient is changed in place (the
    actor's loss run through the critic) reads as unknown, then is copied."""
    actor, critic = nets()
    g = torch.Generator().manual_seed(2)
    obs, actions, target = (torch.randn(16, 3, generator=g), torch.randn(16, 1, generator=g),
                            torch.randn(16, 1, generator=g))
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    steps = StepGradients({"actor": actor, "critic": critic}, trace_backwards=False,
                          by_reference=("actor", "critic"))
    try:
        critic_loss, _ = losses(actor, critic, obs, actions, target)
        critic_opt.zero_grad()
        critic_loss.backward()
        stepped = [p.grad.clone() for p in critic.parameters()]
        critic_opt.step()
        critic_opt.zero_grad()  # .grad set to None: the held tensors stay as stepped
        assert all(p.grad is None for p in critic.parameters())
        for got, want in zip(steps.gradients("critic").values(), stepped, strict=True):
            assert torch.equal(got, want)
        for step in range(2):
            critic_loss, _ = losses(actor, critic, obs, actions, target)
            critic_opt.zero_grad()
            critic_loss.backward()
            stepped = [p.grad.clone() for p in critic.parameters()]
            critic_opt.step()
            _, actor_loss = losses(actor, critic, obs, actions, target)
            actor_opt.zero_grad()
            actor_loss.backward()  # into the critic's held .grad, in place
            actor_opt.step()
            if step == 0:  # found changed: unknown rather than wrong
                assert steps.gradients("critic") is None
                assert "critic_grad_norm" not in steps.norms()
            else:  # copied since its next step
                for got, want in zip(steps.gradients("critic").values(), stepped,
                                     strict=True):
                    assert torch.equal(got, want)
        assert "actor_grad_norm" in steps.norms()
    finally:
        steps.close()


@pytest.mark.parametrize("algo", ["PPO", "A2C", "DQN"])
def test_sb3_leaves_the_gradients_it_stepped_with(algo):
    """`LeftGradients` (what the SB3 callback reads for PPO, A2C and DQN, with no hook at
    their steps) gives what the optimiser stepped with at the last step of `learn()`: a
    copying `StepGradients` watching the same networks at every step agrees."""
    import stable_baselines3

    from rltrain.integrations.sb3_models import check_model, watched

    settings = {"PPO": dict(n_steps=32, batch_size=32, n_epochs=2),
                "A2C": dict(n_steps=8),
                "DQN": dict(learning_starts=64, train_freq=16, gradient_steps=4,
                            buffer_size=1000)}[algo]
    model = getattr(stable_baselines3, algo)("MlpPolicy", "CartPole-v1", seed=0,
                                             device="cpu", **settings)
    view = watched(model, check_model(model)).view
    networks = {"actor": view.actor, "critic": view.critic}
    copied = StepGradients(networks, trace_backwards=False)
    left = LeftGradients(networks)
    assert left.gradients("actor") is None  # no step yet
    try:
        model.learn(256)
    finally:
        copied.close()
    for name in networks:
        want = copied.gradients(name)
        got = left.gradients(name)
        if want is None:  # DQN's greedy actor: its parameters are the critic's
            assert algo == "DQN" and name == "actor" and got is None
            continue
        assert got is not None and want.keys() == got.keys()
        for key in want:
            assert (want[key] is None) == (got[key] is None)
            if want[key] is not None:
                assert torch.equal(got[key], want[key]), (name, key)
    assert left.norms() == pytest.approx(copied.norms(), rel=0, abs=0)
