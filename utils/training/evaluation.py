"""Deterministic policy evaluation on a separately seeded env.

Episode i of every evaluation starts from the reset seed derived from (seed, i): all
evaluations of a run see the same start states, so the learning curve compares
policies, not luck. No exploration noise is added (CleanRL's evaluation adds it; we
do not). The undiscounted return is what is reported; the discounted return and the
start observation are kept for the critic's over-estimation check.
"""

from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np

from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.seeding import EVAL_EPISODES, derive_seed
from rltrain.utils.training.envs import env_code


def evaluate(policy: Callable[[np.ndarray], np.ndarray], env: gym.Env, n_episodes: int,
             seed: int, gamma: float = 0.99,
             on_step: Callable[[np.ndarray, np.ndarray], None] | None = None,
             env_name: str | None = None) -> EvalResult:
    """Run `n_episodes` with the deterministic `policy`; `on_step(obs, action)` observes.
    `env_name`: what failures call the env (the config's, with its module)."""
    returns, lengths, discounted, starts, finals, cut = [], [], [], [], [], []
    name = env_name or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
    for i in range(n_episodes):
        with env_code(name, "reset (evaluation)"):
            obs, _ = env.reset(seed=derive_seed(seed, EVAL_EPISODES, i))
        starts.append(np.asarray(obs, dtype=np.float32))
        total, disc, weight, steps, done = 0.0, 0.0, 1.0, 0, False
        while not done:
            action = policy(obs)
            if on_step is not None:
                on_step(obs, action)
            with env_code(name, "step (evaluation)"):
                obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            disc += weight * float(reward)
            weight *= gamma
            steps += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(steps)
        discounted.append(disc)
        finals.append(np.asarray(obs, dtype=np.float32))
        cut.append(bool(truncated and not terminated))
    return EvalResult(returns, lengths, discounted, np.stack(starts), np.stack(finals), cut)
