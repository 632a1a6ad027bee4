"""The SB3 callback: planted faults named as rltrain's trainer names them, pauses that
leave a loadable SB3 model and buffer, SAC and vector envs, refusals, the import guard."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

import rltrain
from rltrain.integrations.sb3 import RltrainCallback
from rltrain.integrations.sb3_taps import PolicyTap
from rltrain.integrations.sb3_view import SB3Replay, sb3_view
from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.rules.registry import rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.errors import ConfigError
from rltrain.utils.run.log_files import read_jsonl

from conftest import tiny_dict

TINY_NET = {"net_arch": [16, 16]}  # SB3 adds keys to the dict it gets: pass copies
# Reward statistics after 2 episodes (of 200 steps) instead of 5.
REWARD_WINDOW = {"diagnostics": {"window_size": 2, "grad_freq": 50, "heatmap_freq": 10_000}}
REWARD_RULES = {"reward_scale", "reward_spikes", "constant_reward", "non_finite"}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the callback's default folders: logs/, checkpoints/


def td3(env: str | gym.Env, learning_starts: int = 100, **kwargs) -> TD3:
    return TD3("MlpPolicy", env, policy_kwargs=dict(TINY_NET), batch_size=32, seed=0, device="cpu",
               learning_starts=learning_starts, **kwargs)


def warned(findings: list[dict]) -> set[str]:
    return {f["rule"] for f in findings if f["severity"] in ("warning", "pause")}


def test_a_planted_reward_fault_is_named_as_rltrains_trainer_names_it(tmp_path):
    env = "fake_envs:FakeScaledPendulum-v0"  # rewards x 1e-5
    td3(env, learning_starts=300).learn(400, callback=RltrainCallback("sb3", config=REWARD_WINDOW))
    config = tmp_path / "own.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(
        tmp_path, env_name=env, max_timesteps=400, learning_starts=300, eval_freq=400,
        safe_mode=False, **REWARD_WINDOW)))
    own = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "own"])
    assert own.exit_code == 0, own.output
    sb3_found = warned(rltrain.diagnose("sb3")) & REWARD_RULES
    assert sb3_found == warned(rltrain.diagnose("own")) & REWARD_RULES == {"reward_scale"}
    shown = CliRunner().invoke(cli, ["diagnose", "sb3"])
    assert shown.exit_code == 0 and "reward_scale" in shown.output
    assert (tmp_path / "logs" / "sb3" / "report.html").is_file()
    status = json.loads(CliRunner().invoke(cli, ["status", "sb3", "--json"]).output)
    assert (status["state"], status["env_steps"], status["episodes"]) == ("finished", 400, 2)


class PauseAt(BaseCallback):
    """Runs `rltrain pause RUN` (not waiting) from inside training at one step."""

    def __init__(self, run: str, at: int) -> None:
        super().__init__()
        self.run, self.at, self.result = run, at, None

    def _on_step(self) -> bool:
        if self.num_timesteps == self.at:
            self.result = CliRunner().invoke(cli, ["pause", self.run, "--no-wait",
                                                   "--reason", "checking the callback"])
        return True


def loaded(tmp_path: Path, run: str, steps: int) -> TD3:
    """The paused model and its replay buffer, loaded back with SB3's own API."""
    folder = tmp_path / "checkpoints" / run
    model = TD3.load(folder / f"paused_at_step_{steps}.zip", device="cpu")
    model.load_replay_buffer(folder / f"paused_at_step_{steps}_replay_buffer.pkl")
    return model


def test_rltrain_pause_saves_the_model_and_buffer_and_stops_learn(tmp_path, capsys):
    pauser = PauseAt("p", 150)
    model = td3("Pendulum-v1")
    model.learn(1000, callback=[RltrainCallback("p"), pauser])
    assert pauser.result.exit_code == 0, pauser.result.output
    # Taken after step 150's update, the request stops learn() at SB3's next callback.
    assert model.num_timesteps == 151
    again = loaded(tmp_path, "p", 151)
    assert again.num_timesteps == 151 and again.replay_buffer.size() == 150
    assert again._n_updates == model._n_updates == 50
    events = read_jsonl(tmp_path / "logs" / "p" / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("outside_request", "pause", 150), ("outside_request", "paused", 151)]
    assert events[0]["message"] == "checking the callback"
    status = json.loads((tmp_path / "logs" / "p" / "status.json").read_text())
    assert status["state"] == "paused"
    assert status["pause_reason"] == "[outside_request] checking the callback"
    assert status["latest_checkpoint"].endswith("paused_at_step_151.zip")
    printed = capsys.readouterr().out
    assert "model.load_replay_buffer(" in printed and "reset_num_timesteps=False" in printed


