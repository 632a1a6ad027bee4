"""`rltrain diagnose RUN --verify`: a finding's proposed fix, tried as a controlled experiment.

For each of the top findings that propose a config change (`suggested_set`), the run is
forked twice from the newest checkpoint at or before the step the finding was first
seen (else the newest): one branch with the change, one without. Both are ordinary
forks (`rltrain resume --checkpoint C --run-name NEW --set ...`), so they show in
`rltrain status` and TensorBoard; they run at once, sharing the cores (torch_threads),
for the same env steps, evaluate at the same steps (EVALUATIONS times) with the same
evaluation seeds, and train through warnings (safe_mode off).

The branches are compared where they end up: the last `last` evaluations both reached
(default: the last third, at least one; scripts/verify_stats.py says why), by the
difference of the mean returns (fix - control) with a 95% bootstrap interval over the
episodes, and a verdict: confirmed (the interval lies above 0), not confirmed (it lies
below a gain of `MARGIN` of the control's magnitude) or inconclusive.

With `seeds` K = 1 the pair is an exact fork: both branches continue the checkpoint's
random streams. With K > 1, pair k starts both its branches from the same checkpoint
with the same new seed, derived from the run's seed and k: exploration noise, replay
sampling, torch and the training episodes are re-seeded after the state is loaded
(`rltrain resume --fork-seed`, internal). The pairs run one after another; the
difference is the mean of the pairs' differences, its interval over pairs x episodes.
The verdicts go to <run folder>/verify.json, which `diagnose --json` and report.html
include.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rltrain.scripts.verify_stats import (
    MARGIN,
    Evaluations,
    common_steps,
    compared_steps,
    difference,
    pooled_difference,
    returns_at,
    verdict,
)
from rltrain.utils.diagnostics.report import VERIFY_FILE
from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import atomic_write, to_json
from rltrain.utils.run.folders import CONFIG_FILE, METRICS_FILE, STEP_CHECKPOINT
from rltrain.utils.run.logger import read_jsonl
from rltrain.utils.seeding import FORKS, derive_seed

__all__ = ["MARGIN", "difference", "fork_point", "verdict", "verify", "summary_lines"]

DEFAULT_STEPS = 5000
EVALUATIONS = 6  # per branch after the fork: the last third is then two
TOP = 3


def step_checkpoints(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    """The run's step and paused checkpoints, (env steps, path), oldest first."""
    return sorted((int(m.group(1)), p) for p in checkpoint_dir.glob("*.pt")
                  if (m := STEP_CHECKPOINT.match(p.name)))


def fork_point(checkpoint_dir: Path, first_step: int) -> tuple[int, Path] | None:
    """The newest step or paused checkpoint at or before `first_step`, else the newest."""
    found = step_checkpoints(checkpoint_dir)
    before = [c for c in found if c[0] <= first_step]
    return (before or found or [None])[-1]


def _run_config(folder: Path) -> Any:
    from rltrain.utils.config.loader import config_from_dict, read_yaml_mapping

    return config_from_dict(read_yaml_mapping(folder / CONFIG_FILE))


def _checkpoint_dir(folder: Path) -> Path:
    return Path(_run_config(folder).checkpoint_dir) / folder.name


def _free_name(log_parent: Path, stem: str) -> str:
    n = 1
    while (log_parent / f"{stem}-{n}").exists():
        n += 1
    return f"{stem}-{n}"


