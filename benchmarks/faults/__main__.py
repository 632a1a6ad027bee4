"""The fault benchmark: how many real training faults rltrain names, how early, with
which fix, and how many false alarms it raises on healthy runs.

    python -m benchmarks.faults                      # every case and healthy run, its seeds
    python -m benchmarks.faults --jobs 2 --seeds 2
    python -m benchmarks.faults --only tau_one --only pendulum_ddpg
    python -m benchmarks.faults --table benchmarks/results/faults.json   # print a table
    python -m benchmarks.faults --verify             # and try each named case's fix

Run from the repository root. Each case (benchmarks/faults/cases.py) and each healthy
run trains in its own process (`--jobs` at once, one torch thread each) for its
healthy run's budget, scaled by `--scale`. Per case the table says whether a warning or
pause of one of its rules named it, whether that finding's `suggested_set` holds the
right key in the right direction, the env step of the first such finding, and the
faulty run's final evaluation against its healthy run's (a real fault falls clearly
below). In total: recall (named / cases), the share named with the right key, false
alarms per healthy run (every warning or pause on one is one) and the median steps to
detection. With `--verify`, the fix that named a case is tried by `rltrain diagnose
--verify` on the case's run (benchmarks/faults/verify.py): the verify column and the
share of named fixes it confirmed. Results go to benchmarks/results/faults.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.faults.cases import (
    CASES,
    FAULTY_ENV,
    HALVES,
    HEALTHY,
    Case,
    Healthy,
    half,
    healthy,
)
from benchmarks.faults.sb3_runs import CLASSES as SB3_CLASSES
from benchmarks.faults.table import table
from benchmarks.faults.verify import DEFAULT_SEEDS, verify_case

RESULTS = Path(__file__).resolve().parents[1] / "results" / "faults.json"


def findings(log_dir: Path) -> list[dict[str, Any]]:
    """The warnings and pauses of a run (events.jsonl)."""
    path = log_dir / "events.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("action") in ("warn", "pause")]


def final_eval(log_dir: Path) -> float | None:
    path = log_dir / "metrics.jsonl"
    if not path.exists():
        return None
    evals = [json.loads(line) for line in path.read_text().splitlines()
             if '"kind": "eval"' in line]
    return float(evals[-1]["mean_return"]) if evals else None


def train_config(run: Healthy, case: Case | None, steps: int, seed: int,
                 folder: Path) -> dict[str, Any]:
    """The keyword arguments of rltrain.train for a healthy run or a planted case."""
    raw = base_config(run)
    raw.update({"max_timesteps": steps, "seed": seed, "torch_threads": 1,
                "eval_freq": max(steps // 5, 1000), "checkpoint_freq": steps,
                "learning_starts": min(raw["learning_starts"], steps // 5),
                "log_dir": str(folder / "logs"), "checkpoint_dir": str(folder / "ck"),
                "patience": 1000})
    env_fault = run.env_fault
    if case is not None:
        raw = merged(raw, case.sets)
        env_fault = case.env_fault or env_fault
    if env_fault is not None:
        raw["env_kwargs"] = {"base": run.env, **env_fault,
                             **({"base_kwargs": raw["env_kwargs"]} if raw.get("env_kwargs")
                                else {})}
        raw["env_name"] = FAULTY_ENV
    return raw


def base_config(run: Healthy) -> dict[str, Any]:
    """The run's tuned settings: the shipped per-env entry (RL Zoo's), or rltrain's
    defaults for the algorithm; `learning_starts` always present."""
    from rltrain.utils.config.schema import TrainConfig
    from rltrain.utils.config.zoo import per_env_section, shipped_per_env_file
    from rltrain.utils.io.safe_yaml import read_yaml_mapping

    if run.config == "defaults":
        raw: dict[str, Any] = {"algo": run.algo, "env_name": run.env}
    else:
        path = shipped_per_env_file(run.algo)
        raw = per_env_section({run.env: read_yaml_mapping(path)[run.env]}, run.env,
                              path.name)
    raw.setdefault("learning_starts", TrainConfig().learning_starts)
    return raw


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes`, nested sections merged key by key."""
    result = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def run_one(name: str, seed: int, scale: float,
            verify: dict[str, Any] | None = None, keep: Path | None = None) -> dict[str, Any]:
    """Train one case or healthy run in this process; what it found. `verify`: verify's
    options (steps, seeds, jobs) to try the fix that named the case (benchmarks/faults/
    verify.py), None for none. `keep`: a folder the run's folders are kept in (None: a
    temporary one)."""
    import torch

    torch.set_num_threads(1)
    case = next((c for c in CASES if c.id == name), None)
    run = healthy(case.healthy) if case is not None else healthy(name)
    steps = max(int(run.steps * scale), 2000)
    with tempfile.TemporaryDirectory() as tmp:
        folder, run_name = keep or Path(tmp), f"{name}_s{seed}"
        if run.algo == "loop":
            from benchmarks.faults.loop import run as run_loop

            log_dir = run_loop(case.loop if case else None, run.env, steps, seed, folder,
                               run_name)
        elif run.algo in SB3_CLASSES:
            from benchmarks.faults.sb3_runs import run as run_sb3

            log_dir = run_sb3(run.algo, run.env, case.sets if case else None,
                              (case.env_fault if case else None) or run.env_fault, steps,
                              seed, folder, run_name)
        else:
            import rltrain

            rltrain.train(train_config(run, case, steps, seed, folder), run_name=run_name)
            log_dir = folder / "logs" / run_name
        found = findings(log_dir)
        result = {"name": name, "seed": seed, "steps": steps,
                  "final_eval": final_eval(log_dir),
                  "findings": [{k: e.get(k) for k in ("env_steps", "rule", "action", "value",
                                                      "suggested_set")} for e in found]}
        if verify is not None and case is not None and run.algo not in SB3_CLASSES:
            checked = verify_case(case, result, log_dir, verify,
                                  say=lambda line: print(f"{name} seed {seed}: {line}",
                                                         flush=True))
            if checked is not None:
                result["verify"] = checked
        return result


