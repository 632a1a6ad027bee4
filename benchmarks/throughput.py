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
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Stopwatch,
    agent_on_filled_buffer,
    peak_rss_mib,
    run_worker,
    sb3_model,
    sbx_model,
    scratch_folder,
    timed_updates,
)
from gemm_floor import (  # noqa: E402
    gemm_floor_updates_per_second,
    gemm_sequence_updates_per_second,
)
from throughput_report import print_table  # noqa: E402

WARMUP = 1000
# Learning steps before the clock starts, for every library alike: a library's first
# updates set it up (SBX's first compiles its update with XLA, about 2.5 s for SAC here;
# oneDNN makes its primitives), which is start-up, not the learning rate.
SETTLE = 100
FLOOR_BLOCKS = 5
# Env steps per block of the one-process diagnostics comparison: about 0.2 s, so that
# both halves of a pair see the same machine (with 200-step blocks, pairs ranged 0.7-1.3).
AB_BLOCK = 20
BUFFER = 1_000_000


BASE_CONFIGS = {"ddpg": "pendulum_ddpg.yaml", "td3": "pendulum_td3.yaml",
                "sac": "pendulum_sac.yaml", "crossq": "pendulum_crossq.yaml",
                "tqc": "pendulum_tqc.yaml"}
FUSED = ("pendulum_ddpg.yaml", "pendulum_td3.yaml", "pendulum_sac.yaml")  # a fused update


def bench_config(base: str, steps: int, seed: int, extra: list[str]):
    """`base` (a shipped config) for WARMUP + SETTLE + `steps` env steps, no evaluations or
    checkpoints until the end, output in a temporary folder removed when the worker
    exits."""
    import torch

    from rltrain.utils.config.loader import load_config

    folder = scratch_folder()
    # torch's default threads, as SB3 trains with (rltrain's own default for these
    # networks is one thread: docs/performance.md, "Threads"); --set torch_threads=N in
    # `extra` compares another count.
    return load_config(base, [
        f"max_timesteps={WARMUP + SETTLE + steps}", f"learning_starts={WARMUP}",
        f"seed={seed}",
        "eval_freq=1000000", "checkpoint_freq=1000000", f"replay_buffer_size={BUFFER}",
        f"log_dir={folder}/logs", f"checkpoint_dir={folder}/checkpoints",
        f"torch_threads={torch.get_num_threads()}", *extra])


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


def diagnostics_ab_worker(steps: int) -> dict:
    """The diagnostics on and off in one process: the learning phase in blocks of
    AB_BLOCK env steps, alternately with `Flow1Diagnostics` and with `NoDiagnostics`
    (the order flipped every pair), so that both halves of a pair see the same machine.
    Per pair: the on/off throughput ratio, the on-block's share spent in the
    diagnostics' own (timed) calls, and what the on-block took beyond those calls and the
    off-block's time: the cost the in-run share cannot see (the actor hook's dispatch
    through nn.Module, caches). Medians leave out the rare blocks with a heatmap in them
    (one per 5000 steps), whose cost the in-run share includes."""
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.diagnosis.watch import NoDiagnostics
    from rltrain.utils.run.folders import create_run

    # No loss logging: it reads the diagnostics' timer, which the swaps below would skew.
    config = bench_config(BASE_CONFIGS["ddpg"], steps, 0, [f"log_freq={10 * (WARMUP + steps)}"])
    blocks: list[tuple[bool, float, float]] = []  # (on, seconds, diagnostics' own seconds)

    class SwappingTrainer(Trainer):
        flow1, off = None, None  # the diagnostics object, and the stand-in while off
        mark = (0.0, 0.0)

        def _step(self) -> None:
            super()._step()
            done = self.state.counters.env_steps - WARMUP
            if done < 0 or done % AB_BLOCK:
                return
            if self.flow1 is None:
                self.flow1, self.off = self.diagnostics, NoDiagnostics()
            else:
                seconds, own = self.mark
                blocks.append((self.diagnostics is self.flow1,
                               time.perf_counter() - seconds, self.flow1.seconds - own))
            index = done // AB_BLOCK
            on = (index // 2 % 2 == 0) == (index % 2 == 0)
            if on and self.diagnostics is not self.flow1:
                self.flow1.attach()
                self.diagnostics = self.flow1
            elif not on and self.diagnostics is self.flow1:
                self.flow1.close()
                self.diagnostics = self.off
            self.mark = (time.perf_counter(), self.flow1.seconds)

    trainer = SwappingTrainer(config, torch.device("cpu"), interactive=False)
    trainer.run(create_run(config))
    return ab_summary(blocks)


def ab_summary(blocks: list[tuple[bool, float, float]]) -> dict:
    """Per on/off pair of blocks (on, seconds, diagnostics' own seconds): the medians."""
    pairs = [sorted(blocks[i:i + 2], reverse=True) for i in range(0, len(blocks) - 1, 2)]
    return {"pairs": len(pairs),
            "on_off": statistics.median(off[1] / on[1] for on, off in pairs),
            "own_share": statistics.median(on[2] / on[1] for on, _ in pairs),
            "beyond_share": statistics.median((on[1] - on[2] - off[1]) / on[1]
                                              for on, off in pairs)}


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


def update_only_worker(updates: int) -> dict:
    from rltrain.utils.run.device import tune_process

    tune_process()  # as the Trainer does
    agent, buffer = agent_on_filled_buffer(rows=10_000)
    for _ in range(50):
        agent.update(buffer.sample(256))
    # Updates and the floor alternate in short blocks, so that both see the same load
    # on a shared machine; each block gives one ratio.
    rates, floors, sequences = [], [], []
    block = updates // FLOOR_BLOCKS
    for _ in range(FLOOR_BLOCKS):
        rates.append(block / timed_updates(agent, buffer, block))
        floors.append(gemm_floor_updates_per_second(repeats=50))
        sequences.append(gemm_sequence_updates_per_second(repeats=50))
    shares = sorted(rate / floor for rate, floor in zip(rates, floors, strict=True))
    return {"updates_per_second": statistics.median(rates),
            "gemm_floor": statistics.median(floors),
            "floor_share": statistics.median(shares),
            "floor_share_range": [shares[0], shares[-1]],
            "gemm_sequence": statistics.median(sequences),
            "sequence_share": statistics.median(
                rate / sequence for rate, sequence in zip(rates, sequences, strict=True))}


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


def print_one_process(script: Path, updates: int, ab_steps: int) -> None:
    """The diagnostics on/off in one process, and the update against the GEMM floor."""
    update = run_worker(script, ["update", str(updates), "0", BASE_CONFIGS["ddpg"]])
    ab = run_worker(script, ["diagnostics", str(ab_steps), "0", BASE_CONFIGS["ddpg"]])
    print(f"in one process, alternating {AB_BLOCK}-step blocks with and without them "
          f"({ab['pairs']} pairs, medians): on/off = {ab['on_off']:.1%}; their own calls "
          f"{ab['own_share']:.1%} of an on-block, the rest of the on-block "
          f"{ab['beyond_share']:+.1%} of it beyond the off-block's time\n")
    low, high = update["floor_share_range"]
    print(f"update-only: {update['updates_per_second']:.1f} updates/s; GEMM floor "
          f"{update['gemm_floor']:.1f} updates/s; {update['floor_share']:.0%} of the floor "
          f"(median of {FLOOR_BLOCKS} alternating blocks; range {low:.0%}-{high:.0%}); the "
          f"same products in sequence {update['gemm_sequence']:.1f} updates/s "
          f"({update['sequence_share']:.0%} of that)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        main()
