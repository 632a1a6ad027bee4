"""Exploration: uniform warm-up actions, then gaussian or Ornstein-Uhlenbeck action noise.

Noise is relative to each action dimension's half-range (as in TD3's `N(0, 0.1 *
max_action)`), so `exploration_noise: 0.1` means 10% of the half-range in every
dimension, also for asymmetric bounds. The std may decay linearly with env steps, so
that a policy explores early and acts more precisely later. OU noise is the DDPG paper's
process (theta 0.15 there), discretised as in OpenAI Baselines' DDPG (the paper gives no
dt): x <- x - theta * x * dt + sigma * sqrt(dt) * N(0, 1), dt = 0.01, x = 0 at each
episode start. Its std is then not sigma: it grows from 0 towards sigma / sqrt(2 *
theta) (1.8x sigma at theta 0.15) over about 1 / (theta * dt) steps (667), and
successive values are strongly correlated.
With `num_envs` training envs, actions come as rows [num_envs, action_dim] and each env
has its own OU process. All randomness comes from this object's own NumPy generator,
saved in checkpoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltrain.utils.config.schema import TrainConfig

OU_DT = 0.01


class Exploration:
    """Turns the policy's action into the action the env executes: random during the
    warm-up, then the deterministic action plus the configured noise, or, for an algorithm
    that explores by sampling its own policy (`action_noise` False: SAC), that sample as
    it is."""

    def __init__(self, config: TrainConfig, action_low: np.ndarray, action_high: np.ndarray,
                 seed: int, action_noise: bool = True) -> None:
        self.config, self.action_noise = config, action_noise
        self.low = np.asarray(action_low, dtype=np.float32)
        self.high = np.asarray(action_high, dtype=np.float32)
        self.scale = (self.high - self.low) / 2
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.shape = (config.num_envs, len(self.low))
        self.ou_state = np.zeros(self.shape)
        # The latest noisy() call's noise, as standard normal draws independent of the env
        # (OU: the new step of the process), and the action the state decided before them
        # (the policy's, plus what remains of the OU process): the `ignored_action` rule
        # judges a run whose warm-up was too short on them (see `drawn`). None: no noise
        # was drawn.
        self.drawn: tuple[np.ndarray, np.ndarray] | None = None

    def sigma(self, env_steps: int) -> float:
        """The noise std (relative to the half-range) at this point of training (0: the
        algorithm adds no noise)."""
        if not self.action_noise:
            return 0.0
        start, final = self.config.exploration_noise, self.config.exploration_noise_final
        if final is None:
            return start
        horizon = self.config.noise_decay_steps or self.config.max_timesteps
        fraction = min(env_steps / horizon, 1.0)
        return start + fraction * (final - start)

    def random_actions(self) -> np.ndarray:
        """Uniformly random actions [num_envs, action_dim], for the warm-up before learning
        starts."""
        return self.rng.uniform(self.low, self.high, size=self.shape).astype(np.float32)

    def noisy(self, action: np.ndarray, env_steps: int) -> np.ndarray:
        """The policy's actions [num_envs, action_dim] plus exploration noise, clipped to
        the action bounds; a sampled policy's actions as they are."""
        if not self.action_noise:
            return action  # a sampling policy leaves its own `drawn` here
        sigma = self.sigma(env_steps)
        if self.config.noise_type == "ou":
            theta = self.config.ou_theta
            step = self.rng.standard_normal(self.ou_state.shape)
            kept = self.ou_state - theta * self.ou_state * OU_DT
            self.ou_state = kept + sigma * np.sqrt(OU_DT) * step
            noise = self.ou_state
            steered, unit = action + kept * self.scale, sigma * np.sqrt(OU_DT) * self.scale
        else:
            step = self.rng.standard_normal(self.shape)
            noise = sigma * step
            steered, unit = action, sigma * self.scale
        self.drawn = None if sigma == 0 else drawn(step, steered, unit, self.low, self.high)
        return np.clip(action + noise * self.scale, self.low, self.high).astype(np.float32)

    def reset(self, env: int) -> None:
        """Start of an episode in training env `env`: its OU process restarts at zero."""
        self.ou_state[env] = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "ou_state": self.ou_state.tolist()}

    def reseed(self, seed: int) -> None:
        """A new noise stream from `seed` (a re-seeded fork); the OU processes keep their
        values, which are the episodes' state, not randomness to come."""
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        # Checkpoints from before num_envs saved one env's state, shape [action_dim].
        self.ou_state = np.asarray(state["ou_state"], dtype=np.float64).reshape(self.shape)


ROOM = 1.0  # noise stds between the policy's action and the bounds, for the noise to count


def drawn(step: np.ndarray, steered: np.ndarray, unit: Any, low: Any,
          high: Any) -> tuple[np.ndarray, np.ndarray]:
    """The noise as the `ignored_action` rule judges it: the standard normal `step` (that
    many `unit`s added to the `steered` action), each dimension clipped as the bounds
    clipped it (at the room between the steered action and the nearer bound, in `unit`s:
    symmetric, so it stays independent of the state), NaN in the rows where a dimension
    had less room than ROOM (a policy at the bounds, where the noise is clipped away);
    and the steered action."""
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.minimum(steered - low, high - steered) / unit
    noise = np.clip(step, -room, room)
    return np.where((room >= ROOM).all(axis=1, keepdims=True), noise, np.nan), steered