def _launch(folder: Path, checkpoint: Path, name: str, changes: dict[str, Any],
            until: int, eval_every: int, seed: int | None) -> subprocess.Popen:
    """A fork beside the run (its log and checkpoint folders' parents); re-seeded with
    `seed` unless it is None."""
    from rltrain.utils.config.resolve import override_strings

    threads = max(1, (os.cpu_count() or 2) // 2)  # two branches at once share the cores
    sets = override_strings({**changes, "max_timesteps": until, "torch_threads": threads,
                             "safe_mode": False, "eval_freq": eval_every,
                             "log_dir": str(folder.parent),
                             "checkpoint_dir": str(checkpoint.parent.parent)})
    command = [sys.executable, "-c", "from rltrain.scripts import main; main()", "resume",
               "--checkpoint", str(checkpoint), "--run-name", name]
    command += ["--fork-seed", str(seed)] if seed is not None else []
    for item in sets:
        command += ["--set", item]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _evaluations(log_dir: Path, after: int) -> Evaluations:
    """Every evaluation after the fork step: (env steps, episode returns)."""
    return [(int(m["env_steps"]), [float(r) for r in m["returns"]])
            for m in read_jsonl(log_dir / METRICS_FILE)
            if m["kind"] == "eval" and m["env_steps"] > after]


def _run_pair(folder: Path, finding: dict[str, Any], fork: tuple[int, Path], steps: int,
              seed: int | None, stem: str) -> dict[str, Any]:
    """One fix branch and one control branch from the fork, trained at once."""
    step, checkpoint = fork
    names = {"fix": _free_name(folder.parent, f"{stem}-fix"),
             "control": _free_name(folder.parent, f"{stem}-control")}
    procs = {kind: _launch(folder, checkpoint, name, finding["suggested_set"] if kind == "fix"
                           else {}, step + steps, max(1, steps // EVALUATIONS), seed)
             for kind, name in names.items()}
    branches: dict[str, Any] = {}
    for kind, proc in procs.items():
        _, err = proc.communicate()
        evaluations = _evaluations(folder.parent / names[kind], step)
        branches[kind] = {"run": names[kind], "exit_code": proc.returncode,
                          "evaluations": evaluations,
                          "returns": [r for _, returns in evaluations for r in returns],
                          "error": err.strip().splitlines()[-1] if proc.returncode not in
                          (0, 3) and err.strip() else None}
    return {"seed": seed, "branches": branches, "difference": None}


def _verify_finding(folder: Path, finding: dict[str, Any], steps: int, seeds: int,
                    before: int | None, last: int | None) -> dict[str, Any]:
    first = finding["first_step"] if before is None else min(before, finding["first_step"])
    fork = fork_point(_checkpoint_dir(folder), first)
    assert fork is not None  # checked by verify()
    run_seed = _run_config(folder).seed
    stem = f"{folder.name}-verify-{finding['rule']}"
    pairs = [_run_pair(folder, finding, fork, steps, None, stem)] if seeds == 1 else [
        _run_pair(folder, finding, fork, steps, derive_seed(run_seed, FORKS, k),
                  f"{stem}-pair{k}") for k in range(seeds)]
    result = {"rule": finding["rule"], "first_step": finding["first_step"],
              "suggested_set": finding["suggested_set"], "checkpoint": str(fork[1]),
              "fork_step": fork[0], "steps": steps, "seeds": seeds}
    return {**result, **_judged(pairs, last)}


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _judged(pairs: list[dict[str, Any]], last: int | None) -> dict[str, Any]:
    """The compared evaluations, each pair's difference and the verdict over all pairs."""
    branches = [p["branches"][kind]["evaluations"] for p in pairs for kind in ("fix",
                                                                              "control")]
    common = common_steps(branches)
    steps = compared_steps(common, last)
    compared = [{kind: returns_at(p["branches"][kind]["evaluations"], steps)
                 for kind in ("fix", "control")} for p in pairs]
    for pair, returns in zip(pairs, compared, strict=True):
        for kind in ("fix", "control"):
            branch = pair["branches"][kind]
            branch["mean"], branch["path_mean"] = _mean(returns[kind]), _mean(branch["returns"])
    result: dict[str, Any] = {"compared_steps": steps, "evaluations": len(common),
                              "pairs": pairs, "branches": pairs[0]["branches"],
                              "difference": None, "interval": None,
                              "verdict": "inconclusive"}
    if steps and all(r["fix"] and r["control"] for r in compared):
        diff = pooled_difference([(r["fix"], r["control"]) for r in compared])
        for pair, each in zip(pairs, diff["pairs"], strict=True):
            pair["difference"] = each
        base = float(np.mean([x for r in compared for x in r["control"]]))
        result.update(difference=diff["difference"], interval=[diff["low"], diff["high"]],
                      verdict=verdict(diff, base))
    return result


def verify(folder: Path, steps: int = DEFAULT_STEPS, seeds: int = 1, top: int = TOP,
           before: int | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """Try the top findings' proposed changes; writes and returns the verdicts. `before`:
    fork at or before this step (a fault of the set-up is there from the start, well
    before a rule can see it). `seeds`: re-seeded pairs per finding (1: the exact fork).
    `last`: the evaluations compared (None: the last third)."""
    from rltrain.utils.diagnostics.report import findings

    given = {"--steps": steps, "--seeds": seeds, "--last": 1 if last is None else last}
    for name, value in given.items():
        if value < 1:
            raise UserError(f"{name} must be at least 1 (got {value})")
    candidates = [f for f in findings(folder) if f["suggested_set"]][:top]
    kept = step_checkpoints(_checkpoint_dir(folder))
    if not kept:
        raise UserError(f"run '{folder.name}' has no checkpoint to fork from "
                        f"({_checkpoint_dir(folder)}): --verify needs one")
    if before is not None and kept[0][0] > before:
        raise UserError(f"--fork-step {before}: run '{folder.name}' keeps no checkpoint at "
                        f"or before it (the oldest is step {kept[0][0]}); choose a later "
                        f"--fork-step, or train with a larger keep_checkpoints")
    results = [_verify_finding(folder, f, steps, seeds, before, last) for f in candidates]
    atomic_write(folder / VERIFY_FILE, lambda f: f.write(to_json(results).encode()),
                 durable=False)
    return results


def summary_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per verified finding, for the terminal."""
    if not results:
        return ["verify: no finding proposes a config change; nothing to try"]
    return [_summary(r) for r in results]


def _summary(r: dict[str, Any]) -> str:
    fix, base = r["branches"]["fix"], r["branches"]["control"]
    change = " ".join(f"{k}={v}" for k, v in r["suggested_set"].items())
    steps = r["compared_steps"]
    where = (f"last {len(steps)} of {r['evaluations']} evaluations (step "
             f"{', '.join(map(str, steps))})")
    if r["difference"] is None:
        numbers = "no evaluations after the fork to compare"
    elif len(r["pairs"]) == 1:
        numbers = (f"{where}: fix {fix['mean']:.1f} vs control {base['mean']:.1f}, "
                   f"difference {r['difference']:+.1f}")
    else:
        each = ", ".join(f"{p['difference']:+.1f}" for p in r["pairs"])
        numbers = (f"{where}: {len(r['pairs'])} re-seeded pairs, differences {each}; "
                   f"mean {r['difference']:+.1f}")
    if r["interval"] is not None:
        numbers += f" [{r['interval'][0]:+.1f}, {r['interval'][1]:+.1f}]"
    runs = ", ".join(p["branches"][k]["run"] for p in r["pairs"] for k in ("fix", "control"))
    return (f"verify {r['rule']} ({change}) from step {r['fork_step']} for {r['steps']} "
            f"steps, {numbers}: {r['verdict']} (runs {runs})")