def test_a_nan_reward_pauses_before_sb3_stores_it_and_the_run_continues(tmp_path):
    model = td3("fake_envs:FakeNaNReward-v0")  # NaN reward at step 120 of each episode
    model.learn(1000, callback=RltrainCallback("nan"))
    assert model.num_timesteps == 120
    events = read_jsonl(tmp_path / "logs" / "nan" / "events.jsonl")
    assert [(e["rule"], e["action"]) for e in events] == [("non_finite", "pause"),
                                                          ("non_finite", "paused")]
    again = loaded(tmp_path, "nan", 120)
    assert again.replay_buffer.size() == 119  # the NaN transition is not in it
    assert np.isfinite(again.replay_buffer.rewards[:119]).all()
    again.set_env(gym.make("fake_envs:FakeNaNReward-v0"))
    again.learn(50, reset_num_timesteps=False)  # SB3's way on, from the paused step
    assert again.num_timesteps == 170


def test_sac_runs_through_the_callback_on_its_deterministic_action(tmp_path):
    model = SAC("MlpPolicy", "fake_envs:FakePoint-v0", policy_kwargs=dict(TINY_NET), batch_size=32,
                learning_starts=100, seed=0, device="cpu")
    model.learn(400, callback=RltrainCallback("sac", config={
        "diagnostics": {"grad_freq": 50, "heatmap_freq": 400}}))
    log_dir = tmp_path / "logs" / "sac"
    flow1 = read_jsonl(log_dir / "flow1.jsonl")
    gradients = [d for d in flow1 if d["kind"] == "gradients"]
    assert [d["env_steps"] for d in gradients] == list(range(150, 401, 50))  # every 50 updates
    assert set(gradients[0]["actor"]) == {n for n, _ in model.actor.named_parameters()}
    # The map samples the policy after the warm-up: 300 states, most of them kept
    heatmaps = [d for d in flow1 if d["kind"] == "heatmap"]
    assert [d["env_steps"] for d in heatmaps] == [400]
    clusters = json.loads(Path(heatmaps[0]["png"].replace("heatmap_", "clusters_").replace(
        ".png", ".json")).read_text())["clusters"]
    assert 200 < sum(c["samples"] for c in clusters.values()) <= 300
    episodes = [m for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "episode"]
    assert len(episodes) == 20 and all(e["length"] == 20 for e in episodes)  # 20-step episodes
    status = json.loads((log_dir / "status.json").read_text())
    assert status["integration"].endswith("SAC") and status["updates"] == 300
    # recorded as sac, with its own settings; no exploration-noise rule judges it
    recorded = yaml.safe_load((log_dir / "config.yaml").read_text())
    assert recorded["algo"] == "sac" and recorded["sac"]["ent_coef"] == "auto"
    assert recorded["sac"]["target_entropy"] == -float(model.action_space.shape[0])
    assert "no_learning" not in {h.spec.name for h in rule_hooks(RuleContext(
        config_from_dict(recorded), 2, model.action_space.shape[0]))}
    view, scale = sb3_view(model)  # in the env's units ([0, 4] here), as SB3's predict gives
    # Its deterministic action does not reach log_std: gradient traces leave it unjudged.
    assert view.unprobed == ("actor.log_std.weight", "actor.log_std.bias")
    obs = np.array([[0.5, 0.1], [-0.3, 0.9]], np.float32)
    with torch.no_grad():
        ours = view.actor(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(ours, model.predict(obs, deterministic=True)[0], atol=1e-5)
    tap = PolicyTap(model, scale)  # what the map samples while SAC acts stochastically
    model._last_obs = obs[:1]  # SB3 acts on the training env's current observation
    model.predict(obs[1:], deterministic=True)  # an evaluation's (an EvalCallback's)
    assert tap.pop() is None
    model.predict(obs[:1], deterministic=False)
    np.testing.assert_allclose(tap.env_action(tap.pop()), ours[:1], atol=1e-5)
    assert tap.pop() is None
    tap.close()


@pytest.mark.parametrize("name", ["CrossQ", "TQC"])
def test_sb3_contribs_crossq_and_tqc_are_watched_under_their_own_names(tmp_path, name):
    import sb3_contrib

    model = getattr(sb3_contrib, name)(
        "MlpPolicy", "fake_envs:FakePoint-v0", policy_kwargs=dict(TINY_NET), batch_size=32,
        learning_starts=100, seed=0, device="cpu")
    model.learn(300, callback=RltrainCallback(name, config={
        "diagnostics": {"grad_freq": 50, "heatmap_freq": 300}}))
    log_dir = tmp_path / "logs" / name
    status = json.loads((log_dir / "status.json").read_text())
    assert status["integration"].endswith(name) and status["updates"] == 200
    gradients = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "gradients"]
    assert gradients and set(gradients[0]["critic"]) == {
        n for n, _ in model.critic.named_parameters()}
    algo = name.lower()
    recorded = yaml.safe_load((log_dir / "config.yaml").read_text())
    config = config_from_dict(recorded)  # a valid rltrain config: CrossQ's tau 1 left out
    assert recorded["algo"] == algo and recorded[algo]["ent_coef"] == "auto"
    own = {"CrossQ": {"policy_delay": 3, "batch_norm_momentum": 0.01},
           "TQC": {"top_quantiles_to_drop_per_net": 2, "n_quantiles": 25}}[name]
    assert {k: recorded[algo][k] for k in own} == own
    assert recorded["library"]["algorithm"] == name
    hooks = {h.spec.name for h in rule_hooks(RuleContext(config, 2, 1))}
    assert "entropy_collapse" in hooks and "no_learning" not in hooks
    view, _ = sb3_view(model)  # every Q head, and the first, in the env's units
    obs, action = torch.zeros(4, 2), torch.full((4, 1), 2.0)
    with torch.no_grad():
        assert view.critic(obs, action).shape == (4, 2)
        torch.testing.assert_close(view.q_value(obs, action), view.critic(obs, action)[:, :1])


