"""Suggested changes are valid config changes that resume accepts; a planted fault in a
tiny real run is found with its suggested_set; `diagnose --verify` forks and judges it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.resume import FIXED_ON_RESUME, resume_config
from rltrain.scripts.verify import difference, fork_point, verdict
from rltrain.utils.config import TrainConfig, config_to_dict
from rltrain.utils.config_loader import apply_overrides, config_from_dict
from rltrain.utils.rules._remedies import remedies
from rltrain.utils.run_logger import read_jsonl

from conftest import tiny_dict

REMEDIES = remedies()  # every rule whose spec proposes a config change

# A tiny run with both learning rates at 0.1, measured every 20 updates.
FAULT = {"actor_lr": 0.1, "critic_lr": 0.1, "safe_mode": False, "max_timesteps": 400,
         "diagnostics": {"learning_rate": {"every_updates": 20, "measurements": 2}}}


def check_suggestion(config: TrainConfig, suggested: dict) -> TrainConfig:
    """`suggested` applied as `--set`, and through resume's own check."""
    from rltrain.scripts.api import override_strings

    assert suggested and not {k.split(".")[0] for k in suggested} & set(FIXED_ON_RESUME)
    sets = override_strings(suggested)
    changed = config_from_dict(apply_overrides(config_to_dict(config), sets))
    resumed = resume_config({"config": config_to_dict(config)}, sets, "ck.pt")
    assert resumed == changed
    return changed


def test_the_older_rules_with_a_config_remedy_declare_it_in_their_spec() -> None:
    assert sorted(REMEDIES) == ["critic_loss_explosion", "dead_relu", "exploding_gradient",
                                "grad_explosion", "q_explosion", "q_overestimation",
                                "short_horizon"]


@pytest.mark.parametrize("rule", sorted(REMEDIES))
def test_older_rules_suggest_valid_resumable_changes(rule: str) -> None:
    config = config_from_dict({"gamma": 0.5})  # short_horizon fires with this gamma
    changed = check_suggestion(config, REMEDIES[rule](config))
    assert changed != config


def train(tmp_path: Path, name: str, **overrides) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", name])
    assert result.exit_code == 0, result.output
    return tmp_path / "logs" / name


@pytest.fixture(scope="module")
def hot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted-fault run, trained once for the module. Tests only add to its folders
    (reports, forks); one that removes files works on its own copy (`own_copy`)."""
    return train(tmp_path_factory.mktemp("verify"), "hot", **FAULT)


def own_copy(folder: Path, tmp_path: Path) -> Path:
    """The run's log and checkpoint folders copied under tmp_path, its config.yaml
    pointing at the copies: a run of its own, as if trained there."""
    logs, checkpoints = tmp_path / "logs", tmp_path / "checkpoints"
    shutil.copytree(folder, logs / folder.name)
    shutil.copytree(folder.parent.parent / "checkpoints" / folder.name,
                    checkpoints / folder.name)
    config_file = logs / folder.name / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    config.update(log_dir=str(logs), checkpoint_dir=str(checkpoints))
    config_file.write_text(yaml.safe_dump(config))
    return logs / folder.name


def test_a_tiny_run_with_planted_learning_rates_names_them(hot: Path, tmp_path: Path) -> None:
    events = [e for e in read_jsonl(hot / "events.jsonl") if e.get("rule") == "learning_rate"]
    assert events, "the learning_rate rule did not fire"
    suggested = events[0]["suggested_set"]
    assert set(suggested) <= {"actor_lr", "critic_lr"} and suggested
    assert all(v <= 1e-3 for v in suggested.values())
    changed = check_suggestion(config_from_dict(tiny_dict(tmp_path, **FAULT)), suggested)
    assert changed.actor_lr <= 1e-3 or "actor_lr" not in suggested
    report = CliRunner().invoke(cli, ["diagnose", str(hot), "--json"])
    assert report.exit_code == 0
    found = json.loads(report.output)["findings"]
    assert all("suggested_set" in f for f in found)
    assert any(f["rule"] == "learning_rate" and f["suggested_set"] for f in found)


def test_verify_forks_both_branches_and_gives_a_verdict(hot: Path) -> None:
    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--steps", "200",
                                      "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    checked = [v for v in report["verifications"] if v["rule"] == "learning_rate"]
    assert len(checked) == 1
    v = checked[0]
    assert v["verdict"] in ("confirmed", "not confirmed", "inconclusive")
    assert v["fork_step"] <= v["first_step"] or v["fork_step"] == FAULT["max_timesteps"]
    for kind in ("fix", "control"):
        branch = v["branches"][kind]
        assert branch["exit_code"] == 0 and branch["returns"], branch
        status = json.loads((hot.parent / branch["run"] / "status.json").read_text())
        assert status["env_steps"] == v["fork_step"] + 200
    fix_config = yaml.safe_load(
        (hot.parent / v["branches"]["fix"]["run"] / "config.yaml").read_text())
    assert fix_config["actor_lr"] == v["suggested_set"].get("actor_lr", 0.1)
    assert "Verified fixes" in (hot / "report.html").read_text()


def test_verify_without_a_checkpoint_says_so(hot: Path, tmp_path: Path) -> None:
    folder = own_copy(hot, tmp_path)
    for checkpoint in (tmp_path / "checkpoints" / "hot").glob("*.pt"):
        checkpoint.unlink()
    result = CliRunner().invoke(cli, ["diagnose", str(folder), "--verify"])
    assert result.exit_code != 0
    assert "no checkpoint" in result.output and len(result.output.strip().splitlines()) == 1
    assert list((hot.parent.parent / "checkpoints" / "hot").glob("*.pt"))  # the original's


def test_verify_refuses_reseeded_pairs(hot: Path) -> None:
    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--seeds", "2"])
    assert result.exit_code != 0 and "seed" in result.output


def test_fork_point_takes_the_newest_before_the_finding(tmp_path: Path) -> None:
    for step in (100, 200, 300):
        (tmp_path / f"checkpoint_step_{step}.pt").write_bytes(b"")
    (tmp_path / "best_model.pt").write_bytes(b"")
    assert fork_point(tmp_path, 250)[0] == 200
    assert fork_point(tmp_path, 50)[0] == 300  # none before: the newest
    assert fork_point(tmp_path / "none", 50) is None


def test_verdicts_follow_the_bootstrap_interval() -> None:
    better = difference([10.0, 11.0, 12.0, 10.5], [0.0, 1.0, -1.0, 0.5])
    assert better["low"] > 0 and verdict(better, 0.1) == "confirmed"
    worse = difference([0.0, 1.0, -1.0, 0.5], [10.0, 11.0, 12.0, 10.5])
    assert verdict(worse, 10.9) == "not confirmed"
    noisy = difference([0.0, 20.0, -20.0, 5.0], [1.0, -15.0, 18.0, 2.0])
    assert verdict(noisy, 1.5) == "inconclusive"
