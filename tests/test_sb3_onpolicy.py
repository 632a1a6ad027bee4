"""The SB3 callback on the agents most users train: PPO and A2C (on-policy, Box or
Discrete actions) and DQN (Discrete). Short runs with RL Zoo's settings (fewer envs and
steps): the run folder, the state-action map of Discrete actions, the gradient records,
`rltrain diagnose` with no warning and with the rules that do not judge the family
named, and a pause whose printed lines continue the run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.env_util import make_vec_env
from test_sb3_callback import PauseAt

from rltrain.integrations.sb3 import RltrainCallback
from rltrain.scripts.cli import cli
from rltrain.utils.errors import ConfigError
from rltrain.utils.run.log_files import read_jsonl

# RL Zoo's hyperparameters (rl-baselines3-zoo, hyperparams/<algo>.yml), with fewer
# steps per rollout where a run of a few thousand steps must see several.
ZOO = {
    "ppo_cartpole": (PPO, "CartPole-v1", 8, dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=1e-3, clip_range=0.2)),
    "ppo_pendulum": (PPO, "Pendulum-v1", 4, dict(
        n_steps=256, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
        learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4)),
    "a2c_cartpole": (A2C, "CartPole-v1", 8, dict(ent_coef=0.0)),
    "dqn_cartpole": (DQN, "CartPole-v1", 1, dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
        gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
        exploration_fraction=0.16, exploration_final_eps=0.04,
        policy_kwargs=dict(net_arch=[256, 256]))),
}
# env steps each run takes (PPO and A2C: whole rollouts of all their envs)
STEPS = {"ppo_cartpole": 3072, "ppo_pendulum": 3072, "a2c_cartpole": 3000,
         "dqn_cartpole": 3072}  # DQN: whole train_freq periods of 256 steps
# Gradient records every few updates, so that a short run has some.
GRADIENTS = {"diagnostics": {"grad_freq": 20}}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # SB3's small networks: one thread is fastest beside others
    yield
    torch.set_num_threads(threads)


def model(case: str) -> PPO | A2C | DQN:
    cls, env, n_envs, settings = ZOO[case]
    return cls("MlpPolicy", make_vec_env(env, n_envs=n_envs, seed=0), seed=0, device="cpu",
               **settings)


def diagnose(run: str) -> tuple[dict, str]:
    as_json = CliRunner().invoke(cli, ["diagnose", run, "--json"])
    table = CliRunner().invoke(cli, ["diagnose", run])
    assert as_json.exit_code == 0 and table.exit_code == 0, as_json.output + table.output
    return json.loads(as_json.output), table.output


@pytest.mark.parametrize("case", list(ZOO))
def test_a_short_healthy_run_is_watched_and_diagnosed_without_a_warning(tmp_path, case):
    trained = model(case)
    trained.learn(STEPS[case], callback=RltrainCallback(case, config=GRADIENTS))
    log_dir = tmp_path / "logs" / case
    config = yaml.safe_load((log_dir / "config.yaml").read_text())
    algo = type(trained).__name__
    assert (config["algo"], config["library"]["algorithm"]) == (algo.lower(), algo)
    assert config["gamma"] == ZOO[case][3].get("gamma", 0.99)
    status = json.loads((log_dir / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", STEPS[case])
    assert status["integration"].endswith(f" {algo}")
    episodes = [m for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "episode"]
    assert episodes and episodes[-1]["env_steps"] <= STEPS[case]
    assert list(log_dir.glob("events.out.tfevents.*"))  # TensorBoard
    # The policy's and the value's networks, as each optimiser stepped with them
    flow1 = read_jsonl(log_dir / "flow1.jsonl")
    gradients = [d for d in flow1 if d["kind"] == "gradients"]
    assert gradients
    if algo == "DQN":  # a greedy choice: no network of its own
        assert gradients[-1]["actor"] == {} and "q_net.0.weight" in gradients[-1]["critic"]
    else:
        assert {"policy_net.0.weight", "action_net.weight"} <= set(gradients[-1]["actor"])
        assert {"value_body.0.weight", "value_net.weight"} <= set(gradients[-1]["critic"])
        assert all(v > 0 for v in gradients[-1]["critic"].values())
    report, table = diagnose(case)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []
    assert "q_overestimation" in report["not_judged_for"]["rules"]
    assert "reward_scale" not in report["not_judged_for"]["rules"]
    assert f"not judged for algo {algo.lower()} (" in " ".join(table.split())


@pytest.mark.parametrize("case", ["ppo_cartpole", "dqn_cartpole"])
def test_the_state_action_map_counts_each_discrete_action_per_cluster(tmp_path, case):
    model(case).learn(STEPS[case], callback=RltrainCallback(case))
    (clusters,) = (tmp_path / "logs" / case / "heatmaps").glob("clusters_step_*.json")
    found = json.loads(clusters.read_text())["clusters"]
    rows = [c["action_probs"] for c in found.values() if c["samples"]]
    # CartPole's two actions: one bin each, a share of the cluster's samples
    assert rows and all(len(row) == 1 and len(row[0]) == 2 for row in rows)
    assert all(sum(row[0]) == pytest.approx(1.0, abs=0.01) for row in rows)
    assert sum(c["samples"] for c in found.values()) >= 200
    assert any(0 < row[0][0] < 1 for row in rows)  # both actions chosen somewhere
    heatmap = read_jsonl(tmp_path / "logs" / case / "flow1.jsonl")
    assert [d["action_saturation"] for d in heatmap if d["kind"] == "heatmap"] == [None]


def run_lines(printed: str, env_id: str, n_envs: int) -> None:
    """The printed `model = ...` lines that continue the run, run as they are."""
    lines = [line.strip() for line in printed.splitlines()
             if line.startswith("    model")]
    assert lines and lines[-1].startswith("model.learn(")
    env = make_vec_env(env_id, n_envs=n_envs, seed=1)
    exec("\n".join(lines), {"PPO": PPO, "A2C": A2C, "DQN": DQN, "env": env,  # noqa: S102
                            "RltrainCallback": RltrainCallback})


@pytest.mark.parametrize("case, asked, paused, total", [
    # PPO stops at the first step of the rollout after the one asked in (8 envs x 32
    # steps a rollout: step 256 + 8), once that rollout has been trained on.
    ("ppo_cartpole", 104, 264, 1024),
    # DQN at the first step of the collection after the one asked in (train_freq 256:
    # 1024 + 256 + 1), with its replay buffer (a run of 2200 steps: its warm-up of 1000
    # would be most of a shorter one, which learning_not_started names).
    ("dqn_cartpole", 1200, 1281, 2200),
])
def test_rltrain_pause_stops_at_a_safe_point_and_the_printed_lines_continue(
        tmp_path, capsys, case, asked, paused, total):
    pauser = PauseAt(case, asked)
    trained = model(case)
    trained.learn(total, callback=[RltrainCallback(case), pauser])
    assert pauser.result.exit_code == 0, pauser.result.output
    assert trained.num_timesteps == paused
    log_dir = tmp_path / "logs" / case
    status = json.loads((log_dir / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("paused", paused)
    saved = tmp_path / "checkpoints" / case / f"paused_at_step_{paused}.zip"
    assert status["latest_checkpoint"].endswith(saved.name) and saved.is_file()
    printed = capsys.readouterr().out
    algo = type(trained).__name__
    assert f'model = {algo}.load("checkpoints/{case}/paused_at_step_{paused}.zip", ' \
           'env=env)' in printed
    assert ("model.load_replay_buffer(" in printed) == (algo == "DQN")
    assert f'model.learn({total - paused}, reset_num_timesteps=False, ' \
           f'callback=RltrainCallback(run_name="{case}"))' in printed
    run_lines(printed, ZOO[case][1], ZOO[case][2])
    now = json.loads((log_dir / "status.json").read_text())
    assert now["state"] == "finished" and now["env_steps"] >= total
    events = read_jsonl(log_dir / "events.jsonl")
    assert [e["action"] for e in events if e["rule"] == "outside_request"] == [
        "pause", "paused"]
    assert any(e["action"] == "resume" and e["env_steps"] == paused for e in events)
    report, _ = diagnose(case)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []


def test_a_rules_pause_stops_ppo_at_once_and_drops_the_rollout_holding_it(tmp_path):
    """A NaN reward at step 120, in the middle of a 256-step rollout: PPO stops there, the
    model as the last whole rollout left it (none: its initial weights), never trained
    on the NaN."""
    trained = PPO("MlpPolicy", "fake_envs:FakeNaNReward-v0", n_steps=256, batch_size=64,
                  n_epochs=1, seed=0, device="cpu")
    trained.learn(1024, callback=RltrainCallback("nan"))
    assert trained.num_timesteps == 120 and trained._n_updates == 0
    events = read_jsonl(tmp_path / "logs" / "nan" / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 120), ("non_finite", "paused", 120)]
    saved = PPO.load(tmp_path / "checkpoints" / "nan" / "paused_at_step_120.zip", device="cpu")
    assert all(torch.isfinite(p).all() for p in saved.policy.parameters())


def test_an_action_space_it_does_not_watch_is_refused_in_one_line():
    # (an algorithm it does not watch: test_sb3_callback.py)
    multi = PPO("MlpPolicy", "fake_envs:FakeMultiDiscrete-v0", n_steps=16, batch_size=16,
                device="cpu")
    with pytest.raises(ConfigError, match=re.escape(
            "rltrain watches a 1-D Box or a Discrete action space, not MultiDiscrete([3 3])")):
        multi.learn(20, callback=RltrainCallback("multi"))
    assert not Path("logs/multi").exists()


@pytest.mark.parametrize("env_id, settings", [
    ("CartPole-v1", {}), ("Pendulum-v1", {}), ("Pendulum-v1", {"use_sde": True}),
    ("CartPole-v1", {"policy_kwargs": {"share_features_extractor": False}})])
def test_the_views_actor_is_the_policys_deterministic_action(env_id, settings):
    """The state-action map's actor (the action net's argmax or mean, without SB3's
    distribution object) gives what SB3's deterministic prediction does, bit for bit."""
    import numpy as np

    from rltrain.integrations.sb3_value_view import onpolicy_view

    trained = PPO("MlpPolicy", make_vec_env(env_id, n_envs=2, seed=0), seed=0,
                  device="cpu", **settings)
    space = trained.observation_space
    obs = torch.as_tensor(np.stack([space.sample() for _ in range(64)]))
    with torch.no_grad():
        ours = onpolicy_view(trained).actor(obs)
        sb3 = trained.policy.get_distribution(obs).get_actions(deterministic=True)
    if env_id == "CartPole-v1":
        assert torch.equal(ours, sb3.float().reshape(-1, 1))
    else:
        assert torch.equal(ours, torch.clamp(sb3, -2.0, 2.0))