def test_sb3_sac_with_its_defaults_names_an_env_that_ignores_the_action():
    """SB3's learning_starts 100 leaves too short a warm-up: SAC's sampling noise after it
    is judged instead (its first 1000 steps whose sample was not saturated)."""
    model = SAC("MlpPolicy", "fake_envs:FakeIgnoredActionPendulum-v0",
                policy_kwargs=dict(TINY_NET), batch_size=32, seed=0, device="cpu")
    model.learn(1300, callback=RltrainCallback("sac", config=REWARD_WINDOW))
    lines = [d for d in read_jsonl(Path("logs/sac/flow1.jsonl"))
             if d["kind"] == "action_effect" and d.get("judged_on") == "exploration noise"]
    assert len(lines) == 1 and lines[0]["rows"] == 1000 and lines[0]["action_effect"] < 1.5
    assert "ignored_action" in warned(rltrain.diagnose("sac"))


def test_sb3_td3_without_action_noise_says_why_ignored_action_cannot_judge():
    td3("fake_envs:FakeIgnoredActionPendulum-v0").learn(
        300, callback=RltrainCallback("td3", config=REWARD_WINDOW))
    report = json.loads(CliRunner().invoke(cli, ["diagnose", "td3", "--json"]).output)
    why = report["unjudged"]["ignored_action"]
    assert "the 200 actions after it carry no exploration noise" in why
    assert "action_noise=NormalActionNoise(...)" in why and "learning_starts >= 1000" in why


