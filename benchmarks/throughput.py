"""Training throughput: rltrain vs Stable-Baselines3 side by side, plus the GEMM floor.

    python benchmarks/throughput.py                 # 3 rounds, 5000 learning steps each
    python benchmarks/throughput.py --rounds 5 --steps 5000
    python benchmarks/throughput.py --device cuda   # both on a GPU (training rounds only)
    python benchmarks/throughput.py --algo sac      # rltrain's SAC against SB3's SAC
    python benchmarks/throughput.py --algo crossq --threads 1   # against sb3-contrib's
    python benchmarks/throughput.py --algo sac --threads 1 --sbx --env HalfCheetah-v5
    python benchmarks/throughput.py --algo sac --threads 1 --sbx --only rltrain,sbx --rounds 8

Each round runs, each in a fresh process on the same settings and each round starting
with the next: rltrain (flow-1 diagnostics on, the default), rltrain with diagnostics
off, rltrain with `update_backend: autograd`, and SB3 (TD3 set up like rltrain's DDPG,
see common.py). With `--algo sac`: rltrain's SAC (pendulum_sac.yaml) the same three
ways, and SB3's SAC on the same settings; `--algo
crossq` and `--algo tqc` likewise, against sb3-contrib's CrossQ and TQC
(pendulum_crossq.yaml, pendulum_tqc.yaml; common.py `sb3_model`). `--threads N` gives
both libraries N torch threads. It measures env steps per second over the learning
phase (from `SETTLE` learning steps after the random warm-up, past each library's
first updates, which set it up, SBX's XLA compile among them, to the last env step,
marked inside each library's loop: start-up and the end of the run are left out for all
alike, and the
seconds from the last step to the end are printed apart), per second of wall time and
per second of the process's CPU time (all its threads), the process's peak memory, and
with the diagnostics on the share of the learning phase spent in their own calls. Then, on the
CPU only: the diagnostics on
and off in one process (alternating blocks), and the update-only rate against the GEMM
floor (the same matrix shapes timed alone, in alternating blocks) and against the same
products in sequence. Prints medians and ratios; needs the `[bench]` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Stopwatch, peak_rss_mib, run_worker, sb3_model, sbx_model  # noqa: E402
from throughput_one_process import (  # noqa: E402
    diagnostics_ab_worker,
    print_one_process,
    update_only_worker,
)
from throughput_report import print_table  # noqa: E402
from throughput_settings import (  # noqa: E402
    BASE_CONFIGS,
    BUFFER,
    FUSED,
    SETTLE,
    WARMUP,
    bench_config,
)


def rltrain_worker(base: str, steps: int, seed: int, extra: list[str]) -> dict:
    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.run.device import resolve_device
    from rltrain.utils.run.folders import create_run

    config = bench_config(base, steps, seed, extra)
    watch = Stopwatch()
    diagnostics_at = []

    class TimedTrainer(Trainer):
        def _step(self) -> None:
            super()._step()
            if self.state.counters.env_steps in (WARMUP + SETTLE, WARMUP + SETTLE + steps):
                watch.mark_start() if not diagnostics_at else watch.mark_stop()
                diagnostics_at.append(self.diagnostics.seconds)

    trainer = TimedTrainer(config, resolve_device(config.device), interactive=False)
    trainer.run(create_run(config))
    # The diagnostics' own calls (Flow1Diagnostics times them), as a share of the same
    # learning phase: measured inside one process, so the machine's drift cancels.
    diagnostics = (diagnostics_at[1] - diagnostics_at[0]) / watch.seconds
    return {"steps_per_second": steps / watch.seconds, "peak_rss_mib": peak_rss_mib(),
            "cpu_steps_per_second": steps / watch.cpu_seconds,
            "diagnostics_share": diagnostics, "end_seconds": watch.since_stop()}


def sbx_worker(base: str, steps: int, seed: int, extra: list[str]) -> dict:
    """SBX (JAX) on the same settings; with torch_threads=1, XLA on one thread too."""
    import os

    if "torch_threads=1" in extra:  # before JAX is imported: its thread pool is fixed then
        os.environ["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")
    return sb3_worker(base, steps, seed, extra, sbx_model)


def sb3_worker(base: str, steps: int, seed: int, extra: list[str],
               make_model=sb3_model) -> dict:
    from stable_baselines3.common.callbacks import BaseCallback

    watch = Stopwatch()

    class Timer(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == WARMUP + SETTLE:
                watch.mark_start()
            elif self.num_timesteps == WARMUP + SETTLE + steps:
                watch.mark_stop()
            return True

    from rltrain.utils.config.loader import load_config

    config = load_config(base, [f"learning_starts={WARMUP}", f"replay_buffer_size={BUFFER}",
                                *extra])
    if config.torch_threads is not None:  # as rltrain's Trainer sets them
        import torch

        torch.set_num_threads(config.torch_threads)
    model = make_model(config, seed, config.device)
    model.learn(WARMUP + SETTLE + steps, callback=Timer())
    return {"steps_per_second": steps / watch.seconds, "peak_rss_mib": peak_rss_mib(),
            "cpu_steps_per_second": steps / watch.cpu_seconds,
            "end_seconds": watch.since_stop()}


def worker_main(argv: list[str]) -> None:
    kind, steps, seed, base, extra = argv[0], int(argv[1]), int(argv[2]), argv[3], argv[4:]
    if "torch_threads=1" in extra:
        # One core for every library: a thread count does not bind JAX's runtime, whose
        # dispatch overlaps the env steps on a second core (SBX used 1.6 CPU-seconds per
        # wall second unpinned).
        import os

        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    workers = {"rltrain": lambda: rltrain_worker(base, steps, seed, extra),
               "sb3": lambda: sb3_worker(base, steps, seed, extra),
               "sbx": lambda: sbx_worker(base, steps, seed, extra),
               "diagnostics": lambda: diagnostics_ab_worker(steps),
               "update": lambda: update_only_worker(steps)}
    print(json.dumps(workers[kind]()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5000, help="learning steps per run")
    parser.add_argument("--updates", type=int, default=2000, help="for the update-only rate")
    parser.add_argument("--ab-steps", type=int, default=10_000,
                        help="learning steps of the one-process diagnostics on/off comparison")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both train (cuda: the training rounds only)")
    parser.add_argument("--algo", choices=tuple(BASE_CONFIGS), default="ddpg",
                        help="ddpg: rltrain's DDPG against SB3's TD3 set up as DDPG; sac: "
                             "the two SACs; crossq, tqc: against sb3-contrib's")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of both libraries (default: torch's choice); "
                             "1 also pins each run to one core")
    parser.add_argument("--env", default=None,
                        help="train on this Gymnasium env instead of the base config's "
                             "Pendulum-v1 (e.g. HalfCheetah-v5), every library alike")
    parser.add_argument("--only", default=None,
                        help="a comma-separated subset of the kinds to run (rltrain,sbx: "
                             "rltrain against SBX alone, with --sbx)")
    parser.add_argument("--sbx", action="store_true",
                        help="SBX (JAX, `pip install sbx-rl`) too: SAC, TD3/DDPG, CrossQ, TQC; "
                             "with --threads 1, XLA on one thread")
    args = parser.parse_args()
    script = Path(__file__).resolve()
    rows = run_rounds(script, args.rounds, args.steps, args.device, BASE_CONFIGS[args.algo],
                      args.threads, args.sbx, args.env,
                      None if args.only is None else args.only.split(","))
    print_table(rows, args.rounds, BUFFER)
    if (args.device == "cuda" or args.algo != "ddpg" or args.env is not None
            or args.only is not None):
        return  # the rest measures the CPU: its matrix products, caches and threads
    print_one_process(script, args.updates, args.ab_steps)


def run_rounds(script: Path, rounds: int, steps: int, device_name: str,
               base: str, threads: int | None = None, sbx: bool = False,
               env: str | None = None, only: list[str] | None = None) -> dict[str, list]:
    """Every kind of run (or those `only` names) once per round, each in a fresh
    process; their results by kind."""
    device = f"device={device_name}"
    if threads is not None:
        device = f"{device} torch_threads={threads}"
    if env is not None:  # the base config's settings on another env, for every library
        device = f"{device} env_name={env}"
    kinds = {"rltrain": ["rltrain", *device.split()], "rltrain, diagnostics off":
             ["rltrain", *device.split(), "diagnostics.enabled=false"],
             "rltrain, autograd backend": ["rltrain", *device.split(),
                                           "update_backend=autograd"],
             "sb3": ["sb3", *device.split()]}
    if base not in FUSED:  # CrossQ, TQC: no hand-fused update
        del kinds["rltrain, autograd backend"]
    if sbx:
        kinds["sbx"] = ["sbx", *device.split()]
    if only is not None:
        unknown = set(only) - set(kinds)
        if unknown:
            raise SystemExit(f"--only: no kind {', '.join(sorted(unknown))} here; the kinds: "
                             f"{', '.join(kinds)}")
        if set(only) != {"rltrain", "sbx"}:  # the one subset the report prints
            raise SystemExit("--only takes rltrain,sbx (with --sbx): rltrain against SBX")
        kinds = {kind: kinds[kind] for kind in only}
    rows: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for round_index in range(rounds):
        # Each round starts with the next kind, so that no kind always runs first or
        # always follows the same one.
        order = list(kinds.items())
        order = order[round_index % len(order):] + order[:round_index % len(order)]
        for kind, (worker, *extra) in order:
            result = run_worker(script, [worker, str(steps), str(round_index), base, *extra])
            rows[kind].append(result)
            print(f"round {round_index + 1}: {kind:25s} {result['steps_per_second']:7.1f} "
                  f"steps/s ({result['cpu_steps_per_second']:.1f} per CPU-second), peak "
                  f"RSS {result['peak_rss_mib']:.0f} MiB", flush=True)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        main()
