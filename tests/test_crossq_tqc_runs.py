"""CrossQ and TQC wherever SAC works: the CLI and the API train, pause, resume, evaluate
and diagnose them; SAC's entropy rule judges them in their own sections; `diagnose
--verify` forks a CrossQ run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from test_sac_runs import evaluation

import rltrain
from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.rules.entropy_collapse import EntropyCollapse
from rltrain.utils.diagnosis.rules.registry import rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.hook import Update
from rltrain.utils.io.checkpoint import load_checkpoint

from conftest import tiny_dict


@pytest.mark.parametrize("algo, own_key", [("crossq", "renorms.0.steps"),
                                           ("tqc", "layers.0.weight")])
def test_a_run_pauses_resumes_evaluates_and_is_diagnosed(tmp_path, algo, own_key):
    paused = rltrain.train(tiny_dict(tmp_path, run_name=algo, algo=algo,
                                     min_reward_threshold=0.0))  # Pendulum: pauses at 200
    assert (paused.status, paused.env_steps) == ("paused", 200)
    payload = load_checkpoint(paused.checkpoint)
    assert payload["algo"] == algo and "log_ent_coef" in payload
    assert ("critic_target" in payload) == (algo == "tqc")  # CrossQ keeps no target
    assert own_key in payload["critic"]
    run = rltrain.resume(paused.checkpoint, min_reward_threshold=None)
    assert (run.status, run.env_steps) == ("finished", 300)
    policy = rltrain.load_policy(run.checkpoint_dir / "best_model.pt")
    action, _ = policy.predict(np.zeros(3, np.float32))
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    evaluated = CliRunner().invoke(cli, ["eval", "--checkpoint",
                                         str(run.checkpoint_dir / "best_model.pt"),
                                         "--episodes", "1"])
    assert evaluated.exit_code == 0 and "mean return" in evaluated.output, evaluated.output
    findings = rltrain.diagnose(run)
    assert "no_learning" not in {f["rule"] for f in findings}  # a noise rule: not theirs
    report = CliRunner().invoke(cli, ["diagnose", str(run.log_dir)])
    assert report.exit_code == 0 and (run.log_dir / "report.html").is_file(), report.output


def test_a_crossq_checkpoints_batch_renorm_counter_is_checked(tmp_path):
    run = rltrain.train(tiny_dict(tmp_path, run_name="c", algo="crossq", max_timesteps=200))
    payload = load_checkpoint(run.checkpoint)
    payload["critic"]["renorms.0.steps"] = torch.tensor(-3)
    torch.save(payload, forged := tmp_path / "forged.pt")
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(forged)])
    assert result.exit_code == 2 and "its field 'critic.renorms.0.steps' is" in result.output
    assert "a count: a 0-d int64 tensor >= 0" in result.output


@pytest.mark.parametrize("algo", ["crossq", "tqc"])
def test_the_entropy_rule_judges_them_and_names_their_own_section(tmp_path, algo):
    config = config_from_dict(tiny_dict(tmp_path, algo=algo, **{algo: {"ent_coef": 1e-3}}))
    assert "entropy_collapse" in {h.spec.name for h in rule_hooks(RuleContext(config, 3, 2))}
    rule = EntropyCollapse(RuleContext(config, 3, 2))
    rule.on_update(Update(100, 1, {"entropy": -6.0, "ent_coef": 1e-3}))
    found = [f for step in range(4) for f in rule.on_eval(evaluation(1000 * step, step))]
    assert len(found) == 1 and found[0].suggested_set == {f"{algo}.ent_coef": "auto"}
    assert f"({algo}.ent_coef: auto)" in found[0].message


def test_diagnose_verify_forks_a_crossq_run(tmp_path):
    """Far too high learning rates: the learning_rate rule names them and --verify trains
    both CrossQ branches from a checkpoint before the finding."""
    raw = tiny_dict(tmp_path, algo="crossq", actor_lr=0.1, critic_lr=0.1, safe_mode=False,
                    max_timesteps=400,
                    diagnostics={"learning_rate": {"every_updates": 20, "measurements": 2}})
    (tmp_path / "hot.yaml").write_text(yaml.safe_dump(raw))
    trained = CliRunner().invoke(cli, ["train", "--config", str(tmp_path / "hot.yaml"),
                                       "--run-name", "hot"])
    assert trained.exit_code == 0, trained.output
    run = tmp_path / "logs" / "hot"
    result = CliRunner().invoke(cli, ["diagnose", str(run), "--verify", "--steps", "100",
                                      "--fork-step", "400", "--seeds", "1", "--json"])
    assert result.exit_code == 0, result.output
    checked = [v for v in json.loads(result.stdout)["verifications"]
               if v["rule"] == "learning_rate"]
    assert checked, "the learning_rate rule did not name the CrossQ run's rates"
    for kind in ("fix", "control"):
        branch = checked[0]["branches"][kind]
        assert branch["exit_code"] == 0 and branch["returns"], branch
        config = yaml.safe_load((run.parent / branch["run"] / "config.yaml").read_text())
        assert config["algo"] == "crossq"
