"""Every rule rltrain can report, with a hypothesis and what to check, as `diagnose`
shows them (each rule declares both in its spec, utils/diagnosis/rules/).

Each hypothesis is falsifiable: "if X, then Y should be observable". The names are part
of the JSON output that users script against: never rename one.
"""

from __future__ import annotations

from rltrain.utils.diagnosis.rules.registry import all_specs

# rule -> (hypothesis, suggested check), from each rule's spec (utils/diagnosis/rules/).
RULES: dict[str, tuple[str, str]] = {name: (spec.hypothesis, spec.check)
                                     for name, spec in all_specs().items()}

# events.jsonl's action -> the finding's severity ("stop": stopped without a checkpoint).
SEVERITY = {"info": "info", "warn": "warning", "pause": "pause", "stop": "pause"}
