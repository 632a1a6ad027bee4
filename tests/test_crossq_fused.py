"""CrossQ's hand-written update (agents/crossq_fused.py): the networks' renormalised
passes and their backward against the modules' with autograd, the whole update against
the autograd one (agents/crossq_update.py), resuming bit for bit, checkpoints shared
with the autograd backend, the backend's choice, and the probes. (The batch
renormalisation layer's kernels alone: tests/test_renorm_ops.py.)

The updates are compared in two ways. In double precision the fused update follows the
autograd one for many updates, to 1e-6 (most cases to 1e-11). In single precision, the
one runs train in, the two are compared update by update from the same state: over many
updates two float32 CrossQ runs part at the rounding's level whatever computes them, as
a bias before a batch normalisation whose ReLU passes every row has a gradient of 0 up
to rounding, which Adam's first steps turn into steps of the learning rate's size (the
autograd update parts so from a copy of itself whose weights differ by 1e-7).
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from test_sac import HIGH, LOW, make_batch

from rltrain.agents import gemm, renorm_ops
from rltrain.agents.base import CommonSettings
from rltrain.agents.crossq import build
from rltrain.agents.crossq_fused import FusedCrossQAgent
from rltrain.agents.crossq_update import CrossQAgent
from rltrain.agents.probes import gradient_probe
from rltrain.agents.registry import CrossQOptions
from rltrain.networks.batch_renorm import D_MAX, R_MAX, BatchRenorm
from rltrain.networks.batch_renorm import training as renorm_training
from rltrain.networks.mlp import NetworkSpec

CPU = torch.device("cpu")
TINY = NetworkSpec((16, 16))
WIDE = NetworkSpec((48, 48))  # every hidden product at least gemm.THIN wide: oneDNN's
# The warm-up all along; r and d from the fifth training pass on; the same with the
# running statistics set far off (d clipped too); policy delays 1 and 3; fixed and
# learnt temperatures; clipping.
CASES = [
    {},
    {"renorm_warmup_steps": 4},
    {"renorm_warmup_steps": 0, "skew": True, "policy_delay": 1},
    {"renorm_warmup_steps": 4, "policy_delay": 1, "ent_coef": 0.05, "clip": 0.5},
    {"policy_delay": 3, "ent_coef": "auto_0.3", "target_entropy": -0.5,
     "batch_norm_momentum": 0.2},
]


def make(cls: type[CrossQAgent], seed: int = 0, kernel: str = "auto", net: NetworkSpec = TINY,
         skew: bool = False, **options) -> CrossQAgent:
    torch.manual_seed(seed)
    common = CommonSettings(actor_lr=1e-3, critic_lr=1e-3, actor_net=net, critic_net=net,
                            seed=seed, grad_clip_norm=options.pop("clip", None),
                            matmul_kernel=kernel)
    agent = cls(3, LOW, HIGH, common, CrossQOptions(**options), CPU)
    if skew:
        skew_running_statistics(agent)
    return agent


def skew_running_statistics(agent: CrossQAgent) -> None:
    """Running means of +-8 and variances of 4 in every layer (the same in every agent):
    far enough from the batches' for r and d to be clipped."""
    for module in renorms(agent):
        with torch.no_grad():
            signs = torch.ones_like(module.running_mean)
            signs[..., 1::2] = -1.0
            module.running_mean.copy_(8.0 * signs)
            module.running_var.fill_(4.0)


def renorms(agent: CrossQAgent) -> list[BatchRenorm]:
    return [m for net in (agent.actor, agent.critic) for m in net.modules()
            if isinstance(m, BatchRenorm)]


