"""Replay memory: resident memory and checkpoint size against the filled part and capacity.

    python benchmarks/memory.py
    python benchmarks/memory.py --run [--steps 1300] [--pairs 2]

For capacities of 1e5 and 1e6 transitions (Pendulum's shapes) and fills of 0, 10k and
100k transitions, each in a fresh process: the resident memory the buffer adds, and
the size of its checkpointed state; SB3's ReplayBuffer beside it (same capacity,
same fills) when the `[bench]` extra is installed.

`--run`: the peak resident memory of a whole short run, SAC on Pendulum with the shipped
`pendulum_sac.yaml` (replay 1e6, learning_starts 100, diagnostics on) for `--steps` env
steps, with the `ignored_action` rule on (warn) and off, and SB3's SAC on the same
settings; fresh processes alternated, one torch thread each, medians over `--pairs`.
The default 1300 steps cover the 1000 steps after the warm-up on which `ignored_action`
judges the exploration noise.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_worker  # noqa: E402

CAPACITIES = (100_000, 1_000_000)
FILLS = (0, 10_000, 100_000)


def rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2 ** 20


def worker(tool: str, capacity: int, fill: int) -> dict:
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(1000, 3)).astype(np.float32)
    before = rss_mib()
    size = None
    if tool == "rltrain":
        from rltrain.utils.training.replay_buffer import ReplayBuffer

        buffer = ReplayBuffer(capacity, 3, 1, torch.device("cpu"), seed=0)
        for i in range(fill):
            buffer.add(obs[i % 1000], obs[i % 1000, :1], -1.0, obs[(i + 1) % 1000], False, False)
        data = io.BytesIO()
        torch.save(buffer.state_dict(), data)
        size = data.tell() / 2 ** 20
    else:
        import gymnasium as gym
        from stable_baselines3.common.buffers import ReplayBuffer

        space = gym.spaces.Box(-1, 1, (3,), np.float32)
        action = gym.spaces.Box(-2, 2, (1,), np.float32)
        buffer = ReplayBuffer(capacity, space, action, device="cpu")
        for i in range(fill):
            buffer.add(obs[i % 1000], obs[(i + 1) % 1000], obs[i % 1000, :1], np.array([-1.0]),
                       np.array([False]), [{}])
    return {"rss_added_mib": rss_mib() - before, "checkpoint_mib": size}


def run_worker_peak(tool: str, steps: int) -> dict:
    """Peak RSS of one short SAC Pendulum run: rltrain with ignored_action `warn` or `off`
    (tool "rltrain-warn", "rltrain-off"), or SB3's SAC ("sb3")."""
    import torch

    torch.set_num_threads(1)
    from common import peak_rss_mib, sb3_sac, scratch_folder

    from rltrain.utils.config.loader import load_config

    if tool == "sb3":
        sb3_sac(load_config("pendulum_sac.yaml"), seed=0).learn(steps)
    else:
        import rltrain

        folder = scratch_folder()
        rltrain.train("pendulum_sac.yaml", max_timesteps=steps, eval_freq=10 * steps,
                      checkpoint_freq=10 * steps, log_dir=f"{folder}/logs",
                      checkpoint_dir=f"{folder}/checkpoints", torch_threads=1,
                      **{"diagnostics.ignored_action.action": tool.split("-")[1]})
    return {"peak_rss_mib": peak_rss_mib()}


def main_run(steps: int, pairs: int) -> None:
    import statistics

    script = Path(__file__).resolve()
    tools = ["rltrain-warn", "rltrain-off"]
    try:
        import stable_baselines3  # noqa: F401

        tools.append("sb3")
    except ImportError:
        print("stable-baselines3 not installed: rltrain only")
    peaks: dict[str, list[float]] = {t: [] for t in tools}
    for _ in range(pairs):
        for tool in tools:
            result = run_worker(script, ["run", tool, str(steps)])
            peaks[tool].append(result["peak_rss_mib"])
            print(f"{tool}: peak RSS {result['peak_rss_mib']:.0f} MiB", flush=True)
    median = {t: statistics.median(v) for t, v in peaks.items()}
    print(f"\nSAC Pendulum, replay 1e6, {steps} env steps, median of {pairs}:\n")
    print("| run | peak RSS (MiB) | / rltrain, ignored_action off |")
    print("|---|---|---|")
    for tool in tools:
        print(f"| {tool} | {median[tool]:.0f} | {median[tool] / median['rltrain-off']:.2f} |")


def main() -> None:
    script = Path(__file__).resolve()
    tools = ["rltrain"]
    try:
        import stable_baselines3  # noqa: F401

        tools.append("sb3")
    except ImportError:
        print("stable-baselines3 not installed: rltrain only")
    print("| capacity | filled | " + " | ".join(f"{t} RSS added (MiB)" for t in tools)
          + " | rltrain checkpoint (MiB) |")
    print("|---|---|" + "---|" * (len(tools) + 1))
    for capacity in CAPACITIES:
        for fill in FILLS:
            results = {t: run_worker(script, [t, str(capacity), str(fill)]) for t in tools}
            cells = " | ".join(f"{results[t]['rss_added_mib']:.1f}" for t in tools)
            print(f"| {capacity:.0e} | {fill} | {cells} | "
                  f"{results['rltrain']['checkpoint_mib']:.2f} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        import json

        if sys.argv[2] == "run":
            print(json.dumps(run_worker_peak(sys.argv[3], int(sys.argv[4]))))
        else:
            print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    elif "--run" in sys.argv:
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--run", action="store_true")
        parser.add_argument("--steps", type=int, default=1300)
        parser.add_argument("--pairs", type=int, default=2)
        args = parser.parse_args()
        main_run(args.steps, args.pairs)
    else:
        main()
