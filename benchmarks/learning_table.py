"""The learning table: rltrain's shipped per-env configs trained for a step budget.

    python benchmarks/learning_table.py                      # the table of docs/learning.md
    python benchmarks/learning_table.py --only Pendulum-v1:td3 --seeds 2
    python benchmarks/learning_table.py --only LunarLanderContinuous-v3:td3 --seeds 1 --first-seed 1
    python benchmarks/learning_table.py --only Pendulum-v1:sac --sb3   # SB3's SAC beside it
    python benchmarks/learning_table.py --only Pendulum-v1:crossq --sbx  # SBX's CrossQ only

Each row is `rltrain train --algo A --env ID --seed S --steps N` (the tuned entry of
configs/<algo>.yaml, with the step budget given here in place of RL Zoo's, one torch
thread), run as the CLI runs it. Per row it prints the final and the best evaluation
return of each seed, and the warnings the run gave (a shipped config on a healthy run
gives none; a run that has not learnt yet may rightly get `no_learning`). The rows go to
benchmarks/results/learning_table.jsonl, one line per run.

With `--sb3`, each row is also trained by Stable-Baselines3 (its SAC for a sac row, its
TD3 for a td3 row, sb3-contrib's CrossQ and TQC for crossq and tqc rows) on the same
settings (common.py `sb3_model`) and evaluated the same way
(rltrain's evaluation of its deterministic policy: the same episodes, seeds and
evaluation steps); those rows say "SB3" in the algo column.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import sb3_model, sbx_crossq  # noqa: E402

# env id, algo, step budget, and keys set beside the entry: what 2 shared cores allow
# (RL Zoo trains TD3 for 20k, 300k, 300k steps, SAC for 20k, 50k, 500k, CrossQ and TQC
# for 20k on Pendulum). InvertedPendulum-v5, the MuJoCo row, has no entry in configs/:
# rltrain's defaults (the algorithm's options: sb3-contrib's), evaluated every 1000 steps,
# for 5,000 steps (1,000 of them random warm-up): what the shared machine allowed.
ROWS: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("Pendulum-v1", "ddpg", 20_000, ()),
    ("Pendulum-v1", "td3", 20_000, ()),
    ("MountainCarContinuous-v0", "td3", 30_000, ()),
    ("LunarLanderContinuous-v3", "td3", 100_000, ()),
    ("Pendulum-v1", "sac", 20_000, ()),
    ("MountainCarContinuous-v0", "sac", 50_000, ()),
    ("LunarLanderContinuous-v3", "sac", 30_000, ()),
    ("Pendulum-v1", "crossq", 20_000, ()),
    ("Pendulum-v1", "tqc", 20_000, ()),
    ("InvertedPendulum-v5", "crossq", 5_000, ("eval_freq=1000",)),
    ("InvertedPendulum-v5", "tqc", 5_000, ("eval_freq=1000",)),
)
RESULTS = Path(__file__).resolve().parent / "results" / "learning_table.jsonl"


def train(env: str, algo: str, steps: int, seed: int, root: Path,
          sets: tuple[str, ...] = ()) -> dict:
    """One run through the CLI; its exit code, evaluations and warnings from the run
    folder. A run that a rule paused (exit 3) keeps its row, with the pausing rule."""
    name = f"{env}_{algo}_s{seed}"
    rltrain = Path(sys.executable).parent / "rltrain"
    extra = [item for key in sets for item in ("--set", key)]
    done = subprocess.run([str(rltrain), "train", "--algo", algo, "--env", env,
                           "--seed", str(seed), "--steps", str(steps), "--run-name", name,
                           "--set", "torch_threads=1", "--set", f"log_dir={root}/logs",
                           "--set", f"checkpoint_dir={root}/ckpt", *extra],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    folder = root / "logs" / name
    if done.returncode not in (0, 3):
        raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    evals = [(m["env_steps"], float(m["mean_return"])) for m in metrics if m["kind"] == "eval"]
    warned = [e for e in events if e.get("action") in ("warn", "pause")]
    warnings = sorted({e["rule"] for e in warned})
    paused_by = [e["rule"] for e in warned if e.get("action") == "pause"]
    return {"env": env, "algo": algo, "steps": steps, "seed": seed,
            "exit_code": done.returncode, "paused_by": paused_by[-1] if paused_by else None,
            "env_steps_reached": max((m["env_steps"] for m in metrics), default=0),
            "evals": evals, "final": evals[-1][1] if evals else float("nan"),
            "best": max((v for _, v in evals), default=float("nan")), "warnings": warnings,
            "warning_lines": [{k: e.get(k) for k in ("env_steps", "rule", "value", "threshold",
                                                     "message")} for e in warned]}


def train_sb3(env: str, algo: str, steps: int, seed: int, sets: tuple[str, ...] = (),
              sbx: bool = False) -> dict:
    """The row's config trained by SB3 (sb3-contrib for crossq and tqc; with `sbx`, SBX's
    CrossQ) on the same settings, evaluated by rltrain's evaluation at the config's
    eval_freq, in this process with one torch thread."""
    import torch
    import yaml
    from stable_baselines3.common.callbacks import BaseCallback

    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.config.zoo import train_mapping
    from rltrain.utils.training.envs import make_env
    from rltrain.utils.training.evaluation import evaluate

    torch.set_num_threads(1)
    raw = train_mapping(None, None, env, algo, lambda line: None)  # the entry, or none
    given = {key: yaml.safe_load(value) for key, _, value in (s.partition("=") for s in sets)}
    config = config_from_dict({**raw, "algo": algo, "env_name": env, **given,
                               "max_timesteps": steps, "seed": seed})
    model = sbx_crossq(config, seed) if sbx else sb3_model(config, seed)
    eval_env, evals = make_env(env), []

    class Evaluations(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % config.eval_freq == 0:
                result = evaluate(lambda obs: model.predict(obs, deterministic=True)[0],
                                  eval_env, config.n_eval_episodes, config.seed, config.gamma)
                evals.append((self.num_timesteps, result.mean))
            return True

    model.learn(steps, callback=Evaluations())
    library = {"sb3_contrib": "sb3-contrib", "sbx": "SBX"}.get(
        type(model).__module__.split(".")[0], "SB3")
    return {"env": env, "algo": f"{algo} ({library})", "steps": steps, "seed": seed,
            "exit_code": 0,
            "paused_by": None, "env_steps_reached": steps, "evals": evals,
            "final": evals[-1][1] if evals else float("nan"),
            "best": max((v for _, v in evals), default=float("nan")), "warnings": []}


def row_line(runs: list[dict]) -> str:
    first = runs[0]
    finals = [r["final"] for r in runs]
    bests = [r["best"] for r in runs]
    spread = f" ± {statistics.stdev(finals):.1f}" if len(finals) > 1 else ""
    warned = sorted({w for r in runs for w in r["warnings"]}) or ["none"]
    paused = [f"seed {r['seed']} paused by {r['paused_by']} at {r['env_steps_reached']:,}"
              for r in runs if r.get("exit_code") == 3]
    if paused:
        warned.append(f"({'; '.join(paused)})")
    return (f"| {first['env']} | {first['algo']} | {first['steps']:,} | {len(runs)} | "
            f"{statistics.mean(finals):.1f}{spread} | {statistics.mean(bests):.1f} | "
            f"{', '.join(f'{v:.1f}' for v in finals)} | {', '.join(warned)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (to run seeds "
                             "in parallel processes)")
    parser.add_argument("--only", action="append", default=[],
                        help="ENV:ALGO rows to run (repeatable; default: all)")
    parser.add_argument("--sb3", action="store_true",
                        help="also train each row with SB3 on the same settings")
    parser.add_argument("--sb3-only", action="store_true",
                        help="train each row with SB3 only (rltrain's rows run before)")
    parser.add_argument("--sbx", action="store_true",
                        help="train each crossq row with SBX's CrossQ (JAX) only")
    args = parser.parse_args()
    rows = [r for r in ROWS if not args.only or f"{r[0]}:{r[1]}" in args.only]
    table = ["| env | algo | env steps | seeds | final eval (mean ± sd) | best eval (mean) "
             "| final per seed | warnings |", "|---|---|---|---|---|---|---|---|"]
    RESULTS.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for env, algo, steps, sets in rows:
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            if args.sbx:
                if algo == "crossq":
                    theirs = [train_sb3(env, algo, steps, seed, sets, sbx=True)
                              for seed in seeds]
                    with open(RESULTS, "a", encoding="utf-8") as f:
                        f.writelines(json.dumps(r) + "\n" for r in theirs)
                    table.append(row_line(theirs).replace(" | none |", " | not watched |"))
                    print(table[-1], flush=True)
                continue
            if not args.sb3_only:
                runs = [train(env, algo, steps, seed, Path(tmp), sets) for seed in seeds]
                with open(RESULTS, "a", encoding="utf-8") as f:
                    f.writelines(json.dumps(r) + "\n" for r in runs)
                table.append(row_line(runs))
                print(table[-1], flush=True)
            if args.sb3 or args.sb3_only:
                theirs = [train_sb3(env, algo, steps, seed, sets) for seed in seeds]
                with open(RESULTS, "a", encoding="utf-8") as f:
                    f.writelines(json.dumps(r) + "\n" for r in theirs)
                table.append(row_line(theirs).replace(" | none |", " | not watched |"))
                print(table[-1], flush=True)
    print("\n".join(table))


if __name__ == "__main__":
    main()
