"""`diagnose --verify`'s plan: which findings' changes are tried (`proposing`, `distinct`)
and what both branches evaluate on (`evaluated_on`), where each finding's branches start
(from the start for a fault of the set-up, else from a checkpoint before it), their seeds
and names, and what the experiment will cost; scripts/verify/verify.py runs and judges
it (its docstring says why the branches start where they do).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import to_json
from rltrain.utils.run.folders import CONFIG_FILE, METRICS_FILE, STEP_CHECKPOINT
from rltrain.utils.run.log_files import read_jsonl, resume_keys
from rltrain.utils.seeding import FORKS, derive_seed

DEFAULT_STEPS = 5000  # per fork branch, unless --steps


def step_checkpoints(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    """The run's step and paused checkpoints, (env steps, path), oldest first."""
    return sorted((int(m.group(1)), p) for p in checkpoint_dir.glob("*.pt")
                  if (m := STEP_CHECKPOINT.match(p.name)))

def fork_point(checkpoint_dir: Path, first_step: int) -> tuple[int, Path] | None:
    """The newest step or paused checkpoint at or before `first_step`, else the newest."""
    found = step_checkpoints(checkpoint_dir)
    before = [c for c in found if c[0] <= first_step]
    return (before or found or [None])[-1]

def run_config(folder: Path) -> Any:
    from rltrain.utils.config.loader import config_from_dict, read_yaml_mapping

    return config_from_dict(read_yaml_mapping(folder / CONFIG_FILE))

def checkpoint_dir(folder: Path) -> Path:
    return Path(run_config(folder).checkpoint_dir) / folder.name

def free_name(log_parent: Path, stem: str) -> str:
    n = 1
    while (log_parent / f"{stem}-{n}").exists():
        n += 1
    return f"{stem}-{n}"

def start_point(folder: Path, finding: dict[str, Any], before: int | None,
                from_start: bool = False) -> tuple[tuple[int, Path | None], str]:
    """Where the branches start, and why: (0, None) from the start; (step, checkpoint) a
    fork. `before`: --fork-step (a fork at or before it); `from_start`: --from-start."""
    if from_start:
        return (0, None), "from the start: --from-start"
    if before is None:
        changed = _changed_on_resume(folder, set(finding["suggested_set"]),
                                     finding["first_step"])
        if changed is None:
            return (0, None), ("from the start: the fault is in the set-up ("
                               f"{', '.join(sorted(finding['suggested_set']))} had its value "
                               "from step 0)")
        first, why = finding["first_step"], (
            f"from the newest checkpoint before step {finding['first_step']}: a resume at "
            f"step {changed} set the value the finding changes")
    else:
        first, why = min(before, finding["first_step"]), f"from --fork-step {before}"
    fork = fork_point(checkpoint_dir(folder), first)
    if fork is None:
        raise UserError(f"run '{folder.name}' has no checkpoint to fork from "
                        f"({checkpoint_dir(folder)}): --verify needs one, or --from-start")
    return fork, why

def _changed_on_resume(folder: Path, keys: set[str], first_step: int) -> int | None:
    """The newest resume step at or before `first_step` whose --set changed one of `keys`
    (None: none did, they kept their value from step 0)."""
    from rltrain.utils.run.folders import EVENTS_FILE

    steps = [int(e["env_steps"]) for e in read_jsonl(folder / EVENTS_FILE)
             if e.get("rule") == "resume" and int(e["env_steps"]) <= first_step
             and resume_keys(e) & keys]
    return max(steps) if steps else None

