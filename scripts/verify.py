"""`rltrain diagnose RUN --verify`: a finding's proposed fix, tried as a controlled experiment.

For each of the top findings that propose a config change (`suggested_set`), the run is
forked twice from the newest checkpoint at or before the step the finding was first
seen (else the newest): one branch with the change, one without. Both are ordinary
forks (`rltrain resume --checkpoint C --run-name NEW --set ...`), so they show in
`rltrain status` and TensorBoard; they run at once, sharing the cores (torch_threads),
for the same env steps, evaluate at the same steps with the same evaluation seeds, and
train through warnings (safe_mode off). The evaluation episodes after the fork are
compared: the difference of the mean returns (fix - control) with a 95% bootstrap
interval over the episodes, and a verdict: confirmed (the interval lies above 0),
not confirmed (it lies below a gain of `MARGIN` of the control's magnitude) or
inconclusive. The verdicts go to <run folder>/verify.json, which `diagnose --json` and
report.html include.

Re-seeded pairs (--seeds K > 1) would need forks with a new seed; a fork keeps the
checkpoint's seed (its random streams are restored with it), so K > 1 is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rltrain.utils.checkpoint import atomic_write, to_json
from rltrain.utils.diagnostics.report import VERIFY_FILE
from rltrain.utils.errors import UserError
from rltrain.utils.run_logger import read_jsonl
from rltrain.utils.runs import CONFIG_FILE, METRICS_FILE, STEP_CHECKPOINT

MARGIN = 0.05  # a gain below this share of the control's |mean return| is no gain
BOOTSTRAP = 2000
DEFAULT_STEPS = 5000
TOP = 3


def fork_point(checkpoint_dir: Path, first_step: int) -> tuple[int, Path] | None:
    """The newest step or paused checkpoint at or before `first_step`, else the newest."""
    found = sorted((int(m.group(1)), p) for p in checkpoint_dir.glob("*.pt")
                   if (m := STEP_CHECKPOINT.match(p.name)))
    before = [c for c in found if c[0] <= first_step]
    return (before or found or [None])[-1]


def difference(fix: list[float], base: list[float], seed: int = 0) -> dict[str, float]:
    """Mean(fix) - mean(base) and its 95% bootstrap interval over the episodes."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(fix, float), np.asarray(base, float)
    draws = (rng.choice(a, (BOOTSTRAP, a.size)).mean(1)
             - rng.choice(b, (BOOTSTRAP, b.size)).mean(1))
    low, high = np.percentile(draws, [2.5, 97.5])
    return {"difference": float(a.mean() - b.mean()), "low": float(low), "high": float(high)}


def verdict(diff: dict[str, float], base_mean: float) -> str:
    if diff["low"] > 0:
        return "confirmed"
    if diff["high"] < MARGIN * max(abs(base_mean), 1e-9):
        return "not confirmed"
    return "inconclusive"


def _checkpoint_dir(folder: Path) -> Path:
    from rltrain.utils.config_loader import config_from_dict, read_yaml_mapping

    config = config_from_dict(read_yaml_mapping(folder / CONFIG_FILE))
    return Path(config.checkpoint_dir) / folder.name


def _free_name(log_parent: Path, stem: str) -> str:
    n = 1
    while (log_parent / f"{stem}-{n}").exists():
        n += 1
    return f"{stem}-{n}"


def _launch(folder: Path, checkpoint: Path, name: str, changes: dict[str, Any],
            until: int, threads: int, eval_every: int) -> subprocess.Popen:
    """A fork beside the run (its log and checkpoint folders' parents)."""
    from rltrain.scripts.api import override_strings

    sets = override_strings({**changes, "max_timesteps": until, "torch_threads": threads,
                             "safe_mode": False, "eval_freq": eval_every,
                             "log_dir": str(folder.parent),
                             "checkpoint_dir": str(checkpoint.parent.parent)})
    command = [sys.executable, "-c", "from rltrain.scripts import main; main()", "resume",
               "--checkpoint", str(checkpoint), "--run-name", name]
    for item in sets:
        command += ["--set", item]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _branch_returns(log_dir: Path, after: int) -> list[float]:
    """Every evaluation episode's return after the fork step."""
    return [float(r) for m in read_jsonl(log_dir / METRICS_FILE)
            if m["kind"] == "eval" and m["env_steps"] > after for r in m["returns"]]


