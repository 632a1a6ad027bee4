"""Shared fixtures: tiny, fast configs that write into pytest's tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rltrain.utils.config import TrainConfig
from rltrain.utils.config_loader import config_from_dict

TESTS_DIR = Path(__file__).parent
sys.path.insert(0, str(TESTS_DIR))  # makes "fake_envs:FakePoint-v0" importable

TINY: dict[str, Any] = {
    "env_name": "Pendulum-v1",
    "seed": 3,
    "device": "cpu",
    "max_timesteps": 300,
    "batch_size": 32,
    "replay_buffer_size": 1000,
    "learning_starts": 100,
    "hidden_sizes": [16, 16],
    "eval_freq": 100,
    "n_eval_episodes": 1,
    "checkpoint_freq": 100,
    "log_freq": 50,
    "min_reward_threshold": None,
}


def tiny_dict(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    raw = {**TINY, "log_dir": str(tmp_path / "logs"),
           "checkpoint_dir": str(tmp_path / "checkpoints"), **overrides}
    return raw


def tiny_config(tmp_path: Path, **overrides: Any) -> TrainConfig:
    return config_from_dict(tiny_dict(tmp_path, **overrides))


@pytest.fixture
def tiny(tmp_path: Path) -> TrainConfig:
    return tiny_config(tmp_path)