def test_sb3_td3_with_ou_noise_says_its_noise_is_not_handed_on():
    from stable_baselines3.common.noise import OrnsteinUhlenbeckActionNoise

    noise = OrnsteinUhlenbeckActionNoise(np.zeros(1), 0.5 * np.ones(1))
    td3("fake_envs:FakeIgnoredActionPendulum-v0", action_noise=noise).learn(
        300, callback=RltrainCallback("ou", config=REWARD_WINDOW))
    report = json.loads(CliRunner().invoke(cli, ["diagnose", "ou", "--json"]).output)
    why = report["unjudged"]["ignored_action"]
    assert "carry Ornstein-Uhlenbeck noise, which the library does not hand on" in why
    assert "NormalActionNoise(...)" in why and "learning_starts >= 1000" in why


def test_two_vector_envs_count_each_envs_step_and_episode(tmp_path):
    env = make_vec_env("fake_envs:FakePoint-v0", n_envs=2, seed=0)
    model = td3(env)
    model.learn(300, callback=RltrainCallback("vec"))
    log_dir = tmp_path / "logs" / "vec"
    episodes = [m for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "episode"]
    # 150 steps each, 7 episodes of 20 steps each; the two envs end theirs in one vector
    # step, env 0's transition counted first
    assert sorted(e["episode"] for e in episodes) == list(range(14))
    assert sorted(e["env_steps"] for e in episodes) == sorted([*range(39, 281, 40),
                                                              *range(40, 281, 40)])
    status = json.loads((log_dir / "status.json").read_text())
    assert (status["env_steps"], status["episodes"]) == (300, 14)
    assert yaml.safe_load((log_dir / "config.yaml").read_text())["num_envs"] == 2
    _, scale = sb3_view(model)
    replay, b = SB3Replay(model.replay_buffer, scale, model.device), model.replay_buffer
    newest = replay.newest(3)  # rows step by step, env by env, as rltrain adds them
    assert len(replay) == 300 and b.pos == 150
    np.testing.assert_array_equal(newest.obs.numpy(), b.observations[148:150].reshape(4, 2)[1:])
    np.testing.assert_allclose(newest.actions.numpy(),
                               2.0 * (b.actions[148:150].reshape(4, 1)[1:] + 1.0), atol=1e-6)


def test_an_algorithm_it_does_not_watch_is_refused_in_one_line():
    from sb3_contrib import QRDQN  # off-policy, a quantile network: neither family's

    model = QRDQN("MlpPolicy", "fake_envs:FakeDiscrete-v0", learning_starts=10, device="cpu")
    with pytest.raises(ConfigError, match=r"^RltrainCallback watches SB3's DDPG, TD3, SAC, "
                                          r"CrossQ, TQC, PPO, A2C, DQN, not QRDQN$"):
        model.learn(20, callback=RltrainCallback("qrdqn"))
    assert not Path("logs/qrdqn").exists()


@pytest.mark.parametrize("env_id, message", [
    ("fake_envs:FakeDiscrete-v0", r"^RltrainCallback watches SB3's DDPG, TD3, SAC, CrossQ, "
                                  r"TQC, PPO, A2C, DQN, not QRDQN$"),
    ("fake_envs:FakeMultiDiscrete-v0", r"^rltrain watches a 1-D Box or a Discrete action "
                                       r"space, not MultiDiscrete\(\[3 3\]\)$"),
])
def test_a_model_given_to_the_callback_is_refused_at_its_line_not_inside_learn(env_id,
                                                                             message):
    """Given the model, the callback refuses it where it is made: the error comes from
    the user's own line, two calls deep (the constructor, the check), before training."""
    from sb3_contrib import QRDQN

    model = (QRDQN("MlpPolicy", env_id, device="cpu") if "Multi" not in env_id
             else PPO("MlpPolicy", env_id, n_steps=16, batch_size=16, device="cpu"))
    with pytest.raises(ConfigError, match=message) as refused:
        RltrainCallback("refused", model=model)
    here = [entry for entry in refused.traceback
            if entry.frame.code.name.startswith("test_a_model_given")]
    assert len(here) == 1 and len(refused.traceback) <= 4  # this line, then rltrain's
    assert "stable_baselines3" not in "".join(str(e.path) for e in refused.traceback)
    assert not Path("logs/refused").exists()


def test_without_sb3_the_module_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import fails
    monkeypatch.delitem(sys.modules, "rltrain.integrations.sb3")
    with pytest.raises(ImportError) as caught:
        importlib.import_module("rltrain.integrations.sb3")
    assert str(caught.value) == ('rltrain.integrations.sb3 needs Stable-Baselines3: '
                                 'pip install "rltrain[sb3]"')
    importlib.reload(importlib.import_module("rltrain.integrations"))  # needs no SB3


