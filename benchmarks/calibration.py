"""Calibration of the flow-1 rules: each rule's statistic on healthy runs and planted faults.

    python benchmarks/calibration.py                  # all scenarios (about an hour on 2 cores)
    python benchmarks/calibration.py --only healthy-pendulum-ddpg spikes

Healthy runs use the shipped configs on Pendulum-v1 and MountainCarContinuous-v0; the
faults are planted through the small env wrappers of `tests/fake_envs.py` (rare -1000
penalties, rewards x1e-5, torque too weak, actions 100x too weak, a constant reward, a
time limit reported as terminal, an observation dimension x1000, a stale observation)
or a patched actor (a dead first layer: every ReLU off, so no gradient reaches it), or
the config (gamma 0.5, a replay buffer of 300); one more run has
gradient clipping at 1.0.
Every run keeps going through warnings and pauses (safe_mode off) so that each
statistic is seen over the whole run. Prints a markdown table of each rule's statistic
per run, which docs/diagnosing.md quotes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # fake_envs: the planted faults
from common import run_worker  # noqa: E402

MOUNTAINCAR = ["env_name=MountainCarContinuous-v0", "min_reward_threshold=null"]
# name -> (config, overrides, env steps, patch)
SCENARIOS = {
    "healthy-pendulum-ddpg": ("pendulum_ddpg.yaml", [], 20_000, None),
    "healthy-pendulum-td3": ("pendulum_td3.yaml", [], 20_000, None),
    # OU noise of 0.5 explores far enough to find the goal (RL Zoo's setting for this env).
    "healthy-mountaincar-ddpg": ("pendulum_ddpg.yaml", [
        *MOUNTAINCAR, "noise_type=ou", "exploration_noise=0.5"], 30_000, None),
    # Not a planted fault but a classic failure: with small Gaussian noise the goal is
    # never found and the action cost teaches the car to stand still (return 0).
    "mountaincar-stands-still": ("pendulum_ddpg.yaml", MOUNTAINCAR, 30_000, None),
    "spikes": ("pendulum_ddpg.yaml", ["env_name=fake_envs:FakeSpikyPendulum-v0",
                                      "min_reward_threshold=null"], 20_000, None),
    "scaled-1e-5": ("pendulum_ddpg.yaml", ["env_name=fake_envs:FakeScaledPendulum-v0"],
                    20_000, None),
    "weak-torque": ("pendulum_ddpg.yaml", ["env_name=fake_envs:FakeWeakPendulum-v0"],
                    20_000, None),
    "weak-point": ("pendulum_ddpg.yaml", ["env_name=fake_envs:FakeWeakPoint-v0",
                                          "min_reward_threshold=null"], 10_000, None),
    "dead-actor-layer": ("pendulum_ddpg.yaml", [], 20_000, "dead-layer"),
    "constant-reward": ("pendulum_ddpg.yaml", [
        "env_name=fake_envs:FakeConstantRewardPendulum-v0"], 20_000, None),
    # Not a fault here: gradient clipping at 1.0 (a common default); Adam's steps barely
    # depend on the gradient scale.
    "clip-1.0": ("pendulum_ddpg.yaml", ["grad_clip_norm=1.0"], 20_000, None),
    # What goes into learning (utils/diagnosis/measure/inputs.py): the review's faults that no
    # reward, gradient or action rule named.
    "time-limit-terminal": ("pendulum_ddpg.yaml", [
        "env_name=fake_envs:FakeTimeLimitTerminalPendulum-v0"], 20_000, None),
    "observation-x1000": ("pendulum_ddpg.yaml", [
        "env_name=fake_envs:FakeScaledObservationPendulum-v0"], 20_000, None),
    "stale-observation": ("pendulum_ddpg.yaml", [
        "env_name=fake_envs:FakeStaleObservationPendulum-v0"], 20_000, None),
    "gamma-0.5": ("pendulum_ddpg.yaml", ["gamma=0.5"], 20_000, None),
    "replay-300": ("pendulum_ddpg.yaml", ["replay_buffer_size=300"], 20_000, None),
}
COLUMNS = [  # rule, statistic shown, how it is read from flow1.jsonl
    ("reward_spikes", "penalty share (max)"), ("sparse_reward", "bonus share (max)"),
    ("reward_scale", "max abs reward"), ("constant_reward", "reward std / |mean| (min)"),
    ("action_saturation", "saturation (max)"),
    ("q_overestimation", "Q over-estimation after the warm-up (max)"),
    ("dead_relu", "dead units (max)"), ("value_policy_imbalance", "imbalance (max)"),
    ("vanishing_gradient", "weakest/strongest layer (min)"),
    ("exploding_gradient", "layer / own median (max)"),
    ("broken_gradient", "layers without gradient (max)"),
    ("observation_scale", "largest dimension's RMS over sqrt(obs_dim) (max)"),
    ("frozen_observation", "dimensions no step changed (max)"),
    ("time_limit_terminal", "episodes in a row ended terminated at one length (max)"),
    ("short_horizon", "1/(1-gamma) / mean episode length (min)"),
    ("small_replay", "replay capacity / batch size"),
]


def worker(name: str) -> dict:
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.config.loader import load_config
    from rltrain.utils.run.folders import create_run

    import fake_envs  # registers the fault envs; holds the planted faults

    config_name, overrides, steps, patch = SCENARIOS[name]
    if patch == "dead-layer":
        from rltrain.networks.actor import Actor

        Actor.__init__ = fake_envs.dead_first_layer(Actor.__init__)
    with tempfile.TemporaryDirectory() as folder:
        config = load_config(config_name, [
            *overrides, f"max_timesteps={steps}", "safe_mode=false", f"log_dir={folder}/logs",
            f"checkpoint_dir={folder}/checkpoints"], run_name=name)
        paths = create_run(config)
        Trainer(config, torch.device("cpu"), interactive=False).run(paths)
        return result_of(paths, config)


def result_of(paths, config) -> dict:
    from rltrain.utils.run.log_files import eval_curve, read_jsonl

    events = read_jsonl(paths.events_file)
    records = read_jsonl(paths.diagnostics_file)
    warm = config.learning_starts + config.diagnostics.q_warmup_updates // config.utd_ratio
    return {"stats": {**summarise(records, warm,
                                  config.diagnostics.exploding_gradient_min_norm),
                      **input_stats(records, read_jsonl(paths.metrics_file), config)},
            "warnings": sorted({e["rule"] for e in events if e["action"] in ("warn", "pause")}),
            "final_eval": eval_curve(read_jsonl(paths.metrics_file))[-1][1]}


def summarise(records: list[dict], warm: int, min_norm: float) -> dict[str, float | None]:
    """Each rule's statistic over the run, as its rule computes it: Q over-estimation from
    the step its rule starts, weight matrices for the weakest/strongest ratio, spikes of
    norms above `min_norm` against the layer's last HISTORY records, all over the reward
    scale of their record."""
    import numpy as np

    from rltrain.utils.diagnosis.measure.gradients import HISTORY

    def of(kind: str) -> list[dict]:
        return [r for r in records if r["kind"] == kind]

    def top(values: list[float], pick=max) -> float | None:
        values = [float(v) for v in values if v is not None]  # "inf" in JSON is a string
        return round(pick(values), 4) if values else None

    grads = of("gradients")  # the statistics the gradient rules use (gradients.py)
    weakest, spikes, missing, history = [], [], [], {}
    for g in grads:
        for net in ("actor", "critic"):
            norms = g[net]
            weights = [v for k, v in norms.items() if v and k.endswith("weight")]
            missing.append(sum(1 for v in norms.values() if not v))
            if weights:
                weakest.append(min(weights) / max(weights))
            scale = g.get("reward_scale", 1.0)
            for layer, v in norms.items():
                past = history.setdefault(f"{net}.{layer}", deque(maxlen=HISTORY))
                if v and v > min_norm and len(past) >= 5:
                    spikes.append(v / scale / float(np.median(past)))
                if v:
                    past.append(v / scale)
    return {
        "reward_spikes": top([r["penalty_share"] for r in of("reward")]),
        "sparse_reward": top([r["bonus_share"] for r in of("reward")]),
        "reward_scale": top([r["max_abs"] for r in of("reward")][-1:]),
        "constant_reward": top([r["cv"] for r in of("reward")], min),
        "action_saturation": top([r["action_saturation"] for r in of("heatmap")]),
        "q_overestimation": top([r["q_overestimation"] for r in of("ddpg")
                                 if r["env_steps"] >= warm]),
        "dead_relu": top([max(r["dead_relu"].values()) for r in of("ddpg") if r["dead_relu"]]),
        "value_policy_imbalance": top([g["imbalance"] for g in grads]),
        "vanishing_gradient": top(weakest, min),
        "exploding_gradient": top(spikes),
        "broken_gradient": top(missing),
    }


def input_stats(records: list[dict], metrics: list[dict], config) -> dict[str, float | None]:
    """The input rules' statistics: the observation checks' flow1.jsonl lines, and the
    episode lines of metrics.jsonl fed through the rules' own episode bookkeeping."""
    from rltrain.utils.diagnosis.measure.episode_ends import EpisodeEnds

    inputs = [r for r in records if r["kind"] == "inputs"]
    ends, streaks, shares = EpisodeEnds(config.diagnostics.window_size), [], []
    for line in (m for m in metrics if m.get("kind") == "episode"):
        ends.add(line["length"], line.get("terminated", False))  # absent before 2026-12-01
        streaks.append(ends.streak)
        shares.append(ends.horizon_share(config.gamma))
    shares = [x for x in shares if x is not None]
    return {
        "observation_scale": round(max(max(r["observation_rms"]) / len(r["observation_rms"])
                                       ** 0.5 for r in inputs), 2) if inputs else None,
        "frozen_observation": max((len(r["frozen"] or []) for r in inputs), default=None),
        "time_limit_terminal": max(streaks, default=None),
        "short_horizon": round(min(shares), 4) if shares else None,
        "small_replay": round(config.replay_buffer_size / config.batch_size, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "calibration.json")
    args = parser.parse_args()
    results = {}
    for name in args.only or list(SCENARIOS):
        results[name] = run_worker(Path(__file__), [name])
        print(f"{name}: final eval {results[name]['final_eval']:.1f}, warnings "
              f"{results[name]['warnings']}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))  # after each: runs take minutes
    print_table(results)


def print_table(results: dict[str, dict]) -> None:
    names = list(results)
    print("\n| rule (statistic) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for rule, label in COLUMNS:
        cells = " | ".join(str(results[n]["stats"].get(rule, "·")) for n in names)
        print(f"| `{rule}` ({label}) | {cells} |")
    print("| warnings fired | " + " | ".join(", ".join(results[n]["warnings"]) or "none"
                                          for n in names) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2])))
    else:
        main()