def test_a_run_none_of_whose_steps_is_kept_trains_on(tmp_path, monkeypatch):
    """With non_finite at warn, a PPO run whose every step is non-finite keeps none of
    them for the probes: its updates are still watched, the observation checks wait."""
    import numpy as np

    import rltrain.integrations.sb3_rollouts as steps  # where SB3's steps are judged finite

    monkeypatch.setattr(steps, "finite_rows", lambda obs, actions, rewards: np.zeros(
        len(rewards), bool))
    monkeypatch.setattr(steps, "is_finite", lambda obs, action, reward: False)  # final obs
    trained = model("ppo_cartpole")
    callback = RltrainCallback("nothing_kept",
                               config={"monitor": {"non_finite": {"action": "warn"}}})
    trained.learn(512, callback=callback)
    assert len(callback.kept) == 0
    status = json.loads((tmp_path / "logs" / "nothing_kept" / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", 512)
    assert status["updates"] > 0


def test_with_vecnormalize_the_reward_checks_judge_the_envs_own_rewards():
    """VecNormalize scales the rewards by a running std that grows from ~0: the reward
    checks read its original rewards (CartPole's +1), and the run's config says what it
    normalises, so no rule proposes it again."""
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=4, seed=0), gamma=0.98)
    trained = PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0,
                  device="cpu")
    trained.learn(1024, callback=RltrainCallback("normalised"))
    log_dir = Path("logs") / "normalised"
    rewards = [r for r in read_jsonl(log_dir / "flow1.jsonl") if r["kind"] == "reward"]
    assert rewards and all(r["mean"] == 1.0 and r["std"] == 0.0 for r in rewards)
    config = yaml.safe_load((log_dir / "config.yaml").read_text())
    assert config["normalize"]["observations"] is True
    assert config["normalize"]["rewards"] is True


