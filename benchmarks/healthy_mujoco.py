"""False findings on healthy MuJoCo runs: InvertedPendulum-v5 with rltrain's defaults,
Hopper-v5 and HalfCheetah-v5 with the shipped tuned settings (RL Zoo's entries in
configs/), TD3 and SAC each, trained as a user would (`rltrain.train`, the CLI's
settings) for 20,000 env steps, and every warning or pause each got. A healthy run
should get none.

    python -m benchmarks.healthy_mujoco [--steps 20000] [--seed 0] [--jobs 2]
                                        [--only ENV:ALGO] [--out FILE]

Run from the repository root; runs train in parallel processes, one torch thread each.
Results: benchmarks/results/healthy_mujoco.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "healthy_mujoco.json"
# (env, algo, settings): "defaults" are rltrain's own, "shipped" the tuned entry
RUNS = (("InvertedPendulum-v5", "td3", "defaults"), ("InvertedPendulum-v5", "sac", "defaults"),
        ("Hopper-v5", "td3", "shipped"), ("Hopper-v5", "sac", "shipped"),
        ("HalfCheetah-v5", "td3", "shipped"), ("HalfCheetah-v5", "sac", "shipped"))


def run_one(env: str, algo: str, settings: str, steps: int, folder: str,
            seed: int = 0) -> dict[str, Any]:
    """Train one run and read back its findings."""
    import rltrain

    name = f"{env.split('-')[0].lower()}_{algo}_s{seed}"
    config = {"algo": algo, "env_name": env} if settings == "defaults" else None
    run = rltrain.train(config, algo=algo, env_name=env, max_timesteps=steps,
                        seed=seed, torch_threads=1, run_name=name,
                        log_dir=f"{folder}/logs",
                        checkpoint_dir=f"{folder}/checkpoints")
    findings = rltrain.diagnose(run)
    evals = [json.loads(line) for line in (run.log_dir / "metrics.jsonl").read_text()
             .splitlines() if '"kind": "eval"' in line]
    return {"env": env, "algo": algo, "settings": settings, "steps": steps, "seed": seed,
            "final_eval": evals[-1]["mean_return"] if evals else None,
            "alarms": [{"rule": f["rule"], "severity": f["severity"], "step": f["step"],
                        "message": f["message"]} for f in findings
                       if f["severity"] in ("warning", "pause")],
            "notes": sorted({f["rule"] for f in findings if f["severity"] == "info"})}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="ENV:ALGO")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runs = [r for r in RUNS if not args.only or f"{r[0]}:{r[1]}" in args.only]
    with tempfile.TemporaryDirectory() as folder, ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_one, *zip(*[(e, a, s, args.steps, folder, args.seed)
                                                for e, a, s in runs], strict=True)))
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print("| run | settings | seed | steps | final eval | warnings or pauses | notes |\n"
          "|---|---|---|---|---|---|---|")
    for r in results:
        alarms = ", ".join(f"{a['rule']} ({a['severity']}, step {a['step']})"
                           for a in r["alarms"]) or "none"
        final = "-" if r["final_eval"] is None else f"{r['final_eval']:.1f}"
        print(f"| {r['env']} {r['algo']} | {r['settings']} | {r['seed']} | {r['steps']} | "
              f"{final} | "
              f"{alarms} | {', '.join(r['notes']) or '-'} |")


if __name__ == "__main__":
    main()
