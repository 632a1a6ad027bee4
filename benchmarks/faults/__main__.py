"""The fault benchmark: how many real training faults rltrain names, how early, with
which fix, and how many false alarms it raises on healthy runs.

    python -m benchmarks.faults                      # every case and healthy run, 1 seed
    python -m benchmarks.faults --jobs 2 --seeds 2
    python -m benchmarks.faults --only tau_one --only pendulum_ddpg
    python -m benchmarks.faults --table benchmarks/results/faults.json   # print a table

Run from the repository root. Each case (benchmarks/faults/cases.py) and each healthy
run trains in its own process (`--jobs` at once, one torch thread each) for its
healthy run's budget, scaled by `--scale`. Per case the table says whether a warning or
pause of one of its rules named it, whether that finding's `suggested_set` holds the
right key in the right direction, the env step of the first such finding, and the
faulty run's final evaluation against its healthy run's (a real fault falls clearly
below). In total: recall (named / cases), the share named with the right key, false
alarms per healthy run (every warning or pause on one is one) and the median steps to
detection. Results go to benchmarks/results/faults.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.faults.cases import CASES, FAULTY_ENV, HEALTHY, Case, Healthy, healthy

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
    from rltrain.utils.config.zoo import per_env_section, shipped_per_env_file
    from rltrain.utils.io.safe_yaml import read_yaml_mapping

    path = shipped_per_env_file(run.algo)
    raw = per_env_section({run.env: read_yaml_mapping(path)[run.env]}, run.env, path.name)
    raw.update({"max_timesteps": steps, "seed": seed, "torch_threads": 1,
                "eval_freq": max(steps // 5, 1000), "checkpoint_freq": steps,
                "learning_starts": min(raw.get("learning_starts", 100), steps // 5),
                "log_dir": str(folder / "logs"), "checkpoint_dir": str(folder / "ck"),
                "patience": 1000})
    env_fault = run.env_fault
    if case is not None:
        raw.update(case.sets)
        env_fault = case.env_fault or env_fault
    if env_fault is not None:
        raw["env_kwargs"] = {"base": run.env, **env_fault}
        raw["env_name"] = FAULTY_ENV
    return raw


def run_one(name: str, seed: int, scale: float) -> dict[str, Any]:
    """Train one case or healthy run in this process; what it found."""
    import torch

    torch.set_num_threads(1)
    case = next((c for c in CASES if c.id == name), None)
    run = healthy(case.healthy) if case is not None else healthy(name)
    steps = max(int(run.steps * scale), 2000)
    with tempfile.TemporaryDirectory() as tmp:
        folder, run_name = Path(tmp), f"{name}_s{seed}"
        if run.algo == "loop":
            from benchmarks.faults.loop import run as run_loop

            log_dir = run_loop(case.loop if case else None, run.env, steps, seed, folder,
                               run_name)
        else:
            import rltrain

            rltrain.train(train_config(run, case, steps, seed, folder), run_name=run_name)
            log_dir = folder / "logs" / run_name
        found = findings(log_dir)
        return {"name": name, "seed": seed, "steps": steps, "final_eval": final_eval(log_dir),
                "findings": [{k: e.get(k) for k in ("env_steps", "rule", "action", "value",
                                                    "suggested_set")} for e in found]}


def judge(case: Case, result: dict[str, Any]) -> dict[str, Any]:
    """Named, the right key, and the first step, for one case's run."""
    named = [f for f in result["findings"] if f["rule"] in case.rules]
    keyed = [f for f in named if right_key(case, f.get("suggested_set") or {})]
    return {"named": bool(named), "right_key": bool(keyed) if case.key else None,
            "first_step": min((f["env_steps"] for f in named), default=None)}


def right_key(case: Case, suggested: dict[str, Any]) -> bool:
    if case.key not in suggested:
        return False
    if case.direction not in ("up", "down"):
        return True
    before = _dotted({**case.sets, "env_kwargs": case.env_fault or {}}, case.key)
    if before is None:
        return True
    after = suggested[case.key]
    return after > before if case.direction == "up" else after < before


