"""The input rules' statistics on standard envs under random actions (no training).

    pip install mujoco   # for the MuJoCo envs; not an rltrain dependency
    python benchmarks/input_stats.py
    python benchmarks/input_stats.py --envs Pendulum-v1 Hopper-v5 --steps 5000
    python benchmarks/input_stats.py --actions low   # a policy saturated at the low bounds

For each env: random actions for `--steps` env steps, then the statistics that
`utils/diagnostics/inputs.py` computes from the same functions: the largest dimension's
RMS over the newest 1000 transitions, and over sqrt(obs_dim) (`observation_scale`), the
dimensions no step changed over the newest 1000 (`frozen_observation`), the longest run
of episodes that ended `terminated` at one length (`time_limit_terminal`) and gamma
0.99's horizon over the mean episode length (`short_horizon`). A random policy is not a
trained one: this shows what the envs themselves give, where a rule would fire on a
healthy env anyway. `--actions high` or `low` acts at one bound (plus noise of 0.1 of the
half-range, clipped, as exploration adds), the policy a saturated tanh gives: such a
policy falls at one same step every episode, which is what `time_limit_terminal`'s
minimum length is for.
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


def measure(name: str, steps: int, seed: int, actions: str) -> dict:
    env = gym.make(name)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    obs, _ = env.reset(seed=seed)
    rows, ends, streak, length = [], EpisodeEnds(window=100), 0, 0
    for _ in range(steps):
        if actions == "random":
            action = env.action_space.sample()
        else:
            noise = 0.1 * (high - low) / 2 * rng.standard_normal(low.shape)
            action = np.clip((high if actions == "high" else low) + noise, low, high)
        next_obs, _, terminated, truncated, _ = env.step(action.astype(low.dtype))
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
            "scale": stats["scale"],
            "max_rms_dim": int(rms.argmax()), "frozen": stats["frozen"], "streak": streak,
            "episodes": len(ends.lengths), "horizon_share": ends.horizon_share(0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=ENVS)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", choices=["random", "high", "low"], default="random")
    args = parser.parse_args()
    print(f"{args.steps} env steps, actions: {args.actions}\n")
    print("| env | obs dims | largest RMS (dim) | over sqrt(dims) | dims no step changed "
          "| terminated streak | episodes | horizon share, gamma 0.99 |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.envs:
        try:
            r = measure(name, args.steps, args.seed, args.actions)
        except (gym.error.Error, ImportError) as error:  # e.g. MuJoCo not installed
            print(f"| {name} | not available: {error} | | | | | | |")
            continue
        share = "-" if r["horizon_share"] is None else f"{r['horizon_share']:.2f}"
        frozen = f"{len(r['frozen'])} of {r['obs_dim']}" if r["frozen"] else "0"
        print(f"| {r['env']} | {r['obs_dim']} | {r['max_rms']:.1f} ({r['max_rms_dim']}) | "
              f"{r['scale']:.1f} | {frozen} | {r['streak']} | {r['episodes']} | {share} |",
              flush=True)


if __name__ == "__main__":
    main()
