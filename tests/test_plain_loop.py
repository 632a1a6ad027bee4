"""The plain-loop Watcher: docs/examples/cleanrl_ddpg.py names planted faults, pauses
with a loadable state file, and the Watcher refuses spaces it cannot watch."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from click.testing import CliRunner

import rltrain
from rltrain.integrations import Watcher
from rltrain.scripts.cli import cli
from rltrain.utils.errors import ConfigError, UserError
from rltrain.utils.run.log_files import read_jsonl

from conftest import load_example

EXAMPLE = Path(__file__).parents[1] / "docs" / "examples" / "cleanrl_ddpg.py"
SMALL = ["--batch-size", "32", "--hidden", "16", "--eval-every", "500"]


@pytest.fixture(scope="module")
def example():
    return load_example("cleanrl_ddpg")


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_the_example_names_a_planted_reward_fault(tmp_path, example):
    code = example.main(["--env-id", "fake_envs:FakeScaledPendulum-v0",  # rewards x 1e-5
                         "--total-timesteps", "1000", "--learning-starts", "900", *SMALL])
    assert code == 0
    found = {f["rule"]: f for f in rltrain.diagnose("cleanrl_ddpg")}
    assert found["reward_scale"]["severity"] == "warning"
    assert found["reward_scale"]["step"] == 1000  # the 5th episode: the reward window's
    metrics = read_jsonl(tmp_path / "logs" / "cleanrl_ddpg" / "metrics.jsonl")
    assert [m["env_steps"] for m in metrics if m["kind"] == "eval"] == [500, 1000]
    assert sum(m["kind"] == "episode" for m in metrics) == 5
    status = json.loads(CliRunner().invoke(cli, ["status", "cleanrl_ddpg", "--json"]).output)
    assert (status["state"], status["env_steps"], status["updates"]) == ("finished", 1000, 100)


def test_a_nan_reward_pauses_the_loop_with_its_state_saved(tmp_path, example):
    code = example.main(["--env-id", "fake_envs:FakeNaNReward-v0",  # NaN reward at step 120
                         "--total-timesteps", "1000", "--learning-starts", "100", *SMALL])
    assert code == 3
    saved = torch.load(tmp_path / "checkpoints" / "cleanrl_ddpg" / "paused_at_step_120_state.pt",
                       weights_only=True)
    assert saved["env_steps"] == 120
    assert set(saved) == {"env_steps", "updates", "actor", "critic", "actor_target",
                          "qf_target", "actor_optimizer", "q_optimizer"}
    assert saved["updates"] == 20
    assert saved["actor_optimizer"]["state"][0]["step"] == 20  # 20 updates, 101 to 120
    events = read_jsonl(tmp_path / "logs" / "cleanrl_ddpg" / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 120), ("non_finite", "paused", 120)]
    status = json.loads((tmp_path / "logs" / "cleanrl_ddpg" / "status.json").read_text())
    assert status["state"] == "paused" and status["pause_reason"].startswith("[non_finite]")


def test_rltrain_pause_reaches_the_loop_at_its_next_env_step(tmp_path):
    env = gym.make("Pendulum-v1")
    actor, critic = torch.nn.Linear(3, 1), torch.nn.Bilinear(3, 1, 1)
    watcher = Watcher(actor, critic, env.observation_space, env.action_space, run_name="w",
                      config={"max_timesteps": 100, "learning_starts": 10})
    obs, _ = env.reset(seed=0)
    for step in range(1, 100):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        obs = next_obs
        if step == 30:
            assert CliRunner().invoke(cli, ["pause", "w", "--no-wait"]).exit_code == 0
        if watcher.should_pause:
            break
    assert step == 31 and watcher.pause_reason.startswith("[outside_request]")
    path = watcher.pause()
    assert path.name == "paused_at_step_31_state.pt"
    assert torch.load(path, weights_only=True)["actor"].keys() == actor.state_dict().keys()
    # What `status` says continues it is the loop's way, not `rltrain resume` (which
    # cannot run the loop, and refused the file as "not an rltrain checkpoint").
    shown = json.loads(CliRunner().invoke(cli, ["status", "w", "--json"]).output)
    assert shown["continue_with"] == (
        "  saved: checkpoints/w/paused_at_step_31_state.pt\n"
        "  once the cause is fixed, load it (torch.load(path, weights_only=True)), give "
        "\"actor\", \"critic\" their state_dict, run your loop on from env step 31 (its "
        "\"env_steps\"), and watch it with:\n"
        "    Watcher(..., run_name=\"w\", "
        "continue_from=\"checkpoints/w/paused_at_step_31_state.pt\")")
    table = CliRunner().invoke(cli, ["status", "w"]).output  # a narrow terminal's: folded
    assert "…" not in table
    assert 'continue_from="checkpoints/w/paused_at_step_31_state.pt")' in "".join(table.split())
    assert "rltrain resume" not in shown["continue_with"]
    for command in ("resume", "eval"):
        refused = CliRunner().invoke(cli, [command, "--checkpoint", str(path)])
        assert refused.exit_code == 2
        assert "is the state a Watcher saved (a plain training loop's), not an rltrain " \
               "checkpoint" in refused.output, refused.output


def test_a_discrete_action_space_is_refused_for_an_actor_critic_in_one_line():
    with pytest.raises(ConfigError, match=r"^algo ddpg acts in a 1-D Box action space, not "
                                          r"Discrete\(3\); a loop of Discrete actions is "
                                          r"watched as algo ppo, a2c or dqn"):
        Watcher(torch.nn.Linear(2, 3), torch.nn.Linear(2, 1), gym.spaces.Box(-1, 1, (2,)),
                gym.spaces.Discrete(3), run_name="d")
    assert not Path("logs/d").exists()


def test_a_run_name_taken_is_refused_with_the_integrations_hint():
    env = gym.make("Pendulum-v1")
    actor, critic = torch.nn.Linear(3, 1), torch.nn.Bilinear(3, 1, 1)
    Watcher(actor, critic, env.observation_space, env.action_space, run_name="x").close()
    with pytest.raises(UserError, match=r"^run 'x' already exists \(logs/x\); choose another "
                                        r"run_name$"):
        Watcher(actor, critic, env.observation_space, env.action_space, run_name="x")
