"""When do several training envs pay? Env steps/s with 1 env, and with 2 sync or async.

    python benchmarks/vector_envs.py                      # steps of 5 and 20 ms
    python benchmarks/vector_envs.py --rounds 1 --steps 500 --step-ms 20

The env is Pendulum whose every step also burns CPU time (`FakeBusyPendulum-v0` in
tests/fake_envs.py), standing in for an expensive simulator; everything else is
`pendulum_ddpg.yaml` (256x256 networks, one update per env step), diagnostics off.
Each setting runs in a fresh process, in alternation, and is timed over the learning
phase as in throughput.py. Prints medians and the ratio to one env.
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000, help="learning steps per run")
    parser.add_argument("--step-ms", type=float, nargs="+", default=[5.0, 20.0],
                        help="CPU time each env step burns")
    args = parser.parse_args()
    rows = []
    for step_ms in args.step_ms:
        os.environ["BUSY_STEP_SECONDS"] = str(step_ms / 1000)  # the workers inherit it
        rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for round_index in range(args.rounds):
            for name, extra in SETTINGS.items():
                result = run_worker(Path(__file__), [str(args.steps), str(round_index),
                                                     *BUSY, *extra])
                rates[name].append(result["steps_per_second"])
                print(f"{step_ms:g} ms steps, round {round_index + 1}: {name:14s} "
                      f"{rates[name][-1]:6.1f} env steps/s", flush=True)
        base = statistics.median(rates["1 env"])
        rows += [(step_ms, name, statistics.median(v), statistics.median(v) / base)
                 for name, v in rates.items()]
    print("\n| env step | training envs | env steps/s (median) | vs 1 env |")
    print("|---|---|---|---|")
    for step_ms, name, median, ratio in rows:
        print(f"| {step_ms:g} ms | {name} | {median:.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        import json

        from throughput import rltrain_worker

        steps, seed = int(sys.argv[2]), int(sys.argv[3])
        print(json.dumps(rltrain_worker(steps, seed, sys.argv[4:])))
    else:
        main()
