"""TQC's hand-written update (agents/tqc_fused.py) computes the autograd update
(agents/tqc_update.py), continues bit for bit from its own state_dict, shares its
checkpoints with the other backends, and is what `auto` picks where SAC's would be."""

from __future__ import annotations

import copy

import pytest
import torch
from test_sac import HIGH, LOW, make_batch

from rltrain.agents import gemm
from rltrain.agents.base import CommonSettings
from rltrain.agents.probes import gradient_probe
from rltrain.agents.registry import TQCOptions
from rltrain.agents.tqc import FlatTQCAgent
from rltrain.agents.tqc_fused import FusedTQCAgent, quantile_huber_sum
from rltrain.agents.tqc_update import TQCAgent, quantile_huber_loss, quantile_levels
from rltrain.networks.mlp import NetworkSpec
from rltrain.scripts.training.agent_setup import build_agent
from rltrain.utils.config.loader import config_from_dict

from conftest import assert_updates_agree

CPU = torch.device("cpu")
TINY = NetworkSpec((16, 16))
WIDE = NetworkSpec((48, 48))  # every hidden product at least gemm.THIN wide: oneDNN's
SMALL = {"n_quantiles": 7}  # keeps the reference's [n, B, Q, K] loss quick
CASES = [{}, {"ent_coef": 0.05}, {"n_critics": 3}, {"n_critics": 3, "ent_coef": 0.05},
         {"top_quantiles_to_drop_per_net": 0}, {"n_critics": 1, "clip": 0.5},
         {"target_update_interval": 2, "ent_coef": "auto_0.3", "target_entropy": -0.5}]


def make(cls: type[TQCAgent], seed: int = 0, kernel: str = "auto", net: NetworkSpec = TINY,
         **options) -> TQCAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=net, critic_net=net,
                            seed=seed, grad_clip_norm=options.pop("clip", None),
                            matmul_kernel=kernel)
    return cls(3, LOW, HIGH, common, TQCOptions(**{**SMALL, **options}), CPU)


def weights(agent: TQCAgent) -> list[torch.Tensor]:
    return [p.detach().clone() for module in (agent.actor, agent.critic, agent.critic_target)
            for p in module.parameters()] + [agent.log_ent_coef.detach().clone()]


def assert_agree(fused: TQCAgent, reference: TQCAgent, updates: int, first: int = 0) -> None:
    batches = [make_batch(seed=seed) for seed in range(first, first + updates)]
    assert_updates_agree(fused, reference, batches, weights)


@pytest.mark.parametrize("kernel", gemm.available())
@pytest.mark.parametrize("options", CASES)
def test_the_fused_update_agrees_with_autograds_after_many_updates(options, kernel):
    fused = make(FusedTQCAgent, kernel=kernel, net=WIDE, **dict(options))
    assert fused.products.kind == kernel
    reference = make(TQCAgent, net=WIDE, **dict(options))
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(reference),
                                                strict=True))
    assert_agree(fused, reference, 100)
    moved = max(float((a - b).abs().max()) for a, b in
                zip(weights(reference), weights(make(TQCAgent, net=WIDE, **dict(options))),
                    strict=True))
    assert moved > 1e-2  # they agree after real learning, not because nothing moved


@pytest.mark.parametrize("levels, atoms", [(7, 9), (25, 46), (1, 3)])
def test_the_quantile_loss_and_its_gradient_are_autograds(levels, atoms):
    g = torch.Generator().manual_seed(levels)
    # Spread wide enough that some deltas are past the Huber threshold, some within it,
    # and some atoms equal their quantile (delta 0).
    quantiles = torch.randn(16, levels, generator=g) * 2.0
    target = torch.randn(16, atoms, generator=g) * 2.0
    target[:, 0] = quantiles[:, 0]
    work = torch.empty(3, 16, levels, atoms)
    total, grad = quantile_huber_sum(quantiles, target, quantile_levels(levels, target), work)

    leaf = quantiles.clone().requires_grad_(True)
    loss = quantile_huber_loss(leaf.unsqueeze(0), target)  # one critic
    (expected_grad,) = torch.autograd.grad(loss, leaf)
    count = quantiles.numel() * atoms
    torch.testing.assert_close(total / count, loss.detach())
    torch.testing.assert_close(grad / count, expected_grad)
    # Both sides of the quantile carry weight: not a symmetric (levels-blind) loss.
    assert float(expected_grad.abs().max()) > 0


def test_the_quantile_loss_is_the_same_in_a_used_buffer():
    g = torch.Generator().manual_seed(0)
    quantiles, target = torch.randn(8, 5, generator=g), torch.randn(8, 6, generator=g)
    levels = quantile_levels(5, target)
    fresh = quantile_huber_sum(quantiles, target, levels, torch.zeros(3, 8, 5, 6))
    used = quantile_huber_sum(quantiles, target, levels, torch.full((3, 8, 5, 6), 7.0))
    assert all(torch.equal(a, b) for a, b in zip(fresh, used, strict=True))


