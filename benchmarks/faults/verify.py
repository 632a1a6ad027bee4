"""The fault benchmark's `--verify`: the fix that named a case, tried as a controlled
experiment by `rltrain diagnose RUN --verify` (scripts/verify/verify.py) on the case's run,
before its temporary folder goes.

A case is verified when its run was named by one of its rules with a `suggested_set`
(the finding with the right key if there is one) and the case has a config fix (`key`);
plain-loop cases and cases without a key have none. The verify itself is the default
one (the top findings that propose a change, `seeds` pairs, from the start for a
set-up fault); the case's verdict is that of the change the naming finding proposed,
"not tried" where it was not among the top findings verify tried.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.faults.cases import Case
from benchmarks.faults.table import right_key
from rltrain.scripts.verify.verify import DEFAULT_SEEDS, verify

__all__ = ["DEFAULT_SEEDS", "naming_finding", "verify_case"]


def naming_finding(case: Case, result: dict[str, Any]) -> dict[str, Any] | None:
    """The finding of the case's rules that proposes a change, one with the right key
    first; None where the case has no config fix or none proposes one."""
    if not case.key or case.loop is not None:
        return None
    proposing = [f for f in result["findings"]
                 if f["rule"] in case.rules and f.get("suggested_set")]
    keyed = [f for f in proposing if right_key(case, f["suggested_set"])]
    return (keyed or proposing or [None])[0]


def verify_case(case: Case, result: dict[str, Any], log_dir: Path,
                options: dict[str, Any], say: Callable[[str], None] | None = None,
                run_verify: Callable[..., list[dict[str, Any]]] | None = None
                ) -> dict[str, Any] | None:
    """Verify the run in `log_dir` if the case was named with a fix; what it found for
    that fix (verdict, difference, interval), the env steps and seconds it cost. A verify
    that fails is recorded with its error, never loses the run's result. `options`:
    verify's `steps`, `seeds` and `jobs`; `run_verify` stands in for
    scripts/verify/verify.py's `verify` in tests."""
    finding = naming_finding(case, result)
    if finding is None:
        return None
    record: dict[str, Any] = {"rule": finding["rule"],
                              "suggested_set": finding["suggested_set"]}
    start = time.monotonic()
    try:
        extra = {"top": options["top"]} if options.get("top") else {}
        tried = (run_verify or verify)(log_dir, steps=options.get("steps"),
                                       seeds=options["seeds"],
                                       jobs=options["jobs"], say=say,
                                       threads=options.get("threads"), **extra)
    except Exception as exc:  # a verify that cannot run must not lose the case's run
        return {**record, "verdict": "error", "error": f"{type(exc).__name__}: {exc}",
                "seconds": round(time.monotonic() - start, 1)}
    record.update(_verdict_of(case, tried))
    record.update(env_steps=sum(2 * t["seeds"] * t["steps"] for t in tried),
                  seconds=round(time.monotonic() - start, 1),
                  tried=[{"rule": t["rule"], "suggested_set": t["suggested_set"],
                          "verdict": t["verdict"]} for t in tried])
    return record


def _verdict_of(case: Case, tried: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of verify's experiment for one of the case's rules (the right key
    first: verify tries each rule's newest proposal)."""
    ours = [t for t in tried if {t["rule"], *t.get("also", [])} & set(case.rules)]
    keyed = [t for t in ours if right_key(case, t["suggested_set"])]
    chosen = (keyed or ours or [None])[0]
    if chosen is None:
        return {"verdict": "not tried", "difference": None, "interval": None}
    return {"verdict": chosen["verdict"], "difference": chosen["difference"],
            "interval": chosen["interval"], "verified_set": chosen["suggested_set"]}
