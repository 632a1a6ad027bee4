"""docs/examples/cleanrl_ppo.py: a CleanRL-style PPO loop on CartPole with the Watcher.
A short healthy run is watched (run folder, discrete state-action map) without a
warning; a rule's pause stops it at once, `rltrain pause` after the rollout's update;
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

EXAMPLE = Path(__file__).parents[1] / "docs" / "examples" / "cleanrl_ppo.py"
RUN = "cleanrl_ppo"
# 4 envs x 128 steps: rollouts of 512 env steps, each trained on in 4 x 4 minibatches
ROLLOUT, UPDATES = 512, 16


@pytest.fixture(scope="module")
def example():
    return load_example("cleanrl_ppo")


def test_the_watcher_adds_about_twenty_lines():
    assert_watcher_lines_marked(EXAMPLE, 22)


def test_a_short_healthy_run_is_watched_without_a_warning(tmp_path, example):
    assert example.main(["--total-timesteps", str(6 * ROLLOUT)]) == 0
    log_dir = tmp_path / "logs" / RUN
    status = json.loads((log_dir / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "finished", 6 * ROLLOUT, 6 * UPDATES)
    config = yaml.safe_load((log_dir / "config.yaml").read_text())
    assert (config["algo"], config["num_envs"], config["batch_size"]) == ("ppo", 4, 128)
    episodes = [m for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "episode"]
    assert len(episodes) > 20 and sum(e["length"] for e in episodes) <= 6 * ROLLOUT
    assert list(log_dir.glob("events.out.tfevents.*"))
    # The state-action map: CartPole's two actions, one bin each, the policy's choice
    (clusters,) = (log_dir / "heatmaps").glob("clusters_step_*.json")
    rows = [c["action_probs"] for c in json.loads(clusters.read_text())["clusters"].values()
            if c["samples"]]
    assert rows and all(len(row) == 1 and len(row[0]) == 2 for row in rows)
    assert all(sum(row[0]) == pytest.approx(1.0, abs=0.01) for row in rows)
    assert {max(range(2), key=row[0].__getitem__) for row in rows} == {0, 1}
    report = diagnose(RUN)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []
    assert {"q_overestimation", "small_replay"} <= set(report["not_judged_for"]["rules"])
    assert "reward_scale" not in report["not_judged_for"]["rules"]


def test_a_rules_pause_stops_at_once_and_the_run_goes_on_from_the_file(tmp_path, example,
                                                                       capsys):
    # One env, rollouts of 128 steps; a NaN reward at its 150th step, in the second
    # rollout: the pause drops that rollout, the networks as the first one's update left them.
    one_env = ["--num-envs", "1", "--num-steps", "128", "--total-timesteps", "512"]
    code = example.main(["--env-id", "fake_envs:FakeNaNCartPole-v0", *one_env])
    assert code == 3
    path = Path("checkpoints") / RUN / "paused_at_step_150_state.pt"
    saved = torch.load(path, weights_only=True)
    assert set(saved) == {"env_steps", "updates", "actor", "critic", "optimizer"}
    assert (saved["env_steps"], saved["updates"]) == (150, UPDATES)
    assert saved["optimizer"]["state"][0]["step"] == UPDATES  # never trained on the NaN
    assert all(torch.isfinite(v).all() for v in saved["actor"].values())
    events = read_jsonl(tmp_path / "logs" / RUN / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 150), ("non_finite", "paused", 150)]
    printed = capsys.readouterr().out
    assert f'Watcher(..., run_name="{RUN}", continue_from="{path}")' in printed
    # The cause fixed (the env without its NaN), the printed file continues the run: the
    # rollout cut short is collected again, from its first step.
    assert example.main([*one_env, "--continue-from", str(path)]) == 0
    status = json.loads((tmp_path / "logs" / RUN / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "finished", 150 + 3 * 128, 4 * UPDATES)
    events = read_jsonl(tmp_path / "logs" / RUN / "events.jsonl")
    assert [e["env_steps"] for e in events if e["action"] == "resume"] == [150]


def test_rltrain_pause_waits_for_the_rollouts_update(tmp_path, example, monkeypatch):
    # `rltrain pause` at the env's 150th step, in the first rollout of 512 steps: the
    # loop stops once that rollout has been trained on, at step 512.
    monkeypatch.setenv("RLTRAIN_TEST_PAUSE_RUN", RUN)
    code = example.main(["--env-id", "fake_envs:FakePauseAskingCartPole-v0",
                         "--num-envs", "1", "--num-steps", "512",
                         "--total-timesteps", str(4 * ROLLOUT)])
    assert code == 3
    status = json.loads((tmp_path / "logs" / RUN / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "paused", ROLLOUT, UPDATES)
    assert status["pause_reason"].startswith("[outside_request]")
    path = Path("checkpoints") / RUN / f"paused_at_step_{ROLLOUT}_state.pt"
    assert f'continue_from="{path}"' in status["continue_with"]
    assert example.main(["--num-envs", "1", "--num-steps", "512",
                         "--total-timesteps", str(4 * ROLLOUT),
                         "--continue-from", str(path)]) == 0
    status = json.loads((tmp_path / "logs" / RUN / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["updates"]) == (
        "finished", 4 * ROLLOUT, 4 * UPDATES)
    report = diagnose(RUN)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []


def test_a_loop_that_never_clears_its_gradients_is_named(tmp_path, example, monkeypatch):
    # A planted code fault: the loop's optimizer.zero_grad() does nothing
    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad", lambda self, set_to_none=True: None)
    assert example.main(["--total-timesteps", str(2 * ROLLOUT)]) == 0
    report = diagnose(RUN)
    found = {f["rule"]: f for f in report["findings"] if f["severity"] != "info"}
    assert list(found) == ["gradients_not_zeroed"]
    assert "zero_grad()" in found["gradients_not_zeroed"]["message"]
