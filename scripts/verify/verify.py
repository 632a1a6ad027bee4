"""`rltrain diagnose RUN --verify`: a finding's proposed fix, tried as a controlled experiment.

For each of the top findings that propose a config change (`suggested_set`, or where
the finding's latest event proposes none, its rule's newest proposal), two
branches are trained, one with the change and one without, where the fault can be
undone:

- **from the start** when the fault is in the set-up: the keys the finding changes had
  their value from step 0 (no resume changed them before the finding). Both branches
  are fresh runs of the run's own config (`rltrain train --config <run>/config.yaml`),
  for as many env steps as the run made, at least DEFAULT_STEPS past its warm-up within
  its max_timesteps (or `--steps`). A fork from a checkpoint would
  start after the damage: an actor that a too-high learning rate already killed stays
  dead whatever the change.
- **from a checkpoint** when a resume set the faulty value (the fault appeared then), or
  `--fork-step` asks for it: the newest checkpoint at or before the step the finding was
  first seen (else the newest), forked with and without the change (`rltrain resume
  --checkpoint C --run-name NEW --set ...`).

A change to `env_kwargs` (a reward weight, a time limit) changes what a return
measures: both branches evaluate on the env as the change makes it (`evaluated_on`).

Branches are ordinary runs beside the original, so they show in `rltrain status` and
TensorBoard; they run `jobs` at a time, sharing the cores (torch_threads), for the same
env steps, evaluate at the same steps (EVALUATIONS times) with the same evaluation
seeds, and train through warnings (safe_mode off). What the experiment costs is printed
before it starts.

The branches are compared where they end up: the last `last` evaluations both reached
(default: the last third, at least one; scripts/verify/verify_stats.py says why), by the
difference of the mean returns (fix - control) with a 95% bootstrap interval over the
episodes, and a verdict: confirmed (the interval lies above 0), not confirmed (it lies
below a gain of `MARGIN` of the control's magnitude) or inconclusive.

Each of the K `seeds` pairs gives both its branches one seed, derived from the run's
seed and k: a fresh run starts from it; a fork continues the checkpoint and re-seeds
exploration noise, replay sampling, torch and the training episodes after the state is
loaded (`rltrain resume --fork-seed`, internal). A fork with K = 1 is the exact fork: both
branches continue the checkpoint's random streams. The difference is the mean of the
pairs' differences, its interval over pairs x episodes. Fork branches that end exactly
alike started after the damage: that is said, with what to run instead, never reported
as "no difference". The verdicts go to <run folder>/verify.json, which `diagnose --json`
and report.html include.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rltrain.scripts.verify.verify_plan import (
    DEFAULT_STEPS,
    checkpoint_dir,
    cost_line,
    distinct,
    evaluated_on,
    fork_point,
    plan_finding,
    proposing,
    run_config,
    start_point,
    step_checkpoints,
)
from rltrain.scripts.verify.verify_stats import (
    MARGIN,
    Evaluations,
    common_steps,
    compared_steps,
    difference,
    pooled_difference,
    returns_at,
    verdict,
)
from rltrain.utils.diagnosis.report.findings import VERIFY_FILE
from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import atomic_write, to_json
from rltrain.utils.run.folders import CONFIG_FILE, METRICS_FILE
from rltrain.utils.run.log_files import read_jsonl

__all__ = ["DEFAULT_STEPS", "MARGIN", "difference", "fork_point", "start_point", "verdict",
           "verify", "summary_lines"]

DEFAULT_SEEDS = 3
EVALUATIONS = 6  # per branch after the fork: the last third is then two
TOP = 3


def _command(folder: Path, start: tuple[int, Path | None], name: str,
             changes: dict[str, Any], until: int, eval_every: int, seed: int | None,
             threads: int) -> list[str]:
    """The rltrain command of one branch beside the run (its log and checkpoint folders'
    parents): a fresh run of the run's config from step 0 (`start` = (0, None)), or a
    fork of checkpoint `start[1]`, re-seeded with `seed` unless it is None."""
    from rltrain.utils.config.resolve import override_strings

    step, checkpoint = start
    sets = {**changes, "max_timesteps": until, "torch_threads": threads,
            "safe_mode": False, "eval_freq": eval_every, "log_dir": str(folder.parent),
            "checkpoint_dir": str(checkpoint_dir(folder).parent)}
    command = [sys.executable, "-c", "from rltrain.scripts import main; main()"]
    if checkpoint is None:
        command += ["train", "--config", str(folder / CONFIG_FILE), "--run-name", name]
        sets["seed"] = seed if seed is not None else run_config(folder).seed
    else:
        command += ["resume", "--checkpoint", str(checkpoint), "--run-name", name]
        command += ["--fork-seed", str(seed)] if seed is not None else []
    for item in override_strings(sets):
        command += ["--set", item]
    return command


def _evaluations(log_dir: Path, after: int) -> Evaluations:
    """Every evaluation after the fork step: (env steps, episode returns)."""
    return [(int(m["env_steps"]), [float(r) for r in m["returns"]])
            for m in read_jsonl(log_dir / METRICS_FILE)
            if m["kind"] == "eval" and m["env_steps"] > after]


def _run_branches(commands: list[list[str]], jobs: int) -> list[tuple[int, str]]:
    """Run the branches' commands, `jobs` at a time; (exit code, stderr) of each."""
    done: list[tuple[int, str] | None] = [None] * len(commands)
    running: dict[int, tuple[subprocess.Popen, Any]] = {}
    waiting = list(range(len(commands)))
    while waiting or running:
        while waiting and len(running) < jobs:
            i = waiting.pop(0)
            err = tempfile.TemporaryFile("w+")  # a file: a chatty branch never blocks
            running[i] = (subprocess.Popen(commands[i], stdout=subprocess.DEVNULL,
                                           stderr=err, text=True), err)
        for i, (proc, err) in list(running.items()):
            if proc.poll() is not None:
                err.seek(0)
                done[i] = (proc.returncode, err.read())
                err.close()
                del running[i]
        time.sleep(0.2)
    return [d for d in done if d is not None]


