"""False findings inside other frameworks: healthy SB3 TD3 and SAC (RL Zoo's Pendulum
settings) and CleanRL's TD3 (docs/examples/cleanrl_td3.py) trained for 20,000 env steps
with rltrain watching, and every warning or pause they got. A healthy run should get
none; before gradients were read at each optimizer's own step, SB3 TD3 got a false
`value_policy_imbalance` and `vanishing_gradient`.

    python -m benchmarks.healthy_integrations [--steps 20000] [--out FILE] [--only RUN]

Run from the repository root; the three runs train in parallel processes, one torch
thread each. Results: benchmarks/results/healthy_integrations.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "healthy_integrations.json"
RUNS = ("sb3_td3", "sb3_sac", "cleanrl_td3")


def train(name: str, steps: int, folder: Path) -> Path:
    """Train run `name` for `steps` env steps, watched; its log folder."""
    import torch

    torch.set_num_threads(1)
    if name == "cleanrl_td3":
        import importlib.util

        path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "cleanrl_td3.py"
        spec = importlib.util.spec_from_file_location("cleanrl_td3", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        import os

        os.chdir(folder)
        module.main(["--total-timesteps", str(steps), "--run-name", name])
        return folder / "logs" / name
    import numpy as np
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    from rltrain.integrations.sb3 import RltrainCallback

    if name == "sb3_td3":  # RL Zoo's hyperparams/td3.yml, Pendulum-v1
        model = TD3("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, buffer_size=200_000,
                    learning_starts=10_000, gamma=0.98, train_freq=1, gradient_steps=1,
                    action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
                    policy_kwargs={"net_arch": [400, 300]}, seed=0, device="cpu")
    else:  # RL Zoo's hyperparams/sac.yml, Pendulum-v1
        model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=0, device="cpu")
    model.learn(steps, callback=RltrainCallback(run_name=name, log_dir=str(folder / "logs"),
                                                checkpoint_dir=str(folder / "checkpoints")))
    return folder / "logs" / name


def run_one(name: str, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = train(name, steps, Path(tmp))
        events = [json.loads(line) for line in (log_dir / "events.jsonl").read_text()
                  .splitlines() if line.strip()]
        found = [{k: e.get(k) for k in ("env_steps", "rule", "action", "value")}
                 for e in events if e.get("action") in ("warn", "pause")]
        episodes = [json.loads(line)["episode_return"] for line in
                    (log_dir / "metrics.jsonl").read_text().splitlines()
                    if '"kind": "episode"' in line]
        last = episodes[-10:]
        return {"run": name, "steps": steps, "findings": found,
                "last_10_episodes": round(sum(last) / len(last), 1) if last else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", action="append", choices=RUNS, default=[],
                        help="train only these runs (default: all three)")
    args = parser.parse_args()
    runs = args.only or list(RUNS)
    with ProcessPoolExecutor(len(runs)) as pool:
        results = list(pool.map(run_one, runs, [args.steps] * len(runs)))
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        rules = ", ".join(f"{f['rule']} ({f['action']}) at {f['env_steps']}"
                          for f in r["findings"]) or "none"
        print(f"{r['run']}: {r['steps']} steps, mean return of the last 10 training "
              f"episodes {r['last_10_episodes']}, "
              f"warnings/pauses: {rules}")


if __name__ == "__main__":
    main()
