"""The update maths: TD target, critic/actor steps, soft update, TD3 options, clipping.

Every test runs on both update backends (autograd and fused), which must behave alike;
tests/test_backends.py checks that they also compute the same numbers."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from rltrain.agents.deterministic import DDPGAgent
from rltrain.scripts.training.agent_setup import build_agent
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

from conftest import DEVICE

LOW, HIGH = np.array([-2.0], dtype=np.float32), np.array([2.0], dtype=np.float32)


BACKEND = "autograd"  # set per test by the autouse fixture below


@pytest.fixture(autouse=True, params=["autograd", "fused"])
def backend(request, monkeypatch):
    monkeypatch.setitem(globals(), "BACKEND", request.param)
    return request.param


def make_agent(**overrides) -> DDPGAgent:
    torch.manual_seed(0)
    config = config_from_dict({"hidden_sizes": [8, 8], "seed": 0,
                               "update_backend": BACKEND, **overrides})
    agent, warning = build_agent(config, 3, LOW, HIGH, DEVICE)
    assert warning is None
    return agent


def make_batch(n: int = 16, terminated: float = 0.0) -> Batch:
    g = torch.Generator().manual_seed(1)
    columns = (torch.randn(n, 3, generator=g), torch.rand(n, 1, generator=g) * 4 - 2,
               torch.randn(n, 1, generator=g), torch.randn(n, 3, generator=g),
               torch.full((n, 1), terminated))
    return Batch(*(column.to(DEVICE) for column in columns))


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("terminated", [0.0, 1.0])
def test_td_target_in_a_known_tiny_case(terminated):
    agent = make_agent(gamma=0.9)
    with torch.no_grad():  # target critics output only their last bias: 2.0 and -3.0
        agent.critic_target.layers[-1].weight.zero_()
        agent.critic_target.layers[-1].bias.copy_(torch.tensor([[[2.0]], [[-3.0]]]))
    batch = make_batch(terminated=terminated)
    target = agent.td_target(batch)
    # min of the twin targets is -3; a truncated (not terminated) transition bootstraps.
    expected = batch.rewards + 0.9 * (1 - terminated) * -3.0
    assert torch.allclose(target, expected)


def test_critic_loss_is_the_sum_of_both_critics_mse():
    agent = make_agent()
    batch = make_batch()
    with torch.no_grad():
        target = agent.td_target(batch)
        q = agent.critic(batch.obs, batch.actions)
        expected = ((q[0] - target) ** 2).mean() + ((q[1] - target) ** 2).mean()
    metrics = agent._critic_step(batch)
    assert torch.allclose(metrics["critic_loss"], expected)


def test_actor_step_computes_no_gradient_for_the_critic():
    agent = make_agent()
    batch = make_batch()
    critic_before = params(agent.critic)
    for p in agent.critic.parameters():
        p.grad = None
    agent._actor_step(batch.obs)
    assert all(p.grad is None for p in agent.critic.parameters())
    assert all(p.grad is not None for p in agent.actor.parameters())
    assert same(critic_before, params(agent.critic))
    assert all(p.requires_grad for p in agent.critic.parameters())  # unfrozen afterwards


def test_soft_update_follows_the_polyak_formula():
    agent = make_agent(tau=0.1)
    online_before, target_before = params(agent.actor), params(agent.actor_target)
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.add_(1.0)
    agent._soft_update_targets()
    for online, target, after in zip(online_before, target_before, params(agent.actor_target),
                                     strict=True):
        assert torch.allclose(after, 0.1 * (online + 1.0) + 0.9 * target, atol=1e-6)


def test_ddpg_updates_actor_and_targets_every_step():
    agent = make_agent()
    metrics = agent.update(make_batch())
    assert set(metrics) == {"critic_loss", "q_mean", "critic_grad_norm", "actor_loss",
                            "actor_grad_norm"}
    assert not same(params(agent.actor), params(agent.actor_target))


def test_td3_delays_the_actor_and_smooths_targets():
    agent = make_agent(algo="td3", td3={"policy_delay": 2, "target_policy_noise": 0.2})
    actor_before = params(agent.actor)
    first = agent.update(make_batch())
    assert "actor_loss" not in first
    assert same(actor_before, params(agent.actor))
    second = agent.update(make_batch())
    assert "actor_loss" in second
    assert not same(actor_before, params(agent.actor))
    batch = make_batch()  # smoothing noise makes two targets of the same batch differ
    assert not torch.equal(agent.td_target(batch), agent.td_target(batch))


def test_clipping_bounds_the_gradient_and_reports_the_norm_before_clipping():
    agent = make_agent(grad_clip_norm=1e-3)
    batch = make_batch()
    metrics = agent._critic_step(batch)
    clipped = torch.linalg.vector_norm(
        torch.stack([p.grad.norm() for p in agent.critic.parameters()]))
    assert metrics["critic_grad_norm"] > 1e-3
    assert clipped <= 1e-3 * 1.001


def test_without_clipping_the_gradient_is_untouched():
    agent = make_agent(grad_clip_norm=None)
    reference = copy.deepcopy(agent.critic)
    batch = make_batch()
    metrics = agent._critic_step(batch)
    with torch.no_grad():
        target = agent.td_target(batch)  # targets did not move in a critic-only step
    q = reference(batch.obs, batch.actions)
    loss = ((q - target) ** 2).mean(dim=(1, 2)).sum()
    grads = torch.autograd.grad(loss, list(reference.parameters()))
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    assert torch.allclose(metrics["critic_grad_norm"], norm, rtol=1e-5)


def test_agent_state_round_trips():
    a, b = make_agent(), make_agent(seed=5)
    a.update(make_batch())
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert b.updates == 1
    ma, mb = a.update(make_batch()), b.update(make_batch())
    assert all(torch.equal(ma[k], mb[k]) for k in ma)
    assert same(params(a.critic), params(b.critic))


def test_the_fast_adam_step_equals_torch_optim_adam():
    agent = make_agent(grad_clip_norm=None)
    reference = copy.deepcopy(agent.critic)
    optimizer = torch.optim.Adam(reference.parameters(), lr=agent.settings.critic_lr)
    for i in range(4):
        batch = make_batch()
        with torch.no_grad():
            target = agent.td_target(batch)
        agent._critic_step(batch)
        loss = ((reference(batch.obs, batch.actions) - target) ** 2).mean(dim=(1, 2)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for ours, theirs in zip(agent.critic.parameters(), reference.parameters(), strict=True):
            assert torch.allclose(ours, theirs, atol=1e-6), i
    state = agent.critic_opt.state_dict()["state"][0]
    assert float(state["step"]) == 4


@pytest.mark.parametrize("field, untouched", [("rewards", ("critic",)),
                                               ("obs", ("critic", "actor"))])
def test_a_nan_loss_leaves_weights_and_adam_state_untouched(field, untouched):
    agent = make_agent()
    agent.update(make_batch())  # Adam state exists from here on
    before = copy.deepcopy(agent.state_dict())
    bad = make_batch()
    bad = bad._replace(**{field: torch.full_like(getattr(bad, field), float("nan"))})
    metrics = agent.update(bad)
    assert not torch.isfinite(metrics["critic_loss"])
    after = agent.state_dict()
    for net in untouched:
        assert all(torch.equal(before[net][k], after[net][k]) for k in before[net])
        key = f"{net}_optimizer"
        for index, state in before[key]["state"].items():
            for name, value in state.items():
                assert torch.equal(value, after[key]["state"][index][name]), (key, name)
    agent.update(make_batch())  # and learning continues afterwards
    assert float(agent.state_dict()["critic_optimizer"]["state"][0]["step"]) == 2


class HostReads(TorchFunctionMode):
    """Records the calls that, on CUDA, make the host wait for the device: a value read
    back (`.item()`, `bool(t)`, `float(t)`, `.tolist()`, `.numpy()`, `.cpu()`) or an op
    whose output shape depends on the data (`nonzero`, masked selection, a boolean index).
    On CPU they wait for nothing, so a CPU test can only find them by their calls."""

    READS = {"item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__",
             "__index__", "nonzero", "argwhere", "masked_select", "unique"}

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        indices = args[1] if name == "__getitem__" and len(args) > 1 else ()
        indices = indices if isinstance(indices, tuple) else (indices,)
        if name in self.READS or any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                     for i in indices):
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def test_the_host_read_recorder_sees_the_usual_syncs():
    t = torch.arange(4.0)
    with HostReads() as reads:
        t.sum().item()
        bool(t[0])
        t[t > 1]
        t.tolist()
        t[1:]  # a plain slice is no read
    assert reads.calls == ["item", "__bool__", "__getitem__", "tolist"]


@contextlib.contextmanager
def cuda_syncs_raise():
    """On CUDA, any synchronisation of the host with the device raises inside (torch's
    sync debug mode); on the CPU there is nothing to synchronise, and HostReads checks."""
    if DEVICE.type != "cuda":
        yield
        return
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("overrides", [
    {"algo": "ddpg"}, {"algo": "td3", "td3": {"policy_delay": 2, "target_policy_noise": 0.2}}])
def test_sampling_and_updating_never_read_a_value_back_to_the_host(overrides):
    # On CUDA the buffer and the update stay on the device and the loop reads the
    # metrics once per update: nothing inside may wait for the GPU. The buffer is built
    # as on CUDA (rows staged on the host, copied over before a sample).
    agent = make_agent(**overrides)
    buffer = ReplayBuffer(64, 3, 1, DEVICE, seed=0, staged=True)
    rng = np.random.default_rng(0)
    for _ in range(40):
        buffer.add(rng.normal(size=3), rng.uniform(-2, 2, 1), float(rng.normal()),
                   rng.normal(size=3), False, False)
    # Copying the staged rows over makes the host wait (a copy from pageable memory);
    # in training that copy comes right after `act` has read its action back, when the
    # device has nothing queued, so it is made here before the check starts.
    buffer.flush()
    with HostReads() as reads, cuda_syncs_raise():
        for _ in range(2):  # TD3: the second update steps the actor and the targets
            metrics = agent.update(buffer.sample(16))
    assert reads.calls == []
    assert "actor_loss" in metrics  # the actor step ran inside the recorder
