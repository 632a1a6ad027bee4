"""Behaviour snapshots: a video of one episode.

The episode is deterministic and starts from a fixed reset seed, so videos taken at
different points of training show the same situation handled by different policies.
Recording uses Gymnasium's `RecordVideo` (moviepy) and the env's `rgb_array` renderer
(pygame for the classic-control envs, run with SDL's dummy video driver: no screen
needed). Both come with the optional extra: `pip install "rltrain[video]"`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np

from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import UserError, first_line
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.seeding import EVAL_EPISODES, derive_seed

INSTALL_HINT = 'recording videos needs the [video] extra: pip install "rltrain[video]"'


class VideoError(UserError):
    """The env cannot be recorded (it takes no `render_mode`, or its renderer fails)."""


def video_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("moviepy", "pygame"))


def record_episode(policy: Callable[[np.ndarray], np.ndarray], env_name: str, seed: int,
                   path: Path, env_kwargs: dict | None = None) -> Path:
    """Run one deterministic episode from the fixed reset seed and save it as `path`."""
    if not video_available():
        raise VideoError(INSTALL_HINT)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    scratch = Path(tempfile.mkdtemp(prefix="rltrain-video-"))
    try:
        recorded = _record(policy, env_name, seed, scratch / "video", env_kwargs or {})
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(recorded), path)
        return path
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _record(policy: Callable[[np.ndarray], np.ndarray], env_name: str, seed: int,
            folder: Path, env_kwargs: dict) -> Path:
    """The episode's MP4 in `folder` (a new one). Any exception from making, rendering
    or stepping the env here is a `VideoError`: the env's own steps have already run in
    training or evaluation without rendering, so the renderer is what failed."""
    from gymnasium.wrappers import RecordVideo

    try:
        with warnings.catch_warnings():  # Gymnasium's warnings about render modes: said below
            warnings.simplefilter("ignore")
            env = RecordVideo(gym.make(env_name, render_mode="rgb_array", **env_kwargs),
                              str(folder),
                              name_prefix="episode", episode_trigger=lambda _: True)
        try:
            obs, _ = env.reset(seed=derive_seed(seed, EVAL_EPISODES, 0))
            done = False
            while not done:
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                done = terminated or truncated
        finally:
            env.close()
    except Exception as exc:
        raise VideoError(f"env '{env_name}' cannot be recorded as video "
                         f"(render_mode='rgb_array'): {type(exc).__name__}: "
                         f"{first_line(exc)}") from exc
    recorded = sorted(folder.glob("*.mp4"))
    if not recorded:
        raise VideoError(f"env '{env_name}' produced no video frames (does it support "
                         "render_mode='rgb_array'?)")
    return recorded[0]


class BehaviourVideos:
    """The videos taken during training (`diagnostics.snapshot_freq`, and on a pause),
    as `<label>_<env steps>.mp4` in `folder`. They are an extra: a video that cannot be
    made (no [video] extra, an env that cannot render) is said once, recorded in
    flow1.jsonl, and turns them off for the rest of the process; training goes on."""

    def __init__(self, config: TrainConfig, folder: Path, say: Callable[[str], None],
                 logger: RunLogger) -> None:
        self.env_name, self.seed, self.folder = config.env_name, config.seed, folder
        self.env_kwargs = config.env_kwargs
        self.say, self.logger = say, logger
        self.off = False

    def record(self, policy: Callable[[np.ndarray], np.ndarray], env_steps: int,
               label: str) -> None:
        if self.off:
            return
        path = self.folder / f"{label}_{env_steps}.mp4"
        try:
            record_episode(policy, self.env_name, self.seed, path, self.env_kwargs)
        except VideoError as exc:
            self.off = True
            self.say(f"note: behaviour videos are off for this run: {exc}")
            self.logger.diagnostic("video_failed", env_steps, error=str(exc))
            return
        self.logger.diagnostic("video", env_steps, file=str(path))
