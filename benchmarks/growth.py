"""What a run costs as it grows: speed, disk and `rltrain diagnose` against run length.

    python benchmarks/growth.py [--algo sac] [--steps 60000] [--block 10000]
                                [--diagnose-repeats 3] [--set KEY=VALUE ...]
                                [--out results/growth.txt]

One rltrain run of `--steps` env steps on the shipped `pendulum_<algo>.yaml` (SAC by
default; diagnostics on, as shipped) in this process. At each periodic checkpoint that
ends a block of `--block` steps, a hook records, for the block just ended:

- env steps per second of wall time and per CPU-second of the process (what the hook
  itself spends, the copy below, is taken out of both);
- the size of the run's `logs/` folder (and of its `traces/` and `heatmaps/` in it) and
  of its `checkpoints/` folder, and what the block added to each;
- a copy of the log folder as it is then.

After the run, `rltrain diagnose` runs on each copy in a fresh process
(`--diagnose-repeats` times; the median wall time and CPU time of the whole command,
start-up included, which `diagnose` on an empty-ish run sets the floor of).

A cost that grows no faster than the run: steps/s flat from block to block, the same
bytes added per block, and diagnose's time growing at most in proportion to the steps.
Prints a markdown table and writes it, with the settings, to `--out`.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import scratch_folder  # noqa: E402

from rltrain.utils.hooks.hook import Hook  # noqa: E402

ROOT = Path(__file__).resolve().parent
MB = 1e6


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under `folder` (0 if it does not exist)."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@dataclass
class Block:
    env_steps: int          # at the block's end
    seconds: float          # wall time of the block, the hook's own taken out
    cpu_seconds: float      # the process's CPU time of the block, likewise
    logs: int               # bytes of the run's log folder at the block's end
    traces: int
    heatmaps: int
    checkpoints: int
    copy: Path              # the log folder as it was then
    diagnose_seconds: float | None = None
    diagnose_cpu_seconds: float | None = None


class GrowthWatch(Hook):
    """At each periodic checkpoint that ends a block: the block's times and the folders'
    sizes, and a copy of the log folder."""

    name = "growth"

    def __init__(self, block: int, copies: Path) -> None:
        self.block, self.copies = block, copies
        self.blocks: list[Block] = []
        self.paths: Any = None  # the run's RunPaths, set before training starts
        # Wall and CPU time at the block's first step; None between a block's end and
        # the next step, so that the copy below is in no block's time.
        self.start: tuple[float, float] | None = None

    def on_step_end(self, env_steps: int) -> list:
        if self.start is None:
            self.start = (time.perf_counter(), time.process_time())
        return []

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> list:
        if kind != "periodic" or env_steps % self.block or self.start is None:
            return []
        wall, cpu = time.perf_counter(), time.process_time()
        previous, self.start = self.start, None
        log_dir = self.paths.log_dir
        copy = self.copies / f"step_{env_steps}"
        shutil.copytree(log_dir, copy)
        self.blocks.append(Block(
            env_steps, wall - previous[0], cpu - previous[1], folder_bytes(log_dir),
            folder_bytes(log_dir / "traces"), folder_bytes(log_dir / "heatmaps"),
            folder_bytes(self.paths.checkpoint_dir), copy))
        return []


def train(algo: str, steps: int, block: int, sets: list[str], folder: Path) -> list[Block]:
    from rltrain.scripts.training.resume import prepare_train
    from rltrain.utils.config.resolve import ConfigRequest, resolve_config

    # A run that has learnt Pendulum stops improving: early stopping would end it before
    # the steps the growth is measured over (--set patience=N to keep it).
    config = resolve_config(ConfigRequest(f"pendulum_{algo}.yaml", ("patience=1000000",
                                                                   *sets), keywords={
        "max_timesteps": steps, "log_dir": str(folder / "logs"),
        "checkpoint_dir": str(folder / "checkpoints")}, run_name="growth"), print)
    if block % config.checkpoint_freq:
        sys.exit(f"--block {block} must be a multiple of the config's checkpoint_freq "
                 f"({config.checkpoint_freq}): the blocks end at periodic checkpoints")
    trainer, paths = prepare_train(config, interactive=False)
    watch = GrowthWatch(block, folder / "copies")
    watch.paths = paths
    trainer.extra_hooks.append(watch)
    outcome = trainer.run(paths)
    if outcome.status != "finished":
        sys.exit(f"the run {outcome.status} at step {outcome.env_steps}: {outcome.reason}")
    return watch.blocks


def diagnose_seconds(copy: Path, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `rltrain diagnose COPY` in a fresh process."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "from rltrain.scripts import main; main()",
                               "diagnose", str(copy)], capture_output=True, text=True,
                              timeout=600)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if done.returncode != 0:
            sys.exit(f"rltrain diagnose {copy} failed ({done.returncode}):\n{done.stderr}")
    return statistics.median(walls), statistics.median(cpus)


def table(blocks: list[Block], block: int) -> str:
    rows = ["| env steps | steps/s | steps per CPU-s | logs/ (MB) | added (MB) | "
            "traces/ (MB) | heatmaps/ (MB) | checkpoints/ (MB) | added (MB) | "
            "diagnose (s) | diagnose CPU (s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    previous_logs = previous_checkpoints = 0
    for b in blocks:
        rows.append(
            f"| {b.env_steps} | {block / b.seconds:.1f} | {block / b.cpu_seconds:.1f} | "
            f"{b.logs / MB:.2f} | {(b.logs - previous_logs) / MB:.2f} | "
            f"{b.traces / MB:.2f} | {b.heatmaps / MB:.2f} | {b.checkpoints / MB:.2f} | "
            f"{(b.checkpoints - previous_checkpoints) / MB:.2f} | "
            f"{b.diagnose_seconds:.2f} | {b.diagnose_cpu_seconds:.2f} |")
        previous_logs, previous_checkpoints = b.logs, b.checkpoints
    return "\n".join(rows)


def summary(blocks: list[Block]) -> str:
    """The late block against the early one, for each measure."""
    first, last = blocks[0], blocks[-1]
    lines = [f"late/early steps/s (block ending {last.env_steps} / block ending "
             f"{first.env_steps}): wall {first.seconds / last.seconds:.2f}, CPU "
             f"{first.cpu_seconds / last.cpu_seconds:.2f}"]
    if len(blocks) > 2:
        second = blocks[1]  # the first block holds the random warm-up's cheap steps
        lines.append(f"late/second block steps/s: wall {second.seconds / last.seconds:.2f}, "
                     f"CPU {second.cpu_seconds / last.cpu_seconds:.2f}")
    added = [b.logs - a.logs for a, b in itertools.pairwise(blocks)]
    if added:
        lines.append("logs/ added per block after the first: "
                     + ", ".join(f"{x / MB:.2f}" for x in added) + " MB")
    lines.append(f"diagnose at {last.env_steps} / at {first.env_steps} steps: wall "
                 f"{last.diagnose_seconds / first.diagnose_seconds:.2f}, CPU "
                 f"{last.diagnose_cpu_seconds / first.diagnose_cpu_seconds:.2f} "
                 f"(steps {last.env_steps / first.env_steps:.1f}x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac", choices=["ddpg", "td3", "sac", "crossq", "tqc"],
                        help="the shipped configs/pendulum_<algo>.yaml")
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--block", type=int, default=10_000,
                        help="env steps per block (a multiple of the config's checkpoint_freq)")
    parser.add_argument("--diagnose-repeats", type=int, default=3)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key changed, as rltrain train --set does (e.g. "
                             "checkpoint_freq=2000 for short blocks)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "growth.txt")
    args = parser.parse_args()
    if args.steps < args.block:
        parser.error(f"--steps {args.steps} is less than one --block ({args.block})")
    folder = Path(scratch_folder())
    blocks = train(args.algo, args.steps, args.block, args.sets, folder)
    for b in blocks:
        b.diagnose_seconds, b.diagnose_cpu_seconds = diagnose_seconds(b.copy,
                                                                      args.diagnose_repeats)
        print(f"diagnose at {b.env_steps}: {b.diagnose_seconds:.2f} s", flush=True)
    sets = "".join(f" --set {x}" for x in args.sets)
    text = (f"python benchmarks/growth.py --algo {args.algo} --steps {args.steps} "
            f"--block {args.block} --diagnose-repeats {args.diagnose_repeats}{sets}\n"
            f"configs/pendulum_{args.algo}.yaml, diagnostics on; steps/s per block of "
            f"{args.block} env steps; sizes at each block's end\n\n"
            f"{table(blocks, args.block)}\n\n{summary(blocks)}\n")
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
