"""Health rules of the TrainingMonitor: early stopping, bad returns, NaN/inf, explosions.

Every rule has the same shape: a name, a threshold and an action (`warn`, `pause` or
`off`), all from the config; `safe_mode: false` turns pauses into warnings. A check
returns `Finding`s; what happens to them (event line, console, pause) is the monitor's
job. The per-step checks are plain Python/NumPy on values the loop already has on the
host, so they cost a few microseconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import psutil
import torch

from rltrain.utils.config import TrainConfig
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks import EpisodeEnd, Evaluation, Hook, Step, Update
from rltrain.utils.monitor import Finding, make_rule
from rltrain.utils.rules._remedies import remedy

MIB = 1024 * 1024


def is_finite(obs: np.ndarray, action: np.ndarray, reward: float) -> bool:
    """Whether a transition may be stored (NaN/inf values are never learnt from)."""
    return bool(np.isfinite(obs).all() and math.isfinite(reward) and np.isfinite(action).all())


class HealthRules(Hook):
    """The monitor's health checks, each one a rule of the same shape, as one hook."""

    name = "health"

    def __init__(self, config: TrainConfig, obs_dim: int, device: torch.device) -> None:
        m, safe = config.monitor, config.safe_mode
        self.memory_check_freq = m.memory_check_freq
        memory_mib = m.memory.threshold or 0.9 * psutil.virtual_memory().total / MIB
        gpu_mib = m.memory.gpu_threshold
        if gpu_mib is None and device.type == "cuda":
            gpu_mib = 0.9 * torch.cuda.get_device_properties(device).total_memory / MIB
        self.device = device
        self.config = config
        self.gpu_mib = gpu_mib
        self.learning_starts = config.learning_starts
        self.low, self.high = _bounds(m.state_bounds.low, m.state_bounds.high, obs_dim)
        reward_action = "off" if config.min_reward_threshold is None else \
            m.catastrophic_reward.action
        bounds_action = "off" if self.low is None and self.high is None else \
            m.state_bounds.action
        self.rules = {r.name: r for r in (
            make_rule("early_stopping", config.patience, m.early_stopping.action, safe),
            make_rule("catastrophic_reward", config.min_reward_threshold, reward_action, safe),
            make_rule("non_finite", None, m.non_finite.action, safe),
            make_rule("critic_loss_explosion", m.critic_loss_explosion.threshold,
                      m.critic_loss_explosion.action, safe),
            make_rule("q_explosion", m.q_explosion.threshold, m.q_explosion.action, safe),
            make_rule("grad_explosion", m.grad_explosion.threshold, m.grad_explosion.action,
                      safe),
            make_rule("memory", round(memory_mib, 1), m.memory.action, safe),
            make_rule("state_bounds", [_plain(self.low), _plain(self.high)], bounds_action,
                      safe),
        )}

    # ------------------------------------------------------------- the hook
    def on_step(self, step: Step) -> list[Finding]:
        if step.stored:  # the loop found it finite (`is_finite`): only the bounds are left
            return self._check_bounds(step.env_steps, step.next_obs) \
                if self.low is not None or self.high is not None else []
        return self.check_transition(step.env_steps, step.next_obs, step.action,
                                     step.reward)[0]

    def on_update(self, update: Update) -> list[Finding]:
        return self.check_update(update.env_steps, update.metrics)

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        return self.check_episode(episode.env_steps, episode.episode_return)

    def on_step_end(self, env_steps: int) -> list[Finding]:
        return self.check_memory(env_steps) if env_steps % self.memory_check_freq == 0 else []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        steps, mean = evaluation.env_steps, evaluation.result.mean
        found = [] if np.isfinite(mean) else self.fire(
            "non_finite", steps, "evaluation return",
            f"the evaluation return at env step {steps} is {mean}: the env gave NaN/inf "
            "rewards in evaluation (training leaves such rewards out)")
        return found + self.check_patience(steps, evaluation.evals_since_best)

    # ------------------------------------------------------------- the checks
    def fire(self, name: str, env_steps: int, value: Any, message: str,
             on_weights: bool = False) -> list[Finding]:
        return self.rules[name].fire(env_steps, value, message, on_weights=on_weights,
                                     suggested_set=remedy(name, self.config))

    def check_transition(self, env_steps: int, obs: np.ndarray, action: np.ndarray,
                         reward: float) -> tuple[list[Finding], bool]:
        """After an env step: (findings, whether every value is finite and may be stored)."""
        bad = [name for name, ok in (("observation", np.isfinite(obs).all()),
                                     ("reward", math.isfinite(reward)),
                                     ("action", np.isfinite(action).all())) if not ok]
        found = []
        if bad:
            found += self.fire("non_finite", env_steps, ", ".join(bad),
                               f"non-finite {' and '.join(bad)} at env step {env_steps}; the "
                               "transition was not stored")
        if self.low is not None or self.high is not None:
            found += self._check_bounds(env_steps, obs)
        return found, not bad

    def _check_bounds(self, env_steps: int, obs: np.ndarray) -> list[Finding]:
        below = self.low is not None and bool((obs < self.low).any())
        above = self.high is not None and bool((obs > self.high).any())
        if not (below or above):
            return []
        dims = [int(i) for i in np.flatnonzero(
            (obs < self.low if self.low is not None else False)
            | (obs > self.high if self.high is not None else False))]
        return self.fire("state_bounds", env_steps, [float(obs[i]) for i in dims],
                         f"observation dimension(s) {dims} outside the configured bounds")

    def check_update(self, env_steps: int, metrics: dict[str, float],
                     probe: bool = False) -> list[Finding]:
        """After an update (or, `probe`, the restored weights' loss, Q and gradients on a
        batch): non-finite losses/Q and the explosion rules, all judged on the weights."""
        bad = [k for k, v in metrics.items() if not math.isfinite(v)]
        if bad:
            where = ("in the restored weights, probed on the newest replay batch" if probe
                     else f"in the update at env step {env_steps}; that optimiser step was "
                     "skipped")
            return self.fire("non_finite", env_steps, ", ".join(bad),
                             f"non-finite {', '.join(bad)} {where}", on_weights=True)
        found = []
        checks = (("critic_loss_explosion", "critic_loss", "critic loss"),
                  ("q_explosion", "q_mean", "mean Q"),
                  ("grad_explosion", "critic_grad_norm", "critic gradient norm"),
                  ("grad_explosion", "actor_grad_norm", "actor gradient norm"))
        for rule, key, label in checks:
            value, threshold = metrics.get(key), self.rules[rule].threshold
            if value is None or self.rules[rule].action == "off":
                continue
            if abs(value) > threshold:
                beyond = f"above {threshold:g}" if value > 0 else f"below {-threshold:g}"
                found += self.fire(rule, env_steps, value, f"{label} {value:.4g} is {beyond}",
                                   on_weights=True)
        return found

    def check_episode(self, env_steps: int, episode_return: float) -> list[Finding]:
        threshold = self.rules["catastrophic_reward"].threshold
        # An episode that ended during the random warm-up shows the env, not the policy.
        if (threshold is None or episode_return >= threshold
                or env_steps <= self.learning_starts):
            return []
        return self.fire("catastrophic_reward", env_steps, episode_return,
                         f"episode return {episode_return:.1f} is below the catastrophic "
                         f"threshold {threshold:g}")

    def check_patience(self, env_steps: int, evals_since_best: int) -> list[Finding]:
        patience = self.rules["early_stopping"].threshold
        if evals_since_best < patience:
            return []
        return self.fire("early_stopping", env_steps, evals_since_best,
                         f"no new best evaluation for {evals_since_best} evaluations "
                         f"(patience {patience})")

    def check_memory(self, env_steps: int) -> list[Finding]:
        rss = psutil.Process().memory_info().rss / MIB
        found = []
        if rss > self.rules["memory"].threshold:
            found += self.fire("memory", env_steps, round(rss, 1),
                               f"process memory {rss:.0f} MiB is above "
                               f"{self.rules['memory'].threshold:.0f} MiB")
        if self.device.type == "cuda" and self.gpu_mib is not None:
            # In use by every process on the device, not only this one's reservations:
            # another job filling the GPU makes this run's next allocation fail too.
            free, total = torch.cuda.mem_get_info(self.device)
            gpu = (total - free) / MIB
            if gpu > self.gpu_mib:
                found += self.fire("memory", env_steps, round(gpu, 1),
                                   f"GPU memory in use {gpu:.0f} MiB (all processes) is "
                                   f"above {self.gpu_mib:.0f} MiB")
        return found


def _bounds(low: Any, high: Any, obs_dim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    arrays = []
    for name, value in (("low", low), ("high", high)):
        if value is not None and len(value) != obs_dim:
            raise ConfigError(f"config key 'monitor.state_bounds.{name}' has {len(value)} "
                              f"values but the observations have {obs_dim} dimensions")
        arrays.append(None if value is None else np.asarray(value, dtype=np.float64))
    return arrays[0], arrays[1]


def _plain(array: np.ndarray | None) -> list[float] | None:
    return None if array is None else array.tolist()
