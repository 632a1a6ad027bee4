"""Seeds derived from the run seed, one independent stream per consumer.

Each consumer (network init, replay sampling, exploration, every training episode's
reset, every evaluation episode's reset) draws from its own stream, so changing how
often one of them draws never shifts the others; and an episode's reset seed depends
only on (run seed, episode index), which is what lets a resumed run rebuild the
current episode exactly.
"""

from __future__ import annotations

import numpy as np

TRAIN_EPISODES, EVAL_EPISODES, REPLAY, EXPLORATION, AGENT, NETWORK_INIT, DIAGNOSTICS = range(7)


def derive_seed(seed: int, stream: int, index: int = 0) -> int:
    """A 32-bit seed that depends only on (seed, stream, index)."""
    return int(np.random.SeedSequence([seed, stream, index]).generate_state(1)[0])
