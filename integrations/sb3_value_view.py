"""Stable-Baselines3's PPO and A2C (the ON_POLICY family: a Gaussian or categorical
policy and a state value V, learnt from rollouts) and DQN (Q_LEARNING: a Q network acted
on epsilon-greedily, learnt from a replay buffer) as rltrain's hooks see them, built on
what the Watcher shares (integrations/value_views.py: a discrete action as its index,
the probes).

The view's `actor` is the policy's choice in the env's units: PPO's and A2C's mode (a
Box action: the Gaussian's mean, clipped to the bounds as SB3's `predict` does; a
Discrete one: the likeliest action's index), DQN's greedy action. The `critic` is the
value network (PPO's V of a state, DQN's Q of every action). This module reads the
model's attributes only and imports nothing of SB3.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rltrain.agents.families import ON_POLICY
from rltrain.agents.probes import Probe
from rltrain.agents.registry import Algorithm
from rltrain.integrations.library_keys import plain
from rltrain.integrations.sb3_settings import ARGUMENTS, learning_rate, updates_per_env_step
from rltrain.integrations.value_views import (
    action_bounds,
    discrete_n,
    greedy_actor,
    part,
    q_probe,
    value_probe,
    value_view,
)
from rltrain.integrations.views import Mirror
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.training.replay_buffer import Batch

# SB3's action distributions whose mode is the action net's output (or its argmax)
DIRECT_MODES = ("CategoricalDistribution", "DiagGaussianDistribution",
                "StateDependentNoiseDistribution")
# SB3's activation_fn -> rltrain's name for it (PPO's and A2C's default is Tanh)
ACTIVATIONS = {"ReLU": "relu", "Tanh": "tanh", "ELU": "elu", "GELU": "gelu"}


def onpolicy_view(model: Any) -> AgentView:
    """PPO's or A2C's policy as the hooks see it: `actor` the policy's network and its
    mode, `critic` the value network and V ([B, 1])."""
    policy, space, device = model.policy, model.action_space, model.device
    low, high = action_bounds(space)
    discrete = isinstance(space, spaces.Discrete)
    low_t, high_t = (torch.as_tensor(x, device=device) for x in (low, high))
    direct, mode_of = direct_mode(policy), action_mode(space, device)

    def mode(obs: torch.Tensor) -> torch.Tensor:
        if direct:
            features = policy.extract_features(obs, policy.pi_features_extractor)
            return mode_of(policy.action_net(policy.mlp_extractor.forward_actor(features)))
        chosen = policy.get_distribution(obs).get_actions(deterministic=True)
        if discrete:
            return chosen.float().reshape(-1, 1)
        return torch.clamp(chosen, low_t, high_t)  # as SB3's predict clips it

    def log_prob(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return policy.get_distribution(obs).log_prob(
            actions.long().flatten() if discrete else actions)

    actor = part(mode, features_extractor=policy.pi_features_extractor,
                  policy_net=policy.mlp_extractor.policy_net, action_net=policy.action_net,
                  log_std=getattr(policy, "log_std", None))
    shared = policy.vf_features_extractor is policy.pi_features_extractor
    critic = part(policy.predict_values,
                   features_extractor=None if shared else policy.vf_features_extractor,
                   value_body=policy.mlp_extractor.value_net, value_net=policy.value_net)
    return _view(model, actor, critic, value_probe(log_prob, actor, critic, model.gamma),
                 {"policy": policy}, low, high)


def direct_mode(policy: Any) -> bool:
    """Whether PPO's or A2C's mode is its action net's output (or its argmax): a
    categorical's logits, a Gaussian's (gSDE's too) mean, without the distribution SB3
    builds around it for each call (with one features extractor: with two, SB3's
    extract_features gives both)."""
    return (type(policy.action_dist).__name__ in DIRECT_MODES
            and not getattr(policy, "squash_output", False)
            and getattr(policy, "share_features_extractor", False))


def action_mode(space: Any, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """The mode, in env units, that a direct action net's output gives: a Discrete
    action's likeliest index ([B, 1]); a Box action's mean, clipped to the bounds as
    SB3's `predict` clips it."""
    if isinstance(space, spaces.Discrete):
        return lambda out: out.argmax(dim=1).float().reshape(-1, 1)
    low, high = (torch.as_tensor(x, device=device) for x in action_bounds(space))
    return lambda out: torch.clamp(out, low, high)


def dqn_view(model: Any) -> AgentView:
    """DQN's Q network as the hooks see it: `critic` every action's Q ([B, n]), `actor`
    its greedy action (no network of its own)."""
    q_net = model.q_net
    low, high = action_bounds(model.action_space)
    if not isinstance(model.action_space, spaces.Discrete):
        raise ConfigError(f"DQN acts in a Discrete action space, not {model.action_space}")
    start = float(model.action_space.start)
    critic = Mirror(q_net, q_net)
    nets = {"q_net": q_net, "q_net_target": model.q_net_target}
    return _view(model, greedy_actor(q_net, start), critic,
                 q_probe(critic, start, model.gamma), nets, low, high)


def _view(model: Any, actor: nn.Module, critic: nn.Module, probe: Callable[[Batch], Probe],
          nets: dict[str, nn.Module], low: np.ndarray, high: np.ndarray) -> AgentView:
    """The view; its networks' gradients as each optimiser stepped with them are added
    by the callback (`StepGradients`)."""
    return value_view(actor, critic, probe,
                      lambda obs: model.predict(obs, deterministic=True)[0],
                      lambda: model._n_updates, lambda: nets, low, high, model.device,
                      discrete_n(model.action_space))


def rollout_config(model: Any, entry: Algorithm, total_timesteps: int,
                   env_name: str) -> dict[str, Any]:
    """A PPO, A2C or DQN model's settings as rltrain config keys (what the rules compare
    against), and SB3's own names for `library`."""
    rate = float(model.lr_schedule(1.0))  # a schedule's value at the start
    on_policy = entry.family == ON_POLICY
    rollout = model.n_steps * model.n_envs if on_policy else None
    derived: dict[str, Any] = {
        "env_name": env_name, "seed": model.seed or 0, "algo": entry.name,
        "device": model.device.type if model.device.type in ("cpu", "cuda") else "auto",
        "gamma": model.gamma, "num_envs": model.n_envs, "actor_lr": rate, "critic_lr": rate,
        "library": {**rollout_settings(model), "total_timesteps": total_timesteps},
        # PPO's minibatch (A2C steps on the whole rollout); what a rollout holds stands in
        # for the replay buffer's size
        "batch_size": getattr(model, "batch_size", None) or rollout,
        "replay_buffer_size": rollout if on_policy else model.buffer_size * model.n_envs,
        "learning_starts": 0 if on_policy else model.learning_starts,
    }
    start = derived["learning_starts"]
    derived["max_timesteps"] = max(total_timesteps, start + 1)
    if not on_policy:
        derived["tau"] = model.tau
        derived["utd_ratio"] = max(round(updates_per_env_step(model)), 1)
    arch = getattr(model.policy, "net_arch", None) or []
    actor, critic = ((arch.get("pi"), arch.get("vf")) if isinstance(arch, dict)
                     else (None, arch) if not on_policy else (arch, arch))
    activation = ACTIVATIONS.get(getattr(getattr(model.policy, "activation_fn", None),
                                         "__name__", ""))
    derived["networks"] = {
        name: {"hidden_sizes": list(sizes) if sizes else None,
               **({"activation": activation} if activation else {})}
        for name, sizes in (("actor", actor), ("critic", critic))}
    return derived


def rollout_settings(model: Any) -> dict[str, Any]:
    """What the model trains with, as SB3's constructor names it (a schedule: its name
    and its value at the start)."""
    settings: dict[str, Any] = {"algorithm": type(model).__name__,
                                "learning_rate": learning_rate(model)}
    for name in ARGUMENTS:
        if hasattr(model, name):
            value = getattr(model, name)
            settings[name] = ({"schedule": plain(value), "start": float(value(1.0))}
                              if callable(value) else plain(value))
    if hasattr(model, "train_freq"):
        settings["train_freq"] = [model.train_freq.frequency, model.train_freq.unit.value]
    settings.update({
        "gamma": model.gamma,
        "policy_kwargs": plain({**model.policy_kwargs,
                                "net_arch": plain(getattr(model.policy, "net_arch", None))}),
        "n_envs": model.n_envs, "seed": model.seed, "device": str(model.device)})
    return settings
