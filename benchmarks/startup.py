"""Start-up to the first update: rltrain against Stable-Baselines3 and SBX, side by side.

    python benchmarks/startup.py                   # SAC and TD3, 5 rounds
    python benchmarks/startup.py --algo sac --rounds 7 --warmup 256

Each round runs, each in a fresh process and in turn: rltrain (the Python API, as
`rltrain train` runs, diagnostics on), SB3 and SBX (`--no-sbx` leaves it out), on the
same shipped Pendulum config (common.py `sb3_model`, `sbx_model`) with `learning_starts`
set to `--warmup` random steps, one torch thread (XLA on one thread too), pinned to one
core. A process
counts from just before the parent starts it to the end of its first update (the
first `train()` call for SB3 and SBX, whose JIT compiles there; they get the config as
plain values the parent resolved, so rltrain's config code is not theirs to import):
its wall seconds and
its CPU seconds (all its threads) up to then, imports, env and network construction
and the warm-up's env steps included; then it exits. Prints the medians and the ratios
to SB3's; results in benchmarks/results/startup.txt when copied there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import scratch_folder  # noqa: E402

CONFIGS = {"sac": "pendulum_sac.yaml", "td3": "pendulum_td3.yaml"}
LIBRARIES = ("rltrain", "sb3", "sbx")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def report_and_exit(started: float, folder: str) -> None:
    """The first update is done: print the figures, remove the run's scratch folder and
    leave at once (no other teardown)."""
    print(json.dumps({"wall": time.time() - started, "cpu": cpu_seconds()}), flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def load(base: str, warmup: int, folder: str):
    from rltrain.utils.config.loader import load_config

    return load_config(base, [f"learning_starts={warmup}", f"max_timesteps={warmup + 10}",
                              "torch_threads=1", "eval_freq=1000000",
                              f"log_dir={folder}/logs", f"checkpoint_dir={folder}/ck"])


def as_attributes(value: Any) -> Any:
    """A config's plain dict (`config_to_dict`) read with attributes, as common.py's
    SB3 and SBX makers read a TrainConfig, without rltrain's config code."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: as_attributes(v) for k, v in value.items()})
    return value


def worker(library: str, base: str, warmup: int, started: float) -> None:
    """In the fresh process: build, warm up, update once, report (on one core). SB3 and
    SBX get the config as plain values the parent resolved (`base` is then its JSON
    file): rltrain's config code is not part of their start-up."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    folder = tempfile.mkdtemp()
    if library == "rltrain":
        config = load(base, warmup, folder)
        from rltrain.scripts.training.resume import prepare_train

        trainer, paths = prepare_train(config)
        agent = trainer.state.agent
        update = agent.update

        def first(*args, **kwargs):
            result = update(*args, **kwargs)
            report_and_exit(started, folder)
            return result

        agent.update = first
        trainer.run(paths)
    else:
        import torch

        torch.set_num_threads(1)
        from common import sb3_model, sbx_model

        config = as_attributes(json.loads(Path(base).read_text()))
        model = (sb3_model if library == "sb3" else sbx_model)(config, 0)
        train = model.train

        def first(*args, **kwargs):
            train(*args, **kwargs)
            report_and_exit(started, folder)

        model.train = first
        model.learn(warmup + 10)
    raise SystemExit(f"{library}: no update within {warmup + 10} steps")


def one(library: str, base: str, warmup: int, resolved: Path) -> dict[str, float]:
    """One fresh process; SB3 and SBX read the config the parent resolved (`resolved`)."""
    base = base if library == "rltrain" else str(resolved)
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
           "intra_op_parallelism_threads=1", "OMP_NUM_THREADS": "1"}
    started = time.time()
    proc = subprocess.run([sys.executable, __file__, "--worker", library, base, str(warmup),
                           repr(started)], capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{library} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=tuple(CONFIGS), action="append")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=256,
                        help="random env steps before the first update (learning_starts)")
    parser.add_argument("--no-sbx", action="store_true")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        library, base, warmup, started = args.worker
        worker(library, base, int(warmup), float(started))
        return
    libraries = [lib for lib in LIBRARIES if not (lib == "sbx" and args.no_sbx)]
    from rltrain.utils.config.schema import config_to_dict

    folder = Path(scratch_folder())
    print("| algo | library | wall s to the first update (median) | CPU s (median) | "
          "wall / SB3's | CPU / SB3's |\n|---|---|---|---|---|---|")
    for algo in args.algo or list(CONFIGS):
        config = load(CONFIGS[algo], args.warmup, str(folder))
        if args.warmup < config.batch_size:
            parser.error(f"--warmup must be at least the batch size ({config.batch_size}): "
                         "rltrain updates once the buffer holds a batch")
        resolved = folder / f"{algo}.json"
        resolved.write_text(json.dumps(config_to_dict(config)))
        runs: dict[str, list[dict[str, float]]] = {lib: [] for lib in libraries}
        for _ in range(args.rounds):
            for lib in libraries:
                runs[lib].append(one(lib, CONFIGS[algo], args.warmup, resolved))
        medians = {lib: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")}
                   for lib, rs in runs.items()}
        for lib, m in medians.items():
            print(f"| {algo} | {lib} | {m['wall']:.2f} | {m['cpu']:.2f} | "
                  f"{m['wall'] / medians['sb3']['wall']:.2f} | "
                  f"{m['cpu'] / medians['sb3']['cpu']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
