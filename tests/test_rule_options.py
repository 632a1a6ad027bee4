"""Every option a rule declares has an allowed range: a value outside it is refused when
the config is loaded (one ConfigError naming the key), and the default is accepted."""

from __future__ import annotations

import functools

import pytest
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.config.fields import Range
from rltrain.utils.config.loader import apply_overrides, config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.diagnosis.rules.registry import all_specs
from rltrain.utils.diagnosis.rules.spec import Option, RuleSpec
from rltrain.utils.errors import ConfigError

# Options that name something (a reward term): text or none, no range.
TEXT = (str, str | None)
OPTIONS = [(spec, option) for spec in all_specs().values() for option in spec.options
           if option.type not in TEXT]
TEXT_OPTIONS = [(spec, option) for spec in all_specs().values() for option in spec.options
                if option.type in TEXT]


def outside(valid: Range) -> float:
    """The nearest value the range excludes: an open end itself, else one step past it."""
    if valid.low is not None:
        return valid.low if valid.low_open else valid.low - 1
    assert valid.high is not None
    return valid.high if valid.high_open else valid.high + 1


def loaded(key: str, value: object) -> TrainConfig:
    return config_from_dict(apply_overrides(config_to_dict(TrainConfig()), [f"{key}={value}"]))


def test_the_rules_declare_options() -> None:
    assert len(OPTIONS) >= 15  # the set-up rules' options, at least


@pytest.mark.parametrize(("spec", "option"), OPTIONS,
                         ids=[f"{s.name}.{o.name}" for s, o in OPTIONS])
def test_an_option_outside_its_range_is_refused(spec: RuleSpec, option: Option) -> None:
    assert option.valid is not None, f"{spec.name}.{option.name} declares no range"
    key = f"{spec.section}.{spec.name}.{option.name}"
    bad = outside(option.valid)
    bad = int(bad) if isinstance(option.default, int) else bad
    assert not option.valid.contains(bad)
    with pytest.raises(ConfigError, match=f"config key '{key}' must be"):
        loaded(key, bad)
    config = loaded(key, option.default)
    assert functools.reduce(getattr, key.split("."), config) == option.default


@pytest.mark.parametrize(("spec", "option"), TEXT_OPTIONS,
                         ids=[f"{s.name}.{o.name}" for s, o in TEXT_OPTIONS])
def test_a_text_option_refuses_a_number_and_takes_its_default(spec: RuleSpec,
                                                                option: Option) -> None:
    key = f"{spec.section}.{spec.name}.{option.name}"
    with pytest.raises(ConfigError, match=f"config key '{key}' must be a non-empty string"):
        loaded(key, 3)
    assert functools.reduce(getattr, key.split("."), loaded(key, "name")) == "name"
    config = config_from_dict(config_to_dict(TrainConfig()))
    assert functools.reduce(getattr, key.split("."), config) == option.default


def test_an_out_of_range_option_on_the_command_line_is_one_line() -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--set",
                                      "diagnostics.no_learning.evaluations=1"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert "diagnostics.no_learning.evaluations" in line and ">= 2" in line, line
