"""docs/examples/cleanrl_dqn.py: a CleanRL-style DQN loop on CartPole with the Watcher.
A short healthy run is watched (run folder, discrete state-action map, the Q network's
gradients) without a warning; a NaN reward pauses it with its replay buffer saved, and
the printed lines continue the run in its folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from example_helpers import assert_watcher_lines_marked, diagnose, in_tmp  # noqa: F401

from rltrain.utils.run.log_files import read_jsonl

from conftest import load_example

EXAMPLE = Path(__file__).parents[1] / "docs" / "examples" / "cleanrl_dqn.py"
RUN = "cleanrl_dqn"
# A short run: updates every 10 steps after 1000 random ones, the target every 100
SHORT = ["--learning-starts", "1000", "--buffer-size", "3000",
         "--target-network-frequency", "100", "--exploration-fraction", "0.3"]


@pytest.fixture(scope="module")
def example():
    return load_example("cleanrl_dqn")


def test_the_watcher_adds_about_twenty_lines():
    assert_watcher_lines_marked(EXAMPLE, 20)


def test_a_short_healthy_run_is_watched_without_a_warning(tmp_path, example):
    assert example.main(["--total-timesteps", "3000", *SHORT]) == 0
    log_dir = tmp_path / "logs" / RUN
    status = json.loads((log_dir / "status.json").read_text())
    # updates at global steps 1010, 1020, ..., 2990
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "finished", 3000, 199)
    config = yaml.safe_load((log_dir / "config.yaml").read_text())
    assert (config["algo"], config["learning_starts"], config["tau"]) == ("dqn", 1000, 1.0)
    assert list(log_dir.glob("events.out.tfevents.*"))
    # The map of the greedy choice: CartPole's two actions, one bin each
    (clusters,) = (log_dir / "heatmaps").glob("clusters_step_*.json")
    found = json.loads(clusters.read_text())["clusters"].values()
    rows = [c["action_probs"] for c in found if c["samples"]]
    assert rows and all(len(row) == 1 and len(row[0]) == 2 for row in rows)
    assert all(sum(row[0]) == pytest.approx(1.0, abs=0.01) for row in rows)
    assert sum(c["samples"] for c in found) >= 200  # after the warm-up only
    report = diagnose(RUN)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []
    assert "q_overestimation" in report["not_judged_for"]["rules"]
    assert "small_replay" not in report["not_judged_for"]["rules"]  # DQN replays


def test_a_nan_reward_pauses_with_the_buffer_and_the_run_goes_on(tmp_path, example, capsys):
    # The env's 150th step has a NaN reward, after 4 updates (at steps 110 to 140); the
    # loop stops before storing that step's transition or updating on it
    short = ["--total-timesteps", "2000", "--learning-starts", "100", "--buffer-size", "3000"]
    assert example.main(["--env-id", "fake_envs:FakeNaNCartPole-v0", *short]) == 3
    path = Path("checkpoints") / RUN / "paused_at_step_150_state.pt"
    saved = torch.load(path, weights_only=True)
    assert set(saved) == {"env_steps", "updates", "critic", "target_network", "optimizer",
                          "rb"}
    assert (saved["env_steps"], saved["updates"], saved["rb"]["pos"]) == (150, 4, 149)
    assert torch.isfinite(saved["rb"]["rows"]).all()
    events = read_jsonl(tmp_path / "logs" / RUN / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 150), ("non_finite", "paused", 150)]
    printed = capsys.readouterr().out
    assert f'Watcher(..., run_name="{RUN}", continue_from="{path}")' in printed
    # The cause fixed (the env without its NaN), the printed file continues the run
    assert example.main([*short, "--continue-from", str(path)]) == 0
    status = json.loads((tmp_path / "logs" / RUN / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "finished", 2000, 4 + 185)  # then at steps 150 to 1990
    events = read_jsonl(tmp_path / "logs" / RUN / "events.jsonl")
    assert [e["env_steps"] for e in events if e["action"] == "resume"] == [150]


def test_a_loop_that_never_clears_its_gradients_is_named(tmp_path, example, monkeypatch):
    # A planted code fault: the loop's optimizer.zero_grad() does nothing
    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad", lambda self, set_to_none=True: None)
    # (a warm-up of 500 steps: SHORT's 1000 of 1500 would be named learning_not_started)
    assert example.main(["--total-timesteps", "1500", *SHORT, "--learning-starts", "500"]) == 0
    report = diagnose(RUN)
    found = {f["rule"]: f for f in report["findings"] if f["severity"] != "info"}
    assert list(found) == ["gradients_not_zeroed"]
    assert "zero_grad()" in found["gradients_not_zeroed"]["message"]
