"""The taps: the action SB3's own acting pass computed, read by forward hooks, so that
the state-action map of a watched SB3 run costs no forward pass of its own. `PolicyTap`
for the actor-critics (TD3, DDPG, SAC, CrossQ, TQC: the actor's `mu`, and SAC's
exploration noise recovered from the sampled action), `ModeTap` for PPO, A2C (the action
net) and DQN (the Q network). A pass is the acting one when it runs on the training
envs' current observations (`on_last_obs`), or, for PPO and A2C, inside the policy's
`forward`, which only SB3's rollouts call.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rltrain.integrations.sb3_value_view import action_mode, direct_mode
from rltrain.integrations.sb3_view import Scale
from rltrain.utils.training.exploration import drawn


def on_last_obs(model: Any, inputs: tuple) -> bool:
    """Whether a pass's input is the training envs' current observations (SB3's
    `_last_obs`, what it acts on): shapes compared first, so that other passes (the
    probes' batches, on a GPU too) cost no copy to the host."""
    last = model._last_obs
    if not inputs or not isinstance(last, np.ndarray):
        return False
    x = inputs[0]
    return (isinstance(x, torch.Tensor) and tuple(x.shape) == last.shape
            and np.array_equal(x.detach().cpu().numpy(), last))


class PolicyTap:
    """The deterministic action SB3's own acting pass computed (a forward hook on the
    actor's `mu`, kept from the actor's pass on the training envs' current observations
    with grad off), so that the state-action map costs no forward pass of its own.
    TD3's `mu` ends in tanh; SAC's is the mean before the squash, its deterministic
    action tanh(mu)."""

    def __init__(self, model: Any, scale: Scale) -> None:
        self.model, self.n_envs, self.scale = model, model.n_envs, scale
        self.squash = "deterministic" in inspect.signature(model.actor.forward).parameters
        self.latest: torch.Tensor | None = None
        # SB3 acts through `predict` on the training envs' current observations, as any
        # caller may (an EvalCallback): the actor's pass on those is the acting one.
        self.acting = False
        actor = model.actor
        self._handles = [actor.register_forward_pre_hook(self._enter),
                         actor.register_forward_hook(self._leave),
                         actor.mu.register_forward_hook(self._keep)]
        # SAC's log-std of the same pass: its noise is recovered from the sampled action.
        self.log_std: torch.Tensor | None = None
        if self.squash and isinstance(getattr(actor, "log_std", None), torch.nn.Module):
            self._handles.append(actor.log_std.register_forward_hook(self._keep_std))

    def _enter(self, module: Any, inputs: tuple) -> None:
        self.acting = not torch.is_grad_enabled() and on_last_obs(self.model, inputs)

    def _leave(self, *_: Any) -> None:
        self.acting = False

    def _keep(self, module: Any, inputs: tuple, output: torch.Tensor) -> None:
        if self.acting and output.shape[0] == self.n_envs:
            self.latest = output

    def _keep_std(self, module: Any, inputs: tuple, output: torch.Tensor) -> None:
        if self.acting and output.shape[0] == self.n_envs:
            self.log_std = output

    def exploration(self, out: torch.Tensor, taken: np.ndarray,
                    action_noise: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The exploration noise in the actions SB3 took (`taken`: its buffer_actions, in
        [-1, 1]) after the acting pass that gave `out`, and the deterministic action:
        SAC's standard normal draws (from the sampled action and the pass's mean and
        log-std; NaN where tanh saturated and they cannot be told); TD3/DDPG's action
        minus the policy's over NormalActionNoise's sigma (exploration.drawn: as the
        bounds clipped it). None: TD3/DDPG without NormalActionNoise (none: the actions
        are the policy's own), or a SAC whose log-std was not seen."""
        mean = out.detach().cpu().double().numpy()
        taken = np.asarray(taken, dtype=np.float64).reshape(mean.shape)
        if not self.squash:
            from stable_baselines3.common.noise import NormalActionNoise  # SB3 is installed

            noise = getattr(action_noise, "base_noise", action_noise)  # vectorised
            sigma = getattr(noise, "_sigma", None)
            if not isinstance(noise, NormalActionNoise) or sigma is None:
                return None  # none, or OU noise (not independent from step to step)
            unit = np.asarray(sigma, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = (taken - mean) / unit
            return drawn(step, mean, unit, -1.0, 1.0)
        inside = (np.abs(taken) < 1 - 1e-6).all(axis=1, keepdims=True)  # else saturated
        log_std, self.log_std = self.log_std, None
        if log_std is None:
            return None
        std = np.exp(np.clip(log_std.detach().cpu().double().numpy(), -20.0, 2.0))  # SB3's
        u = np.arctanh(np.clip(taken, -1 + 1e-6, 1 - 1e-6))  # SB3's TanhBijector's bound
        return np.where(inside, (u - mean) / std, np.nan), np.tanh(mean)

    def pop(self) -> torch.Tensor | None:
        """The actor's output in the latest acting pass (None: there was none, a random
        warm-up step), forgotten once read; `env_action` turns it into the action."""
        out, self.latest = self.latest, None
        return out

    def env_action(self, out: torch.Tensor) -> np.ndarray:
        """An output `pop` gave as the deterministic action in env units."""
        scaled = out.detach().cpu().numpy()
        return self.scale.to_env_np(np.tanh(scaled) if self.squash else scaled)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


class ModeTap:
    """The mode SB3's own acting pass computed (PPO's and A2C's action net, DQN's Q
    network: a forward hook), so that the state-action map costs no forward pass of its
    own; what the callback uses of PolicyTap, for the actor-critics. Kept
    only from the acting pass itself, not from another caller's `predict` (an
    EvalCallback's, with as many envs): `acting(inputs)` says whether a pass is it.
    DQN's epsilon-greedy steps that act at random run no pass: the callback then has
    the map call the view's actor."""

    def __init__(self, module: nn.Module, n_envs: int,
                 mode_of: Callable[[torch.Tensor], torch.Tensor],
                 acting: Callable[[tuple], bool]) -> None:
        self.n_envs, self.mode_of, self.acting = n_envs, mode_of, acting
        self.latest: torch.Tensor | None = None
        self._handles = [module.register_forward_hook(self._keep)]

    def _keep(self, module: Any, inputs: tuple, output: torch.Tensor) -> None:
        if (not torch.is_grad_enabled() and output.shape[0] == self.n_envs
                and self.acting(inputs)):
            self.latest = output

    def pop(self) -> torch.Tensor | None:
        """The output of the latest acting pass (None: none since the last call)."""
        out, self.latest = self.latest, None
        return out

    def env_action(self, out: torch.Tensor) -> np.ndarray:
        """The mode, in env units, that an output `pop` gave."""
        return self.mode_of(out.detach()).cpu().numpy()

    def exploration(self, *_: Any) -> None:
        """No exploration noise to recover: the policy samples, or acts at random."""
        return None

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def mode_tap(model: Any) -> ModeTap | None:
    """The tap on a PPO, A2C or DQN model's acting pass (None: a policy whose mode is
    not its action net's output; the map then calls the view's actor). PPO and A2C act
    through the policy's `forward`, which nothing else of SB3's calls (`predict` and
    the update go around it): the action net's pass inside it is the acting one. DQN
    acts through `predict`, as any caller does: its pass is the acting one when its
    input is the training envs' current observations."""
    if hasattr(model, "q_net"):  # DQN
        start = float(model.action_space.start)
        return ModeTap(model.q_net, model.n_envs,
                       lambda q: q.argmax(dim=1, keepdim=True).float() + start,
                       lambda inputs: on_last_obs(model, inputs))
    policy = model.policy
    if not direct_mode(policy):
        return None
    inside = [False]  # within the policy's forward
    tap = ModeTap(policy.action_net, model.n_envs, action_mode(model.action_space, model.device),
                  lambda inputs: inside[0])

    def enter(*_: Any) -> None:
        inside[0] = True

    def leave(*_: Any) -> None:
        inside[0] = False

    tap._handles += [policy.register_forward_pre_hook(enter),
                     policy.register_forward_hook(leave)]
    return tap
