"""Calibration runs for the rules on SB3's PPO, A2C and DQN (the ON_POLICY and
Q_LEARNING families): healthy runs on RL Zoo's tuned settings and one planted fault per
rule, each watched by RltrainCallback, and what each rule measured and said.

RL Zoo's settings (DLR-RM/rl-baselines3-zoo, hyperparams/ppo.yml, a2c.yml, dqn.yml):
PPO CartPole-v1 (8 envs, n_steps 32, batch 256, gae_lambda 0.8, gamma 0.98, n_epochs 20,
ent_coef 0, learning_rate lin_0.001, clip_range lin_0.2), PPO Pendulum-v1 (4 envs,
n_steps 1024, gae_lambda 0.95, gamma 0.9, n_epochs 10, ent_coef 0, learning_rate 1e-3,
clip_range 0.2, use_sde with sde_sample_freq 4), A2C CartPole-v1 (8 envs, ent_coef 0,
SB3's defaults otherwise), DQN CartPole-v1 (learning_rate 2.3e-3, batch 64, buffer 1e5,
learning_starts 1000, gamma 0.99, target_update_interval 10, train_freq 256,
gradient_steps 128, exploration_fraction 0.16, exploration_final_eps 0.04, [256, 256]).
A run shorter than RL Zoo's n_timesteps scales its linear schedules to its own length,
as RL Zoo does.

    nice -n 10 python -m benchmarks.onpolicy_calibration [--steps 40000] [--only NAME ...]

Runs one at a time, one torch thread, seed 0. Results, one JSON line per run:
benchmarks/results/onpolicy_calibration.jsonl (the rules' own statistics from
flow1.jsonl's "rule" lines: their range over the run; every finding that warned).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).resolve().parent / "results" / "onpolicy_calibration.jsonl"


def linear(start: float) -> Callable[[float], float]:
    """RL Zoo's `lin_<start>`: from `start` down to 0 over the run."""
    return lambda progress: progress * start


def ppo_cartpole(**change: Any) -> tuple[str, str, int, dict[str, Any]]:
    return ("PPO", "CartPole-v1", 8, {
        "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20,
        "ent_coef": 0.0, "learning_rate": linear(1e-3), "clip_range": linear(0.2), **change})


def ppo_pendulum(**change: Any) -> tuple[str, str, int, dict[str, Any]]:
    return ("PPO", "Pendulum-v1", 4, {
        "n_steps": 1024, "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10, "ent_coef": 0.0,
        "learning_rate": 1e-3, "clip_range": 0.2, "use_sde": True, "sde_sample_freq": 4,
        **change})


def a2c_cartpole(**change: Any) -> tuple[str, str, int, dict[str, Any]]:
    return ("A2C", "CartPole-v1", 8, {"ent_coef": 0.0, **change})