def _dotted(sets: dict[str, Any], key: str) -> Any:
    value: Any = sets
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def table(results: list[dict[str, Any]]) -> str:
    """The per-case table and the totals; a run that could not run is left out of both
    and listed below them."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            by_name.setdefault(r["name"], []).append(r)
    failed = [f"{r['name']} seed {r['seed']}: {r['error']}" for r in results if "error" in r]
    lines = ["| case | kind | named | right key | first step | final eval (healthy) |",
             "|---|---|---|---|---|---|"]
    named, keyed, keyed_of, steps = 0, 0, 0, []
    for case in CASES:
        runs = by_name.get(case.id)
        if not runs:
            continue
        verdicts = [judge(case, r) for r in runs]
        is_named = all(v["named"] for v in verdicts)
        named += is_named
        if case.key:
            keyed_of += 1
            keyed += all(v["right_key"] for v in verdicts)
        steps += [v["first_step"] for v in verdicts if v["first_step"] is not None]
        ours = _mean(r["final_eval"] for r in runs)
        theirs = _mean(r["final_eval"] for r in by_name.get(case.healthy, []))
        key = "-" if not case.key else ("yes" if all(v["right_key"] for v in verdicts)
                                        else "no")
        first = ", ".join(str(v["first_step"]) for v in verdicts)
        lines.append(f"| {case.id} | {case.kind} | {'yes' if is_named else 'no'} | {key} | "
                     f"{first} | {_show(ours)} ({_show(theirs)}) |")
    cases = [c for c in CASES if c.id in by_name]
    healthy_runs = [r for h in HEALTHY for r in by_name.get(h.id, [])]
    alarms = sum(len(r["findings"]) for r in healthy_runs)
    lines += ["", f"recall: {named}/{len(cases)} named; right key {keyed}/{keyed_of}; "
              f"false alarms: {alarms} over {len(healthy_runs)} healthy runs "
              f"({_alarm_list(healthy_runs)}); median steps to detection: "
              f"{statistics.median(steps) if steps else '-'}"]
    if failed:
        lines.append("could not run: " + "; ".join(failed))
    return "\n".join(lines)


def _alarm_list(runs: list[dict[str, Any]]) -> str:
    found = [f"{r['name']}: {f['rule']} at {f['env_steps']}" for r in runs
             for f in r["findings"]]
    return "; ".join(found) or "none"


def _mean(values: Any) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.mean(kept) if kept else None


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="budget relative to each healthy run's steps")
    parser.add_argument("--only", action="append", default=[], help="case or healthy ids")
    parser.add_argument("--table", type=Path, nargs="+",
                        help="print the table of results files (their runs together)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    args = parser.parse_args()
    if args.table:
        print(table([r for path in args.table for r in json.loads(path.read_text())["runs"]]))
        return
    names = [c.id for c in CASES] + [h.id for h in HEALTHY]
    names = [n for n in names if not args.only or n in args.only]
    jobs = [(n, s, args.scale) for n in names for s in range(args.seeds)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(_safe_run, jobs))
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps({"seeds": args.seeds, "scale": args.scale,
                                    "runs": results}, indent=1))
    print(table(results))


def _safe_run(job: tuple[str, int, float]) -> dict[str, Any]:
    name, seed, scale = job
    try:
        result = run_one(name, seed, scale)
    except Exception as exc:  # one case that cannot run must not lose the others
        result = {"name": name, "seed": seed, "steps": 0, "final_eval": None,
                  "findings": [], "error": f"{type(exc).__name__}: {exc}"}
    print(f"{name} seed {seed}: {len(result['findings'])} warnings/pauses"
          + (f" ({result['error']})" if "error" in result else ""), flush=True)
    return result


if __name__ == "__main__":
    main()
