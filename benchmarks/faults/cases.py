"""The fault benchmark's cases: training faults that users reported in public, each
planted in a run, with the rules that should name it and the fix it should propose.

A case is data (the catalogue, one module per family of faults). `sets` are config keys
on its healthy run's config; an env fault runs the env through benchmarks/faults/envs.py
(`env_fault`, Faulty-v0's kwargs besides `base`); a code fault runs the plain loop of
benchmarks/faults/loop.py with the fault switched on (`loop`). `rules` are the rules
whose warning or pause counts as naming it; `key` and `direction` the `suggested_set`
entry that counts as the right fix ("up" or "down" against the case's value, "set" for
any value, "" where no config key is the fix: the env or the code must change).
`healthy` names the healthy run it is compared with at the same steps. Each `source` is
a public report of the fault (repository and issue number, or a title), or says that
none was found. `seeds`: runs per case (2 where the verdict can flip with the seed).

**The split.** Each case and each healthy run belongs to one half, `tune` or `test`, by
a seeded hash of its id (`half`): SHA-256 of "<SPLIT_SEED>:<id>", even first byte tune,
odd test. Rules' thresholds are set on the `tune` half only; the table reports both; a
rule change that raises `tune` and lowers `test` is not taken. The seed was fixed
before the rules that the benchmark's growth asked for were written, and never changes
(a new seed would be a new benchmark).
"""

from __future__ import annotations

from benchmarks.faults.case_types import (
    FAMILIES,
    FAULTY_ENV,
    HALVES,
    SPLIT_SEED,
    Case,
    Healthy,
    half,
)
from benchmarks.faults.catalogue import CASES, HEALTHY

__all__ = ["CASES", "FAMILIES", "FAULTY_ENV", "HALVES", "HEALTHY", "SPLIT_SEED", "Case",
           "Healthy", "case", "half", "healthy"]


def healthy(name: str) -> Healthy:
    return next(h for h in HEALTHY if h.id == name)


def case(name: str) -> Case:
    return next(c for c in CASES if c.id == name)
