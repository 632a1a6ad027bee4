"""The algorithm registry: the config's choices and sections, checkpoints that name their
algorithm, and rules that judge only the algorithms they are about."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rltrain.agents.registry import ALGORITHMS
from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.diagnosis.rules.registry import rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.checkpoint import load_checkpoint, save_tensors

from conftest import tiny_config


def test_the_config_offers_every_registered_algorithm_and_its_own_section():
    assert set(ALGORITHMS) == {"ddpg", "td3", "sac"}
    for name, entry in ALGORITHMS.items():
        config = config_from_dict({"algo": name})
        assert config.algo == name
        if entry.section is not None:  # its section, with the options' defaults
            section = getattr(config, entry.section)
            assert dataclasses.asdict(section) == dataclasses.asdict(entry.options())
            assert entry.section in config_to_dict(config)
        others = [e.section for e in ALGORITHMS.values() if e.section and e.name != name]
        assert not set(others) & set(config_to_dict(config))  # shown only with their algo


@pytest.mark.parametrize("raw, message", [
    ({"algo": "td3", "sac": {"ent_coef": 0.1}},
     "config section 'sac' applies only with algo: sac (algo is td3)"),
    ({"algo": "sac", "td3": {"policy_delay": 3}},
     "config section 'td3' applies only with algo: td3 (algo is sac)"),
    ({"algo": "sac", "exploration_noise": 0.5},
     "config key 'exploration_noise' sets action noise, which algo sac does not add"),
    ({"algo": "sac", "noise_type": "ou"},
     "config key 'noise_type' sets action noise, which algo sac does not add"),
    ({"algo": "sac", "sac": {"ent_coef": -0.1}}, "config key 'sac.ent_coef' must be a number > 0"),
    ({"algo": "sac", "sac": {"ent_coef": True}}, "config key 'sac.ent_coef' must be a number"),
])
def test_a_section_or_key_of_another_algorithm_is_one_config_error(raw, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        config_from_dict(raw)


def test_sac_takes_a_word_or_a_number_for_its_temperature():
    assert config_from_dict({"algo": "sac", "sac": {"ent_coef": "auto_0.1"}}).sac.ent_coef \
        == "auto_0.1"
    assert config_from_dict({"algo": "sac", "sac": {"ent_coef": 0.2}}).sac.ent_coef == 0.2
    assert config_from_dict({"algo": "sac"}).sac.target_entropy == "auto"


def test_rules_judge_only_the_algorithms_they_are_about(tmp_path: Path):
    def built(algo: str) -> set[str]:
        config = tiny_config(tmp_path, algo=algo)
        return {hook.spec.name for hook in rule_hooks(RuleContext(config, 3, 1))}

    assert "no_learning" in built("td3") and "no_learning" not in built("sac")
    assert "entropy_collapse" in built("sac") and "entropy_collapse" not in built("ddpg")
    assert "eval_collapse" in built("sac") & built("ddpg")


def test_a_checkpoint_names_its_algorithm(trained_run):
    payload = load_checkpoint(trained_run.checkpoint_dir / "checkpoint_step_200.pt")
    assert payload["algo"] == payload["config"]["algo"] == "ddpg"
    assert "actor_target" in payload and "log_ent_coef" not in payload


@pytest.fixture
def run_copy(trained_run, tmp_path) -> Path:
    folder = tmp_path / "checkpoints" / "trained"
    shutil.copytree(trained_run.checkpoint_dir, folder)
    return folder


@pytest.mark.parametrize("command", ["resume", "eval"])
@pytest.mark.parametrize("change, message", [
    ({"algo": "ppo"}, "names algo 'ppo', which this rltrain does not train"),
    ({"algo": "td3"}, "holds a td3 agent but its config says algo 'ddpg'"),
    ({"algo": 3}, "names algo 3, which this rltrain does not train"),
])
def test_a_checkpoint_with_a_forged_algorithm_is_one_line(run_copy, command, change, message):
    path = run_copy / "checkpoint_step_200.pt"
    save_tensors(path, {**load_checkpoint(path), **change})
    before = path.read_bytes()
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(path)])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert path.read_bytes() == before


def test_a_checkpoint_missing_its_algorithms_state_is_refused(run_copy):
    path = run_copy / "checkpoint_step_200.pt"
    payload = load_checkpoint(path)
    del payload["actor_target"]  # a ddpg checkpoint without the actor's target
    save_tensors(path, payload)
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(path)])
    assert result.exit_code == 2 and "is incomplete: missing actor_target" in result.output


def test_resume_cannot_change_the_algorithm(trained_run, run_copy):
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(run_copy / "checkpoint_step_200.pt"),
                                      "--set", "algo=sac"])
    assert result.exit_code == 2, result.output
    assert "algo" in result.output and len(result.output.strip().splitlines()) == 1


def test_the_default_config_is_unchanged_by_the_registry():
    assert TrainConfig().algo == "ddpg" and TrainConfig().td3.policy_delay == 2
