"""A plain loop's networks as the Watcher's `AgentView`, by the family of its algorithm
(agents/families.py): what the loop hands in, and what each family requires of it.

- An actor and Q critics (DDPG, TD3, SAC, ...: `action_noise`, `max_entropy`): the actor
  maps observations to actions in the env's units, a critic (or each of several) maps
  (observation, action) to Q [B, 1]; a 1-D Box action space.
- A categorical policy and a state value (PPO, A2C: `on_policy`): `actor` maps
  observations to the policy's logits ([B, n]; a MultiDiscrete space's dimensions' side
  by side, [B, sum(nvec)], as CleanRL's MultiDiscrete PPO splits them), `critic` to
  V [B, 1]; a Discrete or MultiDiscrete action space.
- A Q network (DQN: `q_learning`): no actor (the policy is the greedy choice), `critic`
  maps observations to every action's Q [B, n]; a Discrete action space.

The views of the last two are SB3's (integrations/value_views.py): the policy's choice
as action indices, one bin per action in the state-action map, and the same probes.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rltrain.agents.families import ON_POLICY, Q_LEARNING
from rltrain.agents.registry import Algorithm
from rltrain.integrations.value_views import (
    Choices,
    greedy_actor,
    q_probe,
    value_probe,
    value_view,
)
from rltrain.integrations.views import Critics, Mirror, ddpg_probe, deterministic_act
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView


class LoopNetworks(NamedTuple):
    """The loop's networks, checked against its algorithm's family."""

    actor: nn.Module | None  # the loop's own actor (None: DQN acts on its Q network)
    critic: nn.Module  # one module: twin critics as `Critics`
    targets: dict[str, nn.Module]  # "actor_target", "critic_target" given
    captured: nn.Module  # the critic whose inputs are the loop's batches (the first)
    captured_target: nn.Module | None


def _one(nets: nn.Module | Sequence[nn.Module] | None) -> nn.Module | None:
    return nets if nets is None or isinstance(nets, nn.Module) else Critics(list(nets))


def _first(nets: nn.Module | Sequence[nn.Module] | None) -> nn.Module | None:
    return nets if nets is None or isinstance(nets, nn.Module) else nets[0]


def loop_networks(entry: Algorithm, actor: nn.Module | None,
                  critic: nn.Module | Sequence[nn.Module],
                  actor_target: nn.Module | None,
                  critic_target: nn.Module | Sequence[nn.Module] | None) -> LoopNetworks:
    """The networks as the Watcher keeps them; a ConfigError where the family's shape is
    not met (DQN given an actor, PPO given several critics, an actor-critic none)."""
    name = entry.name
    if entry.family == Q_LEARNING and actor is not None:
        raise ConfigError(f"algo {name} acts greedily on its Q network: pass actor=None and "
                          "the Q network as critic")
    if entry.family != Q_LEARNING and actor is None:
        raise ConfigError(f"algo {name} has an actor: pass it as actor (actor=None is a "
                          "DQN loop's, config algo dqn)")
    if entry.family in (ON_POLICY, Q_LEARNING) and not isinstance(critic, nn.Module):
        value = "its state value V" if entry.family == ON_POLICY else "its Q network"
        raise ConfigError(f"algo {name} has one value network: pass {value} as critic, "
                          "not a list")
    if entry.family == ON_POLICY and (actor_target is not None or critic_target is not None):
        raise ConfigError(f"algo {name} keeps no target network: leave actor_target and "
                          "critic_target out")
    targets = {"actor_target": actor_target, "critic_target": _one(critic_target)}
    return LoopNetworks(actor, _one(critic),
                        {k: net for k, net in targets.items() if net is not None},
                        _first(critic), _first(critic_target))


def loop_view(entry: Algorithm, nets: LoopNetworks, action_space: Any, gamma: float,
              device: torch.device, updates: Callable[[], int]) -> AgentView:
    """The view of the loop's networks (the Watcher adds what it watches of their
    optimisers' steps and batches)."""
    networks = {**({"actor": nets.actor} if nets.actor is not None else {}),
                "critic": nets.critic, **nets.targets}
    if entry.family == ON_POLICY:
        return _policy_and_value(entry, nets, action_space, gamma, device, updates,
                                 networks)
    if entry.family == Q_LEARNING:
        return _q_network(entry, nets, action_space, gamma, device, updates, networks)
    return _actor_and_critics(entry, nets, action_space, gamma, device, updates, networks)


def _choices(entry: Algorithm, space: Any, multi: bool) -> Choices:
    kinds = "a Discrete or MultiDiscrete" if multi else "a Discrete"
    if not isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)) or (
            not multi and not isinstance(space, spaces.Discrete)):
        more = (" (a loop of Box actions: algo ddpg, td3 or sac; SB3's PPO with "
                "RltrainCallback)" if multi else "")
        raise ConfigError(f"the Watcher watches algo {entry.name} with {kinds} action "
                          f"space, not {space}{more}")
    return Choices(space)


def _index_act(policy: nn.Module, choices: Choices,
               device: torch.device) -> Callable[[np.ndarray], Any]:
    """obs -> the policy's choice as the env takes it (an evaluation's action)."""
    act = deterministic_act(policy, device)
    return lambda obs: choices.env_action(act(obs))


def _policy_and_value(entry: Algorithm, nets: LoopNetworks, space: Any, gamma: float,
                      device: torch.device, updates: Callable[[], int],
                      networks: dict[str, nn.Module]) -> AgentView:
    choices = _choices(entry, space, multi=True)
    logits = nets.actor
    assert logits is not None
    policy = Mirror(logits, lambda obs: choices.mode(logits(obs)))

    def log_prob(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return choices.log_prob(logits(obs), actions)

    return value_view(policy, nets.critic, value_probe(log_prob, policy, nets.critic, gamma),
                      _index_act(policy, choices, device), updates, lambda: networks,
                      choices.low, choices.high, device, choices.n)


def _q_network(entry: Algorithm, nets: LoopNetworks, space: Any, gamma: float,
               device: torch.device, updates: Callable[[], int],
               networks: dict[str, nn.Module]) -> AgentView:
    choices = _choices(entry, space, multi=False)
    start = float(choices.start[0])
    greedy = greedy_actor(nets.critic, start)
    return value_view(greedy, nets.critic, q_probe(nets.critic, start, gamma),
                      _index_act(greedy, choices, device), updates, lambda: networks,
                      choices.low, choices.high, device, choices.n)


def _actor_and_critics(entry: Algorithm, nets: LoopNetworks, space: Any, gamma: float,
                       device: torch.device, updates: Callable[[], int],
                       networks: dict[str, nn.Module]) -> AgentView:
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        raise ConfigError(f"algo {entry.name} acts in a 1-D Box action space, not {space}; "
                          "a loop of Discrete actions is watched as algo ppo, a2c or dqn "
                          "(config={'algo': ...})")
    actor, first = nets.actor, nets.captured
    assert actor is not None

    def q_value(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return first(obs, action)[..., :1]

    return AgentView(
        actor=actor, critic=nets.critic, q_value=q_value,
        act=deterministic_act(actor, device),
        probe=ddpg_probe(actor, nets.critic, q_value, gamma), updates=updates,
        networks=lambda: networks, action_low=np.asarray(space.low, np.float32),
        action_high=np.asarray(space.high, np.float32), device=device)