def plan_finding(folder: Path, finding: dict[str, Any], steps: int | None, seeds: int,
          before: int | None, from_start: bool) -> dict[str, Any]:
    """One finding's experiment: where it starts, its pairs' seeds and branch names."""
    start, why = start_point(folder, finding, before, from_start)
    length = steps if steps is not None else (
        DEFAULT_STEPS if start[1] is not None else _from_start_steps(folder))
    run_seed = run_config(folder).seed
    stem = f"{folder.name}-verify-{finding['rule']}"
    exact = seeds == 1 and start[1] is not None  # the exact fork: the run's own streams
    pairs = [{"seed": None if exact else derive_seed(run_seed, FORKS, k),
              "names": {kind: free_name(folder.parent, f"{stem}{'' if exact else f'-pair{k}'}"
                                                        f"-{kind}")
                        for kind in ("fix", "control")}} for k in range(seeds)]
    return {"finding": finding, "start": start, "why": why, "steps": length, "pairs": pairs}

def _from_start_steps(folder: Path) -> int:
    """Branches from the start train as long as the run did (its newest metrics line),
    but at least DEFAULT_STEPS past the random warm-up, as far as the run's own
    max_timesteps: a run that paused early (a critic exploding in its first updates)
    would otherwise give branches that end in their warm-up, alike whatever the change."""
    config = run_config(folder)
    made = max([int(m["env_steps"]) for m in read_jsonl(folder / METRICS_FILE)] or [0])
    return min(config.max_timesteps, max(made, config.learning_starts + DEFAULT_STEPS))

def _speed(folder: Path) -> float | None:
    """The run's own env steps per second once it updated (its metrics lines' times after
    the random warm-up, which steps far faster), if they say."""
    warmup = run_config(folder).learning_starts
    lines = [m for m in read_jsonl(folder / METRICS_FILE)
             if "time" in m and m["env_steps"] > warmup]
    if len(lines) < 2 or lines[-1]["time"] <= lines[0]["time"]:
        return None
    return (lines[-1]["env_steps"] - lines[0]["env_steps"]) / (lines[-1]["time"]
                                                               - lines[0]["time"])

def cost_line(folder: Path, plans: list[dict[str, Any]], jobs: int) -> str:
    """What the experiment costs, said before it starts."""
    total = sum(2 * len(p["pairs"]) * p["steps"] for p in plans)
    parts = ", ".join(f"{p['finding']['rule']}: {len(p['pairs'])} seed(s) x 2 branches x "
                      f"{p['steps']:,} env steps {p['why'].split(':')[0]}" for p in plans)
    speed = _speed(folder)
    cores = max(1, min(jobs, os.cpu_count() or 1))
    when = (f"; about {total / (speed * cores) / 60:.0f} min at this run's "
            f"{speed:.0f} env steps/s, {jobs} branch(es) at once" if speed else "")
    return f"verify: {total:,} env steps in all ({parts}){when}"

def distinct(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per proposed change: two rules that propose the same change (a dead
    actor is both stalled and too fast) are one experiment, under the first's name."""
    kept: dict[str, dict[str, Any]] = {}
    for finding in found:
        change = to_json(finding["suggested_set"])
        if change in kept:
            kept[change].setdefault("also", []).append(finding["rule"])
        else:
            kept[change] = dict(finding)
    return list(kept.values())


def evaluated_on(change: dict[str, Any]) -> dict[str, Any]:
    """What both branches of `change` evaluate on, beyond the run's own env: a change to
    `env_kwargs` (a reward term's weight, the time limit) changes what a return
    measures, so both are evaluated on the env as the change makes it, the task as the
    finding says it should be (`eval_env_kwargs`); {} for any other change."""
    return {f"eval_{key}": value for key, value in change.items()
            if key == "env_kwargs" or key.startswith("env_kwargs.")}


def proposing(finding: dict[str, Any]) -> dict[str, Any] | None:
    """The finding with the change verify tries: its own `suggested_set`; where its
    latest event proposes none, the newest one its rule did propose (`last_proposal`: a
    rule that fires for two reasons); None where there is none, or the ranking withdrew
    the finding's proposal for contradicting its cause's."""
    if finding["suggested_set"]:
        return finding
    earlier = finding.get("last_proposal")
    if earlier is None or finding.get("withdrawn_set"):
        return None
    return {**finding, "suggested_set": dict(earlier["suggested_set"]),
            "proposed_at": earlier["step"]}
