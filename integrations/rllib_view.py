"""RLlib's SAC (new API stack) as rltrain's hooks see it: its RLModule's networks as an
`AgentView`, and its learner's report as update metrics.

RLlib's SAC module (`DefaultSACTorchRLModule`) works in normalised actions: its policy
is a squashed Gaussian on [-1, 1] (`pi_encoder`, then `pi` gives the mean and log-std),
and with `normalize_actions` (RLlib's default) its env runner maps the action to the
env's bounds. The hooks work in the env's units: `RLlibActor` is the policy's
deterministic action (tanh of the mean) in them, `RLlibCritic` the twin Q-networks
(`qf_encoder` and `qf`, `qf_twin_encoder` and `qf_twin`) of an env-unit action. Both
share the module's submodules and parameters under RLlib's own names. This module reads
the module's attributes only and imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import nn

from rltrain.integrations.views import ddpg_probe, deterministic_act
from rltrain.utils.hooks.agent_view import AgentView

# What RLlib's batches key the observations and actions as (ray.rllib.core.columns).
OBS, ACTIONS = "obs", "actions"
# RLlib's SAC learner's report -> rltrain's update metrics
LOSSES = {"policy_loss": "actor_loss", "qf_mean": "q_mean", "alpha_value": "ent_coef"}
ENCODER_OUT = "encoder_out"  # ray.rllib.core.models.base.ENCODER_OUT


class ActionScale:
    """Actions between RLlib's normalised [-1, 1] and the env's [low, high]; with
    `normalize_actions` off, the module acts in the env's units already."""

    def __init__(self, low: np.ndarray, high: np.ndarray, normalized: bool,
                 device: torch.device) -> None:
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        self.normalized = normalized
        self.low_t = torch.as_tensor(self.low, device=device)
        self.half_t = torch.as_tensor((self.high - self.low) / 2, device=device)

    def to_env(self, action: torch.Tensor) -> torch.Tensor:
        return self.low_t + (action + 1.0) * self.half_t if self.normalized else action

    def to_module(self, action: torch.Tensor) -> torch.Tensor:
        return (action - self.low_t) / self.half_t - 1.0 if self.normalized else action

    def to_env_np(self, action: np.ndarray) -> np.ndarray:
        """An action the episode recorded, as the env got it (unsquashed and clipped, as
        RLlib's `NormalizeAndClipActions` connector does; clipped only, with
        `clip_actions`)."""
        action = np.asarray(action, np.float32)
        if self.normalized:
            action = self.low + (action + 1.0) * (self.high - self.low) / 2
        return np.clip(action, self.low, self.high)


class RLlibActor(nn.Module):
    """obs [B, obs_dim] -> the deterministic action [B, action_dim] in env units."""

    def __init__(self, module: nn.Module, scale: ActionScale) -> None:
        super().__init__()
        self.pi_encoder, self.pi = module.pi_encoder, module.pi
        self._scale = scale

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.pi(self.pi_encoder({OBS: obs})[ENCODER_OUT])  # [B, 2 * action_dim]
        mean = out[..., : out.shape[-1] // 2]
        return self._scale.to_env(torch.tanh(mean))


class RLlibCritic(nn.Module):
    """(obs, env-unit action) -> every Q head [B, n_q]: the online networks, or (with
    `prefix="target_"`) the target networks the module keeps beside them."""

    def __init__(self, module: nn.Module, scale: ActionScale, prefix: str = "") -> None:
        super().__init__()
        self.qf_encoder = getattr(module, f"{prefix}qf_encoder")
        self.qf = getattr(module, f"{prefix}qf")
        self.twin = bool(getattr(module, "twin_q", False))
        if self.twin:
            self.qf_twin_encoder = getattr(module, f"{prefix}qf_twin_encoder")
            self.qf_twin = getattr(module, f"{prefix}qf_twin")
        self._scale = scale

    def _head(self, encoder: nn.Module, head: nn.Module, batch: dict) -> torch.Tensor:
        return head(encoder(batch)[ENCODER_OUT])  # [B, 1]

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        batch = {OBS: obs, ACTIONS: self._scale.to_module(action)}
        return self._head(self.qf_encoder, self.qf, batch)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        batch = {OBS: obs, ACTIONS: self._scale.to_module(action)}
        heads = [self._head(self.qf_encoder, self.qf, batch)]
        if self.twin:
            heads.append(self._head(self.qf_twin_encoder, self.qf_twin, batch))
        return torch.cat(heads, dim=-1)


def rllib_view(module: nn.Module, low: np.ndarray, high: np.ndarray, normalized: bool,
               gamma: float, updates: Callable[[], int]) -> tuple[AgentView, ActionScale]:
    """What the hooks may see of RLlib's SAC `module` (the learner's, which trains), and
    its action scaling. `low`/`high`: the env's action bounds."""
    device = next(module.parameters()).device
    scale = ActionScale(low, high, normalized, device)
    actor, critic = RLlibActor(module, scale), RLlibCritic(module, scale)
    nets: dict[str, nn.Module] = {"actor": actor, "critic": critic}
    if hasattr(module, "target_qf"):
        nets["critic_target"] = RLlibCritic(module, scale, prefix="target_")
    view = AgentView(
        actor=actor, critic=critic, q_value=critic.q1, act=deterministic_act(actor, device),
        probe=ddpg_probe(actor, critic, critic.q1, gamma), updates=updates,
        networks=lambda: nets, action_low=scale.low, action_high=scale.high, device=device)
    return view, scale


def learner_metrics(learner: Mapping[str, Any]) -> dict[str, float]:
    """RLlib's SAC learner's report as rltrain's update metrics: `critic_loss` is the
    twin critics' summed loss (`qf_loss` + `qf_twin_loss`), `entropy` is -`logps`;
    RLlib's gradient norms (with `log_gradients`) keep their names."""
    metrics = {ours: float(learner[key]) for key, ours in LOSSES.items() if key in learner}
    if "qf_loss" in learner:
        metrics["critic_loss"] = float(learner["qf_loss"]) + float(
            learner.get("qf_twin_loss", 0.0))
    if "logps" in learner:
        metrics["entropy"] = -float(learner["logps"])
    return {**metrics, **reported_norms(learner)}


def reported_norms(learner: Mapping[str, Any]) -> dict[str, float]:
    """RLlib's gradient norms in a learner's report (`log_gradients`), under its names."""
    return {key: float(value) for key, value in learner.items()
            if key.startswith("gradients_") and key.endswith("_global_norm")}
