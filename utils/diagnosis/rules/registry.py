"""Every rule module, listed once: the specs, the rules that are their own hooks, and the
config fields generated from the specs. A new rule is one module in this package and one
line in `MODULES`."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from rltrain.utils.diagnosis.rules import (
    action_range,
    actor_stalled,
    code_faults,
    critic_rules,
    entropy_bonus,
    entropy_collapse,
    entropy_temperature,
    episode_rules,
    eval_collapse,
    fit_rules,
    gradient_noise,
    gradient_rules,
    health,
    input_rules,
    learning_rate,
    long_horizon,
    no_learning,
    noise_rules,
    on_policy_rules,
    partial_observability,
    q_divergence,
    q_learning_rules,
    replay_integrity,
    replay_schedule,
    reward_rules,
    reward_terms,
    run_stops,
    state_action_rules,
    target_update,
    update_ratio,
    value_fit,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext, RuleHook, RuleSpec, Section

# In this order in the config sections, the rule reference and `rltrain diagnose`.
MODULES = (action_range, actor_stalled, code_faults, critic_rules, entropy_bonus, entropy_collapse,
           entropy_temperature, episode_rules, eval_collapse, fit_rules, gradient_noise,
           gradient_rules, health, input_rules, learning_rate, long_horizon, no_learning,
           noise_rules, on_policy_rules, value_fit, partial_observability, q_divergence,
           q_learning_rules, replay_integrity, replay_schedule, reward_rules, reward_terms,
           run_stops, state_action_rules, target_update, update_ratio)


def _modules() -> tuple[Any, ...]:
    return MODULES


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
            and hasattr(value, "spec")  # not a shared base of a module's rules
            and value.__module__ == module.__name__]


def rule_hooks(context: RuleContext) -> list[RuleHook]:
    """One hook per rule that is its own hook, except those switched off."""
    hooks = []
    for cls in hook_classes():
        section = getattr(context.config, cls.spec.section)
        if (getattr(section, cls.spec.name).action != "off"
                and cls.spec.judges(context.config.algo)):
            hooks.append(cls(context))
    return hooks


def not_judging(algo: str) -> dict[str, Any]:
    """The rules that do not judge runs of `algo` (their specs name other families), with
    what such a run is made of: {"algo", "family" (in words), "rules"} (no rules: {})."""
    from rltrain.agents.registry import algorithm

    rules = [name for name, spec in all_specs().items() if not spec.judges(algo)]
    if not rules:
        return {}
    entry = algorithm(algo)
    return {"algo": algo, "family": entry.traits.describe(), "rules": rules}


def config_fields(section: Section) -> list[tuple[str, type, Any]]:
    """The config fields of the rules set in `section`, for dataclasses.make_dataclass."""
    from rltrain.utils.config.fields import RuleConfig, opt

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
    cls.__module__ = "rltrain.utils.config.schema"
    return cls


def remedies() -> dict[str, Any]:
    """Every rule whose spec proposes a config change: name -> its remedy."""
    return {name: spec.remedy for name, spec in all_specs().items() if spec.remedy}

