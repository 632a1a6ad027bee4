"""Shared pieces of the benchmarks: the same settings for rltrain and Stable-Baselines3.

The reference is SB3's TD3 set up like rltrain's DDPG (twin critics, no
policy delay, no target smoothing), with rltrain's `pendulum_ddpg.yaml` values: 256x256
networks, batch 256, one update per env step, Adam lr 3e-4, tau 0.005, gamma 0.99,
gaussian exploration noise 0.1 of the action half-range, 1000 random warm-up steps.
Both bootstrap through time-limit truncation (SB3: `handle_timeout_termination`).
"""

from __future__ import annotations

import atexit
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


def scratch_folder() -> str:
    """A temporary folder for a run's files, removed when the process exits."""
    folder = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_worker(script: Path, args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run `script --worker ...` in a fresh process; it prints one JSON line last."""
    proc = subprocess.run([sys.executable, str(script), "--worker", *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sb3_td3(config, seed: int, device: str = "cpu"):
    """SB3's TD3 set up like an rltrain config (a `TrainConfig`): with `algo: ddpg` that is
    policy_delay 1 and no target smoothing, with `algo: td3` the config's TD3 values."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import TD3
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(config.env_name)
    scale = (env.action_space.high - env.action_space.low) / 2
    action_noise = NormalActionNoise(np.zeros_like(scale), config.exploration_noise * scale)
    td3 = config.td3 if config.algo == "td3" else None
    return TD3("MlpPolicy", env, learning_rate=config.actor_lr,
               buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
               batch_size=config.batch_size, tau=config.tau, gamma=config.gamma,
               train_freq=1, gradient_steps=1, action_noise=action_noise,
               policy_delay=td3.policy_delay if td3 else 1,
               target_policy_noise=td3.target_policy_noise if td3 else 0.0,
               target_noise_clip=td3.target_noise_clip if td3 else 0.0,
               policy_kwargs={"net_arch": list(config.hidden_sizes)}, seed=seed, device=device,
               verbose=0)


def sb3_sac(config, seed: int, device: str = "cpu"):
    """SB3's SAC set up like an rltrain SAC config: the same networks, batch, rates,
    replay, one update per env step, and the config's entropy settings."""
    import gymnasium as gym
    from stable_baselines3 import SAC

    sac = config.sac
    return SAC("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
               buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
               batch_size=config.batch_size, tau=config.tau, gamma=config.gamma,
               train_freq=1, gradient_steps=1, ent_coef=sac.ent_coef,
               target_entropy=sac.target_entropy,
               target_update_interval=sac.target_update_interval,
               policy_kwargs={"net_arch": list(config.hidden_sizes)}, seed=seed, device=device,
               verbose=0)


def agent_on_filled_buffer(package: str = "rltrain", rows: int = 10_000,
                           seed: int | None = None):
    """A DDPG agent (`configs/pendulum_ddpg.yaml`, Pendulum's shapes, CPU) and a replay
    buffer holding `rows` random transitions, both built by `package` (rltrain, or a
    commit's copy of it under another name); `seed` seeds the weights' initialisation."""
    import importlib

    import numpy as np
    import torch

    buffers = importlib.import_module(f"{package}.utils.training.replay_buffer")
    configs = importlib.import_module(f"{package}.utils.config.loader")
    if seed is not None:
        torch.manual_seed(seed)
    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    config = configs.load_config("pendulum_ddpg.yaml")
    try:  # the config's update backend, as a run would build it
        setup = importlib.import_module(f"{package}.scripts.agent_setup")
        agent, _ = setup.build_agent(config, 3, low, high, torch.device("cpu"))
    except ModuleNotFoundError:  # a commit from before update backends
        agents = importlib.import_module(f"{package}.agents.ddpg")
        agent = agents.DDPGAgent(3, low, high, config, torch.device("cpu"))
    buffer = buffers.ReplayBuffer(rows, 3, 1, torch.device("cpu"), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(rows):
        buffer.add(rng.normal(size=3), rng.uniform(-2, 2, 1), float(rng.normal()),
                   rng.normal(size=3), False, False)
    return agent, buffer


def timed_updates(agent, buffer, updates: int) -> float:
    """Seconds for `updates` updates on batches of 256, each update's metrics read back
    as the Trainer reads them."""
    import torch

    start = time.perf_counter()
    for _ in range(updates):
        torch.stack(list(agent.update(buffer.sample(256)).values())).tolist()
    return time.perf_counter() - start


class Stopwatch:
    """Wall time between two marks."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.stop: float | None = None

    def mark_start(self) -> None:
        self.start = time.perf_counter()

    def mark_stop(self) -> None:
        self.stop = time.perf_counter()

    @property
    def seconds(self) -> float:
        assert self.start is not None and self.stop is not None
        return self.stop - self.start
