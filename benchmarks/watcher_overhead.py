"""What rltrain's Watcher costs a CleanRL loop: docs/examples/cleanrl_td3.py on
Pendulum-v1 with and without it.

    python benchmarks/watcher_overhead.py                  # 3 rounds, 4000 steps
    python benchmarks/watcher_overhead.py --rounds 5 --steps 5000

The example's own settings (256x256 networks, batch 256) with 1000 random warm-up steps.
Each round runs it twice in this process, once as it is and once with the Watcher
replaced by a stand-in that does nothing (its calls return at once), the order flipped
every round, and measures the wall time of the whole run. Prints each round and the
median with/without speed ratio; the issue's target: the Watcher costs at most 5%.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "cleanrl_td3.py"


class NoWatcher:
    """The Watcher's calls, doing nothing: the plain CleanRL script's cost."""

    should_pause = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def after_env_step(self, *args: Any) -> list:
        return []

    def after_update(self, **kwargs: Any) -> list:
        return []

    def evaluate(self, env: Any) -> list:
        return []

    def close(self) -> None:
        pass


def one_run(module: Any, steps: int, watched: bool) -> float:
    """Env steps per second of one run of the example."""
    module.Watcher = module.REAL_WATCHER if watched else NoWatcher
    with tempfile.TemporaryDirectory() as folder:
        here = os.getcwd()
        os.chdir(folder)
        try:
            start = time.perf_counter()
            module.main(["--total-timesteps", str(steps), "--learning-starts", "1000",
                         "--eval-every", str(10 * steps)])
            return steps / (time.perf_counter() - start)
        finally:
            os.chdir(here)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4000)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # both sides alike; the machine is shared
    spec = importlib.util.spec_from_file_location("cleanrl_td3", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.REAL_WATCHER = module.Watcher
    ratios = []
    print("round  without (steps/s)  with (steps/s)  with/without")
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        result = {watched: one_run(module, args.steps, watched) for watched in order}
        ratios.append(result[True] / result[False])
        print(f"{r + 1:>5}  {result[False]:>17.1f}  {result[True]:>14.1f}  {ratios[-1]:>12.3f}")
    print(f"median with/without: {statistics.median(ratios):.3f} "
          f"(cost {1 - statistics.median(ratios):.1%}); target: cost at most 5%")


if __name__ == "__main__":
    main()
