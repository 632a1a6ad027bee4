"""Actor and critic: shapes, action bounds (also asymmetric), the twin-Q ensemble."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic
from rltrain.networks.mlp import NetworkSpec

BOUNDS = [(np.array([-2.0]), np.array([2.0])),
          (np.array([0.0, -1.0]), np.array([4.0, 3.0])),  # asymmetric, per dimension
          (np.array([10.0, 10.0, -5.0]), np.array([20.0, 11.0, 0.0]))]


@pytest.mark.parametrize("low, high", BOUNDS)
def test_actor_output_has_the_action_shape_and_stays_in_bounds(low, high):
    torch.manual_seed(0)
    actor = Actor(5, low, high, NetworkSpec((16, 16)))
    with torch.no_grad():
        # Push the last layer to saturate tanh in both directions.
        actor.net[-1].weight.mul_(1000.0)
        obs = torch.randn(256, 5) * 10
        actions = actor(obs)
    assert actions.shape == (256, len(low))
    low_t, high_t = torch.as_tensor(low).float(), torch.as_tensor(high).float()
    assert torch.all(actions >= low_t) and torch.all(actions <= high_t)
    # Saturated outputs reach both ends of every dimension (scale and offset, not high[0]).
    assert torch.allclose(actions.min(0).values, low_t, atol=1e-3)
    assert torch.allclose(actions.max(0).values, high_t, atol=1e-3)


def test_actor_maps_zero_preactivation_to_the_middle_of_the_bounds():
    low, high = np.array([0.0, -1.0]), np.array([4.0, 3.0])
    actor = Actor(3, low, high, NetworkSpec((8,)))
    with torch.no_grad():
        actor.net[-1].weight.zero_()
        actor.net[-1].bias.zero_()
        assert torch.allclose(actor(torch.randn(4, 3)), torch.tensor([[2.0, 1.0]] * 4))


def test_critic_returns_one_q_per_member_and_q1_matches_member_zero():
    torch.manual_seed(0)
    critic = Critic(3, np.array([-2.0]), np.array([2.0]), NetworkSpec((32, 32)))
    obs, action = torch.randn(10, 3), torch.rand(10, 1) * 4 - 2
    q = critic(obs, action)
    assert q.shape == (2, 10, 1)
    assert torch.allclose(critic.q1(obs, action), q[0], atol=1e-6)
    assert not torch.allclose(q[0], q[1])  # independently initialised members


def test_critic_members_match_separate_linear_layers():
    """The ensemble is exactly two ordinary MLPs evaluated side by side."""
    torch.manual_seed(1)
    critic = Critic(3, np.array([-1.0]), np.array([1.0]), NetworkSpec((8,)))
    obs, action = torch.randn(6, 3), torch.rand(6, 1) * 2 - 1
    x = torch.cat([obs, action], dim=1)
    for i in range(2):
        first, last = critic.layers
        h = torch.relu(x @ first.weight[i] + first.bias[i])
        assert torch.allclose(critic(obs, action)[i], h @ last.weight[i] + last.bias[i],
                              atol=1e-6)


def test_critic_normalises_actions_to_unit_range():
    critic = Critic(1, np.array([10.0]), np.array([20.0]), NetworkSpec((4,)))
    inputs = critic.inputs(torch.zeros(3, 1), torch.tensor([[10.0], [15.0], [20.0]]))
    assert torch.allclose(inputs[:, 1], torch.tensor([-1.0, 0.0, 1.0]))


def test_the_stock_networks_keep_their_parameter_names():
    """Checkpoints store weights by these names: older checkpoints must still load."""
    actor = Actor(3, np.array([-1.0]), np.array([1.0]), NetworkSpec((8, 8)))
    critic = Critic(3, np.array([-1.0]), np.array([1.0]), NetworkSpec((8, 8)))
    buffers = {"action_scale", "action_bias"}
    assert set(actor.state_dict()) == buffers | {
        f"net.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")}
    assert set(critic.state_dict()) == buffers | {
        f"layers.{i}.{p}" for i in range(3) for p in ("weight", "bias")}


@pytest.mark.parametrize("activation", ["relu", "tanh", "elu", "gelu"])
@pytest.mark.parametrize("layer_norm", [False, True])
def test_every_activation_and_layer_norm_train_both_networks(activation, layer_norm):
    torch.manual_seed(3)
    spec = NetworkSpec((16, 8), activation, layer_norm)
    low, high = np.array([0.0, -1.0]), np.array([4.0, 3.0])
    actor, critic = Actor(3, low, high, spec), Critic(3, low, high, spec)
    obs = torch.randn(5, 3)
    action = actor(obs)
    assert action.shape == (5, 2) and bool((action >= 0.0 - 1e-6).all())
    q = critic(obs, action)
    assert q.shape == (2, 5, 1)
    assert torch.allclose(critic.q1(obs, action), q[0], atol=1e-6)
    (q.sum() + critic.q1(obs, action).sum()).backward()
    for net in (actor, critic):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    kinds = {type(m).__name__ for m in actor.net}
    assert ("LayerNorm" in kinds) == layer_norm
    assert type(critic.activations[0]).__name__.lower() == activation
    assert (critic.norms is not None) == layer_norm


def test_an_unknown_activation_is_refused():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        NetworkSpec((8,), "swish")


def test_batch_renorm_is_batch_norm_during_its_warm_up_and_moves_its_statistics():
    from rltrain.networks.batch_renorm import BatchRenorm, Renorm, training

    layer = BatchRenorm(3, Renorm(momentum=0.1, eps=1e-6, warmup_steps=2)).eval()
    x = torch.randn(64, 3) * 5 + 2
    with training(layer):
        y = layer(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.std(0), torch.ones(3), atol=1e-4, rtol=0)
    # The running statistics moved 0.1 of the way to the batch's (unbiased variance).
    torch.testing.assert_close(layer.running_mean[0], 0.1 * x.mean(0))
    torch.testing.assert_close(layer.running_var[0], 0.9 + 0.1 * x.var(0))
    assert int(layer.steps) == 1 and not layer.training
    # Eval mode: the running statistics, nothing moves.
    before = layer.running_mean.clone()
    torch.testing.assert_close(layer(x), (x - before) / (layer.running_var + 1e-6).sqrt())
    assert torch.equal(layer.running_mean, before) and int(layer.steps) == 1


def test_batch_renorm_after_its_warm_up_corrects_towards_the_running_statistics():
    from rltrain.networks.batch_renorm import D_MAX, R_MAX, BatchRenorm, Renorm, training

    layer = BatchRenorm(2, Renorm(momentum=0.0, eps=1e-6, warmup_steps=0)).eval()
    with torch.no_grad():
        layer.running_mean.fill_(1.0)  # running: mean 1, std 2
        layer.running_var.fill_(4.0)
    x = torch.tensor([[0.0, 0.0], [2.0, 40.0]])  # batch means 1, 20; stds 1.41, 28.3
    with training(layer, track=False):
        y = layer(x)
    mean, std = x.mean(0), (x.var(0) + 1e-6).sqrt()
    r = (std / 2.0).clamp(1 / R_MAX, R_MAX)         # [0.71, 3 (clipped)]
    d = ((mean - 1.0) / 2.0).clamp(-D_MAX, D_MAX)   # [0, 5 (clipped)]
    torch.testing.assert_close(y, (x - mean) / std * r + d)
    assert int(layer.steps) == 0 and float(layer.running_mean[0, 0]) == 1.0  # untracked


def test_a_batch_renormalised_critic_keeps_statistics_per_member():
    from rltrain.networks.batch_renorm import Renorm, training

    critic = Critic(3, np.array([-1.0]), np.array([1.0]), NetworkSpec((8,)),
                    renorm=Renorm(warmup_steps=0)).eval()
    obs, action = torch.randn(32, 3), torch.rand(32, 1) * 2 - 1
    with torch.no_grad():
        critic.layers[0].weight[1].mul_(3.0)  # member 1 sees other hidden statistics
        with training(critic):
            critic(obs, action)
    means = critic.renorms[1].running_mean  # [2, 1, 8]
    assert means.shape == (2, 1, 8) and not torch.allclose(means[0], means[1])
    q = critic(obs, action)
    torch.testing.assert_close(critic.q1(obs, action), q[0])  # eval mode: member alone
