"""`rltrain diagnose`'s HTML page: logs/<run>/report.html, one self-contained page of a
run's findings (findings.py's), what was not judged, the verdicts of `--verify`, the
reward terms, the charts and the latest state-action heatmaps, images inlined.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from rltrain.utils.diagnosis.report import evidence, plots
from rltrain.utils.diagnosis.report.findings import RULES, problems
from rltrain.utils.diagnosis.report.table import (
    cause_lines,
    not_judged_lines,
    reward_terms_lines,
    seen_at,
    symptom_note,
    unjudged_lines,
)
from rltrain.utils.io.checkpoint import atomic_write
from rltrain.utils.run.folders import DIAGNOSTICS_FILE, METRICS_FILE
from rltrain.utils.run.log_files import HEATMAP, eval_curve, number, read_jsonl

ZERO_GRADIENT = "zero gradient"  # the gradient chart's label for layers with none


def _unjudged_html(report: dict[str, Any]) -> list[str]:
    lines = unjudged_lines(report)
    other = [f"<p>{html.escape(line)}</p>" for line in not_judged_lines(report)]
    if not lines:
        return other
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return ["<p>Not judged (too little data so far):</p>", f"<ul>{items}</ul>", *other]


def write_html(log_dir: Path, report: dict[str, Any]) -> Path:
    """logs/<run>/report.html: one self-contained page (images inlined)."""
    metrics = read_jsonl(log_dir / METRICS_FILE)
    flow1 = read_jsonl(log_dir / DIAGNOSTICS_FILE)
    charts = [_learning_curve(metrics), _reward_chart(flow1), _gradient_chart(flow1)]
    heatmaps = sorted((p for p in (log_dir / "heatmaps").glob("heatmap_step_*.png")
                       if HEATMAP.match(p.name)),  # not a stray "... (copy).png"
                      key=lambda p: int(HEATMAP.match(p.name).group(1)))[-2:]
    parts = [f"<h1>rltrain diagnosis: {html.escape(report['run'])}</h1>",
             *_cause_html(report), "<h2>Findings</h2>", _findings_html(report),
             *_unjudged_html(report), *_verify_html(report), *_terms_html(report),
             "<h2>Charts</h2>"]
    parts += [f'<img alt="{html.escape(t)}" src="data:image/png;base64,{img}">'
              for t, img in charts if img]
    parts += _zero_gradient_html(flow1)
    parts.append("<h2>Latest state-action heatmaps</h2>")
    if heatmaps:
        parts.append("<p>Row #N is state cluster N, as the findings number the clusters "
                     "(its typical states: heatmaps/clusters_step_&lt;step&gt;.json).</p>")
    parts += [f'<p>{html.escape(p.name)}</p><img alt="{html.escape(p.name)}" '
              f'src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
              for p in heatmaps]
    if not heatmaps:
        parts.append("<p>none yet</p>")
    parts += _video_html(log_dir)
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>rltrain diagnosis"
            "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px;"
            "vertical-align:top;font-size:13px}table.evidence th{font-weight:normal;"
            "text-align:left;white-space:nowrap}img{max-width:100%}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    path = log_dir / "report.html"
    atomic_write(path, lambda f: f.write(page.encode()), durable=False)
    return path


def _findings_html(report: dict[str, Any]) -> str:
    found = report["findings"]
    lead = "" if problems(report) else "<p><b>No problems found.</b></p>"
    if not found:
        return lead
    if lead:
        lead += "<p>Notes (info, not problems):</p>"
    rows = ["<tr><th>severity</th><th>rule</th><th>steps</th><th>evidence</th>"
            "<th>finding</th><th>hypothesis</th><th>check</th></tr>"]
    for f in found:
        hypothesis, check = RULES[f["rule"]]
        cells = [html.escape(c) for c in (f["severity"], f["rule"], seen_at(f))]
        cells += [_evidence_html(f["evidence"]),
                  *(html.escape(c) for c in (f["message"] + symptom_note(f), hypothesis,
                                             check))]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return lead + "<table>" + "".join(rows) + "</table>"


def _cause_html(report: dict[str, Any]) -> list[str]:
    """The first screen: the most likely cause, its evidence and the change to try."""
    lines = cause_lines(report)
    if not lines:
        return []
    head, *rest = lines
    return ([f'<p style="font-size:16px"><b>{html.escape(head)}</b></p>']
            + [f"<p>{html.escape(line.strip())}</p>" for line in rest])


def _evidence_html(value: Any) -> str:
    """The evidence as a small key/value table (evidence.rows); one plain value alone."""
    found = evidence.rows(value)
    if len(found) == 1 and found[0][0] == evidence.SINGLE:
        return html.escape(found[0][1])
    return ('<table class="evidence">' + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in found)
        + "</table>")


def _verify_html(report: dict[str, Any]) -> list[str]:
    """The verdicts of `diagnose --verify`: each finding's fix against its control."""
    if not report.get("verifications"):
        return []
    rows = ["<tr><th>rule</th><th>change</th><th>fork step</th><th>steps</th>"
            "<th>compared evaluations (step)</th><th>pairs</th>"
            "<th>fix (first pair's run, mean)</th><th>control (run, mean)</th>"
            "<th>difference [95%]</th><th>verdict</th></tr>"]
    for r in report["verifications"]:
        fix, base = r["branches"]["fix"], r["branches"]["control"]
        diff = ("n/a" if r["difference"] is None else
                f"{r['difference']:+.1f} [{r['interval'][0]:+.1f}, {r['interval'][1]:+.1f}]")
        steps = r.get("compared_steps")  # absent: written when every evaluation counted
        compared = "all after the fork" if steps is None else ", ".join(map(str, steps))
        cells = [r["rule"], json.dumps(r["suggested_set"]), str(r["fork_step"]),
                 str(r["steps"]), compared or "none", str(len(r.get("pairs", [r]))),
                 f"{fix['run']}: {_mean(fix)}", f"{base['run']}: {_mean(base)}", diff,
                 r["verdict"]]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return ["<h2>Verified fixes</h2>", "<table>" + "".join(rows) + "</table>"]