def dqn_cartpole(**change: Any) -> tuple[str, str, int, dict[str, Any]]:
    return ("DQN", "CartPole-v1", 1, {
        "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
        "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10,
        "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}, **change})


# name -> (SB3 class, env, n_envs, settings), the rule a fault should be named by (None:
# a healthy run, or a change that turned out harmless: its run learnt as well)
SCENARIOS: dict[str, tuple[tuple[str, str, int, dict[str, Any]], str | None]] = {
    "healthy_ppo_cartpole": (ppo_cartpole(), None),
    "healthy_ppo_pendulum": (ppo_pendulum(), None),
    "healthy_a2c_cartpole": (a2c_cartpole(), None),
    "healthy_dqn_cartpole": (dqn_cartpole(), None),
    # harmless: PPO's clipping keeps the steps small (KL 0.01-0.1), the runs learn; on
    # CartPole a greedy DQN from the start learns too
    "ppo_cartpole_lr_lin_0.02": (ppo_cartpole(learning_rate=linear(0.02)), None),
    "ppo_cartpole_n_epochs_200": (ppo_cartpole(n_epochs=200), None),
    "ppo_pendulum_n_epochs_100": (ppo_pendulum(n_epochs=100), None),
    "dqn_cartpole_exploration_fraction_0.001": (
        dqn_cartpole(exploration_fraction=0.001, exploration_final_eps=0.0), None),
    # faults
    "ppo_cartpole_lr_0.05": (ppo_cartpole(learning_rate=0.05), "policy_step_size"),
    "ppo_cartpole_clip_range_100": (ppo_cartpole(clip_range=100.0), "policy_step_size"),
    "ppo_pendulum_lr_0.01": (ppo_pendulum(learning_rate=0.01), "policy_step_size"),
    "ppo_cartpole_reward_x1000": (ppo_cartpole(), "value_fit"),
    "ppo_pendulum_lr_1e-6": (ppo_pendulum(learning_rate=1e-6), "value_fit"),
    "a2c_cartpole_lr_0.01": (a2c_cartpole(learning_rate=0.01), "policy_entropy_collapse"),
    # value_fit does not judge A2C's 5-step rollouts; the health rule names it
    "a2c_cartpole_reward_x1000": (a2c_cartpole(), "critic_loss_explosion"),
    "dqn_cartpole_target_every_update": (
        dqn_cartpole(train_freq=1, gradient_steps=1, target_update_interval=1),
        "q_beyond_returns"),
}
REWARD_SCALE = {"ppo_cartpole_reward_x1000": 1000.0, "a2c_cartpole_reward_x1000": 1000.0}
# The rules' config: the health rules warn instead of pausing, so that a fault's run goes
# on for the rules judged here to see it (a reward x1000 sets off critic_loss_explosion
# at the first rollout).
WATCH = {"log_freq": 1024, "monitor": {name: {"action": "warn"} for name in (
    "critic_loss_explosion", "grad_explosion", "catastrophic_reward")}}


def make_env(env_id: str, n_envs: int, scale: float) -> Any:
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env

    wrapper = None if scale == 1.0 else (
        lambda env: gym.wrappers.TransformReward(env, lambda r: scale * r))
    return make_vec_env(env_id, n_envs=n_envs, seed=0, wrapper_class=wrapper)


def train(name: str, steps: int, folder: Path) -> Path:
    """Train scenario `name` for `steps` env steps, watched; its log folder."""
    import stable_baselines3
    import torch

    from rltrain.integrations.sb3 import RltrainCallback

    torch.set_num_threads(1)
    (cls_name, env_id, n_envs, settings), _ = SCENARIOS[name]
    cls = getattr(stable_baselines3, cls_name)
    env = make_env(env_id, n_envs, REWARD_SCALE.get(name, 1.0))
    model = cls("MlpPolicy", env, seed=0, device="cpu", **settings)
    model.learn(steps, callback=RltrainCallback(
        run_name=name, log_dir=str(folder / "logs"),
        checkpoint_dir=str(folder / "checkpoints"), config=WATCH))
    return folder / "logs" / name


def summary(name: str, log_dir: Path, seconds: float) -> dict[str, Any]:
    """What each rule measured (its statistics' range) and every warning."""
    from rltrain.utils.run.log_files import read_jsonl

    stats: dict[str, dict[str, list[float]]] = {}
    for line in read_jsonl(log_dir / "flow1.jsonl"):
        if line.get("kind") != "rule":
            continue
        for key, value in line.items():
            if isinstance(value, (int, float)) and key not in ("env_steps", "time"):
                stats.setdefault(line["rule"], {}).setdefault(key, []).append(value)
    ranges = {rule: {k: [min(v), max(v), len(v)] for k, v in values.items()}
              for rule, values in stats.items()}
    findings = [{"rule": e["rule"], "env_steps": e["env_steps"], "action": e["action"],
                 "message": e.get("message", "")}
                for e in read_jsonl(log_dir / "events.jsonl")
                if e.get("action") in ("warn", "pause")]
    episodes = [m["episode_return"] for m in read_jsonl(log_dir / "metrics.jsonl")
                if m.get("kind") == "episode"]
    first = {}
    for f in findings:
        first.setdefault(f["rule"], f)
    return {"scenario": name, "expected": SCENARIOS[name][1], "seconds": round(seconds),
            "first_returns": round(sum(episodes[:20]) / max(len(episodes[:20]), 1), 1),
            "last_returns": round(sum(episodes[-20:]) / max(len(episodes[-20:]), 1), 1),
            "statistics": ranges, "warned": sorted(first), "findings": list(first.values())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the run folders here (default: a temporary folder)")
    args = parser.parse_args(argv)
    names = args.only or list(SCENARIOS)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        for name in names:
            start = time.monotonic()
            log_dir = train(name, args.steps, folder)
            line = summary(name, log_dir, time.monotonic() - start)
            print(json.dumps(line), flush=True)
            with args.out.open("a") as out:
                out.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
