"""`rltrain diagnose`'s table: a run's findings (findings.py's document) printed on the
terminal, as a table where it is wide enough, else one block per finding; then the
reward's terms and the rules that could not judge yet."""

from __future__ import annotations

from typing import Any

from rltrain.utils.diagnosis.report import evidence
from rltrain.utils.diagnosis.report.findings import RULES, problems
from rltrain.utils.errors import printable

WIDE_TABLE = 120  # terminal columns from which the findings are printed as a table


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
    waiting += not_judged_lines(report)
    # The reward's terms, where the env reports them, before the rules that did not judge.
    waiting = reward_terms_lines(report.get("reward_terms")) + waiting
    for line in cause_lines(report):
        console.print(Text(line))
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
                      Text(f"{f['message']}{symptom_note(f)}\nhypothesis: {hypothesis}\n"
                           f"check: {check}"))
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
                           f"{shown}\n  {f['message']}{symptom_note(f)}\n  hypothesis: "
                           f"{hypothesis}\n  check: {check}"))


def cause_lines(report: dict[str, Any]) -> list[str]:
    """The report's first lines: the most likely cause, its evidence in one line, the
    change to try, and what else it explains (none where nothing is wrong)."""
    cause = report.get("most_likely_cause")
    if cause is None:
        return []
    change = (" ".join(f"--set {k}={_value(v)}" for k, v in cause["change"].items())
              if cause["change"] else "no config change: the env or the code (see below)")
    lines = [f"most likely cause: {cause['rule']} ({cause['severity']} at step "
             f"{cause['step']}): {cause['evidence']}", f"  change to try: {change}"]
    if cause["explains"]:
        lines.append("  it also explains: " + ", ".join(cause["explains"]))
    return lines


def symptom_note(finding: dict[str, Any]) -> str:
    """For a finding that another explains: which, and the change it proposed that its
    cause contradicts (withdrawn)."""
    causes = finding.get("caused_by") or []
    if not causes:
        return ""
    note = f"\nset off by: {', '.join(causes)}"
    withdrawn = finding.get("withdrawn_set")
    if withdrawn:
        note += (" (its change " + " ".join(f"{k}={_value(v)}" for k, v in withdrawn.items())
                 + " is withdrawn: the cause proposes otherwise)")
    return note


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return evidence.number(value)


def seen_at(finding: dict[str, Any]) -> str:
    """"1000" once, "1000-12000 (963x)" for a finding seen again and again."""
    if finding["count"] == 1:
        return str(finding["step"])
    return f"{finding['first_step']}-{finding['step']} ({finding['count']}x)"


def unjudged_lines(report: dict[str, Any]) -> list[str]:
    """`rule: why` per rule that could not judge, for the table and the page."""
    return [f"{rule}: {why}" for rule, why in sorted(report.get("unjudged", {}).items())]


def not_judged_lines(report: dict[str, Any]) -> list[str]:
    """The rules that do not judge this run's algorithm, in one line (none: no lines)."""
    other = report.get("not_judged_for") or {}
    if not other.get("rules"):
        return []
    return [f"not judged for algo {other['algo']} ({other['family']}): "
            f"{', '.join(other['rules'])}"]


def reward_terms_lines(record: dict[str, Any] | None) -> list[str]:
    """The newest statistics of the reward's terms (flow1.jsonl's "reward_terms" line) as
    a text table, for the table and the page; none recorded: no lines."""
    if not record or not record.get("terms"):
        return []
    drive = record.get("drive")
    lines = [f"reward terms over the last {record['episodes']} episodes (per episode; "
             "* drives learning):",
             f"  {'term':<26} {'share':>6} {'mean':>10} {'std':>10} {'corr':>6}"]
    for name, s in sorted(record["terms"].items(), key=lambda kv: -kv[1]["share"]):
        corr = "-" if s["corr"] is None else f"{s['corr']:.2f}"
        shown = f"{name} *" if name == drive else name
        lines.append(f"  {shown:<26} {s['share']:>6.1%} {s['mean']:>10.4g} {s['std']:>10.4g} "
                     f"{corr:>6}")
    return lines
