"""When do several training envs pay? Env steps/s with 1 env, and with 2 sync or async.

    python benchmarks/vector_envs.py                      # 3 rounds, 1500 learning steps
    python benchmarks/vector_envs.py --rounds 1 --steps 500

The env is Pendulum whose every step also burns 5 ms of CPU (`FakeBusyPendulum-v0` in
tests/fake_envs.py), standing in for an expensive simulator; everything else is
`pendulum_ddpg.yaml` (256x256 networks, one update per env step), diagnostics off.
Each setting runs in a fresh process, in alternation, and is timed over the learning
phase as in throughput.py. Prints medians and the ratio to one env.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # fake_envs: the busy env
from common import run_worker  # noqa: E402

BUSY = ["env_name=fake_envs:FakeBusyPendulum-v0", "diagnostics.enabled=false",
        "min_reward_threshold=null"]
SETTINGS = {"1 env": [], "2 envs, sync": ["num_envs=2", "vector_mode=sync"],
            "2 envs, async": ["num_envs=2", "vector_mode=async"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500, help="learning steps per run")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for round_index in range(args.rounds):
        for name, extra in SETTINGS.items():
            result = run_worker(Path(__file__), [str(args.steps), str(round_index),
                                                 *BUSY, *extra])
            rates[name].append(result["steps_per_second"])
            print(f"round {round_index + 1}: {name:14s} {rates[name][-1]:6.1f} env steps/s",
                  flush=True)
    base = statistics.median(rates["1 env"])
    print("\n| training envs | env steps/s (median) | vs 1 env |\n|---|---|---|")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} | {median / base:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        import json

        from throughput import rltrain_worker

        steps, seed = int(sys.argv[2]), int(sys.argv[3])
        print(json.dumps(rltrain_worker(steps, seed, sys.argv[4:])))
    else:
        main()
