"""A fused agent's probe (`hand_probe`, agents/probes.py) and its reading of the first
critic (`q1`) give what the autograd agent's give on the same weights, and leave the
agent as it was."""

from __future__ import annotations

import copy

import pytest
import torch
from test_backends import batches
from test_backends import make as make_deterministic
from test_sac import make_batch
from test_sac_fused import WIDE
from test_sac_fused import make as make_sac
from test_tqc_fused import make as make_tqc

from rltrain.agents import gemm
from rltrain.agents.fused import FusedDDPGAgent
from rltrain.agents.probes import Probe, gradient_probe
from rltrain.agents.sac_fused import FusedSACAgent
from rltrain.agents.sac_update import SACAgent
from rltrain.agents.tqc_fused import FusedTQCAgent
from rltrain.agents.tqc_update import TQCAgent

RELATIVE = 1e-4  # float32 rounding of two kernels, summed over a layer


def makers(kernel: str) -> list[tuple]:
    """(make a fused agent, make the autograd one, batches of their kind) per algorithm."""
    deterministic = {"hidden_sizes": [48, 48]}
    return [
        (lambda: make_sac(FusedSACAgent, kernel=kernel, net=WIDE),
         lambda: make_sac(SACAgent, net=WIDE), lambda n, seed: [
             make_batch(seed=seed + i) for i in range(n)]),
        (lambda: make_tqc(FusedTQCAgent, kernel=kernel, net=WIDE),
         lambda: make_tqc(TQCAgent, net=WIDE), lambda n, seed: [
             make_batch(seed=seed + i) for i in range(n)]),
        *((lambda algo=algo: make_deterministic("fused", algo=algo, matmul_kernel=kernel,
                                                **deterministic),
           lambda algo=algo: make_deterministic("autograd", algo=algo, **deterministic),
           lambda n, seed: batches(n, seed=seed + 1)) for algo in ("td3", "ddpg"))]


def trained(kernel: str):
    """(fused, autograd) agents with the same weights after some updates of the fused
    one, a batch of their kind, how to make another fused one, and other batches."""
    for make_fused, make_reference, batches_of_its_kind in makers(kernel):
        fused, reference = make_fused(), make_reference()
        train = batches_of_its_kind(25, 0)
        for batch in train[:-1]:
            fused.update(batch)
        reference.load_state_dict(copy.deepcopy(fused.state_dict()))
        yield fused, reference, train[-1], make_fused, batches_of_its_kind


def close(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE * max(abs(b), 1e-6)


def assert_probes_agree(hand: Probe, reference: Probe) -> None:
    for field in ("critic_loss", "actor_loss", "q_mean"):
        assert close(getattr(hand, field), getattr(reference, field)), field
    for layers in ("critic_layers", "actor_layers"):
        mine, theirs = getattr(hand, layers), getattr(reference, layers)
        assert mine.keys() == theirs.keys()
        assert all(close(mine[k], theirs[k]) for k in theirs), (layers, mine, theirs)


@pytest.mark.parametrize("kernel", gemm.available())
def test_a_fused_agents_probe_agrees_with_autograds(kernel):
    kinds = set()
    for fused, reference, batch, _, batches_of_its_kind in trained(kernel):
        kinds.add(type(fused))
        hand = gradient_probe(fused, batch)
        assert_probes_agree(hand, gradient_probe(reference, batch))
        # the gradients are the batch's: another batch gives other norms
        other = gradient_probe(fused, batches_of_its_kind(1, 70)[0])
        assert not close(other.critic_layers["layers.0.weight"],
                         hand.critic_layers["layers.0.weight"])
    assert kinds == {FusedSACAgent, FusedTQCAgent, FusedDDPGAgent}


def test_a_probe_leaves_the_agent_and_its_next_update_as_they_were():
    for fused, _, batch, make_fused, _ in trained("blas"):
        state = copy.deepcopy(fused.state_dict())  # its tensors are the live ones
        grads = [opt.grad.clone() for opt in (fused.actor_opt, fused.critic_opt)]
        gradient_probe(fused, batch)
        assert all(torch.equal(g, opt.grad)
                   for g, opt in zip(grads, (fused.actor_opt, fused.critic_opt), strict=True))
        after = fused.state_dict()
        for net in ("actor", "critic"):
            assert all(torch.equal(state[net][k], after[net][k]) for k in state[net]), net
        assert torch.equal(state["agent_generator"], after["agent_generator"])
        probed = fused.update(batch)
        twin = make_fused()
        twin.load_state_dict(state)
        plain = twin.update(batch)
        assert all(torch.equal(probed[k], plain[k]) for k in plain)


@pytest.mark.parametrize("kernel", gemm.available())
def test_a_fused_agents_q1_agrees_and_keeps_autograd_where_asked(kernel):
    for fused, reference, batch, _, _ in trained(kernel):
        with torch.no_grad():
            mine = fused.q1(batch.obs, batch.actions)
            theirs = reference.critic.q1(batch.obs, batch.actions)
        assert mine.shape == theirs.shape == (len(batch.obs), 1)
        assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-5)
        assert mine.grad_fn is None
        actions = batch.actions.clone().requires_grad_(True)
        with_grad = fused.q1(batch.obs, actions)  # the module's pass, differentiable
        (grad,) = torch.autograd.grad(with_grad.sum(), actions)
        assert float(grad.abs().sum()) > 0


def test_a_tqc_probe_of_another_size_leaves_the_updates_scratch():
    fused = make_tqc(FusedTQCAgent, net=WIDE)
    fused.update(make_batch(seed=0))
    kept = fused._work
    gradient_probe(fused, make_batch(n=8, seed=1))
    assert fused._work is kept and kept.shape[1] == 32  # the update's batch of 32 rows
