"""How long `rltrain --help` and `rltrain status RUN` take, as a user's shell sees it.

Each command runs as its own subprocess (a fresh interpreter: imports included), several
times; the median wall time is printed, with the fastest and slowest. `status` reads a
tiny run folder made here (status.json, config.yaml, metrics.jsonl; no training), so that the
figure is the command's start-up and reading, not a run's size. Also prints the import
time of `import torch` alone, for scale.

    python benchmarks/cli_startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from rltrain.utils.config.schema import TrainConfig, config_to_dict


def tiny_run(folder: Path) -> Path:
    """A run folder as `rltrain status` reads it, without training one."""
    run = folder / "logs" / "tiny"
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({
        "run": "tiny", "state": "finished", "env_steps": 300, "max_timesteps": 300,
        "episodes": 1, "updates": 200, "latest_episode_return": -1200.0,
        "latest_eval": -1100.0, "best_eval": -1100.0, "best_eval_step": 300,
        "evals_since_best": 0, "evaluations": 3, "pause_reason": None,
        "latest_checkpoint": None, "pid": 0}))
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"kind": "eval", "env_steps": s, "mean_return": -1100.0, "time": 0.0})
        + "\n" for s in (100, 200, 300)))
    (run / "events.jsonl").write_text("")
    (run / "config.yaml").write_text(yaml.safe_dump(config_to_dict(TrainConfig())))
    return run


def timed(command: list[str], cwd: Path, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rltrain = shutil.which("rltrain")
    if rltrain is None:
        sys.exit("rltrain is not on PATH: pip install -e . first")
    folder = Path(tempfile.mkdtemp(prefix="rltrain-startup-"))
    try:
        tiny_run(folder)
        rows = {"rltrain --help": [rltrain, "--help"],
                "rltrain status tiny": [rltrain, "status", "tiny"],
                "rltrain train --help": [rltrain, "train", "--help"],
                "python -c 'import torch' (for scale)": [sys.executable, "-c", "import torch"]}
        print(f"{'command':40s} {'median s':>9s} {'min s':>7s} {'max s':>7s}  "
              f"({args.repeats} runs each)")
        for name, command in rows.items():
            times = timed(command, folder, args.repeats)
            print(f"{name:40s} {statistics.median(times):9.3f} {min(times):7.3f} "
                  f"{max(times):7.3f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