@pytest.mark.parametrize("kernel", gemm.available())
@pytest.mark.parametrize("options", [{}, {"n_critics": 3, "top_quantiles_to_drop_per_net": 0}])
def test_it_continues_bit_for_bit_from_its_state_dict(kernel, options):
    straight, first = (make(FusedTQCAgent, kernel=kernel, net=WIDE, **dict(options))
                       for _ in range(2))
    for seed in range(20):
        straight.update(make_batch(seed=seed))
    for seed in range(8):
        first.update(make_batch(seed=seed))
    resumed = make(FusedTQCAgent, seed=3, net=WIDE, **dict(options))  # auto: the saved kernel
    resumed.products = gemm.Products(next(k for k in gemm.GEMMS if k != kernel))
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    assert resumed.products.kind == kernel
    for seed in range(8, 20):
        resumed.update(make_batch(seed=seed))
    assert all(torch.equal(a, b) for a, b in zip(weights(straight), weights(resumed),
                                                strict=True))


@pytest.mark.parametrize("source, destination", [(FusedTQCAgent, TQCAgent),
                                                 (TQCAgent, FusedTQCAgent),
                                                 (FusedTQCAgent, FlatTQCAgent)])
def test_a_checkpoint_moves_between_the_fused_and_the_autograd_update(source, destination):
    trained = make(source)
    for seed in range(5):
        trained.update(make_batch(seed=seed))
    state = trained.state_dict()
    assert set(state) - {"gemm"} == set(make(TQCAgent).state_dict())
    loaded = make(destination, seed=9)
    loaded.load_state_dict(copy.deepcopy(state))
    assert loaded.updates == 5
    assert all(torch.equal(a, b) for a, b in zip(weights(trained), weights(loaded),
                                                strict=True))
    assert_agree(trained, loaded, 10, first=5)  # optimiser moments and stream went along


@pytest.mark.parametrize("options", [{}, {"ent_coef": 0.05}])
def test_the_flat_adam_gives_the_autograd_update_bit_for_bit(options):
    flat, reference = make(FlatTQCAgent, **options), make(TQCAgent, **options)
    for seed in range(5):
        ours, theirs = flat.update(make_batch(seed=seed)), reference.update(make_batch(seed=seed))
        assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in theirs.items()}
    assert all(torch.equal(a, b) for a, b in zip(weights(flat), weights(reference),
                                                strict=True))


@pytest.mark.parametrize("backend, networks, expected", [
    ("auto", {}, FusedTQCAgent),
    ("fused", {}, FusedTQCAgent),
    ("autograd", {}, TQCAgent),
    ("auto", {"critic": {"layer_norm": True}}, FlatTQCAgent),
    ("auto", {"actor": {"activation": "tanh"}}, FlatTQCAgent)])
def test_the_config_picks_the_update(backend, networks, expected):
    config = config_from_dict({"algo": "tqc", "hidden_sizes": [8], "update_backend": backend,
                               "networks": networks})
    agent, warning = build_agent(config, 3, LOW, HIGH, CPU)
    assert type(agent) is expected and warning is None


def test_the_probes_see_the_fused_agent_as_the_autograd_one_and_change_nothing():
    fused, twin = make(FusedTQCAgent), make(FusedTQCAgent)
    for seed in range(5):
        fused.update(make_batch(seed=seed))
        twin.update(make_batch(seed=seed))
    reference = make(TQCAgent, seed=9)
    reference.load_state_dict(copy.deepcopy(fused.state_dict()))
    batch = make_batch(seed=50)
    for ours, theirs in zip(fused.probe_losses(batch), reference.probe_losses(batch),
                            strict=True):
        torch.testing.assert_close(ours, theirs)
    probe, expected = gradient_probe(fused, batch), gradient_probe(reference, batch)
    assert probe.critic_layers.keys() == expected.critic_layers.keys()
    assert probe.actor_layers.keys() == expected.actor_layers.keys()
    for key, value in expected.health_metrics().items():
        assert probe.health_metrics()[key] == pytest.approx(value, rel=1e-5), key
    assert all(norm is not None and norm > 0 for norm in probe.critic_layers.values())
    assert all(norm is not None and norm > 0 for norm in probe.actor_layers.values())
    # The probes drew nothing from the agent's stream and left its buffers as they were.
    for seed in range(5, 8):
        fused.update(make_batch(seed=seed))
        twin.update(make_batch(seed=seed))
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(twin), strict=True))
