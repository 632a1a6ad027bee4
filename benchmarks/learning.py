"""Learning: evaluation return against env steps for N seeds, rltrain and SB3 side by side.

    python benchmarks/learning.py                       # 5 seeds, 20k steps, both tools
    python benchmarks/learning.py --seeds 3 --config pendulum_td3.yaml --no-sb3

rltrain trains with a shipped config; SB3 trains TD3 set up like it (see common.py).
Both are evaluated the same way: every `eval_freq` env steps, `n_eval_episodes`
deterministic episodes from the same reset seeds (rltrain's `evaluate`). Prints a
table of the final evaluation per seed and writes `learning.png` (mean and spread over
seeds) and `learning.json` to benchmarks/results/, or to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_worker, sb3_td3, scratch_folder  # noqa: E402


def rltrain_curve(config_name: str, seed: int, steps: int) -> list[tuple[int, float]]:
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.config.loader import load_config
    from rltrain.utils.run.folders import create_run
    from rltrain.utils.run.log_files import eval_curve, read_jsonl

    folder = scratch_folder()
    config = load_config(config_name, [f"seed={seed}", f"max_timesteps={steps}",
                                       f"log_dir={folder}/logs",
                                       f"checkpoint_dir={folder}/checkpoints",
                                       "safe_mode=false"], run_name="run")
    paths = create_run(config)
    Trainer(config, torch.device("cpu"), interactive=False).run(paths)
    return eval_curve(read_jsonl(paths.metrics_file))


def sb3_curve(config_name: str, seed: int, steps: int) -> list[tuple[int, float]]:
    from stable_baselines3.common.callbacks import BaseCallback

    from rltrain.utils.config.loader import load_config
    from rltrain.utils.training.envs import make_env
    from rltrain.utils.training.evaluation import evaluate

    config = load_config(config_name)
    model = sb3_td3(config, seed)
    eval_env, curve = make_env(config.env_name), []

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % config.eval_freq == 0:
                result = evaluate(lambda obs: model.predict(obs, deterministic=True)[0],
                                  eval_env, config.n_eval_episodes, seed, config.gamma)
                curve.append((self.num_timesteps, result.mean))
            return True

    model.learn(steps, callback=Evaluate())
    return curve


def plot(results: dict[str, dict[int, list]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for tool, runs in results.items():
        curves = [dict(c) for c in runs.values()]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        values = np.array([[c[s] for s in steps] for c in curves])
        mean = values.mean(axis=0)
        ax.plot(steps, mean, label=f"{tool} (mean of {len(curves)} seeds)")
        ax.fill_between(steps, values.min(axis=0), values.max(axis=0), alpha=0.2)
    ax.axhline(-200, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean evaluation return")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="pendulum_ddpg.yaml")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--no-sb3", action="store_true", help="rltrain only")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    tools = ["rltrain"] + ([] if args.no_sb3 else ["sb3"])
    results: dict[str, dict[int, list]] = {tool: {} for tool in tools}
    script = Path(__file__).resolve()
    for seed in range(args.seeds):
        for tool in tools:
            curve = run_worker(script, [tool, args.config, str(seed), str(args.steps)])["curve"]
            results[tool][seed] = curve
            print(f"seed {seed}: {tool:8s} final eval {curve[-1][1]:8.1f} at step "
                  f"{curve[-1][0]}", flush=True)
    print(f"\n| seed | {' | '.join(tools)} |\n|---|{'---|' * len(tools)}")
    for seed in range(args.seeds):
        cells = " | ".join(f"{results[t][seed][-1][1]:.1f}" for t in tools)
        print(f"| {seed} | {cells} |")
    for label, pick in (("mean", statistics.mean), ("median", statistics.median)):
        cells = " | ".join(f"{pick(c[-1][1] for c in results[t].values()):.1f}" for t in tools)
        print(f"| {label} | {cells} |")
    cells = " | ".join(f"{sum(c[-1][1] >= -200 for c in results[t].values())} of {args.seeds}"
                       for t in tools)
    print(f"| -200 or better | {cells} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning.json").write_text(json.dumps(
        {"config": args.config, "steps": args.steps, "results": results}, indent=1))
    plot(results, args.out / "learning.png")
    print(f"\nwrote {args.out / 'learning.png'} and {args.out / 'learning.json'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        tool, config_name, seed, steps = sys.argv[2], sys.argv[3], int(sys.argv[4]), \
            int(sys.argv[5])
        fn = rltrain_curve if tool == "rltrain" else sb3_curve
        print(json.dumps({"curve": fn(config_name, seed, steps)}))
    else:
        main()
