"""`rltrain diagnose`: a run's findings as a table and a JSON document (the HTML page is
report_page.py's).

Everything is read from the run's files (events.jsonl, metrics.jsonl, flow1.jsonl,
heatmaps/), so a live run and a finished one are read the same way. Findings are the
events of the named rules (see `rules.RULES`), the latest one per rule and severity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rltrain.utils.config.loader import read_yaml_mapping
from rltrain.utils.diagnostics import evidence, reward_terms
from rltrain.utils.diagnostics.rules import RULES, SEVERITY
from rltrain.utils.errors import ConfigError, printable
from rltrain.utils.rules.registry import cause_rank
from rltrain.utils.run.folders import CONFIG_FILE, DIAGNOSTICS_FILE, EVENTS_FILE
from rltrain.utils.run.logger import read_jsonl

ORDER = {"pause": 0, "warning": 1, "info": 2}
VERIFY_FILE = "verify.json"  # the verdicts of `diagnose --verify` (scripts/verify.py)
WIDE_TABLE = 120  # terminal columns from which the findings are printed as a table


def findings(log_dir: Path) -> list[dict[str, Any]]:
    """The latest finding per (rule, severity) with the step it was first seen at and how
    often it was seen; warnings and pauses before notes, and among them causes first
    (rules/registry.py `cause_rank`: a learning rate or a reward scale before the
    explosions they set off), then the most severe, then in the order they first
    appeared. A pause that the run was resumed from says so
    in its message, with the changes made on resume."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for event in read_jsonl(log_dir / EVENTS_FILE):
        rule, action = event.get("rule"), event.get("action")
        if action == "resume":
            changes = ", ".join(event.get("value") or []) or "no changes"
            for finding in latest.values():
                if finding["severity"] == "pause" and "; resumed at step" not in finding["message"]:
                    finding["message"] += f"; resumed at step {event['env_steps']} ({changes})"
            continue
        if rule not in RULES or action not in SEVERITY:
            continue
        severity = SEVERITY[action]
        earlier = latest.get((rule, severity), {"first_step": event["env_steps"], "count": 0})
        latest[(rule, severity)] = {"rule": rule, "step": event["env_steps"],
                                    "first_step": earlier["first_step"],
                                    "count": earlier["count"] + 1 + event.get("held_back", 0),
                                    "evidence": event.get("value"), "severity": severity,
                                    "message": printable(str(event.get("message", ""))),
                                    "suggested_set": dict(event.get("suggested_set") or {})}
    return sorted(latest.values(), key=_rank)


def _rank(finding: dict[str, Any]) -> tuple[bool, int, int, int, str]:
    """Warnings and pauses before notes; among them causes first, then the most severe,
    then in the order they first appeared."""
    return (finding["severity"] == "info", cause_rank(finding["rule"]),
            ORDER[finding["severity"]], finding["first_step"], finding["rule"])


def reward_drops(log_dir: Path) -> dict[str, Any] | None:
    """The return drops the run detected (flow1.jsonl), as one info finding."""
    drops = [d for d in read_jsonl(log_dir / DIAGNOSTICS_FILE) if d["kind"] == "reward_drop"]
    if not drops:
        return None
    return {"rule": "reward_drop", "step": drops[-1]["env_steps"], "suggested_set": {},
            "first_step": drops[0]["env_steps"], "count": len(drops),
            "evidence": [d["env_steps"] for d in drops][-10:], "severity": "info",
            "message": printable(str(drops[-1].get("reason")))}


def diagnose(log_dir: Path) -> dict[str, Any]:
    """The JSON document of `rltrain diagnose --json`. `diagnostics_enabled`: whether the
    run had its flow-1 diagnostics on (off, only the health rules can have findings)."""
    found = findings(log_dir)
    drops = reward_drops(log_dir)
    if drops is not None:
        found = sorted([*found, drops], key=_rank)
    return {"run": log_dir.name, "findings": found,
            "diagnostics_enabled": _diagnostics_enabled(log_dir),
            "unjudged": unjudged(log_dir), "verifications": verifications(log_dir),
            "reward_terms": latest_terms(log_dir)}


