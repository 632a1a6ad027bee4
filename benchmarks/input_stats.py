"""The input rules' statistics on standard envs under random actions (no training).

    pip install mujoco   # for the MuJoCo envs; not an rltrain dependency
    python benchmarks/input_stats.py
    python benchmarks/input_stats.py --envs Pendulum-v1 Hopper-v5 --steps 5000

For each env: random actions for `--steps` env steps, then the statistics that
`utils/diagnostics/inputs.py` computes from the same functions: the largest dimension's
RMS over the newest 1000 transitions (`observation_scale`), the dimensions no step
changed over the newest 1000 (`frozen_observation`), the longest run of episodes that
ended `terminated` at one length (`time_limit_terminal`) and gamma 0.99's horizon over
the mean episode length (`short_horizon`). A random policy is not a trained one: this
shows what the envs themselves give, where a rule would fire on a healthy env anyway.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch

from rltrain.utils.diagnostics.inputs import SCALE_ROWS, EpisodeEnds, observation_stats

ENVS = ["Pendulum-v1", "MountainCarContinuous-v0", "HalfCheetah-v5", "Hopper-v5",
        "Walker2d-v5", "Ant-v5", "Humanoid-v5", "Swimmer-v5", "InvertedPendulum-v5",
        "InvertedDoublePendulum-v5", "Reacher-v5", "Pusher-v5"]


def measure(name: str, steps: int, seed: int) -> dict:
    env = gym.make(name)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows, ends, streak, length = [], EpisodeEnds(window=100), 0, 0
    for _ in range(steps):
        next_obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        rows.append((obs, next_obs))
        obs, length = next_obs, length + 1
        if terminated or truncated:
            ends.add(length, bool(terminated))
            streak = max(streak, ends.streak)
            obs, length = env.reset()[0], 0
    env.close()
    before = torch.as_tensor(np.array([r[0] for r in rows[-SCALE_ROWS:]]), dtype=torch.float32)
    after = torch.as_tensor(np.array([r[1] for r in rows[-SCALE_ROWS:]]), dtype=torch.float32)
    stats = observation_stats(before, after, SCALE_ROWS)
    rms = np.asarray(stats["rms"])
    return {"env": name, "obs_dim": len(rms), "max_rms": float(rms.max()),
            "max_rms_dim": int(rms.argmax()), "frozen": stats["frozen"], "streak": streak,
            "episodes": len(ends.lengths), "horizon_share": ends.horizon_share(0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=ENVS)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| env | obs dims | largest RMS (dim) | dims no step changed | terminated streak "
          "| episodes | horizon share, gamma 0.99 |")
    print("|---|---|---|---|---|---|---|")
    for name in args.envs:
        try:
            r = measure(name, args.steps, args.seed)
        except (gym.error.Error, ImportError) as error:  # e.g. MuJoCo not installed
            print(f"| {name} | not available: {error} | | | | | |")
            continue
        share = "-" if r["horizon_share"] is None else f"{r['horizon_share']:.2f}"
        frozen = f"{len(r['frozen'])} of {r['obs_dim']}" if r["frozen"] else "0"
        print(f"| {r['env']} | {r['obs_dim']} | {r['max_rms']:.1f} ({r['max_rms_dim']}) | "
              f"{frozen} | {r['streak']} | {r['episodes']} | {share} |", flush=True)


if __name__ == "__main__":
    main()
