"""A policy with a state value V (PPO, A2C: the ON_POLICY family) and a Q network over
Discrete actions (DQN: Q_LEARNING) as rltrain's hooks see them: what the SB3 callback
(integrations/sb3_value_view.py) and the plain-loop Watcher share.

A discrete action is its index, one number per action dimension in
[start - 0.5, start + n - 0.5]: the state-action map cuts that range into n bins, one
per action, so a cluster's row counts the actions the policy chose there. The view's
`actor` is the policy's choice (a categorical policy's likeliest action, DQN's greedy
one) as such indices ([B, dims], float); its `critic` is the value network (V of a
state, [B, 1]; or DQN's Q of every action, [B, n]). No rule that reads a critic's Q of
a Box action judges these families (`RuleSpec.algorithms`), so `q_value` is never asked
for. The gradient trace probes each network with a one-step loss on the newest
transitions: V's and the policy gradient's with the one-step advantage (`value_probe`),
the Q network's TD loss (`q_probe`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from rltrain.agents.probes import Probe, loss_layer_norms
from rltrain.integrations.views import Mirror
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.training.replay_buffer import Batch

# (observations [B, obs_dim], actions [B, dims] as the buffer holds them) -> log pi [B]
LogProb = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def action_bounds(space: Any) -> tuple[np.ndarray, np.ndarray]:
    """The action range the hooks see: a 1-D Box's bounds; Discrete(n)'s index in
    [start - 0.5, start + n - 0.5] (n bins of width 1, one per action). Anything else: a
    ConfigError."""
    if isinstance(space, spaces.Discrete):
        start = float(space.start)
        return (np.array([start - 0.5], np.float32),
                np.array([start + space.n - 0.5], np.float32))
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    raise ConfigError(f"rltrain watches a 1-D Box or a Discrete action space, not {space}")


def discrete_n(space: Any) -> int | None:
    """A Discrete space's number of actions (None: a Box)."""
    return int(space.n) if isinstance(space, spaces.Discrete) else None


class Choices:
    """A Discrete or MultiDiscrete space's actions: each dimension's number of actions
    and first index, the range the hooks see, and a categorical policy's logits read as
    its likeliest actions and as the log-probability of actions taken.

    A MultiDiscrete space is watched where its dimensions have as many actions each:
    the state-action map has one number of bins for every dimension."""

    def __init__(self, space: Any) -> None:
        if isinstance(space, spaces.Discrete):
            nvec, start = np.array([space.n]), np.array([space.start])
        elif isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            nvec, start = np.asarray(space.nvec), np.asarray(space.start)
            if len(set(nvec.tolist())) != 1:
                raise ConfigError(f"rltrain watches a MultiDiscrete action space whose "
                                  f"dimensions have as many actions each (one bin per action "
                                  f"in the state-action map), not {space}")
        else:
            raise ConfigError(f"not a Discrete or 1-D MultiDiscrete action space: {space}")
        self.space = space
        self.nvec = [int(n) for n in nvec]
        self.n = self.nvec[0]  # the actions of each dimension: the map's bins
        self.start = start.astype(np.float32)
        self.low, self.high = self.start - 0.5, self.start + self.n - 0.5

    @property
    def dims(self) -> int:
        return len(self.nvec)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [B, sum(nvec)] -> each dimension's likeliest action, [B, dims] float."""
        parts = torch.split(logits, self.nvec, dim=-1)
        chosen = torch.stack([p.argmax(dim=-1) for p in parts], dim=-1).float()
        return chosen + torch.as_tensor(self.start, device=logits.device)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(actions) of the categorical policy, [B]: the dimensions' sum."""
        index = (actions - torch.as_tensor(self.start, device=actions.device)).long()
        parts = torch.split(logits, self.nvec, dim=-1)
        return sum(torch.distributions.Categorical(logits=p).log_prob(index[:, i])
                   for i, p in enumerate(parts))

    def env_action(self, chosen: np.ndarray) -> Any:
        """The view's float indices ([dims] or [B, dims]) as the env takes them: an int
        for Discrete, an int array for MultiDiscrete."""
        index = np.rint(chosen).astype(np.int64)
        if isinstance(self.space, spaces.Discrete):
            return index.reshape(-1)[0] if index.ndim == 1 else index[:, 0]
        return index


def part(forward: Callable[..., torch.Tensor], **members: Any) -> Mirror:
    """Some of a policy's modules and parameters, under these names, as one network whose
    forward is `forward` (a member that is None or holds no parameter is left out)."""
    inner = nn.Module()
    for name, member in members.items():
        if isinstance(member, nn.Parameter):
            inner.register_parameter(name, member)
        elif isinstance(member, nn.Module) and any(True for _ in member.parameters()):
            inner.add_module(name, member)
    return Mirror(inner, forward)


def greedy_actor(q_net: nn.Module, start: float) -> Mirror:
    """A Q network's greedy choice, [B, 1] (no parameters of its own)."""
    return Mirror(nn.Module(), lambda obs: q_net(obs).argmax(dim=1, keepdim=True).float()
                  + start)


def value_view(actor: nn.Module, critic: nn.Module, probe: Callable[[Batch], Probe],
               act: Callable[[np.ndarray], Any], updates: Callable[[], int],
               nets: Callable[[], dict[str, nn.Module]], low: np.ndarray, high: np.ndarray,
               device: torch.device, discrete: int | None, **more: Any) -> AgentView:
    """The view of a policy and its value network; `more`: the AgentView's other fields
    (the gradients its optimisers stepped with, where the caller has them)."""
    def no_q_critic(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        raise AssertionError("no rule that reads a Q critic judges this family")

    return AgentView(actor=actor, critic=critic, q_value=no_q_critic, act=act, probe=probe,
                     updates=updates, networks=nets, action_low=low, action_high=high,
                     device=device, discrete_actions=discrete, **more)


def value_probe(log_prob: LogProb, actor: nn.Module, critic: nn.Module,
                gamma: float) -> Callable[[Batch], Probe]:
    """Losses on `batch` for a policy and a state value: V against its one-step target,
    and the policy gradient's loss with the one-step advantage."""
    def probe(batch: Batch) -> Probe:
        with torch.no_grad():
            target = batch.rewards + gamma * (1.0 - batch.terminated) * critic(batch.next_obs)
        value = critic(batch.obs)  # [B, 1]
        critic_layers, critic_loss = loss_layer_norms(critic, F.mse_loss(value, target))
        advantage = (target - value).detach().flatten()
        actor_loss = -(log_prob(batch.obs, batch.actions) * advantage).mean()
        actor_layers, actor_value = loss_layer_norms(actor, actor_loss)
        return Probe(critic_loss, actor_value, float(value.detach().mean()), critic_layers,
                     actor_layers)
    return probe


def q_probe(critic: nn.Module, start: float, gamma: float) -> Callable[[Batch], Probe]:
    """The Q network's TD loss on `batch` (its target from the online network, as
    `ddpg_probe` takes it); its greedy actor has no loss of its own."""
    def probe(batch: Batch) -> Probe:
        with torch.no_grad():
            best = critic(batch.next_obs).max(dim=1, keepdim=True).values
            target = batch.rewards + gamma * (1.0 - batch.terminated) * best
        index = (batch.actions - start).long()  # [B, 1]
        q = critic(batch.obs).gather(1, index)
        critic_layers, critic_loss = loss_layer_norms(critic, F.mse_loss(q, target))
        return Probe(critic_loss, 0.0, float(q.detach().mean()), critic_layers, {})
    return probe
