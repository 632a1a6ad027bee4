"""SB3 runs continued as SB3 continues training: another `learn()` with the same callback,
or a saved model loaded and trained on under the run's name, goes on in the run's folder
(steps, episodes, logs, findings); a pause says how in SB3's own lines."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import yaml
from click.testing import CliRunner
from stable_baselines3 import TD3
from stable_baselines3.common.callbacks import BaseCallback
from test_sb3_callback import PauseAt, td3

from rltrain.integrations.sb3 import RltrainCallback
from rltrain.scripts.cli import cli
from rltrain.scripts.commands.run_commands import _say_paused
from rltrain.utils.errors import UserError
from rltrain.utils.run.log_files import read_jsonl

ENV = "fake_envs:FakePoint-v0"  # 20-step episodes


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def episodes(tmp_path, run: str) -> list[dict]:
    return [m for m in read_jsonl(tmp_path / "logs" / run / "metrics.jsonl")
            if m["kind"] == "episode"]


def status(tmp_path, run: str) -> dict:
    return json.loads((tmp_path / "logs" / run / "status.json").read_text())


@pytest.mark.parametrize("reset", [False, True])
def test_learn_again_with_the_same_callback_continues_the_run(tmp_path, reset):
    model, callback = td3(ENV), RltrainCallback("again")
    model.learn(200, callback=callback)
    model.learn(200, callback=callback, reset_num_timesteps=reset)
    now = status(tmp_path, "again")
    assert (now["state"], now["env_steps"], now["episodes"]) == ("finished", 400, 20)
    assert [e["episode"] for e in episodes(tmp_path, "again")] == list(range(20))
    assert [e["env_steps"] for e in episodes(tmp_path, "again")] == list(range(20, 401, 20))
    config = yaml.safe_load((tmp_path / "logs" / "again" / "config.yaml").read_text())
    assert config["max_timesteps"] == 400
    events = read_jsonl(tmp_path / "logs" / "again" / "events.jsonl")
    resumed = [e for e in events if e["action"] == "resume"]
    assert [(e["env_steps"], e["message"]) for e in resumed] == [
        (200, "continued at step 200 (another learn() call with its callback); "
              "its rules go on")]


def test_a_run_named_by_default_is_continued_by_its_callback_too(tmp_path):
    model, callback = td3(ENV), RltrainCallback()
    model.learn(120, callback=callback)
    model.learn(80, callback=callback, reset_num_timesteps=False)
    (folder,) = (tmp_path / "logs").iterdir()
    assert folder.name.startswith("FakePoint-v0_td3_s0_")
    assert status(tmp_path, folder.name)["env_steps"] == 200


def test_a_paused_model_loaded_and_learned_on_continues_its_run(tmp_path, capsys):
    pauser = PauseAt("p", 150)
    td3(ENV).learn(1000, callback=[RltrainCallback("p"), pauser])
    printed = capsys.readouterr().out
    folder = tmp_path / "checkpoints" / "p"
    model_file, buffer_file = folder / "paused_at_step_151.zip", \
        folder / "paused_at_step_151_replay_buffer.pkl"
    lines = ('    model = TD3.load("checkpoints/p/paused_at_step_151.zip", env=env)\n'
             '    model.load_replay_buffer("checkpoints/p/paused_at_step_151_replay_buffer.pkl")\n'
             '    model.learn(849, reset_num_timesteps=False, '
             'callback=RltrainCallback(run_name="p"))')
    assert lines in printed
    assert status(tmp_path, "p")["continue_with"].endswith(lines)
    shown = CliRunner().invoke(cli, ["status", "p"])
    assert shown.exit_code == 0 and 'RltrainCallback(run_name="p")' in shown.output
    capsys.readouterr()
    _say_paused(status(tmp_path, "p"))  # what `rltrain pause p` prints once it paused
    said = capsys.readouterr().out
    assert said.endswith(lines + "\n") and "rltrain resume" not in said
    # The lines it printed, run as they are
    model = TD3.load(model_file, env=gym.make(ENV), device="cpu")
    model.load_replay_buffer(buffer_file)
    model.learn(49, reset_num_timesteps=False, callback=RltrainCallback(run_name="p"))
    now = status(tmp_path, "p")
    assert (now["state"], now["env_steps"], now["episodes"]) == ("finished", 200, 9)
    # SB3 resets its env on load: the episode the pause cut short is not counted
    assert [(e["episode"], e["env_steps"]) for e in episodes(tmp_path, "p")] == [
        *zip(range(7), range(20, 141, 20), strict=True), (7, 171), (8, 191)]
    events = read_jsonl(tmp_path / "logs" / "p" / "events.jsonl")
    assert [(e["action"], e["env_steps"]) for e in events] == [
        ("pause", 150), ("paused", 151), ("resume", 151)]
    assert events[-1]["message"].endswith("its rules go on")  # the watch's state was kept


def test_a_fresh_model_under_an_existing_run_name_is_refused_in_one_line(tmp_path):
    td3(ENV).learn(150, callback=RltrainCallback("taken"))
    with pytest.raises(UserError, match=r"^run 'taken' already exists \(logs/taken\); to "
                       r"continue it, load its model \(TD3\.load\(PATH, env=env\)\) and "
                       r"learn with reset_num_timesteps=False, or choose another run_name$"):
        td3(ENV).learn(150, callback=RltrainCallback("taken"))


def test_rltrain_resume_on_an_sb3_model_says_what_to_do_instead(tmp_path):
    model = td3(ENV)
    model.learn(120, callback=RltrainCallback("z"))
    model.save(tmp_path / "checkpoints" / "z" / "model.zip")
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", "checkpoints/z/model.zip"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: 'checkpoints/z/model.zip' is a Stable-Baselines3 model, not an rltrain "
        "checkpoint: continue it in Python with SB3 (Model.load, load_replay_buffer, learn "
        'with reset_num_timesteps=False and callback=RltrainCallback(run_name="z")); '
        "`rltrain status z` prints the exact lines"]


class RaiseAt(BaseCallback):
    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.num_timesteps == self.at:
            raise RuntimeError("the user's own callback failed")
        return True


def test_learn_again_after_a_learn_that_raised_continues_the_run(tmp_path):
    model, callback = td3(ENV), RltrainCallback("raised")
    with pytest.raises(RuntimeError):
        model.learn(200, callback=[callback, RaiseAt(60)])
    model.learn(100, callback=callback, reset_num_timesteps=False)
    now = status(tmp_path, "raised")
    assert (now["state"], now["env_steps"], now["episodes"]) == ("finished", 160, 8)


def test_a_model_saved_earlier_continues_the_run_from_its_own_step(tmp_path):
    model, callback = td3(ENV), RltrainCallback("back", config={
        "diagnostics": {"heatmap_freq": 100}})
    model.learn(200, callback=callback)
    model.save(tmp_path / "at_200.zip")
    model.learn(200, callback=callback, reset_num_timesteps=False)
    heatmaps = tmp_path / "logs" / "back" / "heatmaps"
    assert (heatmaps / "heatmap_step_400.png").is_file()
    again = TD3.load(tmp_path / "at_200.zip", env=gym.make(ENV), device="cpu")
    again.learn(100, reset_num_timesteps=False, callback=RltrainCallback("back", config={
        "diagnostics": {"heatmap_freq": 100}}))
    # the history after step 200 is left out of every reader, its files moved aside
    assert [e["env_steps"] for e in episodes(tmp_path, "back")] == list(range(20, 301, 20))
    assert not (heatmaps / "heatmap_step_400.png").exists()
    (aside,) = (tmp_path / "logs" / "back").glob("superseded_after_step_200_*")
    assert (aside / "heatmaps" / "heatmap_step_400.png").is_file()
    events = read_jsonl(tmp_path / "logs" / "back" / "events.jsonl")
    assert "moved aside, nothing deleted" in events[-1]["message"]
    assert status(tmp_path, "back")["env_steps"] == 300