def _verify_plan(folder: Path, plan: dict[str, Any], last: int | None,
                 done: list[tuple[int, str]]) -> dict[str, Any]:
    """A finding's verdict from its finished branches (`done`: exit code and stderr of
    each, in the plan's order)."""
    step, checkpoint = plan["start"]
    pairs, outcomes = [], iter(done)
    for pair in plan["pairs"]:
        branches: dict[str, Any] = {}
        for kind in ("fix", "control"):
            code, err = next(outcomes)
            name = pair["names"][kind]
            evaluations = _evaluations(folder.parent / name, step)
            branches[kind] = {"run": name, "exit_code": code, "evaluations": evaluations,
                              "returns": [r for _, returns in evaluations for r in returns],
                              "error": err.strip().splitlines()[-1] if code not in (0, 3)
                              and err.strip() else None}
        pairs.append({"seed": pair["seed"], "branches": branches, "difference": None})
    finding = plan["finding"]
    result = {"rule": finding["rule"], "also": finding.get("also", []),
              "first_step": finding["first_step"], "suggested_set": finding["suggested_set"],
              "evaluated_on": evaluated_on(finding["suggested_set"]),
              "proposed_at": finding.get("proposed_at"),
              "checkpoint": None if checkpoint is None else str(checkpoint),
              "fork_step": step, "start": plan["why"], "steps": plan["steps"],
              "seeds": len(plan["pairs"])}
    judged = {**result, **_judged(pairs, last)}
    if checkpoint is not None and _alike(pairs):
        judged["verdict"] = "too late"
        judged["note"] = (f"both branches ended exactly alike from step {step}: the damage "
                          f"was done before the fork; rerun with rltrain diagnose "
                          f"{folder.name} --verify --from-start")
    return judged


def _alike(pairs: list[dict[str, Any]]) -> bool:
    """Every pair's fix and control branch evaluated to the same returns."""
    return all(p["branches"]["fix"]["returns"] == p["branches"]["control"]["returns"]
               and p["branches"]["fix"]["returns"] for p in pairs)


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


def verify(folder: Path, steps: int | None = None, seeds: int = DEFAULT_SEEDS,
           top: int = TOP, before: int | None = None, last: int | None = None,
           jobs: int | None = None, say: Any = None,
           from_start: bool = False, threads: int | None = None) -> list[dict[str, Any]]:
    """Try the top findings' proposed changes; writes and returns the verdicts. `steps`:
    per branch (None: from the start, as many as the run made, at least DEFAULT_STEPS
    past the warm-up within max_timesteps; DEFAULT_STEPS after a
    fork). `before`: fork at or before this step instead of choosing the start (module
    docstring). `seeds`: pairs per finding. `last`: the evaluations compared (None: the
    last third). `jobs`: branches at once (None: the cores). `say`: where the cost line
    goes before the branches start. `threads`: torch threads per branch (None: the cores
    divided by `jobs`; a caller running other trainings beside it gives fewer)."""
    from rltrain.utils.diagnosis.report.findings import findings

    given = {"--steps": 1 if steps is None else steps, "--seeds": seeds,
             "--last": 1 if last is None else last, "--jobs": 1 if jobs is None else jobs}
    for name, value in given.items():
        if value < 1:
            raise UserError(f"{name} must be at least 1 (got {value})")
    candidates = distinct([f for f in map(proposing, findings(folder)) if f is not None])[:top]
    kept = step_checkpoints(checkpoint_dir(folder))
    if before is not None and kept and kept[0][0] > before:
        raise UserError(f"--fork-step {before}: run '{folder.name}' keeps no checkpoint at "
                        f"or before it (the oldest is step {kept[0][0]}); choose a later "
                        f"--fork-step, or train with a larger keep_checkpoints")
    if from_start and before is not None:
        raise UserError("--from-start and --fork-step ask for two different starts: give one")
    plans = [plan_finding(folder, f, steps, seeds, before, from_start) for f in candidates]
    jobs = jobs if jobs is not None else max(2, os.cpu_count() or 2)
    if plans and say is not None:
        say(cost_line(folder, plans, jobs))
    if threads is None:  # the branches at once share the cores
        threads = max(1, (os.cpu_count() or 2) // jobs)
    commands = [_command(folder, p["start"], pair["names"][kind],
                         {**(p["finding"]["suggested_set"] if kind == "fix" else {}),
                          **evaluated_on(p["finding"]["suggested_set"])},
                         p["start"][0] + p["steps"], max(1, p["steps"] // EVALUATIONS),
                         pair["seed"], threads)
                for p in plans for pair in p["pairs"] for kind in ("fix", "control")]
    done = _run_branches(commands, jobs)
    results, at = [], 0
    for plan in plans:
        count = 2 * len(plan["pairs"])
        results.append(_verify_plan(folder, plan, last, done[at:at + count]))
        at += count
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
    if r.get("verdict") == "too late":
        return (f"verify {r['rule']} ({change}) from step {r['fork_step']}: too late: "
                f"{r['note']}")
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
    start = r.get("start") or f"from step {r['fork_step']}"
    return (f"verify {r['rule']} ({change}) {start.split(':')[0]} for {r['steps']} steps, "
            f"{numbers}: {r['verdict']} (runs {runs})")
