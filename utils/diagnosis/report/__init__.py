"""`rltrain diagnose`: a run's findings, read from its files and shown.

`findings` reads a run's files (events.jsonl, flow1.jsonl, verify.json, config.yaml)
into one JSON document, its findings in ranking.py's order; `table` prints it on the
terminal, `page` writes it as report.html; `evidence` turns a finding's evidence into
rows for both, and `plots` draws the pictures: the state-action heatmaps (drawn by
heatmaps.py for the flow-1 hook while the run trains) and the page's charts.
"""
