"""CrossQ's update with hand-written gradients (`update_backend: fused`), for the stock
ReLU MLPs with CrossQ's batch renormalisation.

The same maths, in the same order and from the same random draws, as
agents/crossq_update.py (the readable reference): the next actions from the policy with
its running statistics; one training pass of the critics on the current and next
state-actions together, the target from its next half, the critics' step on its
current half; every `policy_delay` updates a fresh policy sample in a training pass of
the actor, the temperature's step and the actor's step on the critics with their
running statistics. What differs is how: the batch renormalisation kernels of
agents/renorm_ops.py and the products of agents/gemm.py compute every pass and its
backward, the gradients are written straight into the flat buffers of rltrain's Adam
(agents/fused_ops.py `FlatAdam`, with CrossQ's betas), and no autograd graph is built.
The squashed Gaussian's sample, its backward and the temperature's step are those of
SAC's fused update (agents/max_entropy_ops.py). tests/test_crossq_fused.py checks that
it agrees with the autograd update. The diagnostics' probe (`hand_probe`) runs on the
same kernels; acting, saving and loading are CrossQAgent's; the checkpoint adds the
products' kernel ("gemm").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rltrain.agents import fused_ops, max_entropy_ops, renorm_ops
from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.crossq_update import CrossQAgent, betas
from rltrain.agents.fused_ops import FlatAdamOptimisers, Layer
from rltrain.agents.gemm import KeepsProducts
from rltrain.agents.probes import Probe, probe_from_gradients
from rltrain.agents.registry import CrossQOptions
from rltrain.agents.renorm_ops import RenormStack, StackGrads
from rltrain.agents.sac_update import PROBE_SEED
from rltrain.networks.batch_renorm import BatchRenorm
from rltrain.networks.critic import Critic, EnsembleLinear
from rltrain.networks.gaussian_actor import GaussianActor


class _PolicyPass(NamedTuple):
    """A policy sample and what the actor's backward pass reads of it."""

    sample: max_entropy_ops.Squashed
    latent: torch.Tensor  # the hidden stack's output, the heads' input
    tape: renorm_ops.Tape


