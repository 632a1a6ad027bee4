"""The critic checks' statistics, for every algorithm: saturation, Q over-estimation, dead
ReLUs (their rules: rules/critic_rules.py).

- `action_saturation`: the share of the policy's actions within 1% of the action bounds
  (from the state-action samples): a tanh pushed into saturation stops passing
  gradient, and bang-bang behaviour is often an action-scale problem.
- `q_overestimation`: the critic's Q1 at the evaluation start states against the
  discounted return those episodes actually obtained (plus gamma^T Q at the last state
  when a time limit cut the episode), relative to max(|return|, largest |reward| seen):
  the floor keeps a return near 0 (MountainCarContinuous before the goal is found) from
  turning any small error into a huge relative one. DDPG's critic is known to
  over-estimate (Fujimoto et al. 2018); the twin-min target counters it. A soft critic
  (the SAC family) learns the return plus the entropy bonus alpha*H a step, and keeps
  the bonus its targets had for a while after the temperature falls: `EntropyBonus`
  follows how much of it Q holds, added to the obtained return (below).
- `dead_relu`: per hidden ReLU, the share of units that are zero for every sample of
  the newest replay batch. The ReLUs are found as `nn.ReLU` modules, in any network; a
  network with another activation has none to judge.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.training.replay_buffer import Batch


class EntropyBonus:
    """The entropy bonus a soft critic's Q may hold, per step: alpha*H (the update's
    `ent_coef` times its `entropy`), read every `every_updates` updates (where an
    update reports them), followed with the lag of the critic. A bonus b a step in
    every target puts b/(1-gamma) into Q, and the critic gets there at the pace of its
    target: each update moves the target network `tau` of the way, each full move
    discounts what is left to learn by gamma, so Q closes a share 1 - gamma**tau of
    the distance an update, on the way up as on the way down (an update moves all the
    way without target networks: `tau` 1). With SAC's 0.99 and 0.005, about a third of
    a bonus that stopped is still in Q 20,000 updates later. Algorithms without a
    temperature report no `ent_coef`: their bonus stays 0."""

    def __init__(self, gamma: float, tau: float, every_updates: int = 100) -> None:
        self.gamma, self.tau, self.every = gamma, tau, every_updates
        self.held = 0.0  # the bonus a step Q holds
        self.read_at = 0  # the updates at the last reading

    def update(self, updates: int, metrics: dict) -> None:
        if updates % self.every or "ent_coef" not in metrics or "entropy" not in metrics:
            return
        bonus = max(float(metrics["ent_coef"]) * float(metrics["entropy"]), 0.0)
        kept = self.gamma ** (self.tau * max(updates - self.read_at, 0))
        self.held = kept * self.held + (1.0 - kept) * bonus
        self.read_at = updates

    def state_dict(self) -> dict[str, float]:
        return {"held": self.held, "read_at": self.read_at}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.held, self.read_at = float(state["held"]), int(state["read_at"])


def discounted_steps(gamma: float, lengths: np.ndarray) -> np.ndarray:
    """sum_{t<T} gamma**t for each episode length T."""
    lengths = np.asarray(lengths, dtype=np.float64)
    return lengths if gamma == 1 else (1.0 - gamma ** lengths) / (1.0 - gamma)


@torch.no_grad()
def q_overestimation(agent: AgentView, result: EvalResult, gamma: float,
                     reward_scale: float, bonus: float = 0.0) -> dict[str, float]:
    """`reward_scale`: the largest |reward| seen, the floor of the relative error's scale;
    `bonus`: the entropy bonus a step Q may hold (`EntropyBonus.held`), added to what the
    episodes obtained over their steps (past a time limit, the Q of the last state holds
    it already). An evaluation without its episodes' start states (one a library or a
    loop ran) gives NaN: nothing to compare."""
    if len(result.start_obs) == 0:
        nan = float("nan")
        return {"q_estimate": nan, "q_obtained": nan, "q_entropy_bonus": nan,
                "q_overestimation": nan}

    def value(obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs, dtype=torch.float32, device=agent.device)
        return agent.q_value(x, agent.actor(x))[:, 0].cpu().numpy().astype(np.float64)

    tail = np.where(result.truncated, gamma ** np.asarray(result.lengths), 0.0)
    obtained = np.asarray(result.discounted_returns) + tail * value(result.final_obs)
    estimate = float(value(result.start_obs).mean())
    actual = float(obtained.mean())
    in_q = bonus * float(discounted_steps(gamma, result.lengths).mean())
    return {"q_estimate": estimate, "q_obtained": actual, "q_entropy_bonus": in_q,
            "q_overestimation": (estimate - actual - in_q)
            / max(abs(actual), reward_scale, 1e-12)}


@torch.no_grad()
def dead_relu(agent: AgentView, batch: Batch) -> dict[str, float]:
    """Share of never-active units per hidden ReLU, e.g. {"actor.0": 0.02, "critic.1": 0.1}."""
    shares = {}
    for name, net, inputs in (("actor", agent.actor, (batch.obs,)),
                              ("critic", agent.critic, (batch.obs, batch.actions))):
        for i, h in enumerate(relu_outputs(net, *inputs)):  # [..., B, W]
            shares[f"{name}.{i}"] = float((h <= 0).all(dim=-2).float().mean())
    return shares


def relu_outputs(net: nn.Module, *inputs: torch.Tensor) -> list[torch.Tensor]:
    """The output of every `nn.ReLU` of `net` in one forward pass on `inputs`."""
    outputs: list[torch.Tensor] = []
    hooks = [m.register_forward_hook(lambda _m, _in, out: outputs.append(out))
             for m in net.modules() if isinstance(m, nn.ReLU)]
    try:
        net(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return outputs
