"""An env whose own code raises: one line naming the exception and where, exit code 5, the
traceback in the log folder, a resumable checkpoint, and a resume (once the env is
fixed) that takes the failed step again and ends where a run that never failed ends."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from test_resume import assert_same_state, metrics

from rltrain.scripts.cli import cli
from rltrain.utils.errors import EnvFailure
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.run.status import StatusFile, read_status
from rltrain.utils.training.env_clock import ENV_CLOCK
from rltrain.utils.training.evaluation import evaluate

import fake_envs
from conftest import tiny_dict

CRASHING = "fake_envs:FakeCrashingPendulum-v0"  # raises at its 150th step


def train(tmp_path, name: str, env_name: str = CRASHING, eval_freq: int = 1000):
    config = tmp_path / f"{name}.yaml"
    # By default no evaluations: the evaluation env (a crashing one too) would fail first.
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=env_name,
                                               eval_freq=eval_freq)))
    return CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", name])


def test_an_env_that_raises_stops_with_exit_5_and_a_checkpoint_to_resume(tmp_path,
                                                                         monkeypatch):
    result = train(tmp_path, "r")
    logs, checkpoints = tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r"
    paused = checkpoints / "paused_at_step_149.pt"
    assert result.exit_code == 5, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: stopped at step 149: env '{CRASHING}' raised RuntimeError in step at "
        f"fake_envs.py:{fake_envs.CrashingPendulum.step.__code__.co_firstlineno + 3} in step: "
        f"simulator crashed (traceback: {logs / 'env_error_step_149.txt'}); a checkpoint was "
        f"still written; once the env is fixed: rltrain resume --checkpoint {paused}")
    trace = (logs / "env_error_step_149.txt").read_text()
    assert trace.startswith("Traceback") and "RuntimeError: simulator crashed" in trace
    [event] = [e for e in read_jsonl(logs / "events.jsonl") if e["rule"] == "env_error"]
    assert event["action"] == "pause" and event["env_steps"] == 149
    status = read_status(logs / "status.json")
    assert status["state"] == "paused" and "simulator crashed" in status["pause_reason"]
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(logs), "--json"]).output)
    assert [(f["rule"], f["severity"], f["step"]) for f in report["findings"]] == [
        ("env_error", "pause", 149)]
    # The checkpoint keeps the actions of the step the env failed in.
    assert load_checkpoint(paused)["trainer"]["unstepped"].shape == (1, 1)

    # Not fixed: the same step fails again, and the run is where it was.
    again = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert again.exit_code == 5 and "stopped at step 149" in again.output, again.output
    # Fixed: the resumed run takes that step with the same actions and ends exactly where
    # a run of the fixed env ends.
    monkeypatch.setattr(fake_envs.CrashingPendulum, "broken", False)
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0, resumed.output
    assert train(tmp_path, "never_failed").exit_code == 0
    assert_same_state(load_checkpoint(checkpoints / "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "never_failed" /
                                      "checkpoint_step_300.pt"))


@pytest.mark.parametrize("env, error", [
    ("FakeExitingPendulum-v0", "SystemExit"), ("FakeInterruptingPendulum-v0", "KeyboardInterrupt"),
    ("FakeWordyPendulum-v0", "terminated='yes' (str) from step; Gymnasium's API wants a bool"),
])
def test_an_env_that_exits_or_interrupts_is_an_env_failure_with_a_checkpoint(
        tmp_path, env, error):
    result = train(tmp_path, "x", env_name=f"fake_envs:{env}")
    assert result.exit_code == 5, result.output
    assert error in result.output and "Traceback" not in result.output
    paused = tmp_path / "checkpoints" / "x" / "paused_at_step_149.pt"
    assert load_checkpoint(paused)["total_steps"] == 149
    assert read_status(tmp_path / "logs" / "x" / "status.json")["state"] == "paused"


def test_an_env_raising_in_an_async_worker_is_named_where_it_raised(tmp_path):
    config = tmp_path / "a.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=CRASHING, eval_freq=1000,
                                               num_envs=2, vector_mode="async")))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "a"])
    assert result.exit_code == 5, result.output
    assert "raised RuntimeError in step at fake_envs.py:" in result.output  # not Gymnasium's
    assert "Received the following error" not in result.output  # Gymnasium's own report
    trace = next((tmp_path / "logs" / "a").glob("env_error_step_*.txt")).read_text()
    assert 'fake_envs.py", line' in trace and "simulator crashed" in trace


def test_an_evaluation_the_env_failed_in_is_done_again_on_resume(tmp_path, monkeypatch):
    """The evaluation env reaches its 150th step in the first evaluation (step 100), before
    the training env does: resumed once fixed, the run evaluates at step 100 after all and
    its whole history is that of a run that never failed."""
    result = train(tmp_path, "r", eval_freq=100)
    assert result.exit_code == 5 and "in step (evaluation)" in result.output, result.output
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_100.pt"
    assert load_checkpoint(paused)["trainer"]["redo_due"] is True
    monkeypatch.setattr(fake_envs.CrashingPendulum, "broken", False)
    assert CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)]).exit_code == 0
    assert train(tmp_path, "never_failed", eval_freq=100).exit_code == 0
    assert metrics(tmp_path / "logs" / "r" / "metrics.jsonl") == metrics(
        tmp_path / "logs" / "never_failed" / "metrics.jsonl")
    assert_same_state(load_checkpoint(tmp_path / "checkpoints" / "r" / "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "never_failed" /
                                      "checkpoint_step_300.pt"))
    assert (tmp_path / "checkpoints" / "r" / "checkpoint_step_100.pt").exists()


def test_an_env_that_fails_its_first_reset_is_one_line_and_resumes_once_fixed(tmp_path,
                                                                             monkeypatch):
    result = train(tmp_path, "r", env_name="fake_envs:FakeWrongShapePendulum-v0")
    assert result.exit_code == 5 and "Traceback" not in result.output, result.output
    assert "raised ValueError in reset" in result.output
    assert "stopped at step 0" in result.output
    # Fixed (the same env id now makes a plain Pendulum): the checkpoint of step 0, with no
    # episode begun, resumes like a new run.
    monkeypatch.setattr(fake_envs.WrongShapePendulum, "reset", gym.Wrapper.reset)
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_0.pt"
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0, resumed.output


def test_an_evaluation_env_that_raises_is_an_env_failure():
    env = gym.make(CRASHING, at=5)
    with pytest.raises(EnvFailure, match="env 'FakeCrashingPendulum-v0' raised RuntimeError "
                                         "in step \\(evaluation\\) at fake_envs.py:"):
        evaluate(lambda obs: np.zeros(1, np.float32), env, n_episodes=1, seed=0)


HANGING = "fake_envs:FakeHangingPendulum-v0"  # never returns from its 150th step


def test_an_env_step_that_hangs_past_env_step_timeout_stops_with_a_checkpoint(
        tmp_path, monkeypatch):
    monkeypatch.setattr(fake_envs.HangingPendulum, "broken", True)
    monkeypatch.setattr(ENV_CLOCK, "notice_after", 0.3)
    stuck = []
    original = StatusFile.write

    def write(self, state, pause_reason=None, **extra):
        if state == "stuck":
            stuck.append(extra["stuck"]["call"])
        original(self, state, pause_reason, **extra)

    monkeypatch.setattr(StatusFile, "write", write)
    config = tmp_path / "h.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=HANGING, eval_freq=1000,
                                               env_step_timeout=1.5)))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "h"])
    paused = tmp_path / "checkpoints" / "h" / "paused_at_step_149.pt"
    assert result.exit_code == 5, result.output
    assert stuck == ["step"]  # status said so while it hung
    assert (f"env '{HANGING}' did not return from step within 1.5 s (env_step_timeout)"
            in result.output), result.output
    assert f"rltrain resume --checkpoint {paused}" in result.output
    assert read_status(tmp_path / "logs" / "h" / "status.json")["state"] == "paused"
    # Once the env is fixed, the run takes the step it hung in again, and ends as a run
    # that never hung.
    monkeypatch.setattr(fake_envs.HangingPendulum, "broken", False)
    again = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert again.exit_code == 0, again.output
    never = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "never"])
    assert never.exit_code == 0, never.output
    assert_same_state(*(load_checkpoint(tmp_path / "checkpoints" / name /
                                        "checkpoint_step_300.pt") for name in ("h", "never")))


def test_an_envs_exception_text_reaches_no_terminal_as_control_sequences(tmp_path):
    """An env's message with terminal escapes (clear the screen, set the window title) is
    shown escaped by the run, status and diagnose, and so stored in its files; a status
    planted with one is shown escaped too."""
    message = "bad state \x1b[2J\x1b]0;pwned\x07 here"
    config = tmp_path / "esc.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=CRASHING, eval_freq=1000,
                                               env_kwargs={"message": message})))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "esc"])
    assert result.exit_code == 5, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "bad state \\x1b[2J\\x1b]0;pwned\\x07 here" in result.output
    folder = tmp_path / "logs" / "esc"
    for name in ("events.jsonl", "status.json"):
        assert "\\u001b" not in (folder / name).read_text()  # JSON's escape of a raw ESC
    status = json.loads((folder / "status.json").read_text())
    status["pause_reason"] = message  # planted: a file read is shown escaped too
    (folder / "status.json").write_text(json.dumps(status))
    with (folder / "events.jsonl").open("a") as f:
        f.write(json.dumps({"env_steps": 150, "rule": "catastrophic_reward",
                            "action": "warn", "value": message, "message": message}) + "\n")
    for command in ("status", "diagnose"):
        shown = CliRunner().invoke(cli, [command, str(folder)])
        assert shown.exit_code == 0, shown.output
        assert "\x1b" not in shown.output and "\x07" not in shown.output, command


@pytest.mark.parametrize("extra, code, says", [
    ({}, 0, "finished at step 300"),
    ({"min_reward_threshold": 0.0}, 3, "resume with: rltrain resume --checkpoint"),
])
def test_an_env_whose_close_raises_leaves_the_runs_outcome_as_it_was(tmp_path, extra, code,
                                                                       says):
    """A bug in the env's clean-up was a traceback after the run's checkpoint was written,
    with no word of how the run ended."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(
        tmp_path, env_name="fake_envs:FakeCloseFailingPendulum-v0", **extra)))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "c"])
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert says in result.output
    assert "warning: the training env's close() raised RuntimeError: renderer already gone" \
        in result.output


def test_an_env_whose_reset_breaks_the_api_stops_with_a_checkpoint_of_the_whole_step(
        tmp_path, monkeypatch):
    """Its first episode's end (step 200) is where the reset breaks: the run stops there
    with a paused checkpoint of step 200 (it lost the 100 steps since the last periodic
    one, "halfway through an env step"), which resumes exactly once the env is fixed."""
    result = train(tmp_path, "broken", env_name="fake_envs:FakeBrokenResetPendulum-v0")
    assert result.exit_code == 5, result.output
    assert "raised ValueError in reset" in result.output
    paused = tmp_path / "checkpoints" / "broken" / "paused_at_step_200.pt"
    assert f"a checkpoint was still written; once the env is fixed: rltrain resume " \
           f"--checkpoint {paused}" in result.output
    monkeypatch.setattr(fake_envs.BrokenResetPendulum, "broken", False)
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0, resumed.output
    whole = train(tmp_path, "whole", env_name="fake_envs:FakeBrokenResetPendulum-v0")
    assert whole.exit_code == 0, whole.output
    assert_same_state(load_checkpoint(tmp_path / "checkpoints" / "broken" /
                                      "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "whole" /
                                      "checkpoint_step_300.pt"))
