"""`rltrain diagnose`: a run's findings, read from its files into one JSON document (the
table is table.py's, the HTML page page.py's).

Everything is read from the run's files (events.jsonl, metrics.jsonl, flow1.jsonl,
heatmaps/), so a live run and a finished one are read the same way. Findings are the
events of the named rules (`RULES`), the latest one per rule and severity, in the order
of ranking.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rltrain.utils.config.loader import read_yaml_mapping
from rltrain.utils.diagnosis.ranking import finding_rank, link, most_likely_cause
from rltrain.utils.diagnosis.report import evidence
from rltrain.utils.diagnosis.rules.registry import all_specs
from rltrain.utils.errors import ConfigError, printable
from rltrain.utils.run.folders import CONFIG_FILE, DIAGNOSTICS_FILE, EVENTS_FILE
from rltrain.utils.run.log_files import read_jsonl, resume_keys

# Every rule rltrain can report -> (hypothesis, suggested check), as `diagnose` shows them
# (each rule declares both in its spec, rules/). Each hypothesis is falsifiable: "if X,
# then Y should be observable". The names are part of the JSON output that users script
# against: never rename one.
RULES: dict[str, tuple[str, str]] = {name: (spec.hypothesis, spec.check)
                                     for name, spec in all_specs().items()}

# events.jsonl's action -> the finding's severity ("stop": stopped without a checkpoint).
SEVERITY = {"info": "info", "warn": "warning", "pause": "pause", "stop": "pause"}

VERIFY_FILE = "verify.json"  # the verdicts of `diagnose --verify` (scripts/verify/verify.py)


def findings(log_dir: Path) -> list[dict[str, Any]]:
    """The latest finding per (rule, severity) with the step it was first seen at, how
    often it was seen and its `last_proposal` (the step and `suggested_set` of the newest
    of its events that proposed a change, which a rule firing for two reasons may not
    repeat at its latest: `diagnose --verify` tries it); warnings and pauses before
    notes, and among them causes first (ranking.py: a learning rate or a reward scale
    before the explosions they set off), then the most severe, then in the order they
    first appeared. A pause that the run was resumed from says so in its message, with
    the changes made on resume."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for event in read_jsonl(log_dir / EVENTS_FILE):
        rule, action = event.get("rule"), event.get("action")
        if action == "resume":
            changes = ", ".join(event.get("value") or []) or "no changes"
            changed = resume_keys(event)
            for finding in latest.values():
                if finding["severity"] == "pause" and "; resumed at step" not in finding["message"]:
                    finding["message"] += f"; resumed at step {event['env_steps']} ({changes})"
                if changed & set(finding.get("last_proposal", {}).get("suggested_set", {})):
                    del finding["last_proposal"]  # the resume made that change: not again
            continue
        if rule not in RULES or action not in SEVERITY:
            continue
        severity = SEVERITY[action]
        earlier = latest.get((rule, severity), {"first_step": event["env_steps"], "count": 0})
        proposed = dict(event.get("suggested_set") or {})
        finding = {"rule": rule, "step": event["env_steps"], "first_step": earlier["first_step"],
                   "count": earlier["count"] + 1 + event.get("held_back", 0),
                   "evidence": event.get("value"), "severity": severity,
                   "message": printable(str(event.get("message", ""))),
                   "suggested_set": proposed}
        if proposed:
            finding["last_proposal"] = {"step": event["env_steps"],
                                        "suggested_set": dict(proposed)}
        elif "last_proposal" in earlier:
            finding["last_proposal"] = earlier["last_proposal"]
        latest[(rule, severity)] = finding
    return link(list(latest.values()))


def reward_drops(log_dir: Path) -> dict[str, Any] | None:
    """The return drops the run detected (flow1.jsonl), as one info finding."""
    drops = [d for d in read_jsonl(log_dir / DIAGNOSTICS_FILE) if d["kind"] == "reward_drop"]
    if not drops:
        return None
    return {"rule": "reward_drop", "step": drops[-1]["env_steps"], "suggested_set": {},
            "first_step": drops[0]["env_steps"], "count": len(drops),
            "evidence": [d["env_steps"] for d in drops][-10:], "severity": "info",
            "message": printable(str(drops[-1].get("reason"))), "caused_by": []}


def diagnose(log_dir: Path) -> dict[str, Any]:
    """The JSON document of `rltrain diagnose --json`. `diagnostics_enabled`: whether the
    run had its flow-1 diagnostics on (off, only the health rules can have findings)."""
    found = findings(log_dir)
    drops = reward_drops(log_dir)
    if drops is not None:
        found = sorted([*found, drops], key=finding_rank)
    return {"run": log_dir.name, "most_likely_cause": cause_line(found), "findings": found,
            "diagnostics_enabled": _diagnostics_enabled(log_dir),
            "unjudged": unjudged(log_dir), "not_judged_for": not_judged_for(log_dir),
            "verifications": verifications(log_dir),
            "reward_terms": latest_terms(log_dir)}


def cause_line(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most likely cause (ranking.py): its rule, severity and step, its evidence in
    one line, the change to try (its `suggested_set`, or none where the env or the code
    must change), what it explains, and its message; None where nothing is wrong."""
    cause = most_likely_cause(found)
    if cause is None:
        return None
    return {"rule": cause["rule"], "severity": cause["severity"], "step": cause["step"],
            "evidence": evidence.one_line(cause["evidence"]),
            "change": dict(cause["suggested_set"]),
            "explains": [f["rule"] for f in found if cause["rule"] in f.get("caused_by", [])],
            "message": cause["message"]}


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


def not_judged_for(log_dir: Path) -> dict[str, Any]:
    """The rules that do not judge runs of this run's algorithm ({"algo", "family",
    "rules"}, from flow1.jsonl's newest "unjudged" line; none, or a run written before
    it was recorded: {})."""
    lines = [d for d in read_jsonl(log_dir / DIAGNOSTICS_FILE) if d["kind"] == "unjudged"]
    return dict(lines[-1].get("not_for_algo") or {}) if lines else {}


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
