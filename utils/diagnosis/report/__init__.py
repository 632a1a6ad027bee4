"""`rltrain diagnose`: a run's findings, read from its files and shown.

`findings` reads a run's files (events.jsonl, flow1.jsonl, verify.json, config.yaml)
into one JSON document, its findings in ranking.py's order; `table` prints it on the
terminal, `page` writes it as report.html; `evidence` turns a finding's evidence into
rows for both; `heatmap_image` draws the state-action heatmaps' pictures (for
heatmaps.py, as the run trains) and `plots` the page's charts.
"""
