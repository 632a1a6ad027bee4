"""Looking inside the agent without changing it: losses and per-layer gradients on a batch.

Used by the monitor when a run resumes (does a rule that paused it still fail?) and by
the flow-1 gradient trace (section 3.3 of the flow-1 doc). A probe takes no optimiser
step and no random draw (no target smoothing noise), and puts back the gradients the
last update left, so training continues exactly as if it had not run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rltrain.agents.ddpg import DDPGAgent
from rltrain.utils.replay_buffer import Batch


@dataclass(frozen=True)
class Probe:
    critic_loss: float
    actor_loss: float
    q_mean: float
    critic_layers: dict[str, float | None]  # parameter name -> gradient norm (None: no grad)
    actor_layers: dict[str, float | None]

    def health_metrics(self) -> dict[str, float]:
        """The same metrics an update reports, for the monitor's rules."""
        return {"critic_loss": self.critic_loss, "q_mean": self.q_mean,
                "critic_grad_norm": total_norm(self.critic_layers),
                "actor_loss": self.actor_loss,
                "actor_grad_norm": total_norm(self.actor_layers)}


def total_norm(layers: dict[str, float | None]) -> float:
    return float(sum((v or 0.0) ** 2 for v in layers.values()) ** 0.5)


def layer_norms(net: nn.Module) -> dict[str, float | None]:
    """Gradient norm of every parameter of `net` (None where there is no gradient)."""
    named = list(net.named_parameters())
    present = [p.grad for _, p in named if p.grad is not None]
    norms = iter(torch.stack(torch._foreach_norm(present)).tolist() if present else [])
    return {name: (next(norms) if p.grad is not None else None) for name, p in named}


def gradient_probe(agent: DDPGAgent, batch: Batch) -> Probe:
    """Critic and actor losses on `batch` and the per-layer gradients they produce."""
    saved = [opt.grad.clone() for opt in (agent.actor_opt, agent.critic_opt)]
    try:
        critic_loss, q = agent.critic_gradients(batch, smooth=False)
        critic_layers = layer_norms(agent.critic)
        actor_loss = agent.actor_gradients(batch.obs)
        actor_layers = layer_norms(agent.actor)
        values = torch.stack([critic_loss, actor_loss, q[0].mean()]).tolist()
    finally:
        for opt, grad in zip((agent.actor_opt, agent.critic_opt), saved, strict=True):
            opt.grad.copy_(grad)  # put back what the last update left
    return Probe(values[0], values[1], values[2], critic_layers, actor_layers)
