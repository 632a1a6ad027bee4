"""Environment creation and checks.

`env_name` goes to `gymnasium.make`, so registered ids and the `"some.module:EnvName-v0"`
form (which imports the module to register the user's own env) both work. DDPG needs a
continuous, bounded `Box` action space; anything else is refused with one clear line.
Every episode's reset is seeded with `utils.seeding.derive_seed`, which makes episodes
reproducible on their own: the basis of exact resume. `vector_envs.make_training_envs`
puts `num_envs` copies behind Gymnasium's vector API for utils/training/collector.py.
"""

from __future__ import annotations

import contextlib
import difflib
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import _find_spec as find_spec  # what gym.make looks up
from gymnasium.wrappers import FlattenObservation

from rltrain.utils.errors import Aborted, EnvError, EnvFailure, first_line
from rltrain.utils.training.env_clock import ENV_CLOCK


def make_env(env_name: str, render_mode: str | None = None,
             env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """`gymnasium.make(env_name, **env_kwargs)` with user-facing errors and space checks
    (a keyword the env does not take is one line naming it). An exception
    of the env's own constructor is an `EnvFailure`, its traceback written to a file in
    the system's temporary folder (no run folder exists yet) that the message names."""
    kwargs = {**(env_kwargs or {}), **({"render_mode": render_mode} if render_mode else {})}
    try:
        env = gym.make(env_name, **kwargs)
    except gym.error.UnregisteredEnv:
        raise EnvError(_unknown_env_message(env_name)) from None
    except gym.error.DependencyNotInstalled as exc:
        raise EnvError(_missing_package(env_name, exc)) from None
    except ImportError as exc:
        raise EnvError(f"env '{env_name}': cannot import its module ({exc})") from None
    except gym.error.Error as exc:  # a deprecated version, a bad render mode, ...
        raise EnvError(f"env '{env_name}': {first_line(exc)}") from None
    except TypeError as exc:
        if env_kwargs and "keyword argument" in str(exc):  # env_kwargs it does not take
            raise EnvError(f"env '{env_name}' refused env_kwargs: {first_line(exc)}") from None
        raise _constructor_failed(env_failure(env_name, "its constructor", exc)) from None
    except Exception as exc:
        raise _constructor_failed(env_failure(env_name, "its constructor", exc)) from None
    try:
        check_action_space(env_name, env.action_space)
        return StepTypes(_flat_observations(env_name, env), env_name)
    except EnvError:
        env.close()
        raise


def check_env_id(env_name: str) -> None:
    """Raises the `EnvError` `make_env` would for an id that names no env (unknown, or its
    module cannot be imported), without making the env: config resolution checks the id
    first (utils/config/resolve.py). Whatever else fails is left to `make_env`, which
    says it as today: the env's own constructor, a package the env needs."""
    try:
        with warnings.catch_warnings():  # an unversioned id: gym.make warns, once
            warnings.simplefilter("ignore")
            find_spec(env_name)
    except gym.error.UnregisteredEnv:
        raise EnvError(_unknown_env_message(env_name)) from None
    except ImportError as exc:
        raise EnvError(f"env '{env_name}': cannot import its module ({exc})") from None
    except gym.error.Error as exc:
        raise EnvError(f"env '{env_name}': {first_line(exc)}") from None
    except Exception:  # the user's module raised on import: make_env names it, with its
        return  # traceback in a file


def solved_return(env_name: str) -> float | None:
    """The return that solves `env_name` as its Gymnasium registration declares it
    (`reward_threshold`); None where it declares none or the id is not registered."""
    try:
        with warnings.catch_warnings():  # an unversioned id: the lookup warns
            warnings.simplefilter("ignore")
            threshold = find_spec(env_name).reward_threshold
    except Exception:  # not registered, or its module fails to import: judged without
        return None
    return None if threshold is None else float(threshold)


@contextlib.contextmanager
def env_code(env_name: str, call: str) -> Iterator[None]:
    """Around calls into the env (`call`: what rltrain was doing): an exception raised
    there is the env's, and becomes an `EnvFailure` that names it and where it was raised
    (with the traceback kept for the run's log folder). An env is untrusted code: its
    `SystemExit` and `KeyboardInterrupt` are its failures too; only the second Ctrl-C
    (`Aborted`) passes through. The call is timed by `ENV_CLOCK` (a hung call becomes an
    `EnvHung` failure)."""
    timed = ENV_CLOCK.enter(env_name, call)
    try:
        yield
    except (EnvFailure, Aborted):
        raise  # already named where it was raised (in an env's own process, for one)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        raise env_failure(env_name, call, exc) from exc
    finally:
        if timed:
            ENV_CLOCK.leave()


def env_failure(env_name: str, call: str, exc: BaseException) -> EnvFailure:
    """`exc`, raised by the env's code in `call`, as an `EnvFailure` naming where."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in " \
            f"{frames[-1].name}" if frames else ""
    text = first_line(exc)
    return EnvFailure(f"env '{env_name}' raised {type(exc).__name__} in {call}{where}"
                      + (f": {text}" if text else ""), "".join(traceback.format_exception(exc)))


def _constructor_failed(failure: EnvFailure) -> EnvFailure:
    try:
        with tempfile.NamedTemporaryFile("w", prefix="rltrain_env_error_", suffix=".txt",
                                         delete=False) as f:
            f.write(failure.details)
    except OSError:
        return failure
    return EnvFailure(f"{failure} (traceback: {f.name})", failure.details)


def _unknown_env_message(env_name: str) -> str:
    module, _, name = env_name.rpartition(":")
    close = difflib.get_close_matches(name, list(gym.registry.keys()), n=3, cutoff=0.5)
    hint = f"; closest registered ids: {', '.join(close)}" if close else ""
    if module:  # the module was imported (gym.make did) but did not register the name
        return (f"unknown environment id '{env_name}': module '{module}' was imported but "
                f"registers no '{name}'{hint}")
    return f"unknown environment id '{env_name}'{hint}"


def check_action_space(env_name: str, space: gym.Space) -> None:
    """Every algorithm here outputs a real vector through tanh: the actions must be a
    bounded `Box`."""
    if not isinstance(space, gym.spaces.Box):
        raise EnvError(f"env '{env_name}' has a {type(space).__name__} action space; "
                       "rltrain's algorithms need continuous bounded actions (a gymnasium "
                       "Box): train discrete actions with a discrete-action algorithm, such "
                       "as SB3's DQN or PPO")
    if len(space.shape) != 1:
        raise EnvError(f"env '{env_name}' has actions of shape {space.shape}; rltrain supports "
                       "a flat Box of shape (n,)")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise EnvError(f"env '{env_name}' has unbounded actions (low={space.low}, "
                       f"high={space.high}); rltrain's algorithms need continuous bounded "
                       "actions")
    if not np.all(space.high > space.low):
        raise EnvError(f"env '{env_name}' has an action dimension with high <= low")
    with np.errstate(over="ignore"):
        span = space.high.astype(np.float32) - space.low.astype(np.float32)
    if not np.all(np.isfinite(span)):  # random actions and noise would be inf, then NaN
        raise EnvError(f"env '{env_name}' has action bounds too wide to compute with "
                       f"(low={space.low}, high={space.high}: high - low overflows "
                       "float32); give its Box the range the env really takes")


def _missing_package(env_name: str, exc: Exception) -> str:
    if "box2d" in str(exc).lower():  # Gymnasium's own hint names its extra, not ours
        return f"env '{env_name}' needs Box2D: pip install \"rltrain[box2d]\""
    return f"env '{env_name}' needs a package that is not installed: {exc}"


class StepTypes(gym.Wrapper):
    """Checks what the env's `step` returns: `terminated` and `truncated` must be bools
    (Python's or NumPy's) and the reward a real number. Anything else (`"yes"`, `None`, a
    list) is the env's failure, named as such, rather than a truthy value taken as the
    end of an episode."""

    def __init__(self, env: gym.Env, env_name: str) -> None:
        super().__init__(env)
        self.env_name = env_name

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, Any]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(flag, (bool, np.bool_)):
                self._refuse(name, flag, "a bool")
        if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (int, float,
                                                                            np.number)):
            self._refuse("reward", reward, "a number")
        return obs, reward, terminated, truncated, info

    def _refuse(self, name: str, value: Any, wanted: str) -> None:
        problem = (f"env '{self.env_name}' returned {name}={value!r} "
                   f"({type(value).__name__}) from step; Gymnasium's API wants {wanted}")
        raise EnvFailure(problem, problem + "\n")


def _flat_observations(env_name: str, env: gym.Env) -> gym.Env:
    space = env.observation_space
    image = _image_space(space)
    if image is not None:
        raise EnvError(
            f"env '{env_name}' observes images (a {image.dtype} Box of shape {image.shape}); "
            "rltrain's networks are MLPs over a flat vector and would learn from "
            f"{int(np.prod(image.shape)):,} raw pixels: train it with a convolutional "
            "policy (SB3's \"CnnPolicy\"), or wrap the env to observe its state as a vector")
    if not isinstance(space, gym.spaces.Box):
        try:
            return FlattenObservation(env)
        except (NotImplementedError, TypeError, ValueError):
            raise EnvError(f"env '{env_name}' has a {type(space).__name__} observation space "
                           "that cannot be flattened to a vector") from None
    return FlattenObservation(env) if len(space.shape) != 1 else env


def _image_space(space: gym.Space) -> gym.spaces.Box | None:
    """The first image in an observation space (a Box of 2 or 3 axes of uint8 pixels, as
    Gymnasium's and SB3's image checks take them, or of 3 axes with 1, 3 or 4 channels
    first or last), looking into Dict and Tuple spaces; None where there is none."""
    if isinstance(space, gym.spaces.Dict):
        spaces = list(space.spaces.values())
    elif isinstance(space, gym.spaces.Tuple):
        spaces = list(space.spaces)
    else:
        spaces = [space]
    for part in spaces:
        if part is not space and not isinstance(part, gym.spaces.Box):
            found = _image_space(part)
            if found is not None:
                return found
        if not isinstance(part, gym.spaces.Box):
            continue
        shape = part.shape
        pixels = [d for d in shape if d not in (1, 3, 4)]  # the axes that are not channels
        channels = len(shape) == 3 and (shape[0] in (1, 3, 4) or shape[-1] in (1, 3, 4))
        if (len(shape) in (2, 3) and part.dtype == np.uint8) or (
                channels and pixels and min(pixels) >= 16):
            return part
    return None


def space_dims(env: gym.Env) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(obs_dim, action_dim, action_low, action_high) as float32 arrays."""
    obs_dim = int(np.prod(env.observation_space.shape))
    low = np.asarray(env.action_space.low, dtype=np.float32)
    high = np.asarray(env.action_space.high, dtype=np.float32)
    return obs_dim, int(low.shape[0]), low, high


def space_record(env_name: str, env: gym.Env) -> dict[str, Any]:
    """What a checkpoint records of its env's spaces (`spaces`), to check a later env against."""
    obs_dim, _, low, high = space_dims(env)
    return {"env_name": env_name, "obs_dim": obs_dim, "action_low": low.tolist(),
            "action_high": high.tolist()}


class Replayable(gym.Wrapper):
    """A training sub-env that can rebuild an episode's state on its own: reset with the
    episode's seed and replay its actions. A vector env steps all its sub-envs together,
    so a resume replays each sub-env's episode through `VectorEnv.call("replay", plans)`,
    in its own process when the vector env is async."""

    def __init__(self, env: gym.Env, index: int, env_name: str) -> None:
        super().__init__(env)
        self.index, self.env_name = index, env_name

    # Exceptions of the env's own code are named here, where they are raised: in an async
    # vector env that is the env's own process, whose traceback the trainer never sees.
    def step(self, action: Any) -> Any:
        with env_code(self.env_name, "step"):
            return self.env.step(action)

    def reset(self, **kwargs: Any) -> Any:
        with env_code(self.env_name, "reset"):
            return self.env.reset(**kwargs)

    def replay(self, plans: list[tuple[int, np.ndarray]]) -> np.ndarray:
        """`plans[index]` is (reset seed, actions [T, action_dim]); returns the last obs."""
        seed, actions = plans[self.index]
        obs, _ = self.reset(seed=seed)
        for action in actions:
            obs, *_ = self.step(action)
        return obs
