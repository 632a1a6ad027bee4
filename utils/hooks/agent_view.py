"""What the watchers of a run (health rules, diagnostics) may see of its agent: its
modules and a few read-only functions, never the agent object itself.

Anything with an actor and a twin-or-single critic can be shown this way, rltrain's own
agent (scripts/training/agent_setup.py builds its view) or another library's, so the
diagnostics depend on no particular agent class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn


@dataclass
class StepSources:
    """What a watched loop's optimisers stepped with, counted since the watch began
    (integrations/gradient_sources.py): per network ("actor", "critic"), its optimiser
    steps and those whose gradients still held the previous step's (never cleared);
    the critic's steps with gradients from a backward that also reached the actor.
    `traced` False: only the steps are counted (a library's own update, SB3's, whose
    backward passes are not traced: `stale` and `through_actor` stay 0)."""

    steps: dict[str, int] = field(default_factory=dict)
    stale: dict[str, int] = field(default_factory=dict)
    through_actor: int = 0
    traced: bool = True


# How the env ended the steps whose rows a watched run stored as done
# (`AgentView.stored_dones`): the task's end, a time limit only, or no end at all.
ENDINGS = ("terminated", "truncated", "continued")


@dataclass(frozen=True)
class AgentView:
    actor: nn.Module   # obs [B, obs_dim] -> action [B, action_dim], in the env's units
    critic: nn.Module
    q_value: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (obs, action) -> [B, 1]
    act: Callable[[np.ndarray], np.ndarray]  # the deterministic action for observations
    probe: Callable[[Any], Any]  # batch -> losses and per-layer gradients (agents/probes.py)
    updates: Callable[[], int]   # updates made so far
    networks: Callable[[], dict[str, nn.Module]]  # every network by name, for snapshots
    action_low: np.ndarray
    action_high: np.ndarray
    device: torch.device
    # "actor" or "critic" -> its gradients by parameter name as its optimiser last stepped
    # with them (None before): for a loop whose `.grad` after the update holds more than
    # that (integrations/views.py `StepGradients`). None: read `.grad`, which rltrain's
    # own update leaves as each network's own loss made it.
    step_gradients: Callable[[str], dict[str, torch.Tensor | None] | None] | None = None
    # Layers ("actor.log_std.weight") that `probe`'s losses cannot reach: SAC's log_std
    # through a probe of its deterministic action. A gradient trace does not judge them
    # (no gradient there is no evidence); their step gradients still are.
    unprobed: tuple[str, ...] = ()
    # What the optimisers stepped with (None: not watched; rltrain's own update is not)
    step_sources: Callable[[], StepSources] | None = None
    # A watched loop's own batches against what its env gave (integrations/
    # sampled_batches.py): the newest capture's statistics (None: none yet) and how many
    # captures so far. None: not watched; rltrain's own buffer is not.
    sampled_batches: Callable[[], tuple[dict[str, Any] | None, int]] | None = None
    # The rows a watched loop's batches stored as done, counted by how the env ended
    # their step: {"terminated", "truncated" (a time limit only), "continued"}; zeros
    # while the loop hands none (`Watcher.after_update(batch=...)`). None: not a loop.
    stored_dones: Callable[[], dict[str, int]] | None = None  # keys: ENDINGS
    # What a finding on them tells to change (None: the loop's own code, its done flag).
    stored_dones_fix: str | None = None
    # A Discrete(n) action space's n: its actions are indices, one number in
    # [action_low, action_high] = [start - 0.5, start + n - 0.5], and the state-action
    # map gives each its own bin. None: a Box.
    discrete_actions: int | None = None
