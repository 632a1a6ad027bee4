"""RLlib's PPO and DQN (new API stack, a Discrete action space) as rltrain's hooks see
them, built on what the SB3 callback and the Watcher share (integrations/value_views.py:
a discrete action as its index, one bin per action in the state-action map, the probes),
and their learners' reports as the update metrics the rules of their families read.

PPO's RLModule (`DefaultPPOTorchRLModule`) has an actor-critic encoder (`encoder`: an
`actor_encoder` and a `critic_encoder`, or with `vf_share_layers` one `encoder` both
use), the policy head `pi` (the categorical policy's logits) and the value head `vf`.
The view's `actor` is the policy's likeliest action (its encoder and `pi`), its `critic`
V ([B, 1]: the critic's encoder, where it has its own, and `vf`), so that a shared
encoder counts as the policy's, as SB3's shared features extractor does. DQN's
(`DefaultDQNTorchRLModule`) has an `encoder`, the advantage head `af` (the Q head
without `dueling`) and with `dueling` the value head `vf`, and their targets
(`_target_encoder`, ...): the view's `critic` is every action's Q ([B, n], RLlib's
`compute_q_values`), its `actor` the greedy choice. The parts keep RLlib's names. This
module reads the module's attributes only and imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import nn

from rltrain.integrations.rllib_view import reported_norms
from rltrain.integrations.value_views import (
    Choices,
    LogProb,
    greedy_actor,
    part,
    q_probe,
    value_probe,
    value_view,
)
from rltrain.integrations.views import deterministic_act
from rltrain.utils.hooks.agent_view import AgentView

# RLlib's keys (ray.rllib.core.columns, ray.rllib.core.models.base, DQN's module)
OBS, ENCODER_OUT, QF_PREDS = "obs", "encoder_out", "qf_preds"
# RLlib's PPO learner's report -> the update metrics the on-policy rules read. RLlib's
# `vf_loss` is the squared error clipped at `vf_clip_param` (10 by default, far under
# CartPole's squared returns): the value function's fit is its unclipped mean, as SB3's
# value_loss. The entropy is reported as SB3's entropy loss, its negative.
PPO_LOSSES = {"policy_loss": "actor_loss", "vf_loss_unclipped": "critic_loss",
              "vf_explained_var": "explained_variance",
              "default_optimizer_learning_rate": "learning_rate"}
# ... and of its report kept under RLlib's own names (no rule reads them)
PPO_OWN = ("vf_loss", "mean_kl_loss", "curr_kl_coeff", "curr_entropy_coeff")
# RLlib's DQN learner's report -> the update metrics (its epsilon: the env runner's)
DQN_LOSSES = {"qf_loss": "critic_loss", "qf_mean": "q_mean",
              "default_optimizer_learning_rate": "learning_rate"}
DQN_OWN = ("td_error_mean",)


def _index_act(policy: nn.Module, choices: Choices,
               device: torch.device) -> Callable[[np.ndarray], Any]:
    """obs -> the policy's choice as the env takes it (an evaluation's action)."""
    act = deterministic_act(policy, device)
    return lambda obs: choices.env_action(act(obs))


def ppo_view(module: nn.Module, space: Any, gamma: float,
             updates: Callable[[], int]) -> tuple[AgentView, LogProb]:
    """What the hooks may see of RLlib's PPO `module` (the learner's, which trains), and
    its policy's log-probability of actions (the iteration's step is measured with it)."""
    choices = Choices(space)
    device = next(module.parameters()).device
    encoder = module.encoder
    shared = not hasattr(encoder, "actor_encoder")  # vf_share_layers: one `encoder`
    actor_encoder = encoder.encoder if shared else encoder.actor_encoder

    def logits(obs: torch.Tensor) -> torch.Tensor:
        return module.pi(actor_encoder({OBS: obs})[ENCODER_OUT])  # [B, n]

    def log_prob(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return choices.log_prob(logits(obs), actions)

    policy = part(lambda obs: choices.mode(logits(obs)), pi=module.pi,
                  **{"encoder" if shared else "actor_encoder": actor_encoder})
    critic = part(lambda obs: module.compute_values({OBS: obs}).unsqueeze(-1),
                  critic_encoder=None if shared else encoder.critic_encoder, vf=module.vf)
    nets = {"actor": policy, "critic": critic}
    view = value_view(policy, critic, value_probe(log_prob, policy, critic, gamma),
                      _index_act(policy, choices, device), updates, lambda: nets,
                      choices.low, choices.high, device, choices.n)
    return view, log_prob


def _q_network(module: nn.Module, prefix: str) -> nn.Module:
    """DQN's online (`prefix` "") or target (`prefix` "_target_") Q network: obs -> every
    action's Q, [B, n]; its parts under the online network's names."""
    dueling = bool(getattr(module, "uses_dueling", False))
    forward = module.forward_target if prefix else module.compute_q_values
    return part(lambda obs: forward({OBS: obs})[QF_PREDS],
                encoder=getattr(module, f"{prefix}encoder"), af=getattr(module, f"{prefix}af"),
                vf=getattr(module, f"{prefix}vf") if dueling else None)


def dqn_view(module: nn.Module, space: Any, gamma: float,
             updates: Callable[[], int]) -> AgentView:
    """What the hooks may see of RLlib's DQN `module` (the learner's)."""
    choices = Choices(space)
    device = next(module.parameters()).device
    start = float(choices.start[0])
    q_net = _q_network(module, "")
    nets = {"critic": q_net, "critic_target": _q_network(module, "_target_")}
    greedy = greedy_actor(q_net, start)
    return value_view(greedy, q_net, q_probe(q_net, start, gamma),
                      _index_act(greedy, choices, device), updates, lambda: nets,
                      choices.low, choices.high, device, choices.n)


def _renamed(learner: Mapping[str, Any], losses: Mapping[str, str],
             own: tuple[str, ...]) -> dict[str, float]:
    metrics = {ours: float(learner[key]) for key, ours in losses.items() if key in learner}
    metrics.update({key: float(learner[key]) for key in own if key in learner})
    return {**metrics, **reported_norms(learner)}


def ppo_metrics(learner: Mapping[str, Any]) -> dict[str, float]:
    """RLlib's PPO learner's report (its last minibatch's values) as update metrics."""
    metrics = _renamed(learner, PPO_LOSSES, PPO_OWN)
    if "entropy" in learner:
        metrics["entropy_loss"] = -float(learner["entropy"])
    return metrics


def dqn_metrics(learner: Mapping[str, Any], epsilon: float | None) -> dict[str, float]:
    """RLlib's DQN learner's report as update metrics, with the epsilon the env runner
    explored with (`exploration_rate`, as SB3 names it)."""
    metrics = _renamed(learner, DQN_LOSSES, DQN_OWN)
    if epsilon is not None:
        metrics["exploration_rate"] = epsilon
    return metrics


def policy_step(log_prob: LogProb, obs: np.ndarray, actions: np.ndarray,
                sampled_logp: np.ndarray, clip: float, device: torch.device
                ) -> dict[str, float]:
    """How far an iteration's update moved PPO's policy from the one that sampled it,
    on the iteration's own steps (RLlib reports no such figure: its `mean_kl_loss` is 0
    without `use_kl_loss`, and one minibatch's otherwise): SB3's approximate KL,
    mean((r - 1) - log r) of the ratio r of the updated policy's probability of each
    action to the sampling one's, and the share of ratios PPO's clip (`clip_param`)
    cuts. SB3 takes both over the minibatches of its last epoch, before each one's step;
    this is after the last step."""
    with torch.no_grad():
        x = torch.as_tensor(obs, dtype=torch.float32, device=device)
        a = torch.as_tensor(actions, dtype=torch.float32, device=device)
        log_ratio = log_prob(x, a) - torch.as_tensor(sampled_logp, device=device)  # [T]
        ratio = torch.exp(log_ratio)
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipped = ((ratio - 1).abs() > clip).float().mean()
    return {"approx_kl": float(approx_kl), "clip_fraction": float(clipped)}
