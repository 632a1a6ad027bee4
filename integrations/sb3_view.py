"""A Stable-Baselines3 off-policy model (TD3, DDPG, SAC, sb3-contrib's CrossQ and TQC)
as rltrain's hooks see it.

SB3 keeps actions scaled to [-1, 1] inside the model and its replay buffer; the hooks
work in the env's units. `sb3_view` wraps the actor (SAC: its deterministic action) and
the critic (every Q head) in `Mirror`s that convert, `SB3Replay` reads SB3's replay
buffer in place, and `sb3_config` states the model's settings in rltrain's config keys.
This module reads the model's attributes only and imports nothing of SB3.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import torch

from rltrain.agents.registry import ALGORITHMS, Algorithm
from rltrain.integrations.library_keys import plain
from rltrain.integrations.sb3_settings import network_arch, sb3_settings, updates_per_env_step
from rltrain.integrations.views import Mirror, ddpg_probe
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.training.replay_buffer import Batch


class Scale:
    """Actions between SB3's [-1, 1] and the env's [low, high]."""

    def __init__(self, low: np.ndarray, high: np.ndarray, device: torch.device) -> None:
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        self.low_t = torch.as_tensor(self.low, device=device)
        self.half_t = torch.as_tensor((self.high - self.low) / 2, device=device)

    def to_env(self, scaled: torch.Tensor) -> torch.Tensor:
        return self.low_t + (scaled + 1.0) * self.half_t

    def to_sb3(self, action: torch.Tensor) -> torch.Tensor:
        return (action - self.low_t) / self.half_t - 1.0

    def to_env_np(self, scaled: np.ndarray) -> np.ndarray:
        return self.low + (scaled + 1.0) * (self.high - self.low) / 2


class SB3Replay:
    """SB3's ReplayBuffer read in place, with what the diagnostics use of rltrain's
    (`len`, `capacity`, `newest`); `scale`: SB3's [-1, 1] actions to the env's (None:
    DQN's actions, which SB3 keeps as they are). Reading in place costs nothing per env step; a copy
    filled as transitions arrive would cost a row write per step and the memory twice.
    Rows are ordered as rltrain's vector envs add them: step by step, env by env."""

    def __init__(self, buffer: Any, scale: Scale | None, device: torch.device) -> None:
        self.buffer, self.scale, self.device = buffer, scale, device
        self.capacity = buffer.buffer_size * buffer.n_envs

    def __len__(self) -> int:
        b = self.buffer
        return (b.buffer_size if b.full else b.pos) * b.n_envs

    def newest(self, n: int) -> Batch:
        """The `n` most recently added transitions, actions in env units."""
        b = self.buffer
        assert len(self) > 0
        n = min(n, len(self))
        k = math.ceil(n / b.n_envs)  # buffer positions holding them
        pos = (b.pos - k + np.arange(k)) % b.buffer_size
        if b.optimize_memory_usage:
            next_obs = b.observations[(pos + 1) % b.buffer_size]
        else:
            next_obs = b.next_observations[pos]
        terminated = b.dones[pos] * (1.0 - b.timeouts[pos])
        actions = b.actions[pos]  # a Discrete action's index as it is (DQN's)
        if self.scale is not None:
            actions = self.scale.to_env_np(actions)
        columns = (b.observations[pos], actions, b.rewards[pos], next_obs, terminated)
        return Batch(*(torch.as_tensor(
            np.asarray(c, np.float32).reshape(k * b.n_envs, -1)[-n:], device=self.device)
            for c in columns))


def sb3_view(model: Any) -> tuple[AgentView, Scale]:
    """What the hooks may see of `model`, and its action scaling."""
    space, device = model.action_space, model.device
    scale = Scale(space.low, space.high, device)
    actor, critic = model.actor, model.critic
    if "deterministic" in inspect.signature(actor.forward).parameters:  # SAC's actor
        policy = Mirror(actor, lambda obs: scale.to_env(actor(obs, deterministic=True)))
    else:
        policy = Mirror(actor, lambda obs: scale.to_env(actor(obs)))
    critics = Mirror(critic, lambda obs, a: q_heads(critic, obs, scale.to_sb3(a)))

    def q_value(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        if hasattr(critic, "q1_forward"):
            return critic.q1_forward(obs, scale.to_sb3(action))
        return q_heads(critic, obs, scale.to_sb3(action))[:, :1]  # CrossQ's, TQC's

    nets = {name: getattr(model, name) for name in
            ("actor", "critic", "actor_target", "critic_target") if hasattr(model, name)}
    # The probe runs SAC's deterministic action, which does not use log_std.
    unprobed = tuple(f"actor.{name}" for name, _ in policy.named_parameters()
                     if name.startswith("log_std."))
    view = AgentView(
        actor=policy, critic=critics, q_value=q_value,
        act=lambda obs: model.predict(obs, deterministic=True)[0],
        probe=ddpg_probe(policy, critics, q_value, model.gamma),
        updates=lambda: model._n_updates, networks=lambda: nets,
        action_low=scale.low, action_high=scale.high, device=device, unprobed=unprobed)
    return view, scale


def q_heads(critic: Any, obs: torch.Tensor, scaled: torch.Tensor) -> torch.Tensor:
    """Every Q head of an SB3 critic, [B, n]: its tuple of [B, 1] (TD3, SAC, CrossQ), or
    each critic's mean quantile (TQC's [B, n_critics, n_quantiles])."""
    out = critic(obs, scaled)
    if isinstance(out, torch.Tensor):
        return out.mean(dim=2)
    return torch.cat(out, dim=1)


def env_id(model: Any) -> str:
    """The Gymnasium id of the model's first training env, where it has one."""
    try:
        spec = model.get_env().get_attr("spec")[0]
    except (AttributeError, IndexError):
        spec = None
    return spec.id if spec is not None else "unknown"


def sb3_config(model: Any, total_timesteps: int) -> dict[str, Any]:
    """The model's settings as rltrain config keys (what the checks compare against)."""
    entry = sb3_entry(model)
    rate = float(model.lr_schedule(1.0))  # a schedule's value at the start
    derived: dict[str, Any] = {
        "env_name": env_id(model), "seed": model.seed or 0,
        "device": model.device.type if model.device.type in ("cpu", "cuda") else "auto",
        # rltrain refuses a run whose warm-up is all of it; SB3 only never updates
        "max_timesteps": max(total_timesteps, model.learning_starts + 1),
        "batch_size": model.batch_size, "learning_starts": model.learning_starts,
        "replay_buffer_size": model.replay_buffer.buffer_size * model.n_envs,
        "gamma": model.gamma, "tau": model.tau, "num_envs": model.n_envs,
        # rltrain counts updates per env step (one env's transition); a fraction of one
        # is recorded as 1 (the exact count is library.gradient_steps and train_freq).
        "utd_ratio": max(round(updates_per_env_step(model)), 1),
        "actor_lr": rate, "critic_lr": rate,
        "library": {**sb3_settings(model), "total_timesteps": total_timesteps},
        # The algorithm the rules judge it as: the one whose registry entry names the
        # model's class (its `sb3_class`); otherwise ddpg, the nearest (it only names the
        # run).
        "algo": entry.name if entry is not None else "ddpg",
    }
    if entry is not None and not entry.targets:
        del derived["tau"]  # SB3 sets 1.0 for an algorithm without targets (CrossQ)
    derived.update(noise_config(model))
    actor, critic = network_arch(model)
    derived["networks"] = {"actor": {"hidden_sizes": actor or None},
                           "critic": {"hidden_sizes": critic or None}}
    if entry is not None and entry.section is not None:
        derived[entry.section] = own_options(model, entry)
    return derived


def sb3_entry(model: Any) -> Algorithm | None:
    """The registry entry of the model's algorithm (None: rltrain has none)."""
    name = type(model).__name__
    return next((e for e in ALGORITHMS.values() if e.sb3_class == name), None)


def own_options(model: Any, entry: Algorithm) -> dict[str, Any]:
    """The algorithm's own options as the model has them, by the names SB3 gives them
    (agents/registry.py): a constructor argument is the model's attribute; one of
    `policy_kwargs` is the model's policy_kwargs' where given, else left to rltrain's
    default, which is SB3's (sb3-contrib's)."""
    options: dict[str, Any] = {}
    for library, key in entry.library_names().items():
        field = key.partition(".")[2]
        if library.startswith("policy_kwargs."):
            given = model.policy_kwargs or {}
            if library.partition(".")[2] in given:
                options[field] = plain(given[library.partition(".")[2]])
        elif hasattr(model, library):
            options[field] = plain(getattr(model, library))
    return options


def noise_config(model: Any) -> dict[str, Any]:
    """The exploration noise as rltrain's keys (none for SAC, which explores itself)."""
    if model.action_noise is None and hasattr(model, "ent_coef"):
        return {}  # SAC's: rltrain's sac takes no action noise either
    scale = noise_scale(model)
    base = getattr(model.action_noise, "base_noise", model.action_noise)
    config: dict[str, Any] = {"exploration_noise": 0.0 if model.action_noise is None
                              else scale if math.isfinite(scale) else 0.1}
    if type(base).__name__ == "OrnsteinUhlenbeckActionNoise":
        config["noise_type"] = "ou"
        config["ou_theta"] = float(base._theta)
    return config


def noise_scale(model: Any) -> float:
    """The exploration noise's std relative to the action half-range (SB3's noise is in
    its [-1, 1] units already); NaN where the noise is not a Gaussian's (SAC's own)."""
    noise = getattr(model.action_noise, "base_noise", model.action_noise)  # vectorised
    sigma = getattr(noise, "_sigma", None)
    return float(np.mean(sigma)) if sigma is not None else math.nan
