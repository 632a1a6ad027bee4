"""Shared fixtures: tiny, fast configs that write into pytest's tmp_path, and the device
the tests train on.

The tests run on the CPU. `RLTRAIN_TEST_DEVICE=cuda python -m pytest` runs them on a GPU
instead: agents, buffers and trainers are built there (`DEVICE`), and the update is
also checked with CUDA's own sync detector (test_agent.py). `.ci/gpu` does that on a
GPU machine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig

TESTS_DIR = Path(__file__).parent
sys.path.insert(0, str(TESTS_DIR))  # makes "fake_envs:FakePoint-v0" importable

DEVICE_NAME = os.environ.get("RLTRAIN_TEST_DEVICE", "cpu")
DEVICE = torch.device(DEVICE_NAME if DEVICE_NAME in ("cpu", "cuda") else "cpu")


def pytest_configure(config: pytest.Config) -> None:
    if DEVICE_NAME not in ("cpu", "cuda"):
        raise pytest.UsageError(f"RLTRAIN_TEST_DEVICE is '{DEVICE_NAME}'; use cpu or cuda")
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("RLTRAIN_TEST_DEVICE is cuda but torch sees no CUDA device")


def pytest_report_header(config: pytest.Config) -> str:
    return f"rltrain test device: {DEVICE}"


TINY: dict[str, Any] = {
    "env_name": "Pendulum-v1",
    "seed": 3,
    "device": DEVICE.type,
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
    # One thread: nets this small gain nothing from more, and the suite runs two workers
    # (pytest-xdist) on two cores, each of whose runs would otherwise take both.
    "torch_threads": 1,
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


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One tiny finished run (its checkpoints at steps 100, 200, 300 and best_model.pt),
    shared: tests copy its files, never change them."""
    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.run.folders import create_run

    config = tiny_config(tmp_path_factory.mktemp("trained"), run_name="trained")
    trainer = Trainer(config, DEVICE, interactive=False)
    paths = create_run(config)
    trainer.run(paths)
    return paths


def assert_updates_agree(fused: Any, reference: Any, batches: list[Any],
                         weights: Any) -> None:
    """Two agents that started alike compute the same update, batch after batch (metrics
    and, at the end, `weights(agent)`), up to float rounding: a fused update and its
    autograd reference."""
    import torch

    for batch in batches:
        ours, theirs = fused.update(batch), reference.update(batch)
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert torch.allclose(ours[key], theirs[key], rtol=1e-3, atol=1e-5), key
    for a, b in zip(weights(fused), weights(reference), strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-5), (a - b).abs().max()


def agent_settings(config):
    """The DDPG/TD3 update settings a config asks for (agents/ddpg.py, agents/td3.py)."""
    from rltrain.agents import ddpg, td3
    from rltrain.scripts.training.agent_setup import algorithm_options, common_settings

    module = td3 if config.algo == "td3" else ddpg
    return module.settings(common_settings(config), algorithm_options(config))


def load_example(name: str) -> Any:
    """docs/examples/<name>.py imported as a module (a CleanRL-style script's main())."""
    import importlib.util

    path = TESTS_DIR.parent / "docs" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kill_runner(runner: Any) -> int:
    """SIGKILL an env runner's process (a Ray actor); returns its pid."""
    import signal

    import ray

    pid = ray.get(runner.pid.remote())
    os.kill(pid, signal.SIGKILL)
    return pid


def runner_events(log_dir: Path) -> list[dict[str, Any]]:
    """The events.jsonl lines about env runners (lost, restarted, failed)."""
    from rltrain.utils.run.log_files import read_jsonl

    return [e for e in read_jsonl(log_dir / "events.jsonl") if e.get("rule") == "env_runner"]


@pytest.fixture
def double_precision():
    """float64 as torch's default dtype for the test, restored after it."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
