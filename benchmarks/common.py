"""Shared pieces of the benchmarks: the same settings for rltrain and Stable-Baselines3.

The reference is SB3's TD3 set up like rltrain's DDPG (twin critics, no
policy delay, no target smoothing), with rltrain's `pendulum_ddpg.yaml` values: 256x256
networks, batch 256, one update per env step, Adam lr 3e-4, tau 0.005, gamma 0.99,
gaussian exploration noise 0.1 of the action half-range (the same in the env's units for
both: `sb3_action_noise`), 1000 random warm-up steps.
Both bootstrap through time-limit truncation (SB3: `handle_timeout_termination`).
SAC, CrossQ and TQC are compared with SB3's SAC and sb3-contrib's CrossQ and TQC set up
from the same rltrain config (`sb3_model`).
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


def sb3_action_noise(config, action_dim: int):
    """rltrain's gaussian exploration noise as SB3's NormalActionNoise, the same in the
    env's units. rltrain adds `exploration_noise` times each dimension's half-range
    (utils/training/exploration.py); SB3 adds its noise to the action scaled to [-1, 1]
    and scales the sum back to the bounds (`OffPolicyAlgorithm._sample_action`), which
    multiplies it by the half-range: the same sigma, not sigma times the half-range."""
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise

    return NormalActionNoise(np.zeros(action_dim), config.exploration_noise * np.ones(action_dim))


def sb3_td3(config, seed: int, device: str = "cpu", library: str = "stable_baselines3"):
    """SB3's TD3 set up like an rltrain config (a `TrainConfig`): with `algo: ddpg` that is
    policy_delay 1 and no target smoothing, with `algo: td3` the config's TD3 values.
    `library` "sbx": SBX's TD3 (JAX, which picks its own device) on the same settings."""
    import importlib

    import gymnasium as gym

    env = gym.make(config.env_name)
    td3 = config.td3 if config.algo == "td3" else None
    devices = {"device": device} if library == "stable_baselines3" else {}
    return importlib.import_module(library).TD3(
        "MlpPolicy", env, learning_rate=config.actor_lr,
        buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
        batch_size=config.batch_size, tau=config.tau, gamma=config.gamma,
        train_freq=1, gradient_steps=1,
        action_noise=sb3_action_noise(config, env.action_space.shape[0]),
        policy_delay=td3.policy_delay if td3 else 1,
        target_policy_noise=td3.target_policy_noise if td3 else 0.0,
        target_noise_clip=td3.target_noise_clip if td3 else 0.0,
        policy_kwargs={"net_arch": list(config.hidden_sizes)}, seed=seed, verbose=0,
        **devices)


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


def _net_arch(config) -> dict[str, list[int]]:
    """The config's actor and critic widths as SB3's `net_arch` (pi, qf)."""
    def widths(net: str) -> list[int]:
        section = getattr(config.networks, net)
        return list(section.hidden_sizes or config.hidden_sizes)

    return {"pi": widths("actor"), "qf": widths("critic")}


def sb3_crossq(config, seed: int, device: str = "cpu"):
    """sb3-contrib's CrossQ set up like an rltrain CrossQ config: the same networks,
    batch renormalisation, batch, rate, replay, policy delay, one update per env step,
    and the config's entropy settings (Adam's beta1 0.5 is both's default)."""
    import gymnasium as gym
    from sb3_contrib import CrossQ

    crossq = config.crossq
    return CrossQ("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
                  buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
                  batch_size=config.batch_size, gamma=config.gamma, train_freq=1,
                  gradient_steps=1, ent_coef=crossq.ent_coef,
                  target_entropy=crossq.target_entropy, policy_delay=crossq.policy_delay,
                  policy_kwargs={"net_arch": _net_arch(config),
                                 "batch_norm_momentum": crossq.batch_norm_momentum,
                                 "batch_norm_eps": crossq.batch_norm_eps,
                                 "renorm_warmup_steps": crossq.renorm_warmup_steps},
                  seed=seed, device=device, verbose=0)


def sb3_tqc(config, seed: int, device: str = "cpu"):
    """sb3-contrib's TQC set up like an rltrain TQC config: the same networks, quantiles,
    batch, rate, replay, one update per env step, and the config's entropy settings."""
    import gymnasium as gym
    from sb3_contrib import TQC

    tqc = config.tqc
    return TQC("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
               buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
               batch_size=config.batch_size, tau=config.tau, gamma=config.gamma, train_freq=1,
               gradient_steps=1, ent_coef=tqc.ent_coef, target_entropy=tqc.target_entropy,
               target_update_interval=tqc.target_update_interval,
               top_quantiles_to_drop_per_net=tqc.top_quantiles_to_drop_per_net,
               policy_kwargs={"net_arch": _net_arch(config), "n_quantiles": tqc.n_quantiles,
                              "n_critics": tqc.n_critics},
               seed=seed, device=device, verbose=0)