def main() -> None:
    args = arguments().parse_args()
    if args.table:
        print(table([r for path in args.table for r in json.loads(path.read_text())["runs"]]))
        return
    names = [c.id for c in CASES] + [h.id for h in HEALTHY]
    names = [n for n in names if (not args.only or n in args.only)
             and (args.half is None or half(n) == args.half)]
    verify = verify_options(args, os.cpu_count() or 1)
    jobs = [(n, s, args.scale, verify, args.keep) for n in names
            for s in run_seeds(n, args.seeds, args.first_seed)]
    args.out.parent.mkdir(exist_ok=True)
    if verify is not None:
        print(verify_cost(names, args.scale, verify), flush=True)
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(_safe_run, jobs):  # in order, each as soon as it is in
            results.append(result)
            # Written after every run: a benchmark stopped halfway keeps what it measured.
            args.out.write_text(json.dumps({"seeds": args.seeds,
                                            "first_seed": args.first_seed, "scale": args.scale,
                                            "verify": verify, "runs": results}, indent=1))
    print(table(results))


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=_positive, default=1,
                        help="seeds per run, at least (a case or a healthy run may ask for more: "
                             "its `seeds`)")
    parser.add_argument("--first-seed", type=_non_negative, default=0,
                        help="the seeds run are this one and the next ones (another draw of "
                             "every run: --first-seed 1 with --seeds 1 runs seed 1 alone)")
    parser.add_argument("--jobs", type=_positive, default=1)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="budget relative to each healthy run's steps")
    parser.add_argument("--only", action="append", default=[], help="case or healthy ids")
    parser.add_argument("--half", choices=HALVES, default=None,
                        help="only the cases and healthy runs of this half of the split")
    parser.add_argument("--table", type=Path, nargs="+",
                        help="print the table of results files (their runs together)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every run's folders here (logs/<case>_s<seed>, ck/...)")
    parser.add_argument("--verify", action="store_true",
                        help="try the fix that named each case: rltrain diagnose --verify")
    parser.add_argument("--verify-seeds", type=_positive, default=DEFAULT_SEEDS,
                        help="verify's seed pairs per fix (its default: %(default)s)")
    parser.add_argument("--verify-steps", type=_positive, default=None,
                        help="env steps per verify branch (default verify's: as many as the run, "
                             "at least 5000 past its warm-up)")
    parser.add_argument("--verify-top", type=_positive, default=None,
                        help="verify tries this many of the top findings (default verify's: "
                             "3); the case's verdict is its naming fix's")
    parser.add_argument("--verify-jobs", type=_positive, default=None,
                        help="verify branches at once per case (default: the cores / "
                             "--jobs, at least 1)")
    return parser


def verify_options(args: argparse.Namespace, cores: int) -> dict[str, Any] | None:
    """verify's steps, seeds, jobs and threads per case (None without --verify): by
    default as many branches at once as leave about one training per core with --jobs
    cases at once, one torch thread each, as the cases' own runs have (two threads per
    branch ran about a tenth as fast as one on a loaded machine: benchmarks/README.md)."""
    if not args.verify:
        return None
    return {"steps": args.verify_steps, "seeds": args.verify_seeds,
            "jobs": args.verify_jobs or max(1, cores // args.jobs), "threads": 1,
            "top": args.verify_top}


def verify_cost(names: list[str], scale: float, options: dict[str, Any]) -> str:
    """What `--verify` will train at most, said before anything starts: per case with a
    config fix, `top` findings' experiments (verify's default: 3) of `seeds` pairs of two
    branches of the run's own budget (verify trains at least 5000 steps past the
    warm-up)."""
    from rltrain.scripts.verify.verify import TOP

    top = options.get("top") or TOP
    cases = [c for c in CASES if c.id in names and c.key and c.loop is None
             and healthy(c.healthy).algo not in SB3_CLASSES]
    steps = sum(max(int(healthy(c.healthy).steps * scale), 2000) * max(1, c.seeds)
                for c in cases)
    total = steps * top * options["seeds"] * 2
    return (f"verify: at most {total:,} env steps of branches: {len(cases)} cases with a "
            f"config fix, for each named one up to {top} experiment(s) of "
            f"{options['seeds']} seed pairs of 2 branches of the case's budget")


def run_seeds(name: str, seeds: int, first: int = 0) -> range:
    """The seeds a case or a healthy run is trained with: `seeds` or its own count if
    larger, from `first`."""
    return range(first, first + max(seeds, seeds_of(name)))


def seeds_of(name: str) -> int:
    """The seeds a case or a healthy run asks for."""
    return next((c.seeds for c in (*CASES, *HEALTHY) if c.id == name), 1)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0 (got {value})")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _safe_run(job: tuple[str, int, float, dict[str, Any] | None, Path | None]
              ) -> dict[str, Any]:
    name, seed, scale, verify, keep = job
    try:
        result = run_one(name, seed, scale, verify, keep)
    except Exception as exc:  # one case that cannot run must not lose the others
        result = {"name": name, "seed": seed, "steps": 0, "final_eval": None,
                  "findings": [], "error": f"{type(exc).__name__}: {exc}"}
    checked = result.get("verify")
    print(f"{name} seed {seed}: {len(result['findings'])} warnings/pauses"
          + (f" ({result['error']})" if "error" in result else "")
          + (f"; verify: {checked['verdict']}" if checked else ""), flush=True)
    return result


if __name__ == "__main__":
    main()
