"""`rltrain.verify` on SB3: does it confirm lowering a far-too-high learning rate?

    python benchmarks/verify_sb3.py                      # 2 seeds, 6000 steps
    python benchmarks/verify_sb3.py --seeds 4 --steps 20000

SB3's TD3 on Pendulum-v1 (64x64 networks, 1000 warm-up steps) with `learning_rate` 0.1
(the control, far too high) against 1e-3 (the fix), each seed trained from scratch in
both branches and evaluated by rltrain's deterministic evaluation. Writes the result
to results/verify_sb3_lr.json. Needs the `[sb3]` extra.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

RESULT = Path(__file__).resolve().parent / "results" / "verify_sb3_lr.json"


def make_model(seed: int, learning_rate: float = 0.1):
    from stable_baselines3 import TD3

    return TD3("MlpPolicy", "Pendulum-v1", learning_rate=learning_rate, seed=seed,
               device="cpu", policy_kwargs={"net_arch": [64, 64]}, learning_starts=1000)


def main() -> None:
    import rltrain

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--episodes", type=int, default=5)
    args = p.parse_args()
    start = time.monotonic()
    result = rltrain.verify(make_model, {"learning_rate": 1e-3}, steps=args.steps,
                            seeds=list(range(args.seeds)), eval_episodes=args.episodes)
    record = {**dataclasses.asdict(result), "steps": args.steps,
              "seconds": round(time.monotonic() - start, 1)}
    RESULT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{result.verdict}: fix - control = {result.difference:.1f} "
          f"[{result.low:.1f}, {result.high:.1f}] over seeds {result.seeds}")


if __name__ == "__main__":
    main()
