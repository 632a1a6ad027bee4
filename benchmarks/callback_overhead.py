"""What rltrain's SB3 callback costs: SB3's TD3 on Pendulum-v1, PPO and DQN on
CartPole-v1, with and without it.

    python benchmarks/callback_overhead.py                  # 3 rounds, 5000 learning steps
    python benchmarks/callback_overhead.py --rounds 5 --steps 5000
    python benchmarks/callback_overhead.py --algo ppo --steps 40000
    python benchmarks/callback_overhead.py --algo dqn --steps 20000
    python benchmarks/callback_overhead.py --algo ppo --env LunarLander-v3 --steps 65536
    python benchmarks/callback_overhead.py --algo ppo --steps 40000 --rounds 6 --parts

`td3`: SB3's TD3 set up like rltrain's DDPG (common.py: 256x256 networks, batch 256, one
update per env step, 1000 random warm-up steps). `ppo`, `dqn`: RL Zoo's settings for
`--env` (CartPole-v1 by default; benchmarks/faults/sb3_runs.py), the learning phase timed
after PPO's first rollout or DQN's learning_starts. Each round trains a
fresh, identically seeded model twice in this process, once with `RltrainCallback`
(flow-1 diagnostics on, the default) and once without, the order flipped every round,
and measures env steps per second and per CPU-second of the process over the learning
phase (after the warm-up). Prints each round, the median with/without ratios, and
the callback's own share of the learning phase (the time spent in its `_on_step`,
measured inside the run, which the machine's drift moves less).
The issue's target: the callback costs at most 5%. Needs the `[bench]` extra.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import sb3_td3  # noqa: E402

WARMUP = 1000


def timers(warmup: int, watched: bool, folder: str) -> tuple[list, dict[str, float]]:
    """The callbacks of one run and the times they fill in: `start`/`end` of the
    learning phase, `inside` (seconds in RltrainCallback._on_step during it)."""
    from stable_baselines3.common.callbacks import BaseCallback

    from rltrain.integrations.sb3 import RltrainCallback

    times = {"start": 0.0, "end": 0.0, "inside": 0.0, "cpu_start": 0.0, "cpu_end": 0.0}

    class Phase(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == warmup:
                times["start"], times["cpu_start"] = time.perf_counter(), time.process_time()
            return True

        def _on_training_end(self) -> None:
            times["end"], times["cpu_end"] = time.perf_counter(), time.process_time()

    class Timed(RltrainCallback):
        def _on_step(self) -> bool:
            start = time.perf_counter()
            go_on = super()._on_step()
            if self.num_timesteps > warmup:
                times["inside"] += time.perf_counter() - start
            return go_on

    callbacks: list = [Phase()]
    if watched:
        callbacks.insert(0, Timed(log_dir=f"{folder}/logs", checkpoint_dir=f"{folder}/ckpt"))
    return callbacks, times


def model_of(algo: str, seed: int, env: str = "CartPole-v1") -> tuple[object, int]:
    """A fresh model of `algo` and the env steps before its learning phase."""
    if algo == "td3":
        from rltrain.utils.config.loader import load_config

        config = load_config("pendulum_ddpg.yaml", [f"learning_starts={WARMUP}"])
        return sb3_td3(config, seed), WARMUP
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.faults.sb3_runs import CLASSES, settings

    name = f"sb3_{algo}"
    n_envs, kwargs = settings(name, env)
    model = getattr(stable_baselines3, CLASSES[name])(
        "MlpPolicy", make_vec_env(env, n_envs=n_envs, seed=seed), seed=seed,
        device="cpu", **kwargs)
    warmup = model.n_steps * n_envs if algo == "ppo" else max(model.learning_starts, 1)
    return model, warmup


# --parts: the callback's cost taken apart, each variant a run of its own
PARTS = ("none", "idle", "no diagnostics", "full")


def one_run(algo: str, steps: int, seed: int, watched: bool,
            env: str = "CartPole-v1", variant: str = "full") -> dict[str, float]:
    """One run's rates. `variant` (with `watched`): "full"; "idle", the callback installed
    (its optimiser step hook and env wrapper included) with `_on_step` doing nothing; "no
    diagnostics", `diagnostics.enabled` false."""
    model, warmup = model_of(algo, seed, env)
    with tempfile.TemporaryDirectory() as folder:
        callbacks, times = timers(warmup, watched, folder)
        if watched and variant == "idle":  # nothing told, at the steps or at the end
            callbacks[0]._on_step = lambda: True
            callbacks[0]._tell_updates = lambda: None
        elif watched and variant == "no diagnostics":
            callbacks[0].user_config = {"diagnostics": {"enabled": False}}
        model.learn(warmup + steps, callback=callbacks)
    if not times["start"]:
        raise RuntimeError(f"the learning phase's start (step {warmup}) was never seen")
    elapsed = times["end"] - times["start"]
    return {"steps_per_s": steps / elapsed, "inside_share": times["inside"] / elapsed,
            "steps_per_cpu_s": steps / (times["cpu_end"] - times["cpu_start"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5000, help="learning steps per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algo", choices=("td3", "ppo", "dqn"), default="td3")
    parser.add_argument("--env", default="CartPole-v1", help="ppo, dqn: the env")
    parser.add_argument("--parts", action="store_true",
                        help="alternate four runs a round: " + ", ".join(PARTS))
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # both sides alike; the machine is shared
    if args.parts:
        parts(args)
        return
    ratios, cpu_ratios, shares = [], [], []
    print("round  without (steps/s)  with (steps/s)  with/without  per CPU-second  "
          "callback share")
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        result = {watched: one_run(args.algo, args.steps, args.seed, watched, args.env)
                  for watched in order}
        off, on = result[False]["steps_per_s"], result[True]["steps_per_s"]
        ratios.append(on / off)
        cpu_ratios.append(result[True]["steps_per_cpu_s"] / result[False]["steps_per_cpu_s"])
        shares.append(result[True]["inside_share"])
        print(f"{r + 1:>5}  {off:>17.1f}  {on:>14.1f}  {on / off:>12.3f}  "
              f"{cpu_ratios[-1]:>14.3f}  {shares[-1]:>14.1%}")
    print(f"median with/without: {statistics.median(ratios):.3f} per wall second (cost "
          f"{1 - statistics.median(ratios):.1%}), {statistics.median(cpu_ratios):.3f} per "
          f"CPU-second (cost {1 - statistics.median(cpu_ratios):.1%}); median callback share "
          f"of the learning phase: {statistics.median(shares):.1%}; target: cost at most 5%")


def parts(args: argparse.Namespace) -> None:
    """The callback's cost taken apart: each round runs PARTS (reversed every other
    round) and prints env steps per CPU-second; then each variant's median ratio to no
    callback, and the median of its per-round ratios."""
    rates: dict[str, list[float]] = {name: [] for name in PARTS}
    for r in range(args.rounds):
        for name in PARTS if r % 2 == 0 else PARTS[::-1]:
            rates[name].append(one_run(args.algo, args.steps, args.seed, name != "none",
                                       args.env, name)["steps_per_cpu_s"])
        print(f"round {r + 1}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in PARTS),
              flush=True)
    base = rates["none"]
    for name in PARTS:
        paired = [a / b for a, b in zip(rates[name], base, strict=True)]
        print(f"{name}: median {statistics.median(rates[name]):.1f} env steps per CPU-second, "
              f"{statistics.median(rates[name]) / statistics.median(base):.3f} of none "
              f"(per round: median {statistics.median(paired):.3f})")


if __name__ == "__main__":
    main()
