"""What the hand-written updates of the maximum-entropy family (agents/sac_fused.py,
agents/crossq_fused.py) compute alike: the tanh-squashed Gaussian policy's heads, its
sample and log-probability, the actor loss's gradient back through them, the gradient
of the twin critics' minimum, and the temperature's step.

The same maths as networks/gaussian_actor.py `sample` and agents/sac_update.py. The
gradient of the actor's loss mean(alpha log pi - min_i Q_i(obs, s)) through the
squashed Gaussian, per action dimension, with u = mean + std * eps, s = tanh(u),
log pi = sum(-eps^2/2 - log std - log(2 pi)/2) - sum(log(1 - s^2 + 1e-6)):
  dL/du = (dL/ds + dL/dlog pi * 2 s / (1 - s^2 + 1e-6)) * (1 - s^2)
  dL/dmean = dL/du;  dL/dlog std = dL/du * std * eps - dL/dlog pi  (0 where clamped)
where dL/ds reaches s through the critic whose Q is the lower on that row.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rltrain.agents.fused_ops import Layer
from rltrain.agents.sac_update import SACAgent
from rltrain.networks.gaussian_actor import HALF_LOG_2PI, LOG_STD_MAX, LOG_STD_MIN, TANH_EPS


class Squashed(NamedTuple):
    """Sampled actions of the tanh-squashed Gaussian, in the [-1, 1] units the critic
    takes, and what the backward pass reads of them; rows as the observations'."""

    squashed: torch.Tensor   # tanh(u) [rows, action_dim]
    log_prob: torch.Tensor   # [rows, 1]
    std: torch.Tensor        # [rows, action_dim]
    eps: torch.Tensor        # the standard normal draws [rows, action_dim]
    unclamped: torch.Tensor  # where the log-std head's output lies within its clamp

    def split(self, rows: int) -> tuple["Squashed", "Squashed"]:
        """The first `rows` rows and the rest (row slices: no copies)."""
        return (Squashed(*(x[:rows] for x in self)), Squashed(*(x[rows:] for x in self)))


def heads_forward(heads: list[Layer], latent: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and the unclamped log-std [rows, action_dim] from the policy's `latent`
    features; `heads`: the mean's and the log-std's layers."""
    (mu_w, mu_b), (std_w, std_b) = heads
    return torch.addmm(mu_b, latent, mu_w), torch.addmm(std_b, latent, std_w)


def squash(mean: torch.Tensor, raw_log_std: torch.Tensor, noise: torch.Tensor) -> Squashed:
    """The sample tanh(mean + std * noise) and its log-probability."""
    log_std = raw_log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    std = log_std.exp()
    squashed = torch.tanh(mean + std * noise)
    log_prob = (-0.5 * noise.square() - log_std - HALF_LOG_2PI).sum(-1, keepdim=True)
    log_prob = log_prob - torch.log1p(-squashed.square() + TANH_EPS).sum(-1, keepdim=True)
    unclamped = (raw_log_std >= LOG_STD_MIN) & (raw_log_std <= LOG_STD_MAX)
    return Squashed(squashed, log_prob, std, noise, unclamped)


def squash_backward(sample: Squashed, grad_s: torch.Tensor,
                    grad_log_prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/dmean and dL/dlog-std (the unclamped head's output) from dL/ds [rows,
    action_dim] and dL/dlog pi (the same for every row)."""
    s = sample.squashed
    # 1 + (-s^2 + 1e-6) as the reference's log1p computes it: near |s| = 1 it is not
    # the same float as (1 - s^2) + 1e-6.
    log1p_input = -s.square() + TANH_EPS
    grad_u = (grad_s + grad_log_prob * 2.0 * s / (log1p_input + 1.0)) * (1.0 - s.square())
    grad_log_std = torch.where(sample.unclamped,
                               grad_u * sample.std * sample.eps - grad_log_prob, 0.0)
    return grad_u, grad_log_std


def heads_backward(heads: list[Layer], head_grads: list[Layer], latent: torch.Tensor,
                   grad_mean: torch.Tensor, grad_log_std: torch.Tensor) -> torch.Tensor:
    """Write the heads' weight and bias gradients into `head_grads`; return dL/dlatent."""
    (mu_w, _), (std_w, _) = heads
    for grad, (weight_grad, bias_grad) in zip((grad_mean, grad_log_std), head_grads,
                                              strict=True):
        torch.mm(latent.t(), grad, out=weight_grad)
        torch.sum(grad, dim=0, out=bias_grad)
    return torch.addmm(torch.mm(grad_mean, mu_w.t()), grad_log_std, std_w.t())


def actor_latent_gradient(sample: Squashed, grad_x: torch.Tensor, obs_dim: int,
                          ent_coef: torch.Tensor, heads: list[Layer], head_grads: list[Layer],
                          latent: torch.Tensor) -> torch.Tensor:
    """dL/dlatent of the actor's loss mean(alpha log pi - Q(obs, s)) [rows, hidden], from
    its gradient at the critics' input `grad_x` = dL/d[obs, s] (the critic takes s
    itself, in normalised units) and the alpha log pi term; the heads' weight and bias
    gradients are written into `head_grads`."""
    grad_s = grad_x[:, obs_dim:]
    grad_u, grad_log_std = squash_backward(sample, grad_s, ent_coef / grad_x.shape[0])
    return heads_backward(heads, head_grads, latent, grad_u, grad_log_std)


def lower_critic_gradients(q1: torch.Tensor, q2: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """d(-mean(min(q1, q2)))/dq1 and /dq2, [rows, 1]: the minimum's gradient goes to the
    lower critic (the first where they tie)."""
    rows = q1.shape[0]
    second = q2 < q1
    return torch.where(second, 0.0, -1.0 / rows), torch.where(second, -1.0 / rows, 0.0)


def temperature_step(agent: SACAgent, log_prob: torch.Tensor) -> dict[str, torch.Tensor]:
    """The learnt temperature's step on the policy sample's `log_prob` [rows, 1] (none
    for a fixed one): its loss -mean(log alpha (log pi + target entropy)), whose
    gradient is written into the temperature's `FlatAdam`."""
    if not agent.temperature.learnt:
        return {}
    shortfall = log_prob + agent.target_entropy
    loss = -(agent.log_ent_coef * shortfall).mean()
    optimiser = agent.ent_coef_opt
    torch.mean(shortfall, dim=0, out=optimiser.grad).neg_()  # dLoss/dlog(alpha)
    optimiser.step(loss, None)
    return {"ent_coef_loss": loss}
