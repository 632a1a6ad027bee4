"""Replay memory: resident memory and checkpoint size against the filled part and capacity.

    python benchmarks/memory.py

For capacities of 1e5 and 1e6 transitions (Pendulum's shapes) and fills of 0, 10k and
100k transitions, each in a fresh process: the resident memory the buffer adds, and
the size of its checkpointed state; SB3's ReplayBuffer beside it (same capacity,
same fills) when the `[bench]` extra is installed.
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

        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
