"""What rltrain's RLlib callback costs: RLlib's SAC on Pendulum-v1 with and without it.

    python benchmarks/rllib_overhead.py                       # 3 rounds, 2000 learning steps
    python benchmarks/rllib_overhead.py --rounds 5 --steps 5000 --hidden 256 --batch-size 256

The docs' example (docs/examples/rllib_sac.py: RLlib's SAC, one env runner in this
process, 100 env steps per `train()` iteration) with `--learning-starts` random warm-up
steps. Each round trains a fresh, identically seeded algorithm twice in this process,
once with the callback (flow-1 diagnostics on, the default) and once without, the order
flipped every round, and measures env steps per second over the learning phase (the
iterations after the warm-up), and per CPU second of this process (which other processes'
load moves less). Prints each round, the median with/without ratios, and the
callback's own share of the learning phase (the time spent in its methods and in its
copy of the gradients at RLlib's optimiser steps, measured inside the run, which the
machine's drift moves less). The issue's target: the callback
costs at most 5%. Needs the `[rllib]` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "rllib_sac.py"
TIMED = ("on_sample_end", "on_train_result")  # the callback's methods that do its work


def timed_callback(inside: dict[str, float]) -> Callable[[], None]:
    """Wrap the callback's methods, and the copy of the gradients it takes at each of
    RLlib's optimiser steps (inside RLlib's update), to add their seconds to
    `inside["seconds"]`; returns the function that unwraps them."""
    from rltrain.integrations.rllib import RltrainRLlibCallback
    from rltrain.integrations.views import StepGradients

    owners = {name: RltrainRLlibCallback for name in TIMED}
    owners["_before"] = StepGradients
    originals = {name: getattr(owner, name) for name, owner in owners.items()}

    def wrap(method: Callable[..., None]) -> Callable[..., None]:
        def timed(self: Any, *args: Any, **kwargs: Any) -> None:
            start = time.perf_counter()
            try:
                method(self, *args, **kwargs)
            finally:
                if inside["on"]:
                    inside["seconds"] += time.perf_counter() - start
        return timed

    for name, method in originals.items():
        setattr(owners[name], name, wrap(method))

    def undo() -> None:
        for name, method in originals.items():
            setattr(owners[name], name, method)
    return undo


def one_run(example: Any, argv: list[str], steps: int, warmup: int,
            watched: bool) -> dict[str, float]:
    inside = {"seconds": 0.0, "on": False}
    undo = timed_callback(inside)
    try:
        with tempfile.TemporaryDirectory() as folder:
            args = example.parse([*argv, "--log-dir", f"{folder}/logs", "--checkpoint-dir",
                                  f"{folder}/ckpt", "--total-timesteps", str(warmup + steps),
                                  *([] if watched else ["--no-rltrain"])])
            algo = example.sac_config(args).build_algo()
            sampled = 0
            while sampled < warmup:  # the warm-up, untimed
                sampled = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
            start, cpu, first = time.perf_counter(), time.process_time(), sampled
            inside["on"] = True
            while sampled < warmup + steps:
                sampled = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            algo.stop()
    finally:
        undo()
    return {"steps_per_s": (sampled - first) / elapsed,
            "steps_per_cpu_s": (sampled - first) / cpu,
            "inside_share": inside["seconds"] / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000, help="learning steps per run")
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--training-intensity", type=float, default=None)
    args = parser.parse_args()
    import ray
    import torch

    torch.set_num_threads(1)  # both sides alike; the machine is shared
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    spec = importlib.util.spec_from_file_location("rllib_sac", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    argv = ["--learning-starts", str(args.learning_starts), "--hidden", str(args.hidden),
            "--batch-size", str(args.batch_size)]
    if args.training_intensity:
        argv += ["--training-intensity", str(args.training_intensity)]
    ratios, cpu_ratios, shares = [], [], []
    print(f"settings: {vars(args)}")
    print("round  without (steps/s)  with (steps/s)  with/without  per CPU second  "
          "callback share")
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        result = {watched: one_run(example, argv, args.steps, args.learning_starts, watched)
                  for watched in order}
        off, on = result[False]["steps_per_s"], result[True]["steps_per_s"]
        ratios.append(on / off)
        cpu_ratios.append(result[True]["steps_per_cpu_s"] / result[False]["steps_per_cpu_s"])
        shares.append(result[True]["inside_share"])
        print(f"{r + 1:>5}  {off:>17.1f}  {on:>14.1f}  {on / off:>12.3f}  "
              f"{cpu_ratios[-1]:>14.3f}  {shares[-1]:>14.1%}", flush=True)
    print(f"median with/without: {statistics.median(ratios):.3f} "
          f"(cost {1 - statistics.median(ratios):.1%}); per CPU second of this process: "
          f"{statistics.median(cpu_ratios):.3f}; median callback share of the learning "
          f"phase: {statistics.median(shares):.1%}; target: cost at most 5%")
    ray.shutdown()


if __name__ == "__main__":
    main()
