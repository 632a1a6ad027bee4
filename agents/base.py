"""The algorithm interface: what the run shell and the watchers use of any off-policy
actor-critic agent (DDPG, TD3, SAC, or a fourth one).

An algorithm is one module of `agents/` that defines an agent class following `Agent`
and its `IMPLEMENTATION` (how to build the agent, how it explores, what its checkpoint
holds), and one entry in `agents/registry.py` (its name and its own config options).
Nothing else in rltrain names an algorithm: the config's `algo` choices and option
sections, the checkpoint's keys, the collector's exploration and the hooks' view of the
networks all come from these.

This layer is update maths only: it never touches an env, a file, a logger or
rltrain's config. Hyperparameters arrive as `CommonSettings` (what every algorithm here
shares) and the algorithm's own options dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch
from torch import nn

from rltrain.networks.mlp import NetworkSpec


class Batch(Protocol):
    """What an update reads from a replay sample (rltrain's `ReplayBuffer.sample` gives it)."""

    obs: torch.Tensor         # [B, obs_dim]
    actions: torch.Tensor     # [B, action_dim], in the env's units
    rewards: torch.Tensor     # [B, 1]
    next_obs: torch.Tensor    # [B, obs_dim]
    terminated: torch.Tensor  # [B, 1]: 1.0 where the episode truly ended (not a time limit)


@dataclass(frozen=True)
class CommonSettings:
    """The hyperparameters every algorithm here takes (rltrain's config names)."""

    gamma: float = 0.99
    tau: float = 0.005
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    grad_clip_norm: float | None = None
    actor_net: NetworkSpec = field(default_factory=NetworkSpec)
    critic_net: NetworkSpec = field(default_factory=NetworkSpec)
    seed: int = 0                     # seeds the agent's own random stream


class Agent(Protocol):
    """An off-policy actor-critic agent, as the rest of rltrain sees it.

    `actor` maps observations [B, obs_dim] to the deterministic action [B, action_dim]
    in the env's units (a stochastic policy's mode); `critic` is a twin Q ensemble
    (networks/critic.py). Metrics from `update` are detached tensors on the agent's
    device, read by the loop in one transfer.
    """

    device: torch.device
    updates: int
    actor: nn.Module
    critic: nn.Module

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The action for one observation [obs_dim] or one per row of [N, obs_dim]; with
        `deterministic=False` the policy's own exploration (SAC samples; an algorithm
        whose registry entry says `adds_action_noise` returns the deterministic action
        and the collector adds the configured noise)."""
        ...

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient update; its metrics (`critic_loss`, `q_mean`, `critic_grad_norm`,
        and on updates that step the actor `actor_loss`, `actor_grad_norm`, ...)."""
        ...

    def networks(self) -> dict[str, nn.Module]:
        """Every network by role: `actor`, `critic`, and the targets it keeps
        (`actor_target`, `critic_target`)."""
        ...

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimiser by the role of what it steps (`actor`, `critic`, ...)."""
        ...

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(critic loss, actor loss, critics' Q [n, B, 1]) on `batch`, with autograd graphs
        and without drawing from the agent's random stream (agents/probes.py)."""
        ...

    def parameters_finite(self) -> bool: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore what `state_dict` saved; whether the agent's random stream continues
        (False for a checkpoint from the other kind of device)."""
        ...

    def reseed(self, seed: int) -> None:
        """Continue the agent's random stream from `seed` (a re-seeded fork)."""
        ...


@dataclass(frozen=True)
class Implementation:
    """What an algorithm's module gives the run: how to build its agent and how it
    explores. Each algorithm module defines one as `IMPLEMENTATION`; its entry in
    agents/registry.py names the module."""

    # (obs_dim, action_low, action_high, common, options, device, backend) -> (agent, a
    # warning for the user or None). A backend that cannot run is a ValueError.
    build: Callable[..., tuple[Agent, str | None]]
    # What `state_dict` writes: the keys a checkpoint of this algorithm must hold.
    state_keys: tuple[str, ...]
    # (obs_dim, action_low, action_high, actor spec) -> the policy network that
    # `state_dict()["actor"]` loads into: what `rltrain eval` and `load_policy` run.
    make_actor: Callable[[int, np.ndarray, np.ndarray, NetworkSpec], nn.Module]