def latest_terms(log_dir: Path) -> dict[str, Any] | None:
    """The newest statistics of the reward's terms (flow1.jsonl; none: None): the window's
    episodes, the driving term and per term its share, mean, std and correlation."""
    lines = [d for d in read_jsonl(log_dir / DIAGNOSTICS_FILE) if d["kind"] == "reward_terms"]
    if not lines:
        return None
    return {k: lines[-1][k] for k in ("env_steps", "episodes", "drive", "terms")}


def unjudged(log_dir: Path) -> dict[str, str]:
    """The rules that had too little data to judge the run when it last stopped, and
    why (flow1.jsonl's newest "unjudged" line; none written: {})."""
    lines = [d for d in read_jsonl(log_dir / DIAGNOSTICS_FILE) if d["kind"] == "unjudged"]
    return dict(lines[-1]["rules"]) if lines else {}


def unjudged_lines(report: dict[str, Any]) -> list[str]:
    """`rule: why` per rule that could not judge, for the table and the page."""
    return [f"{rule}: {why}" for rule, why in sorted(report.get("unjudged", {}).items())]


def verifications(log_dir: Path) -> list[dict[str, Any]]:
    """The verdicts of the newest `diagnose --verify` of this run (none: [])."""
    try:
        return list(json.loads((log_dir / VERIFY_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return []


def problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings that are warnings or pauses (info notes are not problems)."""
    return [f for f in report["findings"] if f["severity"] != "info"]


def _diagnostics_enabled(log_dir: Path) -> bool:
    """From the run's resolved config.yaml (True if it cannot be read: the default)."""
    try:
        return bool(read_yaml_mapping(log_dir / CONFIG_FILE)["diagnostics"]["enabled"])
    except (ConfigError, KeyError, TypeError):
        return True


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(soft_wrap=False)
    if not report["diagnostics_enabled"]:
        console.print(Text(f"run {report['run']}: the diagnostics were off in this run "
                           "(diagnostics.enabled: false); only the health rules were checked"))
    waiting = unjudged_lines(report)
    judged = " by the rules that could judge it" if waiting else ""
    if waiting:  # printed last: after the findings, or after "no problems found"
        waiting = ["not judged (too little data so far):", *(f"  {w}" for w in waiting)]
    # The reward's terms, where the env reports them, before the rules that did not judge.
    waiting = reward_terms.table_lines(report.get("reward_terms")) + waiting
    if not problems(report):
        console.print(Text(f"run {report['run']}: no problems found{judged}"))
        if not report["findings"]:
            for line in waiting:
                console.print(Text(line))
            return
        console.print(Text("notes (info, not problems):"))
    if console.width < WIDE_TABLE:  # five columns would wrap a word per line
        _print_blocks(console, report)
        for line in waiting:
            console.print(Text(line))
        return
    table = Table(title=f"findings for run {report['run']}", show_lines=True)
    for column in ("severity", "rule", "steps", "evidence", "finding / hypothesis / check"):
        table.add_column(column, overflow="fold")
    for f in report["findings"]:
        hypothesis, check = RULES[f["rule"]]
        table.add_row(Text(f["severity"]), Text(f["rule"]), Text(seen_at(f)),
                      Text(printable(evidence.text(f["evidence"]))),
                      Text(f"{f['message']}\nhypothesis: {hypothesis}\ncheck: {check}"))
    console.print(table)
    for line in waiting:
        console.print(Text(line))


def _print_blocks(console: Any, report: dict[str, Any]) -> None:
    """The findings one after another, for a terminal too narrow for the table."""
    from rich.text import Text

    console.print(Text(f"findings for run {report['run']}"))
    for f in report["findings"]:
        hypothesis, check = RULES[f["rule"]]
        shown = printable(evidence.text(f["evidence"])).replace("\n", "\n    ")
        console.print(Text(f"\n[{f['severity']}] {f['rule']}, steps {seen_at(f)}, evidence "
                           f"{shown}\n  {f['message']}\n  hypothesis: "
                           f"{hypothesis}\n  check: {check}"))


def seen_at(finding: dict[str, Any]) -> str:
    """"1000" once, "1000-12000 (963x)" for a finding seen again and again."""
    if finding["count"] == 1:
        return str(finding["step"])
    return f"{finding['first_step']}-{finding['step']} ({finding['count']}x)"
