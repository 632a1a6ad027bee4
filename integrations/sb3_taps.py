"""The tap: the action SB3's own acting pass computed, read by forward hooks, so that
the state-action map of a watched actor-critic (TD3, DDPG, SAC, CrossQ, TQC) costs no
forward pass of its own: the actor's `mu`, and SAC's exploration noise recovered from
the sampled action. A pass is the acting one when it runs on the training envs' current
observations (`on_last_obs`). PPO, A2C and DQN need none: their steps are told once per
collection (sb3_rollouts.py), the map's actions computed then in one pass.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

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
