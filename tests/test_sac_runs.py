"""SAC wherever DDPG and TD3 work: the CLI and the API train, pause, resume, evaluate and
diagnose it; its checkpoint refuses another algorithm; entropy_collapse judges it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import rltrain
from rltrain.scripts.cli import cli
from rltrain.scripts.training.run_state import RunState
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.rules.entropy_collapse import EntropyCollapse
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.errors import CheckpointError
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.hook import Evaluation, Update
from rltrain.utils.io.checkpoint import load_checkpoint

from conftest import DEVICE, tiny_dict

SAC = {"algo": "sac", "min_reward_threshold": 0.0}  # Pendulum: pauses at step 200


@pytest.fixture
def paused(tmp_path: Path) -> rltrain.Run:
    return rltrain.train(tiny_dict(tmp_path, run_name="sac", **SAC))


def test_a_sac_run_pauses_resumes_evaluates_and_is_diagnosed(paused, tmp_path):
    assert (paused.status, paused.env_steps) == ("paused", 200)
    payload = load_checkpoint(paused.checkpoint)
    assert payload["algo"] == "sac" and "log_ent_coef" in payload
    assert "actor_target" not in payload  # SAC keeps no target policy
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
    assert "no_learning" not in {f["rule"] for f in findings}  # a noise rule: not SAC's
    report = CliRunner().invoke(cli, ["diagnose", str(run.log_dir)])
    assert report.exit_code == 0 and (run.log_dir / "report.html").is_file(), report.output


def test_the_sac_metrics_reach_tensorboard_and_metrics_jsonl(paused):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(paused.log_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/ent_coef", "train/entropy", "train/ent_coef_loss"} <= tags
    assert "train/exploration_noise" not in tags  # SAC adds none


def test_a_td3_checkpoint_does_not_load_into_a_sac_run(tmp_path):
    td3 = rltrain.train(tiny_dict(tmp_path, run_name="td3", algo="td3"))
    payload = load_checkpoint(td3.checkpoint)
    state = RunState(config_from_dict(tiny_dict(tmp_path, algo="sac")), DEVICE)
    try:
        with pytest.raises(CheckpointError, match="holds a td3 agent, and this run's config "
                                                  "says algo sac"):
            state.load_state_dict(payload, str(td3.checkpoint))
    finally:
        state.close()


def test_sac_with_the_fused_backend_on_a_custom_network_is_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["train", "--algo", "sac", "--env", "Pendulum-v1",
                                      "--set", "update_backend=fused", "--set",
                                      "networks.critic.layer_norm=true", "--set",
                                      f"log_dir={tmp_path}", "--steps", "300"])
    assert result.exit_code == 2, result.output
    assert "stock ReLU networks only" in result.output
    assert len(result.output.strip().splitlines()) == 1


def evaluation(step: int, since_best: int) -> Evaluation:
    result = EvalResult([-100.0], [200], [-50.0], np.zeros((1, 3)), np.zeros((1, 3)), [True])
    return Evaluation(step, result, best=-100.0, evals_since_best=since_best)


@pytest.mark.parametrize("ent_coef, entropy, alpha, suggested", [
    (1e-3, -6.0, 1e-3, {"sac.ent_coef": "auto"}),          # fixed, far under the target
    ("auto", 0.5, 1e-6, {"sac.target_entropy": -1.0}),     # learnt, driven to about 0
])
def test_entropy_collapse_names_the_temperature(tmp_path, ent_coef, entropy, alpha, suggested):
    config = config_from_dict(tiny_dict(tmp_path, algo="sac", sac={"ent_coef": ent_coef}))
    rule = EntropyCollapse(RuleContext(config, 3, 2))  # target entropy -2
    rule.on_update(Update(100, 1, {"entropy": entropy, "ent_coef": alpha}))
    assert rule.on_eval(evaluation(1000, 0)) == []       # a new best: not stalled
    assert rule.on_eval(evaluation(2000, 1)) == []
    assert rule.on_eval(evaluation(3000, 2)) == []
    found = rule.on_eval(evaluation(4000, 3))            # 3 evaluations without a new best
    assert len(found) == 1 and found[0].rule == "entropy_collapse"
    assert found[0].suggested_set == suggested and found[0].action == "warn"


def test_entropy_collapse_is_quiet_on_an_exploring_policy(tmp_path):
    config = config_from_dict(tiny_dict(tmp_path, algo="sac"))
    rule = EntropyCollapse(RuleContext(config, 3, 2))
    rule.on_update(Update(100, 1, {"entropy": -2.5, "ent_coef": 0.05}))  # 0.25 nats/dim under
    assert all(rule.on_eval(evaluation(1000 * i, i)) == [] for i in range(1, 8))


def test_the_watcher_judges_a_sac_loop_as_sac(tmp_path):
    from gymnasium import spaces

    from rltrain.integrations.watcher import Watcher
    from rltrain.networks.critic import Critic
    from rltrain.networks.gaussian_actor import GaussianActor

    low, high = np.array([-1.0], np.float32), np.array([1.0], np.float32)
    actor, critic = GaussianActor(3, low, high), Critic(3, low, high)
    watcher = Watcher(actor, critic, spaces.Box(-1, 1, (3,)), spaces.Box(low, high),
                      run_name="w", log_dir=str(tmp_path / "logs"),
                      checkpoint_dir=str(tmp_path / "ck"), config={"algo": "sac"})
    try:
        names = {h.spec.name for h in watcher.session.hooks.hooks if hasattr(h, "spec")}
        assert "entropy_collapse" in names and "no_learning" not in names
        assert watcher.config.algo == "sac"
    finally:
        watcher.close()
    assert torch.is_tensor(actor.action_scale)


def test_diagnose_verify_forks_a_sac_run(tmp_path):
    """A SAC run with far too high learning rates: the learning_rate rule names them and
    --verify trains both SAC branches from a checkpoint before the finding."""
    import json

    import yaml

    raw = tiny_dict(tmp_path, algo="sac", actor_lr=0.1, critic_lr=0.1, safe_mode=False,
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
    assert checked, "the learning_rate rule did not name the SAC run's rates"
    for kind in ("fix", "control"):
        branch = checked[0]["branches"][kind]
        assert branch["exit_code"] == 0 and branch["returns"], branch
        config = yaml.safe_load((run.parent / branch["run"] / "config.yaml").read_text())
        assert config["algo"] == "sac"
