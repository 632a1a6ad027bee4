"""Calibration of the training set-up rules (utils/diagnosis/rules/): healthy runs and planted
faults on Pendulum-v1, MountainCarContinuous-v0 and LunarLanderContinuous-v3.

    python benchmarks/calibration_setup.py                   # every scenario
    python benchmarks/calibration_setup.py --only lr-high-pendulum healthy-pendulum
    python benchmarks/calibration_setup.py --steps 10000     # shorter runs

LunarLanderContinuous needs Box2D (`pip install "rltrain[box2d]"`). Each run is short
([64, 64] networks, one torch thread, safe_mode off so that it trains through every
finding); the faults are planted through the config alone. Each scenario runs in a
fresh process; its line says which set-up rules fired (first step, suggested change)
and each rule's own statistic at the end (the state the rule keeps), as JSON Lines in
--out and as the markdown table docs/diagnosing.md quotes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

SETUP_RULES = ("learning_rate", "target_update", "long_horizon", "actor_stalled",
               "no_learning", "q_divergence", "eval_collapse")
SMALL = ["hidden_sizes=[64,64]", "torch_threads=1", "safe_mode=false", "device=cpu",
         "eval_freq=2000", "n_eval_episodes=3", "checkpoint_freq=5000",
         "min_reward_threshold=null", "diagnostics.heatmap_freq=100000000"]
CAR = ["env_name=MountainCarContinuous-v0"]
LUNAR = ["env_name=LunarLanderContinuous-v3"]
# name -> (config, overrides, the rule that should fire or None for a healthy run)
SCENARIOS: dict[str, tuple[str, list[str], str | None]] = {
    "healthy-pendulum": ("pendulum_ddpg.yaml", [], None),
    "healthy-pendulum-td3": ("pendulum_td3.yaml", [], None),
    "lr-high-pendulum": ("pendulum_ddpg.yaml", ["actor_lr=0.1", "critic_lr=0.1"],
                         "learning_rate"),
    "lr-low-pendulum": ("pendulum_ddpg.yaml", ["actor_lr=1e-6", "critic_lr=1e-6"],
                        "learning_rate"),
    "tau-1-pendulum": ("pendulum_ddpg.yaml", ["tau=1.0"], "target_update"),
    "tau-frozen-pendulum": ("pendulum_ddpg.yaml", ["tau=1e-5"], "target_update"),
    "gamma-0.9999-pendulum": ("pendulum_ddpg.yaml", ["gamma=0.9999"], "long_horizon"),
    "actor-lr-1e-8-pendulum": ("pendulum_ddpg.yaml", ["actor_lr=1e-8"], "actor_stalled"),
    "critic-diverges-pendulum": ("pendulum_ddpg.yaml", ["critic_lr=0.03", "gamma=0.999",
                                                        "tau=0.5"], "q_divergence"),
    "stands-still-mountaincar": ("pendulum_ddpg.yaml", CAR, "no_learning"),
    "lr-high-mountaincar": ("pendulum_ddpg.yaml", [*CAR, "actor_lr=0.1", "critic_lr=0.1"],
                            "learning_rate"),
    "healthy-lunar": ("pendulum_ddpg.yaml", LUNAR, None),
    "tau-1-lunar": ("pendulum_ddpg.yaml", [*LUNAR, "tau=1.0"], "target_update"),
    "lr-high-lunar": ("pendulum_ddpg.yaml", [*LUNAR, "actor_lr=0.1", "critic_lr=0.1"],
                      "learning_rate"),
}


def worker(name: str, steps: int, seed: int, root: str, extra: list[str]) -> dict:
    """One scenario in this process: train, then read its findings and rule states."""
    from rltrain.scripts.training.resume import prepare_train
    from rltrain.utils.config.loader import apply_overrides, config_from_dict, resolve_config_path
    from rltrain.utils.io.safe_yaml import read_yaml_mapping
    from rltrain.utils.run.log_files import read_jsonl

    config_file, overrides, expected = SCENARIOS[name]
    raw = read_yaml_mapping(resolve_config_path(config_file))
    sets = [*SMALL, *overrides, *extra, f"max_timesteps={steps}", f"seed={seed}",
            f"run_name={name}-s{seed}", f"log_dir={root}/logs",
            f"checkpoint_dir={root}/checkpoints"]
    trainer, paths = prepare_train(config_from_dict(apply_overrides(raw, tuple(sets))), False)
    trainer.run(paths)
    fired: dict[str, dict] = {}
    events = read_jsonl(paths.log_dir / "events.jsonl")
    warned = sorted({e["rule"] for e in events if e.get("action") in ("warn", "pause")})
    for event in events:
        if event.get("rule") in SETUP_RULES and event["rule"] not in fired:
            fired[event["rule"]] = {"step": event["env_steps"], "value": event["value"],
                                    "suggested_set": event.get("suggested_set", {})}
    states = {h.spec.name: h.state_dict() for h in trainer.hooks.hooks
              if getattr(h, "spec", None) is not None and h.spec.name in SETUP_RULES}
    return {"scenario": name, "seed": seed, "steps": steps, "expected": expected,
            "fired": fired, "warnings": warned, "best_eval": trainer.monitor.best_eval,
            "states": {k: v for k, v in states.items() if k != "eval_collapse"}}


def table(rows: list[dict]) -> str:
    lines = ["| scenario | steps | seed | expected | set-up rules fired (first step: "
             "suggested change) | all rules that warned | best eval |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        fired = "; ".join(f"{rule} ({f['step']}: {json.dumps(f['suggested_set'])})"
                          for rule, f in row["fired"].items()) or "none"
        best = row["best_eval"]
        lines.append(f"| {row['scenario']} | {row['steps']} | {row['seed']} | "
                     f"{row['expected'] or 'none (healthy)'} | {fired} | "
                     f"{', '.join(row.get('warnings', [])) or 'none'} | "
                     f"{'n/a' if best is None else f'{best:.1f}'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--steps", type=int, default=12_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/calibration_setup.jsonl")
    parser.add_argument("--set", dest="extra", action="append", default=[],
                        help="one more config change for every scenario (KEY=VALUE)")
    parser.add_argument("--root", default=None,
                        help="keep the runs here (for `rltrain diagnose --verify`)")
    parser.add_argument("--worker", nargs=3, metavar=("NAME", "STEPS", "ROOT"))
    args = parser.parse_args()
    if args.worker:
        name, steps, root = args.worker
        print(json.dumps(worker(name, int(steps), args.seed, root, args.extra), default=float))
        return
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        root = args.root or temporary
        for name in args.only:
            extra = [f"--set={item}" for item in args.extra]
            proc = subprocess.run([sys.executable, __file__, "--seed", str(args.seed), *extra,
                                   "--worker", name, str(args.steps), root],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{name}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            with open(args.out, "a") as out:
                out.write(json.dumps(rows[-1]) + "\n")
            print(json.dumps({k: rows[-1][k] for k in ("scenario", "fired", "best_eval")}),
                  flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
