"""RLlib's SAC (new API stack) as rltrain's hooks see it: its RLModule's networks as an
`AgentView`, and its AlgorithmConfig's settings in rltrain's keys and in RLlib's names.

RLlib's SAC module (`DefaultSACTorchRLModule`) works in normalised actions: its policy
is a squashed Gaussian on [-1, 1] (`pi_encoder`, then `pi` gives the mean and log-std),
and with `normalize_actions` (RLlib's default) its env runner maps the action to the
env's bounds. The hooks work in the env's units: `RLlibActor` is the policy's
deterministic action (tanh of the mean) in them, `RLlibCritic` the twin Q-networks
(`qf_encoder` and `qf`, `qf_twin_encoder` and `qf_twin`) of an env-unit action. Both
share the module's submodules and parameters under RLlib's own names. This module reads
the module's and the config's attributes only and imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rltrain.integrations.sb3_settings import plain
from rltrain.integrations.views import ddpg_probe, deterministic_act
from rltrain.utils.hooks.agent_view import AgentView

# What RLlib's batches key the observations and actions as (ray.rllib.core.columns).
OBS, ACTIONS = "obs", "actions"
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


# ------------------------------------------------------------------ settings
# RLlib's SAC settings recorded under config.yaml's `library`, in RLlib's names.
SETTINGS = ("gamma", "tau", "actor_lr", "critic_lr", "alpha_lr", "lr", "initial_alpha",
            "target_entropy", "twin_q", "n_step", "train_batch_size_per_learner",
            "num_steps_sampled_before_learning_starts", "replay_buffer_config",
            "training_intensity", "target_network_update_freq", "model_config",
            "num_env_runners", "num_envs_per_env_runner", "rollout_fragment_length",
            "num_learners", "normalize_actions", "clip_actions", "grad_clip",
            "grad_clip_by", "log_gradients", "seed", "env", "env_config",
            "evaluation_interval", "evaluation_duration", "evaluation_duration_unit")


def rllib_settings(config: Any) -> dict[str, Any]:
    """What the algorithm trains with, as RLlib's AlgorithmConfig names it."""
    settings: dict[str, Any] = {"algorithm": type(config).__name__.removesuffix("Config")}
    for name in SETTINGS:
        if hasattr(config, name):
            settings[name] = plain(getattr(config, name))
    return settings


def updates_per_env_step(config: Any) -> float:
    """RLlib's SAC updates per env step: `training_intensity` (env steps trained on per
    env step sampled) over the batch size; without it, one update per rollout fragment
    of every env (RLlib's "native ratio")."""
    batch = config.total_train_batch_size
    if config.training_intensity:
        return float(config.training_intensity) / batch
    fragment = config.get_rollout_fragment_length()
    return 1.0 / (fragment * config.num_envs_per_env_runner * max(config.num_env_runners, 1))


def hidden_sizes(config: Any) -> list[int] | None:
    sizes = config.model_config.get("fcnet_hiddens")
    return [int(n) for n in sizes] if sizes else None


def sac_options(config: Any) -> dict[str, Any]:
    """RLlib's SAC temperature and target entropy as rltrain's `sac:` options (RLlib
    always learns the temperature, from `initial_alpha`)."""
    alpha = float(config.initial_alpha)
    target = config.target_entropy
    return {"ent_coef": "auto" if alpha == 1.0 else f"auto_{alpha:g}",
            "target_entropy": "auto" if target in (None, "auto") else float(target),
            "target_update_interval": max(int(config.target_network_update_freq or 1), 1)}


def rllib_config(config: Any, env_name: str) -> dict[str, Any]:
    """The algorithm's settings as rltrain config keys (what the checks compare against)."""
    learning_starts = int(config.num_steps_sampled_before_learning_starts)
    capacity = (config.replay_buffer_config or {}).get("capacity")
    widths = hidden_sizes(config)
    derived: dict[str, Any] = {
        "algo": "sac", "env_name": env_name, "seed": int(config.seed or 0),
        "gamma": float(config.gamma), "tau": float(config.tau),
        "batch_size": int(config.total_train_batch_size),
        "learning_starts": learning_starts,
        "num_envs": int(config.num_envs_per_env_runner),
        "actor_lr": float(config.actor_lr), "critic_lr": float(config.critic_lr),
        # rltrain counts whole updates per env step: a fraction is recorded as 1 (the
        # exact figures are library.training_intensity and the batch size)
        "utd_ratio": max(round(updates_per_env_step(config)), 1),
        "networks": {"actor": {"hidden_sizes": widths}, "critic": {"hidden_sizes": widths}},
        "sac": sac_options(config), "library": rllib_settings(config)}
    if capacity:
        derived["replay_buffer_size"] = int(capacity)
    return derived
