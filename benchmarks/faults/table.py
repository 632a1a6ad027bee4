"""The fault benchmark's judgement and table: per case whether a run named it, with the
right `suggested_set` key, when, its final evaluation against its healthy run's and
what `--verify` made of the proposed fix; in total recall, the right keys, false alarms
per healthy run, the median steps to detection and the fixes `--verify` confirmed.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.faults.cases import CASES, HALVES, HEALTHY, Case

# The first finding's step is also given as if each run had Pendulum's budget (6,000
# steps): a step times 6,000 over the run's own budget (10,000 on MountainCar, ...).
PENDULUM_STEPS = 6000
# A case is a real fault at its budget when it ends this far below its healthy run
REAL_DROP, REAL_MIN_DROP = 0.1, 10.0


def judge(case: Case, result: dict[str, Any]) -> dict[str, Any]:
    """Named, the right key, the first step, and whether `rltrain diagnose`'s most
    likely cause is one of the case's rules, for one case's run."""
    named = [f for f in result["findings"] if f["rule"] in case.rules]
    keyed = [f for f in named if right_key(case, f.get("suggested_set") or {})]
    cause = lead(result)
    return {"named": bool(named), "right_key": bool(keyed) if case.key else None,
            "first_step": min((f["env_steps"] for f in named), default=None),
            "lead": cause, "led": cause in case.rules}


def lead(result: dict[str, Any]) -> str | None:
    """The rule `rltrain diagnose` leads with (its most likely cause) for a run's
    warnings and pauses, as the report reads them: the latest per rule and severity,
    linked as cause and symptom (utils/diagnosis/ranking.py)."""
    from rltrain.utils.diagnosis.ranking import link, most_likely_cause

    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for f in result["findings"]:
        severity = "pause" if f["action"] == "pause" else "warning"
        first = latest.get((f["rule"], severity), {}).get("first_step", f["env_steps"])
        latest[(f["rule"], severity)] = {
            "rule": f["rule"], "severity": severity, "step": f["env_steps"],
            "first_step": first, "suggested_set": dict(f.get("suggested_set") or {})}
    cause = most_likely_cause(link(list(latest.values())))
    return None if cause is None else cause["rule"]


def right_key(case: Case, suggested: dict[str, Any]) -> bool:
    """Whether `suggested` holds the case's key (one of its `|` alternatives; a dotted
    key also nested) moved in its direction. Layer widths compare by their sum."""
    keys = case.key.split("|")
    # a key as it is, or nested (SB3's `normalize: {norm_reward: true}`)
    found = {k: suggested[k] if k in suggested else _dotted(suggested, k) for k in keys}
    chosen = next((k for k in keys if found[k] is not None), None)
    if chosen is None:
        return False
    if case.direction not in ("up", "down"):
        return True
    planted = {**case.sets, "env_kwargs": {**case.sets.get("env_kwargs", {}),
                                           **(case.env_fault or {})}}
    before = next((v for k in keys if (v := _dotted(planted, k)) is not None), None)
    if before is None:
        return True
    after, before = _size(found[chosen]), _size(before)
    return after > before if case.direction == "up" else after < before


def _size(value: Any) -> Any:
    return sum(value) if isinstance(value, (list, tuple)) else value


def _dotted(sets: dict[str, Any], key: str) -> Any:
    value: Any = sets
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def table(results: list[dict[str, Any]]) -> str:
    """The per-case table and the totals of each half of the split and of both; a run
    that could not run is left out of both and listed below them."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "error" not in r:
            by_name.setdefault(r["name"], []).append(r)
    failed = [f"{r['name']} seed {r['seed']}: {r['error']}" for r in results if "error" in r]
    lines = ["| case | half | family | named | right key | leads with | first step "
             "| final eval (healthy) | verify |", "|---|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        runs = by_name.get(case.id)
        if runs:
            lines.append(_row(case, runs, by_name))
    lines.append("")
    groups = sorted({group_of(name) for name in by_name})
    for group in (groups if len(groups) > 1 else []):
        for which in (*HALVES, None):
            lines.append(f"{group}, " + totals(by_name, which, group))
    for which in (*HALVES, None):
        lines.append(totals(by_name, which))
    if failed:
        lines.append("could not run: " + "; ".join(failed))
    return "\n".join(lines)


def _row(case: Case, runs: list[dict[str, Any]], by_name: dict[str, list]) -> str:
    verdicts = [judge(case, r) for r in runs]
    named = all(v["named"] for v in verdicts)
    key = "-" if not case.key else ("yes" if all(v["right_key"] for v in verdicts) else "no")
    first = ", ".join(str(v["first_step"]) for v in verdicts)
    ours = _mean(r["final_eval"] for r in runs)
    theirs = _mean(r["final_eval"] for r in by_name.get(case.healthy, []))
    leads = ", ".join(v["lead"] or "-" for v in verdicts)
    return (f"| {case.id} | {case.half} | {case.kind} | {'yes' if named else 'no'} | {key} | "
            f"{leads} | {first} | {_show(ours)} ({_show(theirs)}) | {verify_cell(runs)} |")


def group_of(name: str) -> str:
    """The algorithm families a case or healthy run belongs to: the actor-critic ones
    rltrain trains, or the PPO, A2C and DQN runs of SB3 it watches."""
    run = next((c.healthy for c in CASES if c.id == name), name)
    algo = next(h.algo for h in HEALTHY if h.id == run)
    return "PPO, A2C, DQN" if algo.startswith("sb3_") else "DDPG, TD3, SAC"


def totals(by_name: dict[str, list[dict[str, Any]]], which: str | None,
           group: str | None = None) -> str:
    """One half's totals (None: both), of one `group` of families (None: all): recall,
    right keys, false alarms on its healthy runs, the median step of detection and the
    fixes verify confirmed."""
    cases = [c for c in CASES if c.id in by_name and which in (None, c.half)
             and group in (None, group_of(c.id))]
    named, keyed, keyed_of, steps, led, scaled = 0, 0, 0, [], 0, []
    real = {"cases": 0, "named": 0, "keyed": 0, "keyed_of": 0}
    for case in cases:
        verdicts = [judge(case, r) for r in by_name[case.id]]
        scaled += [v["first_step"] * PENDULUM_STEPS / r["steps"]
                   for v, r in zip(verdicts, by_name[case.id], strict=True)
                   if v["first_step"] is not None and r.get("steps")]
        named += all(v["named"] for v in verdicts)
        led += all(v["led"] for v in verdicts)
        if case.key:
            keyed_of += 1
            keyed += all(v["right_key"] for v in verdicts)
        steps += [v["first_step"] for v in verdicts if v["first_step"] is not None]
        if real_fault(case, by_name[case.id], by_name.get(case.healthy, [])):
            real["cases"] += 1
            real["named"] += all(v["named"] for v in verdicts)
            real["keyed_of"] += bool(case.key)
            real["keyed"] += bool(case.key) and all(v["right_key"] for v in verdicts)
    healthy_runs = [r for h in HEALTHY if which in (None, h.half)
                    and group in (None, group_of(h.id)) for r in by_name.get(h.id, [])]
    alarms = sum(len(r["findings"]) for r in healthy_runs)
    return (f"{which or 'all'}: recall {named}/{len(cases)} named ({_share(named, len(cases))}); "
            f"right key {keyed}/{keyed_of} ({_share(keyed, keyed_of)}); led by a case's rule "
            f"{led}/{len(cases)}; false alarms: {alarms} "
            f"over {len(healthy_runs)} healthy runs ({_alarm_list(healthy_runs)}); median steps "
            f"to detection: {statistics.median(steps) if steps else '-'} "
            f"({_median(scaled)} at Pendulum's scale of {PENDULUM_STEPS:,}); "
            f"{verified_line([by_name.get(c.id, []) for c in cases])}; real faults (below "
            f"their healthy run by {REAL_DROP:.0%} and {REAL_MIN_DROP:g}, or paused below it): "
            f"named {real['named']}/{real['cases']} ({_share(real['named'], real['cases'])}), "
            f"right key {real['keyed']}/{real['keyed_of']} "
            f"({_share(real['keyed'], real['keyed_of'])})")


def real_fault(case: Case, runs: list[dict[str, Any]],
               healthy_runs: list[dict[str, Any]]) -> bool:
    """Whether a planted case cost return at its budget: its final evaluation (the mean
    over its seeds; a reward-scale fault's in the healthy env's units) below its healthy
    run's (the mean over its seeds) by more than `REAL_DROP` of that one's size and at
    least `REAL_MIN_DROP`, or a rule paused it below. Some planted cases end at or above
    their healthy run at these budgets."""
    fault = case.env_fault or {}
    scale = fault.get("factor", 1.0) if fault.get("fault") == "reward_scale" else 1.0
    mine = _mean(r["final_eval"] / scale for r in runs if r.get("final_eval") is not None)
    healthy = _mean(r.get("final_eval") for r in healthy_runs)
    if mine is None or healthy is None:
        return False
    paused = any(f["action"] == "pause" for r in runs for f in r["findings"])
    return (healthy - mine > max(REAL_DROP * abs(healthy), REAL_MIN_DROP)
            or (paused and mine < healthy))


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def verify_cell(runs: list[dict[str, Any]]) -> str:
    """What `--verify` made of the naming finding's fix, per seed: the verdict, the
    difference (fix - control) and its 95% interval; "-" where it did not run."""
    checked = [r.get("verify") for r in runs]
    if not any(checked):
        return "-"
    return "; ".join(_verdict(v) if v else "-" for v in checked)


def _verdict(v: dict[str, Any]) -> str:
    if v.get("error"):
        return f"error ({v['error']})"
    if v.get("difference") is None:
        return v["verdict"]
    low, high = v["interval"] or (None, None)
    interval = f" [{low:+.1f}, {high:+.1f}]" if low is not None else ""
    return f"{v['verdict']} {v['difference']:+.1f}{interval}"


def verified_line(cases: list[list[dict[str, Any]]]) -> str:
    """The total "verified: X/Y named fixes confirmed": of the cases whose fix `--verify`
    tried (Y), those every seed confirmed (X), and the env steps it trained for them."""
    tried = [[r["verify"] for r in runs if r.get("verify")] for runs in cases]
    tried = [checks for checks in tried if checks]
    if not tried:
        return "verified: -"
    confirmed = sum(all(v.get("verdict") == "confirmed" for v in checks) for checks in tried)
    cost = sum(v.get("env_steps", 0) for checks in tried for v in checks)
    return (f"verified: {confirmed}/{len(tried)} named fixes confirmed "
            f"({cost:,} env steps of verify branches)")


def _alarm_list(runs: list[dict[str, Any]]) -> str:
    found = [f"{r['name']} s{r.get('seed', 0)}: {f['rule']} at {f['env_steps']}"
             for r in runs for f in r["findings"]]
    return "; ".join(found) or "none"


def _mean(values: Any) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.mean(kept) if kept else None


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
