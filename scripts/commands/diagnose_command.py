"""`rltrain diagnose`: the findings of a run (live or not), its report page, and with
`--verify` a test of the proposed changes (scripts/verify/verify.py).

The findings come from the run's files (utils/diagnosis/report/); `--fail-on` turns
them into an exit code for scripts and CI.
"""

from __future__ import annotations

import sys

import click

from rltrain.scripts.commands.run_commands import LOG_DIR_HELP
from rltrain.utils.io.checkpoint import to_json
from rltrain.utils.run.folders import find_run_log_dir
from rltrain.utils.run.log_files import unreadable_note

EXIT_FINDINGS = 6  # `diagnose --fail-on`: a finding at least that severe


@click.command()
@click.argument("run")
@click.option("--log-dir", default="logs", show_default=True, help=LOG_DIR_HELP)
@click.option("--json", "as_json", is_flag=True,
              help='Print {"run": ..., "findings": [{"rule", "step", "evidence", "suggested_set", '
                   '"severity", "message"}]} instead of the table.')
@click.option("--fail-on", type=click.Choice(["pause", "warning", "info"]), default=None,
              help=f"Exit with code {EXIT_FINDINGS} when a finding is this severe or more "
                   "(pause > warning > info), after the report: for scripts and CI.")
@click.option("--verify", is_flag=True,
              help="Try the top findings' proposed changes: train the run with and without "
                   "the change (from the start for a fault of the set-up, else from a "
                   "checkpoint before the finding) over several seeds and compare them.")
@click.option("--steps", type=int, default=None,
              help="Env steps per --verify branch (default: from the start, as many as the "
                   "run made, at least 5000 past its warm-up within max_timesteps; 5000 "
                   "after a fork).")
@click.option("--seeds", default=3, show_default=True,
              help="--verify: branch pairs per finding, pair k seeded from the run's seed "
                   "and k (a fork with 1 is the exact fork).")
@click.option("--jobs", type=int, default=None,
              help="--verify branches trained at once (default: the CPU cores, at least 2).")
@click.option("--from-start", is_flag=True,
              help="--verify from the start (fresh runs), whatever the finding.")
@click.option("--last", type=int, default=None,
              help="--verify compares the last N evaluations after the fork (default: the "
                   "last third, at least 1).")
@click.option("--top", default=3, show_default=True,
              help="--verify tries this many findings (most severe, then earliest).")
@click.option("--fork-step", type=int, default=None,
              help="--verify forks from the newest checkpoint at or before this step.")
def diagnose(run: str, log_dir: str, as_json: bool, fail_on: str | None, verify: bool,
             steps: int | None, seeds: int, jobs: int | None, from_start: bool,
             last: int | None, top: int, fork_step: int | None) -> None:
    """Explain a run (live or not): the diagnostics' findings, hypotheses, checks, report.html.

    RUN is a run name under --log-dir, or a run folder. Writes <run folder>/report.html:
    learning curve, reward statistics, latest state-action heatmaps, gradient norms per
    layer, and the findings.
    """
    from rltrain.utils.diagnosis.ranking import SEVERITY_ORDER
    from rltrain.utils.diagnosis.report.findings import diagnose as read_findings
    from rltrain.utils.diagnosis.report.page import write_html
    from rltrain.utils.diagnosis.report.table import print_table

    folder = find_run_log_dir(run, log_dir)
    note = unreadable_note(folder)
    if note is not None:  # damaged lines, wrong types, stray files: read around
        click.echo(note, err=True)
    if verify:
        from rltrain.scripts.verify.verify import summary_lines
        from rltrain.scripts.verify.verify import verify as verify_run

        lines = summary_lines(verify_run(folder, steps, seeds, top, fork_step, last, jobs,
                                         lambda line: click.echo(line, err=True),
                                         from_start))
        if not as_json:
            click.echo("\n".join(lines))
    result = read_findings(folder)
    page = write_html(folder, result)
    if as_json:
        click.echo(to_json(result))
    else:
        print_table(result)
        click.echo(f"report: {page}")
    failing = [] if fail_on is None else [
        f for f in result["findings"]
        if SEVERITY_ORDER[f["severity"]] <= SEVERITY_ORDER[fail_on]]
    if failing:
        click.echo(f"{len(failing)} finding(s) at {fail_on} or more severe "
                   f"({', '.join(sorted({f['rule'] for f in failing}))})", err=True)
        sys.exit(EXIT_FINDINGS)
