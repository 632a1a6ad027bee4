"""What every run of `throughput.py` trains: the shipped config, its warm-up and the
steps before the clock starts, a 1e6 replay capacity, output in a scratch folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import scratch_folder  # noqa: E402

WARMUP = 1000
# Learning steps before the clock starts, for every library alike: a library's first
# updates set it up (SBX's first compiles its update with XLA, about 2.5 s for SAC here;
# oneDNN makes its primitives), which is start-up, not the learning rate.
SETTLE = 100
BUFFER = 1_000_000


BASE_CONFIGS = {"ddpg": "pendulum_ddpg.yaml", "td3": "pendulum_td3.yaml",
                "sac": "pendulum_sac.yaml", "crossq": "pendulum_crossq.yaml",
                "tqc": "pendulum_tqc.yaml"}
FUSED = ("pendulum_ddpg.yaml", "pendulum_td3.yaml", "pendulum_sac.yaml")  # a fused update


def bench_config(base: str, steps: int, seed: int, extra: list[str]):
    """`base` (a shipped config) for WARMUP + SETTLE + `steps` env steps, no evaluations or
    checkpoints until the end, output in a temporary folder removed when the worker
    exits."""
    import torch

    from rltrain.utils.config.loader import load_config

    folder = scratch_folder()
    # torch's default threads, as SB3 trains with (rltrain's own default for these
    # networks is one thread: docs/performance.md, "Threads"); --set torch_threads=N in
    # `extra` compares another count.
    return load_config(base, [
        f"max_timesteps={WARMUP + SETTLE + steps}", f"learning_starts={WARMUP}",
        f"seed={seed}",
        "eval_freq=1000000", "checkpoint_freq=1000000", f"replay_buffer_size={BUFFER}",
        f"log_dir={folder}/logs", f"checkpoint_dir={folder}/checkpoints",
        f"torch_threads={torch.get_num_threads()}", *extra])
