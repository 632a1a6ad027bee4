"""The fault benchmark's catalogue: the healthy runs and the planted faults, one module
per family (benchmarks/faults/case_types.py has their shapes)."""

from __future__ import annotations

from benchmarks.faults.catalogue import (
    action,
    algorithm,
    capacity,
    code,
    data,
    episodes,
    hyperparameters,
    observation,
    reward,
    sb3_families,
)
from benchmarks.faults.catalogue.healthy import HEALTHY

CASES = (*hyperparameters.CASES, *capacity.CASES, *data.CASES, *episodes.CASES,
         *reward.CASES, *observation.CASES, *action.CASES, *algorithm.CASES, *code.CASES,
         *sb3_families.CASES)

__all__ = ["CASES", "HEALTHY"]
