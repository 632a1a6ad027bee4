"""Environment creation and checks.

`env_name` goes to `gymnasium.make`, so registered ids and the `"some.module:EnvName-v0"`
form (which imports the module to register the user's own env) both work. DDPG needs a
continuous, bounded `Box` action space; anything else is refused with one clear line.
Every episode's reset is seeded with `utils.seeding.derive_seed`, which makes episodes
reproducible on their own: the basis of exact resume.
"""

from __future__ import annotations

import difflib

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FlattenObservation

from rltrain.utils.errors import EnvError


def make_env(env_name: str, render_mode: str | None = None) -> gym.Env:
    """`gymnasium.make(env_name)` with user-facing errors and space checks."""
    kwargs = {"render_mode": render_mode} if render_mode else {}
    try:
        env = gym.make(env_name, **kwargs)
    except gym.error.UnregisteredEnv:
        raise EnvError(_unknown_env_message(env_name)) from None
    except gym.error.DependencyNotInstalled as exc:
        raise EnvError(f"env '{env_name}' needs a package that is not installed: {exc}") from None
    except ImportError as exc:
        raise EnvError(f"env '{env_name}': cannot import its module ({exc})") from None
    try:
        check_action_space(env_name, env.action_space)
        return _flat_observations(env_name, env)
    except EnvError:
        env.close()
        raise


def _unknown_env_message(env_name: str) -> str:
    name = env_name.split(":")[-1]
    close = difflib.get_close_matches(name, list(gym.registry.keys()), n=3, cutoff=0.5)
    hint = f"; closest registered ids: {', '.join(close)}" if close else ""
    return f"unknown environment id '{env_name}'{hint}"


def check_action_space(env_name: str, space: gym.Space) -> None:
    """DDPG outputs a real vector through tanh: the actions must be a bounded `Box`."""
    if not isinstance(space, gym.spaces.Box):
        raise EnvError(f"env '{env_name}' has a {type(space).__name__} action space; DDPG and "
                       "TD3 need continuous bounded actions (a gymnasium Box)")
    if len(space.shape) != 1:
        raise EnvError(f"env '{env_name}' has actions of shape {space.shape}; rltrain supports "
                       "a flat Box of shape (n,)")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise EnvError(f"env '{env_name}' has unbounded actions (low={space.low}, "
                       f"high={space.high}); DDPG needs continuous bounded actions")
    if not np.all(space.high > space.low):
        raise EnvError(f"env '{env_name}' has an action dimension with high <= low")


def _flat_observations(env_name: str, env: gym.Env) -> gym.Env:
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        try:
            return FlattenObservation(env)
        except (NotImplementedError, TypeError, ValueError):
            raise EnvError(f"env '{env_name}' has a {type(space).__name__} observation space "
                           "that cannot be flattened to a vector") from None
    return FlattenObservation(env) if len(space.shape) != 1 else env


def space_dims(env: gym.Env) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(obs_dim, action_dim, action_low, action_high) as float32 arrays."""
    obs_dim = int(np.prod(env.observation_space.shape))
    low = np.asarray(env.action_space.low, dtype=np.float32)
    high = np.asarray(env.action_space.high, dtype=np.float32)
    return obs_dim, int(low.shape[0]), low, high
