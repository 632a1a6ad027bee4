"""Every rule rltrain can report, each declared once: `RuleSpec`.

A rule's spec holds everything about it that is not its check: the config section it is
set in (`monitor` or `diagnostics`) with its default threshold and action and the help
text that says when it fires, the hypothesis its finding states, what to check, and the
hints printed when it pauses a run. The config schema (utils/config.py), `rltrain
diagnose`, the resume hints and the rule reference in the docs are all generated from
the specs.

The specs live in this package, one module per rule or per family of rules, beside the
rule's check, which decides and words the findings (message, `suggested_set`):
- a `RuleHook` subclass, a rule that is its own hook. The trainer (and any integration)
  builds one of each module's `RuleHook`s from `rule_hooks()`, so a new rule is one new
  module here and its test;
- the health rules (`health_rules/`, one module per rule): `RuleHook`s too, built and
  called in order by their family hook (utils/health.py);
- the flow-1 rules (`*_rules.py`): a `RuleCheck` per rule, which the diagnostics'
  hooks (utils/diagnostics/) hand the statistics they collect.

Nothing here imports torch or Gymnasium: the config schema is built from these specs
when utils/config.py is imported.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Callable, Literal

from rltrain.utils.hooks import Hook

if TYPE_CHECKING:
    from rltrain.utils.agent_view import AgentView
    from rltrain.utils.monitor import Rule

Section = Literal["monitor", "diagnostics", "none"]


@dataclass(frozen=True)
class Option:
    """An extra config key of one rule (beside threshold and action)."""

    name: str
    default: Any
    help: str
    valid: Any = None  # a utils.config.Range, or None
    type: Any = None   # the value's type (default: the default's type)


@dataclass(frozen=True)
class RuleSpec:
    """One rule: where it is configured, what it means and what to do about it."""

    name: str
    section: Section  # "none": always reported, not configurable (a run stopped by its env)
    fires_when: str   # the config help text: what makes it fire
    hypothesis: str   # "if X, then Y should be observable"
    check: str        # what to look at or change
    threshold: float | None = None  # default (None: the rule has no threshold of its own)
    action: str = "warn"            # default: warn, pause or off
    fixed_threshold: str | None = None  # where a threshold-less rule's limit comes from
    hint: str | None = None         # after a pause: what to change before resuming
    weight_hint: str | None = None  # judged on the weights: a change that keeps them sound
    input_scaled: bool = False      # large rewards or observations set it off too
    group: str = "Training set-up"  # its section in the rule reference
    options: tuple[Option, ...] = ()
    config_class: type | None = None  # a custom config section instead of the generated one
    # The config change proposed as the fix, from the run's config: the findings'
    # `suggested_set` (None where no config change is the remedy).
    remedy: Callable[[Any], dict[str, Any]] | None = None


@dataclass(frozen=True)
class RuleContext:
    """What a rule's check may know of the run: the config, the spaces, the agent's view
    (None where no agent is watched) and the env steps of random warm-up."""

    config: Any  # utils.config.TrainConfig
    obs_dim: int
    action_dim: int
    view: AgentView | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    device: Any = None  # the torch.device the agent trains on (None: the CPU)


class RuleCheck:
    """One rule's decision and words: `spec` says what it is; whoever has the rule's data
    (its own hook, or a family hook that collects the statistics of several rules, as
    the flow-1 diagnostics do) hands it over, and the rule returns `self.fire(...)`
    findings. `self.rule` has the configured threshold and action (from `configured()`);
    `self.settings` the rule's whole config section (its options too)."""

    spec: RuleSpec

    def __init__(self, context: RuleContext) -> None:
        # Here, not at the top: the config schema imports this package, the monitor
        # (with torch) is needed only once a run is watched.
        from rltrain.utils.monitor import make_rule

        self.context = context
        self.settings = getattr(getattr(context.config, self.spec.section), self.spec.name)
        threshold, action = self.configured()
        remedy = None if self.spec.remedy is None else self.spec.remedy(context.config)
        self.rule: Rule = make_rule(self.spec.name, threshold, action,
                                    context.config.safe_mode, remedy)
        # `self.fire(...)`: the rule's finding, with the spec's remedy as its
        # suggested_set unless the call gives one (`Rule.fire`).
        self.fire = self.rule.fire

    def configured(self) -> tuple[Any, str]:
        """The rule's threshold and action: its config section's, unless it says where
        else they come from (`RuleSpec.fixed_threshold`)."""
        return self.settings.threshold, self.settings.action


class RuleHook(RuleCheck, Hook):
    """A rule that is its own hook: its hook methods check it and return `self.fire(...)`
    findings (see `RuleCheck`)."""

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.name = f"rule:{self.spec.name}"


@cache
def _modules() -> tuple[Any, ...]:
    return tuple(importlib.import_module(f"{__name__}.{info.name}")
                 for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name))


@cache
def all_specs() -> dict[str, RuleSpec]:
    """Every rule by name, in the order of their modules."""
    specs: dict[str, RuleSpec] = {}
    for module in _modules():
        for spec in getattr(module, "SPECS", ()):
            assert spec.name not in specs, f"rule {spec.name} declared twice"
            specs[spec.name] = spec
    return specs


def spec(name: str) -> RuleSpec:
    return all_specs()[name]


def hook_classes() -> list[type[RuleHook]]:
    """The rules that are their own hooks (a subpackage's are its family hook's)."""
    return [value for module in _modules() for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, RuleHook)
            and value is not RuleHook and value.__module__ == module.__name__]


def rule_hooks(context: RuleContext) -> list[RuleHook]:
    """One hook per rule that is its own hook, except those switched off."""
    hooks = []
    for cls in hook_classes():
        section = getattr(context.config, cls.spec.section)
        if getattr(section, cls.spec.name).action != "off":
            hooks.append(cls(context))
    return hooks


def config_fields(section: Section) -> list[tuple[str, type, Any]]:
    """The config fields of the rules set in `section`, for dataclasses.make_dataclass."""
    from rltrain.utils.config_schema import RuleConfig, opt

    fields = []
    for rule in all_specs().values():
        if rule.section != section:
            continue
        cls = rule.config_class or _config_class(rule, RuleConfig, opt)
        default = cls() if rule.config_class else cls(rule.threshold, rule.action)
        fields.append((rule.name, cls, opt(default, rule.fires_when)))
    return fields


def _config_class(rule: RuleSpec, base: type, opt: Any) -> type:
    if not rule.options:
        return base
    extra = [(o.name, o.type or type(o.default), opt(o.default, o.help, o.valid))
             for o in rule.options]
    name = "".join(part.title() for part in rule.name.split("_")) + "Config"
    cls = dataclasses.make_dataclass(name, extra, bases=(base,), frozen=True,
                                     namespace={"__doc__": f"The `{rule.name}` rule."})
    cls.__module__ = "rltrain.utils.config"
    return cls
