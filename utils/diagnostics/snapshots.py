"""Behaviour snapshots (sections 5.1 and 6.1 of the flow-1 doc): a video of one episode.

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
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np

from rltrain.utils.errors import UserError
from rltrain.utils.seeding import EVAL_EPISODES, derive_seed

INSTALL_HINT = 'recording videos needs the [video] extra: pip install "rltrain[video]"'


def video_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("moviepy", "pygame"))


def record_episode(policy: Callable[[np.ndarray], np.ndarray], env_name: str, seed: int,
                   path: Path) -> Path:
    """Run one deterministic episode from the fixed reset seed and save it as `path`."""
    if not video_available():
        raise UserError(INSTALL_HINT)
    from gymnasium.wrappers import RecordVideo

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    scratch = Path(tempfile.mkdtemp(prefix="rltrain-video-"))
    try:
        env = gym.make(env_name, render_mode="rgb_array")
        env = RecordVideo(env, str(scratch / "video"), name_prefix="episode",  # a new folder
                          episode_trigger=lambda _: True)
        obs, _ = env.reset(seed=derive_seed(seed, EVAL_EPISODES, 0))
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            done = terminated or truncated
        env.close()
        recorded = sorted((scratch / "video").glob("*.mp4"))
        if not recorded:
            raise UserError(f"env '{env_name}' produced no video frames (does it support "
                            "render_mode='rgb_array'?)")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(recorded[0]), path)
        return path
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
