"""Calibration of `ignored_action` on exploration noise (a warm-up under 1000 steps).

    python -m benchmarks.noise_effect [--seeds 2] [--only NAME ...]

Trains each case with learning_starts 100 for 2000 more steps, in which the rule judges
the first 1000 steps after the warm-up whose exploration noise reached the env
(utils/diagnosis/measure/inputs.py), healthy and with the env's action dropped
(benchmarks/faults/envs.py IgnoredAction), and prints the statistic it judged and at
which env step (`action_effect`@step, or unjudged; the rule warns below 1.5).
Networks 64x64, batches of 64.
"""

from __future__ import annotations

import argparse
import tempfile

from rltrain.scripts.api import train
from rltrain.utils.diagnosis.measure.action_effect import ROWS
from rltrain.utils.run.log_files import read_jsonl

LEARNING_STARTS = 100
# Small networks and batches, for speed: the statistic judges the noise, not what is learnt.
SMALL = {"hidden_sizes": [64, 64], "batch_size": 64}
CASES = {  # name: env, algo, the run's usual noise
    "pendulum_ddpg": ("Pendulum-v1", "ddpg", {"exploration_noise": 0.1}),
    "pendulum_td3": ("Pendulum-v1", "td3", {"exploration_noise": 0.1}),
    "pendulum_sac": ("Pendulum-v1", "sac", {}),
    "mountaincar_td3_ou": ("MountainCarContinuous-v0", "td3",
                           {"noise_type": "ou", "exploration_noise": 0.5}),
    "lunarlander_td3": ("LunarLanderContinuous-v3", "td3", {"exploration_noise": 0.1}),
}


def judged(env: str, algo: str, noise: dict, seed: int, ignored: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        env_kwargs = {}
        if ignored:
            env_kwargs = {"base": env, "fault": "ignored_action"}
            env = "benchmarks.faults.envs:Faulty-v0"
        run = train({"env_name": env, "env_kwargs": env_kwargs, "algo": algo, "seed": seed,
                     "learning_starts": LEARNING_STARTS,
                     "max_timesteps": LEARNING_STARTS + 2 * ROWS, "eval_freq": 100_000,
                     "checkpoint_freq": 100_000, "safe_mode": False, "log_dir": f"{tmp}/logs",
                     "checkpoint_dir": f"{tmp}/ck", "run_name": "c", **SMALL, **noise})
        lines = [d for d in read_jsonl(run.log_dir / "flow1.jsonl")
                 if d["kind"] == "action_effect" and d.get("judged_on")]
        return (f"{lines[0]['action_effect']:.2f}@{lines[0]['env_steps']}" if lines
                else "unjudged")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", action="append", choices=list(CASES))
    parser.add_argument("--noise", type=float, help="exploration_noise instead of the case's")
    parser.add_argument("--healthy-only", action="store_true")
    args = parser.parse_args()
    print(f"action_effect on the first {ROWS} noisy steps after a {LEARNING_STARTS}-step "
          f"warm-up (warns below 1.5), seeds 0-{args.seeds - 1}")
    for name in args.only or CASES:
        env, algo, noise = CASES[name]
        if args.noise is not None:
            noise = {**noise, "exploration_noise": args.noise}
        for ignored in (False,) if args.healthy_only else (False, True):
            found = [judged(env, algo, noise, seed, ignored) for seed in range(args.seeds)]
            print(f"{name:22s} {noise} {'ignored' if ignored else 'healthy':8s} {found}",
                  flush=True)


if __name__ == "__main__":
    main()
