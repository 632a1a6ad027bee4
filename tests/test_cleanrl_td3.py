"""docs/examples/cleanrl_td3.py: CleanRL's TD3 for Gymnasium 1.x with the Watcher names a
planted fault, counts vector envs' steps and episodes, pauses with its state saved, and
adds about 20 lines to the plain script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import rltrain
from rltrain.scripts.cli import cli
from rltrain.utils.run.log_files import read_jsonl

from conftest import load_example

EXAMPLE = Path(__file__).parents[1] / "docs" / "examples" / "cleanrl_td3.py"
SMALL = ["--batch-size", "32", "--hidden", "16"]


@pytest.fixture(scope="module")
def example():
    return load_example("cleanrl_td3")


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_the_watcher_adds_about_twenty_lines():
    marked = [line for line in EXAMPLE.read_text().splitlines()
              if re.search(r"#\s*rltrain$", line)]
    assert len(marked) <= 23
    # every line that names the Watcher is one of them (the docstring aside)
    code = EXAMPLE.read_text().split('"""', 2)[2]
    assert all(re.search(r"#\s*rltrain$", line) for line in code.splitlines()
               if "watcher" in line.lower())


def test_the_example_names_a_planted_reward_fault(tmp_path, example):
    code = example.main(["--env-id", "fake_envs:FakeScaledPendulum-v0",  # rewards x 1e-5
                         "--total-timesteps", "1000", "--learning-starts", "900",
                         "--eval-every", "500", *SMALL])
    assert code == 0
    found = {f["rule"]: f for f in rltrain.diagnose("cleanrl_td3")}
    assert found["reward_scale"]["severity"] == "warning"
    metrics = read_jsonl(tmp_path / "logs" / "cleanrl_td3" / "metrics.jsonl")
    assert [m["env_steps"] for m in metrics if m["kind"] == "eval"] == [500, 1000]
    assert sum(m["kind"] == "episode" for m in metrics) == 5
    status = json.loads(CliRunner().invoke(cli, ["status", "cleanrl_td3", "--json"]).output)
    assert (status["state"], status["env_steps"], status["updates"]) == ("finished", 1000, 99)


def test_vector_envs_count_every_envs_step_and_episode(tmp_path, example):
    code = example.main(["--env-id", "fake_envs:FakePoint-v0", "--num-envs", "2",
                         "--total-timesteps", "100", "--learning-starts", "50",
                         "--eval-every", "1000", *SMALL])
    assert code == 0
    episodes = [m for m in read_jsonl(tmp_path / "logs" / "cleanrl_td3" / "metrics.jsonl")
                if m["kind"] == "episode"]
    # 100 vector steps of 2 envs: 200 env steps, 10 episodes of 20 steps
    assert sorted(e["episode"] for e in episodes) == list(range(10))
    assert all(e["length"] == 20 for e in episodes)
    status = json.loads((tmp_path / "logs" / "cleanrl_td3" / "status.json").read_text())
    assert (status["env_steps"], status["episodes"], status["updates"]) == (200, 10, 49)


def test_a_nan_reward_pauses_the_loop_with_its_state_saved(tmp_path, example):
    code = example.main(["--env-id", "fake_envs:FakeNaNReward-v0",  # NaN reward at step 120
                         "--total-timesteps", "1000", "--learning-starts", "100", *SMALL])
    assert code == 3
    saved = torch.load(tmp_path / "checkpoints" / "cleanrl_td3" / "paused_at_step_120_state.pt",
                       weights_only=True)
    assert set(saved) == {"env_steps", "updates", "actor", "critic", "target_actor",
                          "qf1_target", "qf2_target", "q_optimizer", "actor_optimizer"}
    events = read_jsonl(tmp_path / "logs" / "cleanrl_td3" / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 120), ("non_finite", "paused", 120)]
