"""The algorithm interface: what the run shell and the watchers use of any off-policy
actor-critic agent (DDPG, TD3, SAC, or a fourth one).

An algorithm is one module of `agents/` that defines an agent class following `Agent`
and an `Algorithm` entry (its name, its own config options, how to build it, how it
explores); `agents/registry.py` lists the entries. Nothing else in rltrain names an
algorithm: the config's `algo` choices and option sections, the checkpoint's keys, the
collector's exploration and the hooks' view of the networks all come from here.

This layer is update maths only: it never touches an env, a file, a logger or
rltrain's config. Hyperparameters arrive as `CommonSettings` (what every algorithm here
shares) and the algorithm's own options dataclass.
"""

from __future__ import annotations

import dataclasses
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
        whose `Algorithm.action_noise` is True returns the deterministic action and the
        collector adds the configured noise)."""
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


def option(default: Any, help: str, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> Any:
    """A field of an algorithm's options: its default, its help (the config reference's
    text) and its allowed interval, which the config turns into its own range check."""
    return field(default=default, metadata={"help": help, "bounds": (low, high, low_open)})


@dataclass(frozen=True)
class Algorithm:
    """One algorithm's entry in agents/registry.py."""

    name: str      # the config's `algo` value
    summary: str   # one line for `--help` and the config reference
    # The algorithm's own config section (`td3:`, `sac:`; None: it has none), a frozen
    # dataclass of `option` fields.
    options: type | None
    # (obs_dim, action_low, action_high, common, options, device, backend) -> (agent,
    # a warning for the user or None). A backend that cannot run is a ValueError.
    build: Callable[..., tuple[Agent, str | None]]
    # Exploration: the configured noise added to the deterministic action (DDPG/TD3), or
    # the policy's own sampling (SAC: `act(obs, deterministic=False)`).
    action_noise: bool
    # What `state_dict` writes: the keys a checkpoint of this algorithm must hold.
    state_keys: tuple[str, ...]
    # The option section's name in the config, if it has options.
    section: str | None = None

    def default_options(self) -> Any:
        return self.options() if self.options is not None else None


def options_from(algorithm: Algorithm, values: dict[str, Any] | None) -> Any:
    """The algorithm's options dataclass from a plain mapping (unknown keys are the
    caller's to refuse)."""
    if algorithm.options is None:
        return None
    known = {f.name for f in dataclasses.fields(algorithm.options)}
    return algorithm.options(**{k: v for k, v in (values or {}).items() if k in known})
