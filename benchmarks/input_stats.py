"""The input rules' statistics on standard envs under random actions (no training).

    pip install mujoco   # for the MuJoCo envs; not an rltrain dependency
    python benchmarks/input_stats.py
    python benchmarks/input_stats.py --envs Pendulum-v1 Hopper-v5 --steps 5000
    python benchmarks/input_stats.py --actions low   # a policy saturated at the low bounds
    python benchmarks/input_stats.py --action-effect   # ignored_action's statistic

For each env: random actions for `--steps` env steps, then the statistics that
`utils/diagnosis/measure/inputs.py` computes from the same functions: the largest dimension's
RMS over the newest 1000 transitions, and over sqrt(obs_dim) (`observation_scale`), the
dimensions no step changed over the newest 1000 (`frozen_observation`), the longest run
of episodes that ended `terminated` at one length (`time_limit_terminal`) and gamma
0.99's horizon over the mean episode length (`short_horizon`). A random policy is not a
trained one: this shows what the envs themselves give, where a rule would fire on a
healthy env anyway. `--actions high` or `low` acts at one bound (plus noise of 0.1 of the
half-range, clipped, as exploration adds), the policy a saturated tanh gives: such a
policy falls at one same step every episode, which is what `time_limit_terminal`'s
minimum length is for.

`--action-effect` measures `ignored_action`'s statistic instead (`utils/diagnosis/
measure/action_effect.py`) on a warm-up of `--rows` random actions (1000), for `--seeds` seeds
(3): with the env as it is, and with three planted faults: the action dropped (the env
gets 0), applied one step late (within the statistic's lags: the env still uses it) and
scaled by 1/100; and with the same rollout's actions shuffled (chance alone, whatever
the env). `--rows 5000` is what training judges where the warm-up is that long.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from rltrain.utils.diagnosis.measure.action_effect import ROWS, action_effect
from rltrain.utils.diagnosis.measure.episode_ends import EpisodeEnds
from rltrain.utils.diagnosis.measure.inputs import SCALE_ROWS, observation_stats
from rltrain.utils.seeding import derive_seed
from rltrain.utils.training.replay_buffer import Batch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import fake_envs  # noqa: E402,F401  (FakeContextBandit-v0, FakeHeadingVehicle-v0)

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


FAULTS = {"as is": lambda action, previous: action,
          "dropped": lambda action, previous: np.zeros_like(action),
          "dropped, echoed": lambda action, previous: np.zeros_like(action),
          "one step late": lambda action, previous: previous,
          "x 1/100": lambda action, previous: action / 100,
          "first dim only": lambda action, previous: np.where(
              np.arange(action.size) == 0, action, 0).astype(action.dtype)}


def warmup(name: str, steps: int, seed: int, fault: str) -> Batch:
    """`steps` uniformly random actions, as the trainer's warm-up takes them, with the
    action the env gets changed by `fault` ("echoed": the observation also carries the
    agent's last action, a common input)."""
    env = gym.make(name)
    # Not `seed` itself: the env's reset would draw the very numbers the actions are
    # (one PCG64 stream), and its first states would follow the first actions.
    env.action_space.seed(derive_seed(seed, 1))
    obs, _ = env.reset(seed=seed)
    previous = np.zeros_like(env.action_space.low)
    rows = []
    for _ in range(steps):
        action = env.action_space.sample()
        sent = FAULTS[fault](action, previous)
        next_obs, reward, terminated, truncated, _ = env.step(sent.astype(action.dtype))
        if fault.endswith("echoed"):
            rows.append((np.append(obs, previous), action, [reward],
                         np.append(next_obs, action), [float(terminated)]))
        else:
            rows.append((obs, action, [reward], next_obs, [float(terminated)]))
        obs, previous = next_obs, action
        if terminated or truncated:
            obs, _ = env.reset()
            previous = np.zeros_like(previous)
    env.close()
    return Batch(*(torch.as_tensor(np.array([r[i] for r in rows]), dtype=torch.float32)
                   for i in range(5)))


def action_effects(name: str, seed: int, rows: int) -> dict[str, list[float]]:
    """Each fault's per-dimension statistics (and the actions shuffled: chance alone)."""
    found = {fault: action_effect(warmup(name, rows, seed, fault))["per_dimension"]
             for fault in FAULTS}
    batch = warmup(name, rows, seed, "as is")
    order = torch.randperm(len(batch.actions), generator=torch.Generator().manual_seed(seed))
    found["shuffled"] = action_effect(batch._replace(actions=batch.actions[order]))[
        "per_dimension"]
    return found


def _cell(per_dimension: list[float], fault: str) -> str:
    """The strongest dimension's statistic; with several dimensions also the weakest
    (for "first dim only": the strongest of the others, which the env ignores)."""
    if len(per_dimension) == 1:
        return f"{per_dimension[0]:.2f}"
    rest = max(per_dimension[1:]) if fault == "first dim only" else min(per_dimension)
    return f"{max(per_dimension):.2f}/{rest:.2f}"


def print_action_effects(envs: list[str], rows: int, seeds: int) -> None:
    columns = [*FAULTS, "shuffled"]
    print(f"action_effect (ignored_action warns below 1.5), {rows} random actions, seeds 0-"
          f"{seeds - 1}; with several action dimensions strongest/weakest dimension (first dim "
          "only: dim 0/the strongest of the others)\n")
    print("| env | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name in envs:
        try:
            found = [action_effects(name, seed, rows) for seed in range(seeds)]
        except (gym.error.Error, ImportError) as error:  # e.g. MuJoCo not installed
            print(f"| {name} | not available: {error} |")
            continue
        cells = [" ".join(_cell(s[c], c) for s in found) for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=None)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", choices=["random", "high", "low"], default="random")
    parser.add_argument("--action-effect", action="store_true",
                        help="ignored_action's statistic, with planted faults")
    parser.add_argument("--rows", type=int, default=ROWS,
                        help="--action-effect: warm-up steps judged (training judges up to 5000)")
    parser.add_argument("--seeds", type=int, default=3, help="--action-effect: seeds 0..N-1")
    args = parser.parse_args()
    if args.action_effect:  # and two envs whose action matters only through the state
        print_action_effects(args.envs or [*ENVS, "FakeContextBandit-v0",
                                           "FakeHeadingVehicle-v0"], args.rows, args.seeds)
        return
    args.envs = args.envs or ENVS
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
