"""The shapes of the fault benchmark's data: a `Case` (a planted fault), a `Healthy` run,
and the seeded split of both into the `tune` and `test` halves (benchmarks/faults/cases.py
says how the split is used)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

FAULTY_ENV = "benchmarks.faults.envs:Faulty-v0"
SPLIT_SEED = "rltrain-faults-2026"
HALVES = ("tune", "test")

# Rules that cases name but that are not written yet: a case they alone would name counts
# as missed until they exist (a case is defined by its fault, not by today's rules).
PLANNED_RULES: frozenset[str] = frozenset({"short_rollouts"})

# The families a case belongs to, in the table's order.
FAMILIES = ("hyperparameter", "capacity", "data", "episode", "reward", "observation",
            "action", "algorithm", "code")


def half(name: str) -> str:
    """`tune` or `test`: the seeded hash of a case's or healthy run's id."""
    digest = hashlib.sha256(f"{SPLIT_SEED}:{name}".encode()).digest()
    return HALVES[digest[0] % 2]


@dataclass(frozen=True)
class Healthy:
    """A healthy run: tuned settings (`config`: "zoo", the shipped per-env entry of
    configs/<algo>.yaml, RL Zoo's; "defaults", rltrain's defaults for the algorithm),
    to count false alarms on. `env_fault`: the env through Faulty-v0 with these kwargs,
    faultless (Pendulum's reward reported as its terms, at their true weights)."""

    id: str
    algo: str  # an rltrain algorithm, or "loop" (benchmarks/faults/loop.py)
    env: str
    steps: int
    env_fault: dict[str, Any] | None = None
    config: str = "zoo"
    seeds: int = 1  # seeds it runs: the table takes its cases' reference as their mean

    @property
    def half(self) -> str:
        return half(self.id)


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    kind: str  # one of FAMILIES
    healthy: str  # the Healthy run of the same env, algo and budget
    rules: tuple[str, ...]
    key: str = ""
    direction: str = ""
    sets: dict[str, Any] = field(default_factory=dict)
    env_fault: dict[str, Any] | None = None  # Faulty-v0's kwargs besides `base`
    loop: str | None = None  # a fault of loop.py
    seeds: int = 1

    @property
    def half(self) -> str:
        return half(self.id)