def watched_record(case: str, steps: int, run: str) -> dict[str, list]:
    """What a watched run of `case` wrote that does not depend on wall time: flow1.jsonl
    (without the pictures' paths), events.jsonl, metrics.jsonl's episodes and the
    clusters of its heatmaps."""
    model(case).learn(steps, callback=RltrainCallback(run))
    log_dir = Path("logs") / run
    flow1 = [{k: v for k, v in line.items() if k not in ("png", "seconds")}
             for line in read_jsonl(log_dir / "flow1.jsonl")]
    events = [{k: v for k, v in e.items() if k != "time"}
              for e in read_jsonl(log_dir / "events.jsonl")]
    episodes = [{k: v for k, v in m.items() if k != "time"}
                for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "episode"]
    clusters = [json.loads(p.read_text()) for p in
                sorted((log_dir / "heatmaps").glob("clusters_step_*.json"))]
    record = {"flow1": flow1, "events": events, "episodes": episodes, "clusters": clusters}
    return json.loads(json.dumps(record).replace(f"/{run}/", "/RUN/"))  # files' paths


@pytest.mark.parametrize("case, steps", [("ppo_cartpole", 15360), ("dqn_cartpole", 5120)])
def test_a_collection_told_at_once_records_what_its_steps_told_one_by_one_do(
        tmp_path, monkeypatch, case, steps):
    """PPO's and DQN's steps are told once per collection (sb3_rollouts.py): the
    reward statistics, the episodes, the findings and the state-action map's samples
    (the clusters of its heatmaps, due in the middle of a collection) are those of the
    same run told a step at a time, each step after the work due at the one before."""
    import rltrain.integrations.sb3_rollouts as rollouts

    at_once = watched_record(case, steps, "at_once")
    monkeypatch.setattr(rollouts, "MAX_STEPS", 1)  # a block of one step: told at each
    on_step = RltrainCallback._on_step

    def each_step(self):  # updates and due work first, at every step, as for TD3
        self._fresh = True
        return on_step(self)

    monkeypatch.setattr(RltrainCallback, "_on_step", each_step)
    one_by_one = watched_record(case, steps, "one_by_one")
    assert at_once["episodes"] and at_once["clusters"]
    assert any(line["kind"] == "reward" for line in at_once["flow1"])
    for part in at_once:
        assert at_once[part] == one_by_one[part], part


