"""Env runners on Ray against the single process: env steps/s and return at equal steps.

    python benchmarks/workers.py                          # 20 ms steps, then Pendulum
    python benchmarks/workers.py --steps 3000 --workers 1 2 4 8
    python benchmarks/workers.py --curve --steps 10000 --seeds 0 1   # learning curves

Each setting trains `pendulum_ddpg.yaml` (256x256 networks, one update per env step,
diagnostics off) for the same number of env steps in a fresh process: on
`slow_env:SleepyPendulum-v0` (every step waits 20 ms, as a simulator elsewhere would:
wall time, little CPU), then on plain Pendulum-v1 (a fast env, where the learner's
updates are the whole cost). Env steps/s is timed from env step 100 (Ray and the
runners started) to the last env step, before the final evaluation; the return is that
evaluation's mean (5 episodes, deterministic policy, the run's fixed evaluation seeds).
Ray gets the machine's cores (2 here); the runners use the default async mode unless
named lockstep. Results: benchmarks/results/workers.txt.

`--curve` trains on the 20 ms env only, for each seed, evaluating every `--eval-every`
env steps, and tables the evaluation returns at equal env steps (each seed's and their
mean) with each setting's env steps/s: benchmarks/results/workers_curve.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import run_worker  # noqa: E402

SLOW = ["env_name=slow_env:SleepyPendulum-v0", "env_kwargs={step_ms: 20}"]
FAST = ["env_name=Pendulum-v1"]


def settings(workers: list[int], lockstep: bool) -> dict[str, list[str]]:
    found = {"single process": []}
    for n in workers:
        found[f"{n} workers, async"] = [f"num_workers={n}", "worker_mode=async"]
    if lockstep and workers:
        n = max(workers)
        found[f"{n} workers, lockstep"] = [f"num_workers={n}", "worker_mode=lockstep"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="env steps per run (slow env)")
    parser.add_argument("--fast-steps", type=int, default=1500,
                        help="env steps per run (Pendulum-v1)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--curve", action="store_true",
                        help="learning curves at equal env steps on the 20 ms env")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="with --curve")
    parser.add_argument("--eval-every", type=int, default=2000, help="with --curve")
    parser.add_argument("--threads", type=int, default=1,
                        help="with --curve: the learner's torch threads (on a shared machine, "
                             "one keeps a busy core from stalling it)")
    parser.add_argument("--set", dest="runner_set", action="append", default=[],
                        metavar="KEY=VALUE", help="with --curve: a config key for the runs "
                        "with runners (e.g. worker_sync_every=5)")
    parser.add_argument("--runners-only", action="store_true",
                        help="with --curve: leave out the single process (its runs do not "
                             "depend on --set)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.curve:
        curve(args)
        return
    args.out = args.out or str(HERE / "results" / "workers.txt")
    lines = [f"# benchmarks/workers.py --steps {args.steps} --fast-steps {args.fast_steps} "
             f"--workers {' '.join(map(str, args.workers))} --seed {args.seed}; "
             f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start "
             "(other work shares the machine)", ""]
    for env_name, env, steps in (("20 ms steps (SleepyPendulum)", SLOW, args.steps),
                                 ("Pendulum-v1", FAST, args.fast_steps)):
        rows = []
        for name, extra in settings(args.workers, env is SLOW).items():
            result = run_worker(Path(__file__), [str(steps), str(args.seed), *env, *extra])
            rows.append((name, result))
            print(f"{env_name}: {name:22s} {result['steps_per_second']:7.1f} env steps/s, "
                  f"return {result['eval_return']:8.1f}", flush=True)
        base = rows[0][1]["steps_per_second"]
        lines += [f"## {env_name}, {steps} env steps, seed {args.seed}", "",
                  "| setting | env steps/s | vs single | eval return at the end | wall s |",
                  "|---|---|---|---|---|"]
        lines += [f"| {name} | {r['steps_per_second']:.1f} | "
                  f"{r['steps_per_second'] / base:.2f}x | {r['eval_return']:.1f} | "
                  f"{r['wall_seconds']:.0f} |" for name, r in rows]
        lines.append("")
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def curve(args: argparse.Namespace) -> None:
    """Each setting's evaluation returns at equal env steps, seed by seed, on the 20 ms env."""
    out = Path(args.out or HERE / "results" / "workers_curve.txt")
    head = (f"# benchmarks/workers.py --curve --steps {args.steps} --eval-every "
            f"{args.eval_every} --threads {args.threads} --workers "
            f"{' '.join(map(str, args.workers))} "
            f"{''.join(f'--set {x} ' for x in args.runner_set)}--seeds "
            f"{' '.join(map(str, args.seeds))}; {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the start (other work shares the machine)")
    results: dict[str, dict[int, dict]] = {}
    for seed in args.seeds:
        for name, extra in settings(args.workers, lockstep=False).items():
            if args.runners_only and not extra:
                continue
            extra = [*extra, *args.runner_set] if extra else extra  # runner settings
            result = run_worker(Path(__file__), [str(args.steps), str(seed), *SLOW, *extra,
                                                 f"eval_freq={args.eval_every}",
                                                 f"torch_threads={args.threads}"])
            results.setdefault(name, {})[seed] = result
            print(f"seed {seed} {name:18s} {result['steps_per_second']:6.1f} env steps/s, "
                  f"evaluations {result['evaluations']}", flush=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    steps = [s for s, _ in next(iter(next(iter(results.values())).values()))["evaluations"]]
    lines = [head, "", f"## Evaluation return at equal env steps (20 ms steps), seeds "
             f"{', '.join(map(str, args.seeds))}: mean (each seed)", "",
             "| setting | env steps/s | " + " | ".join(f"{s} steps" for s in steps) + " |",
             "|---|---|" + "---|" * len(steps)]
    for name, by_seed in results.items():
        cells = []
        for k in range(len(steps)):
            values = [r["evaluations"][k][1] for r in by_seed.values()]
            cells.append(f"{sum(values) / len(values):.0f} ("
                         + ", ".join(f"{v:.0f}" for v in values) + ")")
        speed = sum(r["steps_per_second"] for r in by_seed.values()) / len(by_seed)
        lines.append(f"| {name} | {speed:.1f} | " + " | ".join(cells) + " |")
    lines += ["", f"load average {os.getloadavg()[0]:.1f} at the end"]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def worker(steps: int, seed: int, extra: list[str]) -> dict:
    import tempfile

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.config.loader import load_config
    from rltrain.utils.run.device import resolve_device
    from rltrain.utils.run.folders import create_run
    from rltrain.utils.run.log_files import read_jsonl

    folder = tempfile.mkdtemp(prefix="rltrain_workers_bench_")
    config = load_config("pendulum_ddpg.yaml", [
        f"max_timesteps={steps}", f"seed={seed}", f"eval_freq={steps}",
        f"checkpoint_freq={steps}", "diagnostics.enabled=false", "min_reward_threshold=null",
        f"log_dir={folder}/logs", f"checkpoint_dir={folder}/checkpoints", "run_name=bench",
        *extra])
    if config.num_workers:
        import ray

        # The runners import slow_env as this process does.
        path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        ray.init(address="local", include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    marks: dict[str, float] = {}

    class TimedTrainer(Trainer):
        def _step(self) -> None:
            steps_now = self.state.counters.env_steps
            if steps_now == 100:
                marks["start"] = time.perf_counter()
            if steps_now == config.max_timesteps - 1:
                marks["stop"] = time.perf_counter()  # before the last step's evaluation
            super()._step()

    started = time.perf_counter()
    trainer = TimedTrainer(config, resolve_device(config.device), interactive=False)
    trainer.run(create_run(config))
    wall = time.perf_counter() - started
    evals = [x for x in read_jsonl(Path(folder) / "logs/bench/metrics.jsonl")
             if x.get("kind") == "eval"]
    return {"steps_per_second": (steps - 101) / (marks["stop"] - marks["start"]),
            "eval_return": evals[-1]["mean_return"], "wall_seconds": wall,
            "evaluations": [(x["env_steps"], x["mean_return"]) for x in evals]}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.path.insert(0, str(HERE))  # slow_env
        print(json.dumps(worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])))
    else:
        main()