def networks_state(agent: CrossQAgent) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (running statistics, `steps`) of actor and critic."""
    return {f"{name}.{key}": value for name, net in agent.networks().items()
            for key, value in net.state_dict().items()}


def assert_states_close(ours: CrossQAgent, theirs: CrossQAgent, **tolerance) -> None:
    mine, reference = networks_state(ours), networks_state(theirs)
    assert mine.keys() == reference.keys()
    for key, value in mine.items():
        torch.testing.assert_close(value, reference[key], msg=key, **tolerance)
    torch.testing.assert_close(ours.log_ent_coef, theirs.log_ent_coef, **tolerance)


class ClipCounter:
    """Counts, over the training passes after their warm-up, the features whose r or d
    the layers clip (forward pre-hooks on a module-based agent's layers)."""

    def __init__(self, agent: CrossQAgent) -> None:
        self.r = self.d = 0
        for module in renorms(agent):
            module.register_forward_pre_hook(self._count)

    def _count(self, module: BatchRenorm, args: tuple[torch.Tensor]) -> None:
        if not module.training or module.steps < module.settings.warmup_steps:
            return
        (x,) = args
        eps = module.settings.eps
        running_std = (module.running_var + eps).sqrt()
        r = (x.var(dim=-2, keepdim=True) + eps).sqrt() / running_std
        d = (x.mean(dim=-2, keepdim=True) - module.running_mean) / running_std
        self.r += int(((r < 1 / R_MAX) | (r > R_MAX)).sum())
        self.d += int((d.abs() > D_MAX).sum())


# -------------------------------------------------------------- the networks
def modes(net: torch.nn.Module, training: bool) -> contextlib.AbstractContextManager:
    """`net` in a training pass that moves nothing (`training`), else as it is (eval)."""
    return renorm_training(net, track=False) if training else contextlib.nullcontext()


@pytest.mark.parametrize("training", [True, False])
def test_the_critics_passes_and_backward_are_the_modules(training, double_precision):
    """The kernels' views of the critics run as the module does, with batch statistics (r
    and d clipped) or the running ones, and backpropagate as autograd does: into the
    weights, or into the action (what the actor's step reads)."""
    fused = make(FusedCrossQAgent, kernel="blas", renorm_warmup_steps=0, skew=True)
    reference = make(CrossQAgent, renorm_warmup_steps=0, skew=True)
    batch = make_batch(n=24, seed=3)
    actions = batch.actions.clone().requires_grad_(True)
    grad_q = torch.randn(2, 24, 1, generator=torch.Generator().manual_seed(8))
    with modes(reference.critic, training):
        q = reference.critic(batch.obs, actions)  # [2, 24, 1]
    (q * grad_q).sum().backward()
    with torch.no_grad():
        x = fused.critic.inputs(batch.obs, batch.actions)
        passes = [renorm_ops.forward(member, x, fused.products, training)
                  for member in fused._critics]
        torch.testing.assert_close(torch.stack([q for q, _ in passes]), q, rtol=1e-12,
                                   atol=1e-12)
        grads = [renorm_ops.backward(member, tape, grad, fused.products,
                                     member_grads if training else None)
                 for (_, tape), member, member_grads, grad in zip(
                     passes, fused._critics, fused._critic_grads, grad_q, strict=True)]
    if training:
        for ours, param in zip(fused.critic_opt.grads, reference.critic.parameters(),
                               strict=True):
            torch.testing.assert_close(ours, param.grad, rtol=1e-9, atol=1e-12)
    else:
        grad_x = grads[0] + grads[1]
        torch.testing.assert_close(grad_x[:, 3:] / fused.critic.action_scale, actions.grad,
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("training", [True, False])
def test_the_actors_hidden_pass_and_backward_are_the_modules(training, double_precision):
    fused = make(FusedCrossQAgent, kernel="blas", renorm_warmup_steps=0, skew=True)
    reference = make(CrossQAgent, renorm_warmup_steps=0, skew=True)
    obs = make_batch(n=24, seed=3).obs.requires_grad_(True)
    grad_latent = torch.randn(24, 16, generator=torch.Generator().manual_seed(9))
    with modes(reference.actor, training):
        latent_ref = reference.actor.latent(obs)
    (latent_ref * grad_latent).sum().backward()
    with torch.no_grad():
        latent, tape = renorm_ops.forward(fused._actor, obs, fused.products, training)
        torch.testing.assert_close(latent, latent_ref, rtol=1e-12, atol=1e-12)
        grad_obs = renorm_ops.backward(fused._actor, tape, grad_latent, fused.products,
                                       fused._actor_grads if training else None)
    if training:
        for ours, (name, param) in zip(fused.actor_opt.grads,
                                       reference.actor.named_parameters(), strict=True):
            if name.startswith("latent."):  # the heads' are max_entropy_ops'
                torch.testing.assert_close(ours, param.grad, rtol=1e-9, atol=1e-12)
    else:
        torch.testing.assert_close(grad_obs, obs.grad, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------- the update
@pytest.mark.parametrize("options", CASES)
def test_in_double_precision_it_computes_the_autograd_update(options, double_precision):
    fused = make(FusedCrossQAgent, kernel="blas", **dict(options))
    reference = make(CrossQAgent, **dict(options))
    counter = ClipCounter(reference)
    # In double precision the two agree to 1e-11 in most cases; the skewed one's
    # saturated tanh amplifies rounding (through 2 s / (1 - s^2 + 1e-6)) to 1e-8.
    for seed in range(60):
        batch = make_batch(seed=seed)
        ours, theirs = fused.update(batch), reference.update(batch)
        assert ours.keys() == theirs.keys()
        for key in ours:
            torch.testing.assert_close(ours[key], theirs[key], rtol=1e-6, atol=1e-8, msg=key)
    assert_states_close(fused, reference, rtol=1e-6, atol=1e-8)
    moved = max(float((a - b).abs().max()) for a, b in
                zip(networks_state(reference).values(),
                    networks_state(make(CrossQAgent, **dict(options))).values(), strict=True)
                if a.is_floating_point())
    assert moved > 1e-2  # they agree after real learning, not because nothing moved
    if options.get("renorm_warmup_steps") is not None:
        assert counter.r > 0  # the clipping of r is exercised (and of d where skewed)
        assert counter.d > 0 or not options.get("skew")


@pytest.mark.parametrize("kernel", gemm.available())
@pytest.mark.parametrize("options", [CASES[3], CASES[4]])
def test_each_update_agrees_with_autograds_in_single_precision(options, kernel):
    fused = make(FusedCrossQAgent, kernel=kernel, net=WIDE, **dict(options))
    assert fused.products.kind == kernel
    reference = make(CrossQAgent, net=WIDE, **dict(options))
    for seed in range(24):
        fused.load_state_dict(copy.deepcopy(reference.state_dict()))  # the same start
        batch = make_batch(seed=seed)
        ours, theirs = fused.update(batch), reference.update(batch)
        assert ours.keys() == theirs.keys()
        for key in ours:
            torch.testing.assert_close(ours[key], theirs[key], rtol=1e-3, atol=1e-5, msg=key)
        stepped = [("critic", fused.critic_opt)] + (
            [("actor", fused.actor_opt)] if "actor_loss" in ours else [])
        for name, optimiser in stepped:
            for grad, param in zip(optimiser.grads, reference.networks()[name].parameters(),
                                   strict=True):
                scale = float(param.grad.abs().max())
                torch.testing.assert_close(grad, param.grad, rtol=0.0, atol=1e-3 * scale + 1e-7)
        buffers, expected = networks_state(fused), networks_state(reference)
        for key in buffers:
            if "running" in key or key.endswith("steps"):
                torch.testing.assert_close(buffers[key], expected[key], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------ checkpoints, backends
@pytest.mark.parametrize("kernel", gemm.available())
def test_it_continues_bit_for_bit_from_its_state_dict(kernel):
    options = {"renorm_warmup_steps": 8, "policy_delay": 2}
    straight, first = (make(FusedCrossQAgent, kernel=kernel, net=WIDE, **options)
                       for _ in range(2))
    for seed in range(25):
        straight.update(make_batch(seed=seed))
    for seed in range(11):  # an odd count: the actor is due on the next update
        first.update(make_batch(seed=seed))
    resumed = make(FusedCrossQAgent, seed=3, net=WIDE, **options)  # auto: the saved kernel
    resumed.products = gemm.Products(next(k for k in gemm.GEMMS if k != kernel))
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    assert resumed.products.kind == kernel
    for seed in range(11, 25):
        resumed.update(make_batch(seed=seed))
    mine, theirs = networks_state(resumed), networks_state(straight)
    assert all(torch.equal(value, theirs[key]) for key, value in mine.items())
    assert torch.equal(resumed.actor_opt.exp_avg, straight.actor_opt.exp_avg)


def test_its_checkpoint_has_the_autograd_ones_layout():
    # policy_delay 1: every optimiser has stepped, so their states have a layout to compare
    fused, reference = make(FusedCrossQAgent, policy_delay=1), make(CrossQAgent, policy_delay=1)
    batch = make_batch()
    fused.update(batch)
    reference.update(batch)
    ours, theirs = fused.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() | {"gemm"}
    for key in ("actor", "critic"):
        assert ours[key].keys() == theirs[key].keys()  # running statistics and steps too
    for key in ("actor_optimizer", "critic_optimizer", "ent_coef_optimizer"):
        group, expected = ours[key]["param_groups"][0], theirs[key]["param_groups"][0]
        assert group.keys() == expected.keys() and group["betas"] == expected["betas"]
        assert ours[key]["state"].keys() == theirs[key]["state"].keys() != set()
        for index, entry in ours[key]["state"].items():
            assert entry.keys() == theirs[key]["state"][index].keys()
    assert ours["actor_optimizer"]["param_groups"][0]["betas"] == (0.5, 0.999)
    assert ours["ent_coef_optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)


@pytest.mark.parametrize("source, target", [(FusedCrossQAgent, CrossQAgent),
                                            (CrossQAgent, FusedCrossQAgent)])
def test_a_checkpoint_moves_between_the_fused_and_the_autograd_update(source, target,
                                                                      double_precision):
    options = {"renorm_warmup_steps": 3, "policy_delay": 2}
    trained = make(source, kernel="blas", **options)
    for seed in range(5):
        trained.update(make_batch(seed=seed))
    loaded = make(target, seed=9, kernel="blas", **options)
    assert loaded.load_state_dict(copy.deepcopy(trained.state_dict()))
    assert_states_close(loaded, trained, rtol=0.0, atol=0.0)
    for seed in range(5, 12):  # the optimisers' moments and the random stream continue
        ours, theirs = loaded.update(make_batch(seed=seed)), trained.update(make_batch(seed=seed))
        for key in ours:
            torch.testing.assert_close(ours[key], theirs[key], rtol=1e-9, atol=1e-12, msg=key)
    assert_states_close(loaded, trained, rtol=1e-9, atol=1e-12)


def test_auto_takes_the_fused_update_for_the_stock_networks_on_the_cpu():
    agent, warning = build(3, LOW, HIGH, CommonSettings(), CrossQOptions(), CPU, "auto")
    assert type(agent) is FusedCrossQAgent and warning is None
    custom = CommonSettings(actor_net=NetworkSpec((16,), activation="tanh"))
    agent, warning = build(3, LOW, HIGH, custom, CrossQOptions(), CPU, "auto")
    assert type(agent) is CrossQAgent and warning is None
    agent, _ = build(3, LOW, HIGH, CommonSettings(), CrossQOptions(), CPU, "autograd")
    assert type(agent) is CrossQAgent


# ------------------------------------------------------------------ probes
@pytest.mark.parametrize("rows", [32, 8])  # a batch's, and the gradient noise's small parts
def test_the_probe_reads_the_fused_agent_as_the_autograd_one_and_changes_nothing(rows):
    # Past the renormalisation's warm-up: r and d correct the batch statistics
    options = {"renorm_warmup_steps": 2, "policy_delay": 1}
    probed, twin = make(FusedCrossQAgent, **options), make(FusedCrossQAgent, **options)
    for seed in range(4):
        for agent in (probed, twin):
            agent.update(make_batch(seed=seed))
    reference = make(CrossQAgent, seed=5, **options)
    reference.load_state_dict(copy.deepcopy(probed.state_dict()))
    before = copy.deepcopy(probed.state_dict())
    grads_before = [opt.grad.clone() for opt in (probed.actor_opt, probed.critic_opt)]
    batch = make_batch(n=rows, seed=9)
    ours, theirs = gradient_probe(probed, batch), gradient_probe(reference, batch)
    assert ours.critic_loss == pytest.approx(theirs.critic_loss, rel=1e-6)
    assert ours.q_mean == pytest.approx(theirs.q_mean, rel=1e-6)
    assert ours.actor_loss == pytest.approx(theirs.actor_loss, rel=1e-6)
    assert ours.critic_layers == pytest.approx(theirs.critic_layers, rel=1e-5)
    assert ours.actor_layers == pytest.approx(theirs.actor_layers, rel=1e-5)
    after = probed.state_dict()
    for key in ("actor", "critic"):
        assert all(torch.equal(value, after[key][name]) for name, value in before[key].items())
    assert torch.equal(before["agent_generator"], after["agent_generator"])
    assert all(torch.equal(a, opt.grad) for a, opt in zip(
        grads_before, (probed.actor_opt, probed.critic_opt), strict=True))
    for seed in range(4, 7):  # and training goes on as if it had not run
        ours_metrics, twin_metrics = probed.update(make_batch(seed=seed)), twin.update(
            make_batch(seed=seed))
        assert all(torch.equal(ours_metrics[key], twin_metrics[key]) for key in ours_metrics)
