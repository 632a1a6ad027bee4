"""The Python API (`rltrain.train`, `resume`, `load_policy`, `diagnose`): the CLI's
runs, folders, policies and findings, from Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import rltrain
from rltrain.scripts.cli import cli, load_actor
from rltrain.utils.config.loader import read_yaml_mapping
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.training.envs import make_env

from conftest import TINY, tiny_dict

# Pendulum's returns are all below 0: the catastrophic_reward rule pauses at step 200.
PAUSES = {"min_reward_threshold": 0.0}


@pytest.fixture
def paused(tmp_path: Path) -> rltrain.Run:
    return rltrain.train(tiny_dict(tmp_path, run_name="p", **PAUSES))


def test_train_from_a_mapping_returns_the_finished_run(tmp_path):
    run = rltrain.train(tiny_dict(tmp_path), run_name="m")
    assert (run.name, run.status, run.env_steps, run.reason) == ("m", "finished", 300, None)
    assert run.log_dir == tmp_path / "logs" / "m" and (run.log_dir / "config.yaml").exists()
    assert run.checkpoint_dir == tmp_path / "checkpoints" / "m"
    assert run.checkpoint == run.checkpoint_dir / "checkpoint_step_300.pt"
    assert load_checkpoint(run.checkpoint)["total_steps"] == 300
    assert isinstance(run.best_eval, float) and run.best_eval < 0


def test_train_from_a_shipped_name_with_dotted_and_nested_overrides(tmp_path):
    small = {k: v for k, v in TINY.items() if k not in ("env_name", "min_reward_threshold")}
    run = rltrain.train("pendulum_td3.yaml", **small, run_name="s",
                        log_dir=str(tmp_path / "logs"), checkpoint_dir=tmp_path / "ck",
                        min_reward_threshold=None, td3={"policy_delay": 3},
                        **{"monitor.q_explosion.action": "warn"})
    saved = read_yaml_mapping(run.log_dir / "config.yaml")
    assert run.status == "finished" and run.env_steps == 300
    assert saved["max_timesteps"] == 300 and saved["td3"]["policy_delay"] == 3
    assert saved["monitor"]["q_explosion"]["action"] == "warn"
    assert saved["algo"] == "td3" and saved["actor_lr"] == 3e-4  # from the shipped file


@pytest.mark.parametrize(("overrides", "message"), [
    ({"gama": 0.9}, "unknown config key 'gama'.*did you mean 'gamma'"),
    ({"td3.policy_dela": 2}, "unknown config key 'td3.policy_dela'.*did you mean"),
])
def test_a_bad_key_raises_config_error_and_makes_no_folder(tmp_path, overrides, message):
    with pytest.raises(rltrain.ConfigError, match=message):
        rltrain.train(tiny_dict(tmp_path), **overrides)
    assert not (tmp_path / "logs").exists()


def test_an_unknown_config_name_raises_config_error():
    with pytest.raises(rltrain.ConfigError, match="not found"):
        rltrain.train("no_such_config.yaml")


def test_a_paused_run_resumes_to_the_end(paused):
    assert (paused.status, paused.env_steps) == ("paused", 200)
    assert paused.checkpoint.name == "paused_at_step_200.pt" and "catastrophic" in paused.reason
    run = rltrain.resume(paused.checkpoint, min_reward_threshold=None)
    assert (run.name, run.status, run.env_steps) == ("p", "finished", 300)
    assert run.checkpoint.name == "checkpoint_step_300.pt"


def test_resume_forks_with_run_name_and_refuses_fixed_keys(paused, tmp_path):
    with pytest.raises(rltrain.UserError, match="cannot change 'seed'"):
        rltrain.resume(paused.checkpoint, seed=9)
    fork = rltrain.resume(paused.checkpoint, run_name="fork", min_reward_threshold=None)
    assert fork.name == "fork" and fork.checkpoint_dir == tmp_path / "checkpoints" / "fork"
    assert fork.env_steps == 300


def test_resume_of_a_missing_checkpoint_raises_checkpoint_error(tmp_path):
    with pytest.raises(rltrain.CheckpointError):
        rltrain.resume(tmp_path / "none.pt")


def test_load_policy_predicts_as_evals_actor(paused):
    policy = rltrain.load_policy(paused.checkpoint)
    payload = load_checkpoint(paused.checkpoint)
    actor = load_actor(payload, make_env("Pendulum-v1"), str(paused.checkpoint))
    batch = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    with torch.inference_mode():
        expected = actor(torch.as_tensor(batch)).numpy()
    actions, state = policy.predict(batch)
    assert state is None and actions.shape == (5, 1)
    np.testing.assert_array_equal(actions, expected)
    single, _ = policy.predict(batch[0], deterministic=True)
    with torch.inference_mode():  # as `rltrain eval` runs one observation
        one = actor(torch.as_tensor(batch[0]).unsqueeze(0))[0].numpy()
    np.testing.assert_array_equal(single, one)
    assert single.shape == (1,) and np.all(np.abs(actions) <= 2.0)


def test_load_policy_refuses_a_wrong_shape_and_a_bad_file(paused, tmp_path):
    with pytest.raises(rltrain.UserError, match="takes \\[3\\]"):
        rltrain.load_policy(paused.checkpoint).predict(np.zeros(4))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(rltrain.CheckpointError):
        rltrain.load_policy(bad)


def test_diagnose_returns_the_findings_of_diagnose_json(paused, tmp_path, monkeypatch):
    result = CliRunner().invoke(cli, ["diagnose", str(paused.log_dir), "--json"],
                                catch_exceptions=False)
    expected = json.loads(result.output)["findings"]
    assert any(f["rule"] == "catastrophic_reward" for f in expected)
    assert json.loads(json.dumps(rltrain.diagnose(paused))) == expected
    assert rltrain.diagnose(str(paused.log_dir)) == rltrain.diagnose(paused)
    assert rltrain.diagnose("p", log_dir=tmp_path / "logs") == rltrain.diagnose(paused)
    with pytest.raises(rltrain.UserError, match="not found"):
        rltrain.diagnose("nope", log_dir=tmp_path / "logs")


def test_import_rltrain_loads_neither_torch_nor_gymnasium():
    code = ("import sys, rltrain; rltrain.train, rltrain.Run, rltrain.ConfigError; "
            "print('torch' in sys.modules, 'gymnasium' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]
