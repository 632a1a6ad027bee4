"""Every rule rltrain can report, each declared once: `RuleSpec`.

A rule's spec holds everything about it that is not its check: the config section it is
set in (`monitor` or `diagnostics`) with its default threshold and action and the help
text that says when it fires, the hypothesis its finding states, what to check, and the
hints printed when it pauses a run. The config schema (utils/config/schema.py), `rltrain
diagnose`, the resume hints and the rule reference in the docs are all generated from
the specs.

The specs live in this package, one module per rule or per family of rules, beside the
rule's check, which decides and words the findings (message, `suggested_set`):
- a `RuleHook` subclass, a rule that is its own hook. The trainer (and any integration)
  builds one of each module's `RuleHook`s from `rule_hooks()`, so a new rule is one new
  module here and its test;
- the health rules (`health/`, one module per rule): `RuleHook`s too, built and
  called in order by their family hook (utils/run/health.py);
- the flow-1 rules (`*_rules.py`, `reward_terms.py`): a `RuleCheck` per rule, which
  the flow-1 hook (utils/diagnosis/watch.py) and its measurements (utils/diagnosis/
  measure/) hand the statistics they collect.

Nothing here imports torch or Gymnasium: the config schema is built from these specs
when utils/config/schema.py is imported.
"""
