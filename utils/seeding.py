"""Seeds derived from the run seed, one independent stream per consumer.

Each consumer (network init, replay sampling, exploration, every training episode's
reset, every evaluation episode's reset) draws from its own stream, so changing how
often one of them draws never shifts the others; and an episode's reset seed depends
only on (run seed, episode index), which is what lets a resumed run rebuild the
current episode exactly.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import torch

# FORKS: the seeds of re-seeded forks (`rltrain diagnose --verify --seeds K`), by pair.
# WORKERS: each env runner's own run seed (scripts/workers/env_runner.py), by runner index.
(TRAIN_EPISODES, EVAL_EPISODES, REPLAY, EXPLORATION, AGENT, NETWORK_INIT, DIAGNOSTICS,
 GLOBAL_GENERATORS, FORKS, WORKERS) = range(10)


def derive_seed(seed: int, stream: int, index: int = 0) -> int:
    """A 32-bit seed that depends only on (seed, stream, index)."""
    return int(np.random.SeedSequence([seed, stream, index]).generate_state(1)[0])


def seed_global_generators(seed: int) -> None:
    """Python's `random` and NumPy's global generator, which rltrain itself never draws
    from: an env or wrapper that does then behaves the same in every run of one seed
    (their states are saved in checkpoints, so a resumed run continues them)."""
    random.seed(derive_seed(seed, GLOBAL_GENERATORS, 0))
    np.random.seed(derive_seed(seed, GLOBAL_GENERATORS, 1))


def load_generator_state(generator: torch.Generator, state: torch.Tensor) -> bool:
    """Continue `generator` from a saved state; returns whether it could.

    CPU and CUDA generators keep different states (a Mersenne Twister, 5056 bytes; a
    Philox seed and offset, 16 bytes), so a state saved on the other kind of device cannot
    continue. The generator is then seeded from a hash of the saved state: a new stream,
    the same one every time that checkpoint is resumed on this kind of device.
    """
    state = state.cpu()
    if state.numel() == generator.get_state().numel():
        generator.set_state(state)
        return True
    digest = hashlib.sha256(state.numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little"))
    return False


def global_rng_state() -> dict[str, Any]:
    """Python's, NumPy's and torch's global random states, fit for `weights_only` loads."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    return {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}


def set_global_rng_state(rng: dict[str, Any]) -> None:
    random.setstate(_as_tuple(rng["python"]))
    numpy_state = dict(rng["numpy"])
    numpy_state["state"] = {**numpy_state["state"],
                            "key": np.asarray(numpy_state["state"]["key"], dtype=np.uint32)}
    np.random.set_state(numpy_state)
    torch.set_rng_state(rng["torch"])


def _as_tuple(value: Any) -> Any:
    """`random.setstate` wants the exact nested tuples `getstate` gave."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value
