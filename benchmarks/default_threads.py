"""Which torch thread count to train small networks with when the config does not say.

Torch gives a process one thread per core. For the update of a small MLP (Pendulum's
256x256, batch 256) each matrix product is too small to split well, and on a machine
whose cores are busy with other work the threads wait for each other: the README's
first command ran at 1-3 env steps/s on a busy 2-core machine, and at 7-14 with
`--set torch_threads=1`. This script trains the same run with 1 thread and with one per
core, in fresh processes, alternating, for a few network widths, and prints the env
steps/s of the learning phase (after the random warm-up) and their ratio. `--busy N`
runs N processes that keep a core each busy beside it (another training, say).

    python benchmarks/default_threads.py [--widths 64 256 1024] [--rounds 2] [--steps 300]
                                         [--busy 0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_worker, scratch_folder  # noqa: E402

WARMUP = 200  # env steps of random actions, then --steps of learning


def worker(threads: int, width: int, steps: int) -> None:
    """One run; prints {"steps_per_s": ...} of its learning phase as its last line."""
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.hooks.hook import Hook
    from rltrain.utils.run.folders import create_run

    class Clock(Hook):
        name = "clock"
        marks: dict[int, float] = {}

        def on_step_end(self, env_steps: int) -> list:
            if env_steps in (WARMUP, WARMUP + steps):
                self.marks[env_steps] = time.perf_counter()
            return []

    folder = Path(scratch_folder())
    config = config_from_dict({
        "env_name": "Pendulum-v1", "device": "cpu", "hidden_sizes": [width, width],
        "batch_size": 256, "learning_starts": WARMUP, "max_timesteps": WARMUP + steps,
        "eval_freq": 10**6, "checkpoint_freq": 10**6, "torch_threads": threads,
        "diagnostics": {"enabled": False}, "log_dir": str(folder / "logs"),
        "checkpoint_dir": str(folder / "checkpoints"), "run_name": "threads"})
    trainer = Trainer(config, torch.device("cpu"), interactive=False)
    clock = Clock()
    trainer.extra_hooks.append(clock)
    trainer.run(create_run(config))
    seconds = clock.marks[WARMUP + steps] - clock.marks[WARMUP]
    print(json.dumps({"steps_per_s": steps / seconds}))


def burn() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300, help="learning steps per run")
    parser.add_argument("--busy", type=int, default=0, help="processes burning a core each")
    parser.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    cores = os.cpu_count() or 1
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.busy)]
    for process in burners:
        process.start()
    try:
        rates: dict[tuple[int, int], list[float]] = {}
        for round_ in range(args.rounds):
            for width in args.widths:
                order = (1, cores) if round_ % 2 == 0 else (cores, 1)
                for threads in order:
                    result = run_worker(Path(__file__),
                                        [str(threads), str(width), str(args.steps)])
                    rates.setdefault((width, threads), []).append(result["steps_per_s"])
                    print(f"round {round_ + 1}, {width}x{width}, {threads} thread(s): "
                          f"{result['steps_per_s']:.1f} env steps/s", flush=True)
    finally:
        for process in burners:
            process.terminate()
    print(f"\n{cores} cores, {args.busy} busy processes beside; median env steps/s of the "
          f"learning phase ({args.steps} steps, batch 256):")
    print(f"| network | 1 thread | {cores} threads | 1 thread vs {cores} |\n|---|---|---|---|")
    for width in args.widths:
        one, many = (statistics.median(rates[(width, t)]) for t in (1, cores))
        print(f"| {width}x{width} | {one:.1f} | {many:.1f} | {one / many:.2f}x |")


if __name__ == "__main__":
    main()