def test_a_vector_env_whose_env_raises_pauses_the_run_with_its_model_and_reason(tmp_path):
    """SB3 tells a callback nothing when learn() ends in an exception: the run stayed
    "running", then "stopped (killed?)", with no checkpoint and no reason."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = make_vec_env("fake_envs:FakeCrashingPendulum-v0", n_envs=2, seed=0)  # step 150
    model = td3(env)
    with pytest.raises(RuntimeError, match="simulator crashed"):
        model.learn(1000, callback=RltrainCallback("crash"))
    assert type(model.env) is DummyVecEnv  # the callback's watch is gone with learn()
    status = json.loads((tmp_path / "logs" / "crash" / "status.json").read_text())
    assert status["state"] == "paused" and status["env_steps"] == 298  # 149 vector steps
    assert status["pause_reason"] == \
        "[env_error] the env raised RuntimeError in step: simulator crashed"
    assert status["latest_checkpoint"].endswith("paused_at_step_298.zip")
    again = loaded(tmp_path, "crash", 298)
    assert again.num_timesteps == 298 and again.replay_buffer.size() == 149
    shown = CliRunner().invoke(cli, ["status", "crash"])
    assert "paused" in shown.output and "stopped" not in shown.output, shown.output


def test_the_lines_that_continue_a_paused_run_keep_the_callbacks_settings(tmp_path, capsys):
    """They dropped the callback's eval_env and config: the continued run went on without
    its evaluations and with the default rules."""
    settings = {"eval_freq": 100, "diagnostics": {"grad_freq": 50}}
    model = td3("Pendulum-v1")
    model.learn(1000, callback=[RltrainCallback("e", config=settings,
                                                eval_env=gym.make("Pendulum-v1")),
                                PauseAt("e", 150)])
    printed = capsys.readouterr().out
    line = ('callback=RltrainCallback(run_name="e", config={\'eval_freq\': 100, '
            '\'diagnostics\': {\'grad_freq\': 50}}, eval_env=eval_env))')
    assert line in printed, printed
    status = json.loads((tmp_path / "logs" / "e" / "status.json").read_text())
    assert line in status["continue_with"]


def test_one_callback_given_to_a_fresh_model_is_refused_not_merged(tmp_path):
    """A callback reused on another, fresh model continued its first model's run: two
    models' histories in one run folder."""
    from rltrain.utils.errors import UserError

    callback = RltrainCallback("one")
    td3("Pendulum-v1").learn(150, callback=callback)
    with pytest.raises(UserError, match="this RltrainCallback watched another model's run "
                                        "'one'; give this model a callback of its own"):
        td3("Pendulum-v1").learn(150, callback=callback)
    status = json.loads((tmp_path / "logs" / "one" / "status.json").read_text())
    assert status["env_steps"] == 150 and status["state"] == "finished"


@pytest.mark.parametrize("handled", [False, True])
def test_time_limits_stored_as_the_tasks_end_are_named(tmp_path, monkeypatch, handled):
    """SB3's replay buffer without handle_timeout_termination (which its
    optimize_memory_usage needs) stores every truncation as terminal: named once ten
    time limits were stored so, with the setting to change; with it, nothing."""
    from rltrain.utils.run.log_files import read_jsonl

    monkeypatch.chdir(tmp_path)
    env = gym.make("Pendulum-v1", max_episode_steps=20)
    model = TD3("MlpPolicy", env, policy_kwargs={"net_arch": [16, 16]}, batch_size=32,
                learning_starts=50, seed=0, device="cpu",
                replay_buffer_kwargs={"handle_timeout_termination": handled})
    model.learn(300, callback=RltrainCallback("t"))
    found = [e for e in read_jsonl(tmp_path / "logs" / "t" / "events.jsonl")
             if e.get("rule") == "time_limit_terminal"]
    if handled:
        assert found == []
    else:
        assert [e["env_steps"] for e in found] == [200]
        assert "handle_timeout_termination=True" in found[0]["message"]