def test_a_nan_final_observation_pauses_dqn_at_its_step_and_is_not_stored(tmp_path):
    """An episode's final observation (in its info: SB3 has reset the env) with a NaN
    is told at once too: SB3 would store it as the transition's next observation."""
    import numpy as np
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class NaNFinal(VecEnvWrapper):
        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            obs, rewards, dones, infos = self.venv.step_wait()
            for info, done in zip(infos, dones, strict=True):
                if done:
                    info["terminal_observation"] = np.full_like(
                        info["terminal_observation"], np.nan)
            return obs, rewards, dones, infos

    settings = dict(ZOO["dqn_cartpole"][3], learning_starts=100)
    trained = DQN("MlpPolicy", NaNFinal(make_vec_env("CartPole-v1", n_envs=1, seed=0)),
                  seed=0, device="cpu", **settings)
    trained.learn(2048, callback=RltrainCallback("nan_final"))
    events = read_jsonl(tmp_path / "logs" / "nan_final" / "events.jsonl")
    paused = [e["env_steps"] for e in events if e["action"] == "paused"]
    assert paused == [trained.num_timesteps] and paused[0] < 256  # the first episode's end
    buffer = trained.replay_buffer
    assert np.isfinite(buffer.next_observations[:buffer.pos]).all()


def test_steps_not_told_when_learn_raised_are_told_before_the_run_goes_on(tmp_path):
    """learn() interrupted in the middle of a collection (another callback raised):
    the steps it took are told before the next learn() goes on, so the run's step
    count stays the model's."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Interrupt(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 300:
                raise KeyboardInterrupt
            return True

    trained = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1, seed=0), n_steps=256,
                  batch_size=64, n_epochs=1, seed=0, device="cpu")
    callback = RltrainCallback("interrupted")
    with pytest.raises(KeyboardInterrupt):
        trained.learn(1024, callback=[callback, Interrupt()])
    trained.learn(512, callback=callback, reset_num_timesteps=False)
    status = json.loads((tmp_path / "logs" / "interrupted" / "status.json").read_text())
    assert status["env_steps"] == trained.num_timesteps == 300 + 512


def test_a_nan_reward_pauses_dqn_at_its_step_and_is_not_stored(tmp_path):
    """DQN's steps wait for the end of its collection (train_freq 256), but a step with
    a NaN reward is told at once: the run pauses there, before SB3 stores it."""
    import numpy as np

    settings = dict(ZOO["dqn_cartpole"][3], learning_starts=100)
    trained = DQN("MlpPolicy", make_vec_env("fake_envs:FakeNaNCartPole-v0", n_envs=1,
                                            seed=0), seed=0, device="cpu", **settings)
    trained.learn(2048, callback=RltrainCallback("nan_dqn"))
    assert trained.num_timesteps == 150
    events = read_jsonl(tmp_path / "logs" / "nan_dqn" / "events.jsonl")
    assert [(e["rule"], e["action"], e["env_steps"]) for e in events] == [
        ("non_finite", "pause", 150), ("non_finite", "paused", 150)]
    buffer = trained.replay_buffer
    assert buffer.pos == 149 and np.isfinite(buffer.rewards[:buffer.pos]).all()


def test_rltrain_pause_reaches_dqn_within_a_long_collection(tmp_path, monkeypatch):
    """DQN collecting whole episodes (train_freq in episodes) of 3,000 steps: the steps
    are told a block at a time, and `rltrain pause`, asked at step 100, stops it when
    the next block is told (DQN may stop at any step), not at the episode's end."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.callbacks import BaseCallback

    import rltrain.integrations.sb3_rollouts as rollouts

    class Long(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(2, 0.1, np.float32), 1.0, False, self.t >= 3000, {}

    class Ask(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 100:
                (tmp_path / "logs" / "long" / "pause.request").write_text("asked")
            return True

    monkeypatch.setattr(rollouts, "MAX_STEPS", 64)
    trained = DQN("MlpPolicy", Long(), train_freq=(1, "episode"), learning_starts=50,
                  seed=0, device="cpu")
    trained.learn(6000, callback=[RltrainCallback("long"), Ask()])
    assert trained.num_timesteps == 128  # the block of steps 65..128
    status = json.loads((tmp_path / "logs" / "long" / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("paused", 128)


def test_no_evaluation_runs_after_a_rules_pause_in_the_steps_told(tmp_path):
    """A NaN reward at step 150, where an evaluation is due (eval_freq 150): the run
    pauses there, as at any other step, without evaluating first."""
    import gymnasium as gym

    settings = dict(ZOO["dqn_cartpole"][3], learning_starts=100)
    trained = DQN("MlpPolicy", make_vec_env("fake_envs:FakeNaNCartPole-v0", n_envs=1,
                                            seed=0), seed=0, device="cpu", **settings)
    trained.learn(2048, callback=RltrainCallback("nan_eval", config={"eval_freq": 150},
                                                 eval_env=gym.make("CartPole-v1")))
    assert trained.num_timesteps == 150
    log_dir = tmp_path / "logs" / "nan_eval"
    assert [m for m in read_jsonl(log_dir / "metrics.jsonl") if m["kind"] == "eval"] == []
    events = read_jsonl(log_dir / "events.jsonl")
    assert [(e["rule"], e["action"]) for e in events] == [("non_finite", "pause"),
                                                          ("non_finite", "paused")]
