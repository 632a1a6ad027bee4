"""The algorithm interface: what the run shell and the watchers use of any off-policy
actor-critic agent (each algorithm of registry.py, or another one).

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
    matmul_kernel: str = "auto"       # a fused update's matrix products (agents/gemm.py)


class PolicyNetwork(Protocol):
    """What the rest of rltrain calls on an agent's `actor` (an `nn.Module`: its
    `state_dict` is the checkpoint's `actor`, which `rltrain eval` and the env runners
    load into `Implementation.make_actor`'s network)."""

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action [B, action_dim] in the env's units for obs [B, obs_dim]
        (a stochastic policy's mode): what evaluation and the diagnostics run. An agent
        acts through this call (a forward hook on the actor sees its acting passes: the
        state-action map's); a policy that explores by sampling itself takes
        `explore=True` there and gives a tuple whose first item is this action
        (networks/gaussian_actor.py `Acting`)."""
        ...

    def sample(self, obs: torch.Tensor,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """An exploring action [B, action_dim] and its log-probability [B, 1], drawn from
        `generator`: what an env runner explores with. Only a policy that explores by
        sampling itself (family MAX_ENTROPY, agents/families.py) has it."""
        ...


class CriticNetwork(Protocol):
    """What the rest of rltrain calls on an agent's `critic` (an `nn.Module`)."""

    def __call__(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Every critic's Q estimate [n, B, 1] of (obs [B, obs_dim], action [B, action_dim]
        in the env's units); a distributional critic gives its mean."""
        ...

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic alone, [B, 1] (the diagnostics' Q over-estimation check)."""
        ...


class Agent(Protocol):
    """An off-policy actor-critic agent, as the rest of rltrain sees it: everything the
    run, the collector, the env runners, the checkpoints and the diagnostics use of it is
    declared here.

    `actor` follows `PolicyNetwork`, `critic` `CriticNetwork`. Metrics from `update` are
    detached tensors on the agent's device, read by the loop in one transfer.

    Two methods are optional, for an update that computes outside autograd (the fused
    backends): `q1(obs, action)`, the first critic's Q [B, 1] as the diagnostics read it
    (otherwise `critic.q1`), and `hand_probe(batch)`, agents/probes.py's `Probe`
    (otherwise computed from `probe_losses` with autograd).

    Train and eval mode: outside `update`, every network the agent has (`networks()`) is
    in eval mode (`nn.Module.eval()`), so that whatever runs them between updates (the
    diagnostics' probes, evaluation, acting, the env runners' copy of the actor) reads
    them without changing them. A network whose layers depend on the mode (CrossQ's
    batch renormalisation, whose training passes move its running statistics) is put in
    train mode by `update` for its own passes only, and back (a fused update computes
    those passes by hand and leaves the mode as it is).
    """

    device: torch.device
    updates: int             # updates made so far (a checkpoint continues the count)
    actor: nn.Module
    critic: nn.Module
    # The latest exploring action's noise (standard normal) and mean action, rows as the
    # observations `act(obs, deterministic=False)` was given, for the ignored_action rule
    # (utils/training/exploration.py `drawn`); None: not kept (an algorithm that adds
    # action noise, whose noise the collector draws).
    drawn: tuple[np.ndarray, np.ndarray] | None

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
        (`actor_target`, `critic_target`; agents/registry.py `Algorithm.targets`)."""
        ...

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimiser by the role of what it steps (`actor`, `critic`, ...)."""
        ...

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(critic loss, actor loss, critics' Q [n, B, 1]) on `batch`, with autograd graphs,
        without drawing from the agent's random stream and without changing any state
        (agents/probes.py)."""
        ...

    def parameters_finite(self) -> bool: ...

    def state_dict(self) -> dict[str, Any]:
        """Everything the agent continues from: the keys `Implementation.state_keys`, and
        those of `BACKEND_KEYS` its update backend keeps."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore what `state_dict` saved; whether the agent's random stream continues
        (False for a checkpoint from the other kind of device)."""
        ...

    def reseed(self, seed: int) -> None:
        """Continue the agent's random stream from `seed` (a re-seeded fork)."""
        ...

    def restore_warnings(self) -> list[str]:
        """What the user should know of the last `load_state_dict`: how the agent goes
        on other than bit for bit (a fused update's kernel this torch lacks); [] for
        none."""
        ...


# What an update backend may add to an agent's state_dict beyond its algorithm's keys: a
# fused update's matrix-product kernel (agents/gemm.py). A checkpoint without them loads.
BACKEND_KEYS = ("gemm",)


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
    # (obs_dim, action_low, action_high, actor spec, options) -> the policy network that
    # `state_dict()["actor"]` loads into: what `rltrain eval`, `load_policy` and the env
    # runners run.
    make_actor: Callable[..., nn.Module]
    # The names of the integer counters its networks keep in their state (batch
    # renormalisation's training passes): a checkpoint's network may hold an integer
    # tensor under these names only (utils/io/checkpoint_fields.py).
    network_counters: tuple[str, ...] = ()


def built_from_spec(network: type[nn.Module]) -> Callable[..., nn.Module]:
    """`Implementation.make_actor` for a policy network that its spec alone builds (the
    algorithm's options change nothing of it)."""
    def make(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
             spec: NetworkSpec, options: Any = None) -> nn.Module:
        return network(obs_dim, action_low, action_high, spec)

    return make
