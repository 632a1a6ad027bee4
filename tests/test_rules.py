"""The rule catalogue (utils/diagnosis/rules/): one spec per rule, the config and the reference
generated from it, and rules that are their own hooks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rltrain.utils.config.loader import apply_overrides, config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.report.findings import RULES
from rltrain.utils.diagnosis.rules.entropy_collapse import EntropyCollapse
from rltrain.utils.diagnosis.rules.eval_collapse import EvalCollapse
from rltrain.utils.diagnosis.rules.registry import all_specs, hook_classes, rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleCheck, RuleContext
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation

from conftest import tiny_config


def test_every_declared_rule_has_config_and_a_hypothesis() -> None:
    config = TrainConfig()
    for name, spec in all_specs().items():
        assert name in RULES and RULES[name] == (spec.hypothesis, spec.check)
        if spec.section != "none":
            rule = getattr(getattr(config, spec.section), name)
            assert rule.action == spec.action
            assert getattr(rule, "threshold", None) == spec.threshold


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_every_configurable_rule_has_one_check_beside_its_spec() -> None:
    """One home per rule: each rule set in `monitor` or `diagnostics` is checked by one
    class, in the module that declares its spec (a family module, or the rule's own)."""
    specs = all_specs()
    checks: dict[str, list[type]] = {}
    for cls in _subclasses(RuleCheck):
        if "spec" in vars(cls):
            checks.setdefault(cls.spec.name, []).append(cls)
    for name, spec in specs.items():
        if spec.section == "none":  # recorded by the trainer or the hook, never judged
            assert name not in checks
            continue
        assert len(checks.get(name, ())) == 1, (name, checks.get(name))
        assert spec in sys.modules[checks[name][0].__module__].SPECS, name


def test_each_health_rule_is_built_by_its_family_hook_only(tmp_path: Path) -> None:
    import torch

    from rltrain.utils.diagnosis.rules.health import CHECKS, SPECS
    from rltrain.utils.run.health import HealthRules

    health = HealthRules(tiny_config(tmp_path), obs_dim=3, device=torch.device("cpu"))
    assert [rule.spec for rule in health.rules] == [cls.spec for cls in CHECKS]
    assert sorted(s.name for s in SPECS) == sorted(cls.spec.name for cls in CHECKS)
    assert not set(CHECKS) & set(hook_classes())  # never a second time as a rule hook


def test_a_rule_option_is_a_config_key() -> None:
    raw = apply_overrides({}, ("monitor.eval_collapse.evaluations=4",
                               "monitor.eval_collapse.action=pause"))
    config = config_from_dict(raw)
    assert config.monitor.eval_collapse.evaluations == 4
    assert config.monitor.eval_collapse.action == "pause"
    with pytest.raises(Exception, match="evaluations"):
        config_from_dict(apply_overrides({}, ("monitor.eval_collapse.evaluations=many",)))


def test_rule_hooks_are_built_unless_off(tmp_path: Path) -> None:
    assert EvalCollapse in hook_classes()
    on = rule_hooks(RuleContext(tiny_config(tmp_path), 3, 1))  # a ddpg run
    assert [type(h) for h in on] == [cls for cls in hook_classes() if cls.spec.judges("ddpg")]
    assert EntropyCollapse in hook_classes() and EntropyCollapse not in map(type, on)
    off = tiny_config(tmp_path, monitor={"eval_collapse": {"action": "off"}})
    assert EvalCollapse not in [type(h) for h in rule_hooks(RuleContext(off, 3, 1))]


def _result(mean: float) -> EvalResult:
    return EvalResult([mean], [200], [mean], np.zeros((1, 3)), np.zeros((1, 3)), [True])


def _evaluations(hook: EvalCollapse, means: list[float]) -> list:
    found = []
    best = -1e9
    for i, mean in enumerate(means):
        best = max(best, mean)
        step = (i + 1) * 100
        hook.on_checkpoint("periodic", Path(f"ck/checkpoint_step_{step}.pt"), step)
        found += hook.on_eval(Evaluation(step, _result(mean), best, 0))
    return found


def test_eval_collapse_fires_on_a_fall_and_names_the_checkpoint_before_it(
        tmp_path: Path) -> None:
    hook = EvalCollapse(RuleContext(tiny_config(tmp_path, actor_lr=1e-3), 3, 1))
    found = _evaluations(hook, [-1500, -800, -200, -180, -1400, -1450])
    assert len(found) == 1
    finding = found[0]
    assert finding.rule == "eval_collapse" and finding.env_steps == 600
    assert "checkpoint_step_400.pt" in finding.message  # the best was at step 400
    assert finding.suggested_set["actor_lr"] == pytest.approx(3e-4)
    assert finding.suggested_set["actor_lr"] < 1e-3


def test_eval_collapse_silent_on_noise_and_steady_learning(tmp_path: Path) -> None:
    hook = EvalCollapse(RuleContext(tiny_config(tmp_path), 3, 1))
    assert _evaluations(hook, [-1500, -900, -400, -250, -300, -220, -260, -200]) == []
    # One bad evaluation is not a collapse (evaluations: 2 in a row by default).
    assert _evaluations(hook, [-1400, -190]) == []


def test_eval_collapse_silent_on_a_gain_inside_the_training_returns_spread(
        tmp_path: Path) -> None:
    """MountainCar before the goal: evaluations of -0.1, then -0.0, then -0.1 are a 100%
    fall of a gain of 0.1, while the training episodes' returns spread over 20: no policy
    was learnt to lose. The same evaluations after returns that spread over 0.2 fire."""
    wide = EvalCollapse(RuleContext(tiny_config(tmp_path), 3, 1))
    for k, episode_return in enumerate(np.linspace(-25.0, -5.0, 50)):
        wide.on_episode_end(EpisodeEnd(k * 999, 0, k, float(episode_return), 999, False, 0))
    assert _evaluations(wide, [-0.1, -0.0, -0.1, -0.1]) == []
    narrow = EvalCollapse(RuleContext(tiny_config(tmp_path), 3, 1))
    for k, episode_return in enumerate(np.linspace(-0.3, -0.1, 50)):
        narrow.on_episode_end(EpisodeEnd(k * 999, 0, k, float(episode_return), 999, False, 0))
    assert len(_evaluations(narrow, [-0.1, -0.0, -0.1, -0.1])) == 1


def test_eval_collapse_judges_the_gain_against_the_way_to_a_solved_return(
        tmp_path: Path) -> None:
    """InvertedPendulum declares 950 as solved: a rise from 63 to 107 and a fall back is
    a policy still learning, while one that reached 1,000 and lost it has collapsed. An
    env that declares nothing (Pendulum) is judged on the first evaluation's scale."""
    early = [63.0, 92.0, 107.0, 71.0, 68.0, 70.0]
    solved = EvalCollapse(RuleContext(tiny_config(tmp_path, env_name="InvertedPendulum-v5"),
                                      4, 1))
    assert _evaluations(solved, early) == []
    lost = EvalCollapse(RuleContext(tiny_config(tmp_path, env_name="InvertedPendulum-v5"),
                                    4, 1))
    assert [f.env_steps for f in _evaluations(lost, [63.0, 480.0, 1000.0, 90.0, 70.0])] == [500]
    undeclared = EvalCollapse(RuleContext(tiny_config(tmp_path), 3, 1))  # Pendulum-v1
    assert [f.env_steps for f in _evaluations(undeclared, early)] == [500]


def test_eval_collapse_state_round_trips(tmp_path: Path) -> None:
    context = RuleContext(tiny_config(tmp_path), 3, 1)
    hook = EvalCollapse(context)
    _evaluations(hook, [-1500, -200, -1400])
    again = EvalCollapse(context)
    again.load_state_dict(hook.state_dict())
    assert again.state_dict() == hook.state_dict()
    # The second evaluation below the line fires in both.
    assert again.on_eval(Evaluation(400, _result(-1450), -200, 2))


def test_the_report_puts_a_cause_before_what_it_set_off(tmp_path: Path) -> None:
    """A learning rate found late is still listed before the explosions it caused."""
    import json

    from rltrain.utils.diagnosis.report.findings import findings

    events = [{"env_steps": 100, "rule": "critic_loss_explosion", "action": "pause",
               "message": "critic loss exploded", "value": 1e9},
              {"env_steps": 50, "rule": "dead_relu", "action": "warn", "message": "dead"},
              {"env_steps": 300, "rule": "learning_rate", "action": "warn",
               "message": "lr too high", "suggested_set": {"critic_lr": 0.0003}}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert [f["rule"] for f in findings(tmp_path)] == [
        "learning_rate", "dead_relu", "critic_loss_explosion"]
