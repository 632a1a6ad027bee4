"""Several trainings at once on one machine: torch's default threads against a share each.

    python benchmarks/concurrent_runs.py                  # 2 runs at once, 2 rounds
    python benchmarks/concurrent_runs.py --runs 2 --steps 1000 --rounds 3

torch gives every process one thread per core. Two runs at once on a 2-core machine then
have four threads for two cores, and each of the ~150 small parallel ops of an update
waits at its barrier for a thread that is not running. Each round starts `--runs`
trainings at the same moment, first with torch's default threads, then with
`torch_threads` = cores / runs (the order flips every round), all with the settings of
throughput.py (`pendulum_ddpg.yaml`, diagnostics on); it prints each setting's median
env steps/s per run over the learning phase, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def run_together(runs: int, steps: int, round_index: int, extra: list[str]) -> list[float]:
    """`runs` throughput workers started at once; each one's env steps/s."""
    procs = [subprocess.Popen([sys.executable, str(HERE / "throughput.py"), "--worker",
                               "rltrain", str(steps), str(round_index * runs + i), *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(runs)]
    rates = []
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"worker failed:\n{out[-2000:]}\n{err[-4000:]}")
        rates.append(json.loads(out.strip().splitlines()[-1])["steps_per_second"])
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="trainings at once")
    parser.add_argument("--steps", type=int, default=1000, help="learning steps per run")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    share = max(1, cores // args.runs)
    settings = {"torch's default threads": [], f"torch_threads={share}": [f"torch_threads={share}"]}
    rates: dict[str, list[float]] = {name: [] for name in settings}
    for round_index in range(args.rounds):
        order = list(settings) if round_index % 2 == 0 else list(reversed(settings))
        for name in order:
            got = run_together(args.runs, args.steps, round_index, settings[name])
            rates[name] += got
            print(f"round {round_index + 1}, {name}: " + ", ".join(f"{r:.1f}" for r in got)
                  + " env steps/s", flush=True)
    default, shared = (statistics.median(v) for v in rates.values())
    print(f"\n{args.runs} runs at once on {cores} cores, median env steps/s per run over "
          f"the learning phase ({args.steps} steps):")
    print("| threads per run | env steps/s per run | vs torch's default |")
    print("|---|---|---|")
    print(f"| torch's default ({cores}) | {default:.1f} | 1.00x |")
    print(f"| {share} (torch_threads) | {shared:.1f} | {shared / default:.2f}x |")


if __name__ == "__main__":
    main()
