"""Looking inside the agent without changing it: losses and per-layer gradients on a batch.

Used when a run resumes (does a rule that paused it still fail?), by the gradient
trace after a reward drop and by the gradient noise measurement. A probe computes the
critic and actor losses with autograd and takes their gradients with
`torch.autograd.grad`: no optimiser step, no random draw (no target smoothing noise; a
stochastic policy samples from a fixed-seed stream of its own), and the networks'
`.grad` stay as the last update left them, so training continues exactly as if it had
not run. The fused agents probe the same way with their own kernels and scratch
gradient buffers (`hand_probe`, several times faster on the CPU, and without an autograd
graph's memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rltrain.agents.base import Agent, Batch


@dataclass(frozen=True)
class Probe:
    critic_loss: float
    actor_loss: float
    q_mean: float
    critic_layers: dict[str, float | None]  # parameter name -> gradient norm (None: no grad)
    actor_layers: dict[str, float | None]

    def health_metrics(self) -> dict[str, float]:
        """The same metrics an update reports, for the health rules."""
        return {"critic_loss": self.critic_loss, "q_mean": self.q_mean,
                "critic_grad_norm": _total(self.critic_layers),
                "actor_loss": self.actor_loss,
                "actor_grad_norm": _total(self.actor_layers)}


def _total(layers: dict[str, float | None]) -> float:
    return float(sum((v or 0.0) ** 2 for v in layers.values()) ** 0.5)


def loss_layer_norms(net: nn.Module, loss: torch.Tensor) -> tuple[dict[str, float | None], float]:
    """Gradient norm of `loss` for every parameter of `net` (None where it has none), and
    the loss's value."""
    named = [(name, p) for name, p in net.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    norms = [torch.zeros(()) if g is None else torch.linalg.vector_norm(g).cpu() for g in grads]
    values = torch.stack([*norms, loss.detach().cpu()]).tolist()
    return ({name: (None if g is None else v)
             for (name, _), g, v in zip(named, grads, values, strict=False)}, values[-1])


def gradient_probe(agent: Agent, batch: Batch) -> Probe:
    """Critic and actor losses on `batch` and the per-layer gradients they produce. An
    agent whose update computes its gradients by hand (a fused backend) answers with
    its own kernels (`hand_probe`): the same losses and gradients, rounded as its
    update rounds them."""
    hand_probe = getattr(agent, "hand_probe", None)
    if hand_probe is not None:
        return hand_probe(batch)
    critic_loss, actor_loss, q = agent.probe_losses(batch)
    critic_layers, critic_value = loss_layer_norms(agent.critic, critic_loss)
    actor_layers, actor_value = loss_layer_norms(agent.actor, actor_loss)
    q_mean = float(q[0].mean().detach())
    return Probe(critic_value, actor_value, q_mean, critic_layers, actor_layers)


def probe_from_gradients(critic: nn.Module, critic_grads: list[torch.Tensor],
                         actor: nn.Module, actor_grads: list[torch.Tensor],
                         losses: tuple[torch.Tensor, torch.Tensor], q_mean: torch.Tensor
                         ) -> Probe:
    """The probe of gradients computed by hand (`*_grads`: one per parameter of the
    network, in its order), its (critic, actor) `losses` and the first critic's mean Q,
    read back in one transfer."""
    named = [[name for name, _ in net.named_parameters()] for net in (critic, actor)]
    assert [len(names) for names in named] == [len(critic_grads), len(actor_grads)]
    norms = [torch.linalg.vector_norm(grad) for grad in (*critic_grads, *actor_grads)]
    values = torch.stack([*norms, *losses, q_mean]).cpu().tolist()
    split = len(critic_grads)
    return Probe(values[-3], values[-2], values[-1],
                 dict(zip(named[0], values[:split], strict=True)),
                 dict(zip(named[1], values[split:-3], strict=True)))