def _run_pair(folder: Path, finding: dict[str, Any], steps: int,
              before: int | None = None) -> dict[str, Any]:
    first = finding["first_step"] if before is None else min(before, finding["first_step"])
    point = fork_point(_checkpoint_dir(folder), first)
    assert point is not None  # checked by verify()
    step, checkpoint = point
    threads = max(1, (os.cpu_count() or 2) // 2)
    eval_every = max(1, steps // 4)
    stem = f"{folder.name}-verify-{finding['rule']}"
    names = {"fix": _free_name(folder.parent, f"{stem}-fix"),
             "control": _free_name(folder.parent, f"{stem}-control")}
    procs = {kind: _launch(folder, checkpoint, name, finding["suggested_set"] if kind == "fix"
                           else {}, step + steps, threads, eval_every)
             for kind, name in names.items()}
    branches: dict[str, Any] = {}
    for kind, proc in procs.items():
        _, err = proc.communicate()
        returns = _branch_returns(folder.parent / names[kind], step)
        branches[kind] = {"run": names[kind], "exit_code": proc.returncode,
                          "returns": returns,
                          "mean": float(np.mean(returns)) if returns else None,
                          "error": err.strip().splitlines()[-1] if proc.returncode not in
                          (0, 3) and err.strip() else None}
    return _judged(finding, step, checkpoint, steps, branches)


def _judged(finding: dict[str, Any], step: int, checkpoint: Path, steps: int,
            branches: dict[str, Any]) -> dict[str, Any]:
    result = {"rule": finding["rule"], "first_step": finding["first_step"],
              "suggested_set": finding["suggested_set"], "checkpoint": str(checkpoint),
              "fork_step": step, "steps": steps, "branches": branches,
              "difference": None, "interval": None, "verdict": "inconclusive"}
    fix, base = branches["fix"]["returns"], branches["control"]["returns"]
    if fix and base:
        diff = difference(fix, base)
        result.update(difference=diff["difference"], interval=[diff["low"], diff["high"]],
                      verdict=verdict(diff, branches["control"]["mean"]))
    return result


def verify(folder: Path, steps: int = DEFAULT_STEPS, seeds: int = 1, top: int = TOP,
           before: int | None = None) -> list[dict[str, Any]]:
    """Try the top findings' proposed changes; writes and returns the verdicts. `before`:
    fork at or before this step (a fault of the set-up is there from the start, well
    before a rule can see it)."""
    from rltrain.utils.diagnostics.report import findings

    if seeds != 1:
        raise UserError("--seeds K > 1 needs re-seeded forks, and a fork keeps its "
                        "checkpoint's seed (the random streams are restored with the "
                        "weights): use --seeds 1, or train K runs with other seeds and "
                        "diagnose each")
    if steps < 1:
        raise UserError("--steps must be at least 1")
    candidates = [f for f in findings(folder) if f["suggested_set"]][:top]
    if fork_point(_checkpoint_dir(folder), 0) is None:
        raise UserError(f"run '{folder.name}' has no checkpoint to fork from "
                        f"({_checkpoint_dir(folder)}): --verify needs one")
    results = [_run_pair(folder, f, steps, before) for f in candidates]
    atomic_write(folder / VERIFY_FILE, lambda f: f.write(to_json(results).encode()),
                 durable=False)
    return results


def summary_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per verified finding, for the terminal."""
    if not results:
        return ["verify: no finding proposes a config change; nothing to try"]
    lines = []
    for r in results:
        fix, base = r["branches"]["fix"], r["branches"]["control"]
        change = " ".join(f"{k}={v}" for k, v in r["suggested_set"].items())
        numbers = ("no evaluations after the fork" if r["difference"] is None else
                   f"fix {fix['mean']:.1f} vs control {base['mean']:.1f}, difference "
                   f"{r['difference']:+.1f} [{r['interval'][0]:+.1f}, {r['interval'][1]:+.1f}]")
        lines.append(f"verify {r['rule']} ({change}) from step {r['fork_step']} for "
                     f"{r['steps']} steps: {numbers}: {r['verdict']} (runs {fix['run']}, "
                     f"{base['run']})")
    return lines
