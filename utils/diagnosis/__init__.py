"""The diagnosis engine: why an agent that trains misbehaves.

It follows one method, "flow 1": look at the reward signal, then at which action the
policy picks where, then at how the gradient flows through the networks, and state each
finding as a hypothesis that can be checked ("if X, then Y should be observable"). Four
concerns, one subpackage or module each, in the order a finding flows through them:

1. what is measured, `measure/`: the statistics (reward signal, reward terms,
   state-action map, gradients, inputs, the critic's Q and ReLUs, snapshots). The hook
   the training loop talks to, `watch.Flow1Diagnostics`, drives them and hands what
   they measure to the rules; `watch.NoDiagnostics` stands in when
   `diagnostics.enabled` is false.
2. the rules judge, `rules/`: every rule's spec (config keys, threshold, action,
   hypothesis, what to check) and its check, which words the finding; `registry.py`
   lists them. The flow-1 rules (`*_rules.py`, `reward_terms.py`) judge what
   `measure/` hands them; the rules that are their own hooks (`learning_rate`,
   `eval_collapse`, ...) and the health rules (`rules/health/`, called by
   utils/run/health.py) watch the loop themselves. Torch-free at import: the config
   schema is generated from the specs when `--help` runs.
3. ranking, `ranking.py`: findings from cause to consequence (by their rule's group),
   then the most severe first.
4. the report, `report/`: a run's files read into findings (`findings.py`), printed as
   a table (`table.py`) and written as report.html (`page.py`).

Imports go one way: `rules/` imports nothing else of the engine; `measure/` only
`rules/` (three measurements hand their statistics to their checks themselves);
`ranking` only `rules/`; `report/` the rules and the ranking (and `heatmap_image.py` the
state-action map's `ClusterView`, which it draws); `watch` the rules, `measure/` and
`heatmaps` (what each heatmap writes and finds), which imports the rules, `measure/`
and, of `report/`, only `heatmap_image.py`, to draw each heatmap as it is measured.
tests/test_import_graph.py checks this.
"""