class FusedCrossQAgent(KeepsProducts, FlatAdamOptimisers, CrossQAgent):
    """`CrossQAgent` whose update computes its gradients by hand, on `FlatAdam`s."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 common: CommonSettings, options: CrossQOptions,
                 device: torch.device) -> None:
        fused_ops.check_fusable(common.actor_net, common.critic_net)
        super().__init__(obs_dim, action_low, action_high, common, options, device)
        self._choose_products(common.matmul_kernel,
                              (*common.actor_net.hidden_sizes, *common.critic_net.hidden_sizes))
        self._actor_renorms = [m for m in self.actor.modules() if isinstance(m, BatchRenorm)]
        self._critic_renorms = [m for m in self.critic.modules() if isinstance(m, BatchRenorm)]
        with torch.no_grad():
            # Views in the kernels' layout, made once: updates and load_state_dict change
            # the tensors in place.
            self._actor, self._actor_grads, self._heads, self._head_grads = actor_views(
                self.actor, self.actor_opt.grads)
            self._critics, self._critic_grads = critic_views(self.critic,
                                                             self.critic_opt.grads)

    def adam_betas(self, net: nn.Module) -> tuple[float, float]:
        return betas(net)

    @torch.no_grad()
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.updates += 1
        ent_coef = self.log_ent_coef.detach().exp()  # this update's: before its own step
        metrics = self._fused_critic_step(batch, ent_coef)
        if self.updates % self.options.policy_delay == 0:
            # A fresh policy sample on the batch: a training pass of the actor's layers
            policy = self._policy(batch.obs, training=True)
            metrics.update(max_entropy_ops.temperature_step(self, policy.sample.log_prob))
            metrics.update(self._fused_actor_step(batch.obs, policy, ent_coef))
            metrics["ent_coef"] = ent_coef[0]
            metrics["entropy"] = -policy.sample.log_prob.mean()
        return metrics

    @torch.no_grad()
    def hand_probe(self, batch: Batch) -> Probe:
        """agents/probes.py's probe with this update's kernels: the losses of
        `CrossQAgent.probe_losses` (training passes that move no running statistics and
        count none, the policy sampled from the probe's own stream, in its order) and
        their gradients, written into scratch buffers."""
        generator = torch.Generator(device=self.device).manual_seed(PROBE_SEED)
        ent_coef = self.log_ent_coef.detach().exp()
        critic_grads = self.critic_opt.scratch_grads()
        critic_loss, q1 = self._critic_gradients(batch, ent_coef,
                                                 critic_views(self.critic, critic_grads)[1],
                                                 generator, track=False)
        policy = self._policy(batch.obs, training=True, generator=generator, track=False)
        actor_grads = self.actor_opt.scratch_grads()
        _, hidden_grads, _, head_grads = actor_views(self.actor, actor_grads)
        actor_loss = self._actor_gradients(batch.obs, policy, ent_coef, hidden_grads,
                                           head_grads)
        return probe_from_gradients(self.critic, critic_grads, self.actor, actor_grads,
                                    (critic_loss, actor_loss), q1.mean())

    def _policy(self, obs: torch.Tensor, training: bool,
                generator: torch.Generator | None = None, track: bool = True) -> _PolicyPass:
        """A sample of the policy on `obs` (noise from `generator`, the agent's by
        default), from a training pass of its layers (counted and moving their running
        statistics where `track`) or with their running statistics."""
        latent, tape = renorm_ops.forward(self._actor, obs, self.products, training, track)
        if training and track:
            renorm_ops.count_training_pass(self._actor_renorms)
        mean, raw_log_std = max_entropy_ops.heads_forward(self._heads, latent)
        noise = torch.randn(mean.shape, device=mean.device,
                            generator=generator or self.generator)
        return _PolicyPass(max_entropy_ops.squash(mean, raw_log_std, noise), latent, tape)

    def _fused_critic_step(self, batch: Batch,
                           ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        loss, q1 = self._critic_gradients(batch, ent_coef, self._critic_grads)
        grad_norm = self.critic_opt.step(loss, self.settings.grad_clip_norm)
        return {"critic_loss": loss, "q_mean": q1.mean(), "critic_grad_norm": grad_norm}

    def _critic_gradients(self, batch: Batch, ent_coef: torch.Tensor,
                          grads: list[StackGrads], generator: torch.Generator | None = None,
                          track: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the sum of the critics' MSE to the soft TD target, from one training pass
        of the critics over the current and next state-actions (`track`: counted and
        moving their running statistics), its gradient written into `grads` (each
        member's), and the first critic's Q on the current rows [B, 1]."""
        rows = batch.obs.shape[0]
        next_sample = self._policy(batch.next_obs, training=False, generator=generator).sample
        # [s, a; s', a'], actions in the critic's normalised units (a' is tanh's own)
        x = torch.cat([self.critic.inputs(batch.obs, batch.actions),
                       torch.cat([batch.next_obs, next_sample.squashed], dim=-1)])
        passes = [renorm_ops.forward(member, x, self.products, training=True, track=track)
                  for member in self._critics]
        if track:
            renorm_ops.count_training_pass(self._critic_renorms)
        (q1, _), (q2, _) = passes  # [2B, 1] each
        soft_q = torch.minimum(q1[rows:], q2[rows:]) - ent_coef * next_sample.log_prob
        # A time-limit truncation is not the end of the task: bootstrap through it.
        target = batch.rewards + self.settings.gamma * (1.0 - batch.terminated) * soft_q
        losses = []
        for (q, tape), member, member_grads in zip(passes, self._critics, grads, strict=True):
            error = q[:rows] - target
            losses.append(error.square().mean())
            # d(0.5 mean error^2)/dq = error / B on the current rows; the next rows' Q is
            # the target's, a constant, but their inputs still get a gradient through the
            # batch statistics both halves share.
            grad_q = torch.zeros_like(q)
            torch.mul(error, 1.0 / rows, out=grad_q[:rows])
            renorm_ops.backward(member, tape, grad_q, self.products, member_grads)
        return 0.5 * torch.stack(losses).sum(), q1[:rows]

    def _fused_actor_step(self, obs: torch.Tensor, policy: _PolicyPass,
                          ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        loss = self._actor_gradients(obs, policy, ent_coef, self._actor_grads,
                                     self._head_grads)
        grad_norm = self.actor_opt.step(loss, self.settings.grad_clip_norm)
        return {"actor_loss": loss, "actor_grad_norm": grad_norm}

    def _actor_gradients(self, obs: torch.Tensor, policy: _PolicyPass, ent_coef: torch.Tensor,
                         hidden_grads: StackGrads, head_grads: list[Layer]) -> torch.Tensor:
        """The actor's loss on the critics with their running statistics (eval mode: it
        reaches the actor through their input alone), its gradient written into
        `hidden_grads` and `head_grads`."""
        sample = policy.sample
        x = torch.cat([obs, sample.squashed], dim=-1)
        (q1, tape1), (q2, tape2) = (renorm_ops.forward(member, x, self.products, training=False)
                                    for member in self._critics)
        loss = (ent_coef * sample.log_prob - torch.minimum(q1, q2)).mean()
        grad_q1, grad_q2 = max_entropy_ops.lower_critic_gradients(q1, q2)
        grad_x = renorm_ops.backward(self._critics[0], tape1, grad_q1, self.products)
        grad_x += renorm_ops.backward(self._critics[1], tape2, grad_q2, self.products)
        grad_latent = max_entropy_ops.actor_latent_gradient(
            sample, grad_x, obs.shape[1], ent_coef, self._heads, head_grads, policy.latent)
        renorm_ops.backward(self._actor, policy.tape, grad_latent, self.products, hidden_grads)
        return loss


HEADS = ("mu", "log_std")  # GaussianActor's heads, in the order max_entropy_ops takes them


def _named(net: nn.Module, tensors: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """`tensors`, one per parameter of `net` in its order (an optimiser's gradient
    views), by the parameter's name."""
    return dict(zip((name for name, _ in net.named_parameters()), tensors, strict=True))


def _modules(net: nn.Module, kind: type[nn.Module]) -> list[str]:
    """The names of `net`'s modules of `kind`, in order."""
    return [name for name, module in net.named_modules() if isinstance(module, kind)]


def _layer(tensors: dict[str, torch.Tensor], name: str, transposed: bool = False,
           member: int | None = None) -> Layer:
    """Module `name`'s (weight, bias) among `tensors` (by parameter name): an nn.Linear's
    [out, in] weight `transposed` to the kernels' [in, out]; an ensemble's `member`'s."""
    weight, bias = tensors[f"{name}.weight"], tensors[f"{name}.bias"]
    if member is not None:
        weight, bias = weight[member], bias[member]
    return weight.t() if transposed else weight, bias


def actor_views(actor: GaussianActor, grads: list[torch.Tensor]
                ) -> tuple[RenormStack, StackGrads, list[Layer], list[Layer]]:
    """The actor's hidden stack and heads as the kernels take them (views, no copies),
    and the same of its gradient buffers `grads`."""
    params, grad_of = dict(actor.named_parameters()), _named(actor, grads)
    modules = dict(actor.named_modules())
    renorms = _modules(actor, BatchRenorm)
    hidden = [name for name in _modules(actor, nn.Linear) if name not in HEADS]
    stack = RenormStack([renorm_ops.layer_of(modules[name]) for name in renorms],
                        [_layer(params, name, transposed=True) for name in hidden])
    stack_grads = StackGrads([_layer(grad_of, name) for name in renorms],
                             [_layer(grad_of, name, transposed=True) for name in hidden])
    return (stack, stack_grads, [_layer(params, name, transposed=True) for name in HEADS],
            [_layer(grad_of, name, transposed=True) for name in HEADS])


def critic_views(critic: Critic, grads: list[torch.Tensor]
                 ) -> tuple[list[RenormStack], list[StackGrads]]:
    """Each critic of the ensemble as its own `RenormStack` (views, no copies), and the
    same of its gradient buffers `grads`."""
    params, grad_of = dict(critic.named_parameters()), _named(critic, grads)
    modules = dict(critic.named_modules())
    renorms, linears = _modules(critic, BatchRenorm), _modules(critic, EnsembleLinear)
    stacks, stack_grads = [], []
    for member in range(critic.n_critics):
        stacks.append(RenormStack(
            [renorm_ops.layer_of(modules[name], member) for name in renorms],
            [_layer(params, name, member=member) for name in linears]))
        stack_grads.append(StackGrads([_layer(grad_of, name, member=member) for name in renorms],
                                      [_layer(grad_of, name, member=member) for name in linears]))
    return stacks, stack_grads