def sbx_sac(config, seed: int, device: str = "cpu"):
    """SBX's SAC (JAX) set up like an rltrain SAC config, as `sb3_sac`. JAX picks its own
    device; `device` is unused."""
    import gymnasium as gym
    from sbx import SAC

    sac = config.sac
    return SAC("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
               buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
               batch_size=config.batch_size, tau=config.tau, gamma=config.gamma,
               train_freq=1, gradient_steps=1, ent_coef=sac.ent_coef,
               target_entropy=sac.target_entropy,
               policy_kwargs={"net_arch": _net_arch(config)}, seed=seed, verbose=0)


def sbx_td3(config, seed: int, device: str = "cpu"):
    """SBX's TD3 (JAX) set up like an rltrain config, as `sb3_td3`."""
    return sb3_td3(config, seed, device, library="sbx")


def sbx_model(config, seed: int, device: str = "cpu"):
    """The SBX model that trains like the rltrain config `config`."""
    makers = {"sac": sbx_sac, "crossq": sbx_crossq, "tqc": sbx_tqc}
    return makers.get(config.algo, sbx_td3)(config, seed, device)


def sbx_crossq(config, seed: int, device: str = "cpu"):
    """SBX's CrossQ (JAX) set up like an rltrain CrossQ config, as `sb3_crossq` (SBX states
    the running statistics' rate as 1 - momentum, and has no eps setting: its 0.001 is
    rltrain's default). JAX picks its own device and threads; `device` is unused."""
    import gymnasium as gym
    from sbx import CrossQ

    crossq = config.crossq
    assert crossq.batch_norm_eps == 0.001, "SBX's batch renormalisation eps is fixed"
    return CrossQ("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
                  buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
                  batch_size=config.batch_size, gamma=config.gamma, train_freq=1,
                  gradient_steps=1, ent_coef=crossq.ent_coef,
                  target_entropy=crossq.target_entropy, policy_delay=crossq.policy_delay,
                  policy_kwargs={"net_arch": _net_arch(config),
                                 "batch_norm_momentum": 1 - crossq.batch_norm_momentum,
                                 "renorm_warmup_steps": crossq.renorm_warmup_steps},
                  seed=seed, verbose=0)


def sbx_tqc(config, seed: int, device: str = "cpu"):
    """SBX's TQC (JAX) set up like an rltrain TQC config, as `sb3_tqc` (SBX averages its
    target critics after every update: the config must too). JAX picks its own device;
    `device` is unused."""
    import gymnasium as gym
    from sbx import TQC

    tqc = config.tqc
    assert tqc.target_update_interval == 1, "SBX's TQC averages its targets every update"
    return TQC("MlpPolicy", gym.make(config.env_name), learning_rate=config.actor_lr,
               buffer_size=config.replay_buffer_size, learning_starts=config.learning_starts,
               batch_size=config.batch_size, tau=config.tau, gamma=config.gamma, train_freq=1,
               gradient_steps=1, ent_coef=tqc.ent_coef, target_entropy=tqc.target_entropy,
               top_quantiles_to_drop_per_net=tqc.top_quantiles_to_drop_per_net,
               policy_kwargs={"net_arch": _net_arch(config), "n_quantiles": tqc.n_quantiles,
                              "n_critics": tqc.n_critics},
               seed=seed, verbose=0)


def sb3_model(config, seed: int, device: str = "cpu"):
    """The SB3 (or sb3-contrib) model that trains like the rltrain config `config`."""
    makers = {"sac": sb3_sac, "crossq": sb3_crossq, "tqc": sb3_tqc}
    return makers.get(config.algo, sb3_td3)(config, seed, device)


def agent_on_filled_buffer(package: str = "rltrain", rows: int = 10_000,
                           seed: int | None = None, config_name: str = "pendulum_ddpg.yaml"):
    """The agent of a shipped Pendulum config (`config_name`, DDPG's by default;
    Pendulum's shapes, CPU) and a replay buffer holding `rows` random transitions, both
    built by `package` (rltrain, or a commit's copy of it under another name); `seed`
    seeds the weights' initialisation."""
    import importlib

    import numpy as np
    import torch

    buffers = importlib.import_module(f"{package}.utils.training.replay_buffer")
    configs = importlib.import_module(f"{package}.utils.config.loader")
    if seed is not None:
        torch.manual_seed(seed)
    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    config = configs.load_config(config_name)
    try:  # the config's update backend, as a run would build it
        setup = importlib.import_module(f"{package}.scripts.training.agent_setup")
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
    """Wall time, and the process's CPU time (all its threads), between two marks."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.stop: float | None = None
        self.cpu_start: float | None = None
        self.cpu_stop: float | None = None

    def mark_start(self) -> None:
        self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def mark_stop(self) -> None:
        self.stop, self.cpu_stop = time.perf_counter(), time.process_time()

    @property
    def seconds(self) -> float:
        assert self.start is not None and self.stop is not None
        return self.stop - self.start

    def since_stop(self) -> float:
        """Wall seconds from the stop mark to now."""
        assert self.stop is not None
        return time.perf_counter() - self.stop

    @property
    def cpu_seconds(self) -> float:
        assert self.cpu_start is not None and self.cpu_stop is not None
        return self.cpu_stop - self.cpu_start
