"""A toy algorithm that lives outside rltrain, for tests/test_toy_algorithm.py.

Importing this module registers algo "toy" (agents/registry.py `register`): a
deterministic policy gradient with one critic and no target networks, written against
the interface of agents/base.py alone, and with one option of its own (section `toy:`).
No file of rltrain names it; a process must import this module before rltrain's config
(whose schema is built from the registry once), as the test's processes do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.agents.base import Agent, Batch, CommonSettings, Implementation, built_from_spec
from rltrain.agents.families import ACTION_NOISE
from rltrain.agents.registry import Algorithm, option, register
from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic

STATE_KEYS = ("actor", "critic", "actor_optimizer", "critic_optimizer", "updates")


@dataclass(frozen=True)
class ToyOptions:
    actor_every: int = option(2, "the actor steps every this many critic updates", low=1)


class ToyAgent:
    """One critic bootstrapped from itself, one deterministic actor, plain Adam."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 common: CommonSettings, options: ToyOptions, device: torch.device) -> None:
        self.settings, self.options, self.device = common, options, device
        self.actor = Actor(obs_dim, action_low, action_high, common.actor_net).to(device).eval()
        self.critic = Critic(obs_dim, action_low, action_high, common.critic_net,
                             n_critics=1).to(device).eval()
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=common.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=common.critic_lr)
        self.updates = 0
        self.drawn = None  # the collector adds the action noise

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        rows = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        action = self.actor(rows.reshape(-1, rows.shape[-1]))
        return action.reshape(*rows.shape[:-1], -1).cpu().numpy()

    def _critic_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            next_q = self.critic(batch.next_obs, self.actor(batch.next_obs))[0]
            target = batch.rewards + self.settings.gamma * (1 - batch.terminated) * next_q
        q = self.critic(batch.obs, batch.actions)
        return (q[0] - target).square().mean(), q

    def _actor_loss(self, batch: Batch) -> torch.Tensor:
        return -self.critic.q1(batch.obs, self.actor(batch.obs)).mean()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.updates += 1
        critic_loss, q = self._critic_loss(batch)
        metrics = {"critic_loss": critic_loss.detach(), "q_mean": q.mean().detach(),
                   "critic_grad_norm": _step(self.critic_opt, self.critic, critic_loss)}
        if self.updates % self.options.actor_every == 0:
            actor_loss = self._actor_loss(batch)
            metrics["actor_grad_norm"] = _step(self.actor_opt, self.actor, actor_loss)
            metrics["actor_loss"] = actor_loss.detach()
        return metrics

    def networks(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic}

    def optimizers(self) -> dict[str, Any]:
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        critic_loss, q = self._critic_loss(batch)
        return critic_loss, self._actor_loss(batch), q

    def parameters_finite(self) -> bool:
        return all(bool(torch.isfinite(p).all()) for net in self.networks().values()
                   for p in net.parameters())

    def state_dict(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "actor_optimizer": self.actor_opt.state_dict(),
                "critic_optimizer": self.critic_opt.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_opt.load_state_dict(state["actor_optimizer"])
        self.critic_opt.load_state_dict(state["critic_optimizer"])
        self.updates = int(state["updates"])
        return True

    def reseed(self, seed: int) -> None:
        """It draws no random numbers of its own."""

    def restore_warnings(self) -> list[str]:
        return []


def _step(optimiser: Any, net: nn.Module, loss: torch.Tensor) -> torch.Tensor:
    optimiser.zero_grad()
    loss.backward()
    norm = torch.nn.utils.get_total_norm([p.grad for p in net.parameters()])
    optimiser.step()
    return norm.detach()


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: ToyOptions, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    return ToyAgent(obs_dim, action_low, action_high, common, options, device), None


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(Actor))

register(Algorithm("toy", "a test's: one critic bootstrapped from itself, no targets",
                   "toy_algorithm", ToyOptions, family=ACTION_NOISE, targets=()))
