"""SAC's hand-written update (agents/sac_fused.py) computes the autograd update
(agents/sac_update.py), continues bit for bit from its own state_dict, and shares its
checkpoints with the other backends."""

from __future__ import annotations

import copy

import pytest
import torch
from test_sac import HIGH, LOW, TINY, make_batch

from rltrain.agents import gemm
from rltrain.agents.base import CommonSettings
from rltrain.agents.registry import SACOptions
from rltrain.agents.sac import build
from rltrain.agents.sac_fused import FusedSACAgent
from rltrain.agents.sac_update import SACAgent
from rltrain.networks.mlp import NetworkSpec

from conftest import assert_updates_agree

CPU = torch.device("cpu")
WIDE = NetworkSpec((48, 48))  # every hidden product at least gemm.THIN wide: oneDNN's
CASES = [{}, {"ent_coef": 0.05}, {"clip": 0.5}, {"target_update_interval": 2},
         {"ent_coef": "auto_0.3", "target_entropy": -0.5}]


def make(cls: type[SACAgent], seed: int = 0, kernel: str = "auto", net: NetworkSpec = TINY,
         **options) -> SACAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=net, critic_net=net,
                            seed=seed, grad_clip_norm=options.pop("clip", None),
                            matmul_kernel=kernel)
    return cls(3, LOW, HIGH, common, SACOptions(**options), CPU)


def weights(agent: SACAgent) -> list[torch.Tensor]:
    return [p.detach().clone() for module in (agent.actor, agent.critic, agent.critic_target)
            for p in module.parameters()] + [agent.log_ent_coef.detach().clone()]


def assert_agree(fused: SACAgent, reference: SACAgent, updates: int) -> None:
    assert_updates_agree(fused, reference, [make_batch(seed=seed) for seed in range(updates)],
                         weights)


@pytest.mark.parametrize("kernel", gemm.available())
@pytest.mark.parametrize("options", CASES)
def test_the_fused_update_agrees_with_autograds_after_many_updates(options, kernel):
    fused = make(FusedSACAgent, kernel=kernel, net=WIDE, **dict(options))
    assert fused.products.kind == kernel
    reference = make(SACAgent, net=WIDE, **dict(options))
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(reference),
                                                strict=True))
    assert_agree(fused, reference, 150)
    moved = max(float((a - b).abs().max()) for a, b in
                zip(weights(reference), weights(make(SACAgent, net=WIDE, **dict(options))),
                    strict=True))
    assert moved > 1e-2  # they agree after real learning, not because nothing moved


def test_a_clamped_log_std_gets_no_gradient_in_either():
    # A log-std head biased far above its upper clamp: the reference's clamp passes no
    # gradient to it, so its weights move only through Adam's zero steps.
    fused, reference = make(FusedSACAgent), make(SACAgent)
    for agent in (fused, reference):
        with torch.no_grad():
            agent.actor.log_std.bias.fill_(50.0)
    before = fused.actor.log_std.weight.detach().clone()
    assert_agree(fused, reference, 20)
    assert torch.equal(fused.actor.log_std.weight, before)


@pytest.mark.parametrize("kernel", gemm.available())
def test_it_continues_bit_for_bit_from_its_state_dict(kernel):
    straight, first = (make(FusedSACAgent, kernel=kernel, net=WIDE) for _ in range(2))
    for seed in range(30):
        straight.update(make_batch(seed=seed))
    for seed in range(12):
        first.update(make_batch(seed=seed))
    resumed = make(FusedSACAgent, seed=3, net=WIDE)  # auto: takes the checkpoint's kernel
    resumed.products = gemm.Products(next(k for k in gemm.GEMMS if k != kernel))
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    assert resumed.products.kind == kernel
    for seed in range(12, 30):
        resumed.update(make_batch(seed=seed))
    assert all(torch.equal(a, b) for a, b in zip(weights(straight), weights(resumed),
                                                strict=True))


def test_a_checkpoint_moves_between_the_fused_and_the_autograd_update():
    fused = make(FusedSACAgent)
    for seed in range(5):
        fused.update(make_batch(seed=seed))
    reference = make(SACAgent, seed=9)
    reference.load_state_dict(copy.deepcopy(fused.state_dict()))
    assert all(torch.equal(a, b) for a, b in zip(weights(fused), weights(reference),
                                                strict=True))
    assert_agree(fused, reference, 10)


def test_auto_takes_the_fused_update_for_the_stock_networks_on_the_cpu():
    auto, _ = build(3, LOW, HIGH, CommonSettings(), SACOptions(), CPU, "auto")
    assert type(auto) is FusedSACAgent


def test_a_resume_that_learns_a_fixed_temperature_starts_from_the_configs():
    # The fixed temperature's optimiser never stepped: its state is empty, as torch's.
    fixed = make(FusedSACAgent, ent_coef=0.001)
    for seed in range(3):
        fixed.update(make_batch(seed=seed))
    assert fixed.state_dict()["ent_coef_optimizer"]["state"] == {}
    learnt = make(FusedSACAgent, ent_coef="auto_0.2")
    learnt.load_state_dict(copy.deepcopy(fixed.state_dict()))
    assert float(learnt.log_ent_coef.detach().exp()) == pytest.approx(0.2)
    # A checkpoint whose flat Adam kept an unstepped state (step 0), as older ones did
    older = copy.deepcopy(fixed.state_dict())
    older["ent_coef_optimizer"]["state"] = {0: {"step": torch.tensor(0.0),
                                                "exp_avg": torch.zeros(1),
                                                "exp_avg_sq": torch.zeros(1)}}
    learnt = make(FusedSACAgent, ent_coef="auto_0.2")
    learnt.load_state_dict(older)
    assert float(learnt.log_ent_coef.detach().exp()) == pytest.approx(0.2)