def _terms_html(report: dict[str, Any]) -> list[str]:
    """The table of the reward's terms (none reported: nothing)."""
    lines = reward_terms_lines(report.get("reward_terms"))
    if not lines:
        return []
    return ["<h2>Reward terms</h2>", f"<pre>{html.escape(chr(10).join(lines))}</pre>"]


def _mean(branch: dict[str, Any]) -> str:
    return "n/a" if branch["mean"] is None else f"{branch['mean']:.1f}"


def _video_html(log_dir: Path) -> list[str]:
    """The newest behaviour video (diagnostics.snapshot_freq), inlined."""
    videos = sorted((log_dir / "videos").glob("*.mp4"), key=lambda p: p.stat().st_mtime)
    if not videos:
        return []
    data = base64.b64encode(videos[-1].read_bytes()).decode()
    return ["<h2>Latest behaviour video</h2>", f"<p>{html.escape(videos[-1].name)}</p>",
            f'<video controls src="data:video/mp4;base64,{data}"></video>']


def _learning_curve(metrics: list[dict]) -> tuple[str, str | None]:
    episodes = [(m["env_steps"], value) for m in metrics if m["kind"] == "episode"
                and (value := number(m.get("episode_return"))) is not None]
    evals = eval_curve(metrics)
    if not episodes and not evals:
        return "learning curve", None
    return "learning curve", plots.line_chart(
        {"episode return": episodes, "eval mean return": evals}, "Learning curve", "return")


def _reward_chart(flow1: list[dict]) -> tuple[str, str | None]:
    rewards = [r for r in flow1 if r["kind"] == "reward"]
    if not rewards:
        return "reward signal", None
    series = {name: [(r["env_steps"], r[key]) for r in rewards]
              for name, key in (("CV (std/|mean|)", "cv"), ("spike ratio (|z|>3)", "spike_ratio"),
                                ("penalty share (>6 sigma)", "penalty_share"),
                                ("bonus share (>6 sigma)", "bonus_share"))}
    return "reward signal", plots.line_chart(series, "Reward signal over the window",
                                             "statistic")


def _gradient_series(flow1: list[dict]) -> tuple[dict[str, list[tuple[int, float]]],
                                                  dict[str, list[int]]]:
    """Each layer's gradient norms ("actor.net.0.weight" -> [(step, norm)]) and the steps
    at which it had no gradient: a norm of 0 (an actor whose tanh saturated) or none at
    all (None: no gradient reached the parameter)."""
    series: dict[str, list[tuple[int, float]]] = {}
    zeros: dict[str, list[int]] = {}
    for record in (r for r in flow1 if r["kind"] == "gradients"):
        for net in ("actor", "critic"):
            for layer, norm in record[net].items():
                name = f"{net}.{layer}"
                if norm:
                    series.setdefault(name, []).append((record["env_steps"], norm))
                else:
                    zeros.setdefault(name, []).append(record["env_steps"])
    return series, zeros


def _gradient_chart(flow1: list[dict]) -> tuple[str, str | None]:
    series, zeros = _gradient_series(flow1)
    if not series and not zeros:
        return "gradients", None
    return "gradients", plots.line_chart(series, "Gradient norm per layer (before clipping)",
                                         "norm", log=True, zeros=zeros,
                                         zero_label=ZERO_GRADIENT)


def _zero_gradient_html(flow1: list[dict]) -> list[str]:
    """The layers the gradient chart draws on its floor line, in words."""
    series, zeros = _gradient_series(flow1)
    if not zeros:
        return []
    layers = []
    for name, steps in zeros.items():
        reads = len(steps) + len(series.get(name, []))
        when = f"steps {steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"
        layers.append(f"{html.escape(name)} at {len(steps)} of {reads} reads ({when})")
    return [f"<p>{ZERO_GRADIENT.capitalize()} (crosses on the gradient chart's dotted floor "
            "line, as a log scale cannot show 0): " + "; ".join(layers) + "</p>"]
