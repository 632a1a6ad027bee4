"""The Watcher on loops of each family: what it refuses in one line (networks or spaces
that do not fit the config's algo), a MultiDiscrete policy's map, and a paused run
continued in its folder (`continue_from`) only where that run is a Watcher's pause.
The CleanRL-style PPO and DQN loops themselves: test_cleanrl_ppo.py, test_cleanrl_dqn.py."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rltrain.integrations import Watcher
from rltrain.utils.errors import ConfigError, UserError
from rltrain.utils.run.log_files import read_jsonl

import fake_envs  # noqa: F401  (registers the fake envs)

BOX = gym.spaces.Box(-1, 1, (2,))


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("algo, actor, critic, space, targets, message", [
    ("dqn", nn.Linear(2, 3), nn.Linear(2, 3), gym.spaces.Discrete(3), {},
     r"^algo dqn acts greedily on its Q network: pass actor=None and the Q network as "
     r"critic$"),
    ("ppo", None, nn.Linear(2, 1), gym.spaces.Discrete(3), {},
     r"^algo ppo has an actor: pass it as actor \(actor=None is a DQN loop's"),
    ("ppo", nn.Linear(2, 3), [nn.Linear(2, 1), nn.Linear(2, 1)], gym.spaces.Discrete(3), {},
     r"^algo ppo has one value network: pass its state value V as critic, not a list$"),
    ("a2c", nn.Linear(2, 3), nn.Linear(2, 1), gym.spaces.Discrete(3),
     {"critic_target": nn.Linear(2, 1)},
     r"^algo a2c keeps no target network: leave actor_target and critic_target out$"),
    ("ppo", nn.Linear(2, 1), nn.Linear(2, 1), gym.spaces.Box(-1, 1, (1,)), {},
     r"^the Watcher watches algo ppo with a Discrete or MultiDiscrete action space, not "
     r"Box\(-1.0, 1.0, \(1,\), float32\) \(a loop of Box actions: algo ddpg, td3 or sac; "
     r"SB3's PPO with RltrainCallback\)$"),
    ("ppo", nn.Linear(2, 5), nn.Linear(2, 1), gym.spaces.MultiDiscrete([3, 2]), {},
     r"^rltrain watches a MultiDiscrete action space whose dimensions have as many actions "
     r"each \(one bin per action in the state-action map\), not MultiDiscrete\(\[3 2\]\)$"),
    ("dqn", None, nn.Linear(2, 9), gym.spaces.MultiDiscrete([3, 3]), {},
     r"^the Watcher watches algo dqn with a Discrete action space, not "
     r"MultiDiscrete\(\[3 3\]\)$"),
])
def test_networks_or_a_space_that_do_not_fit_the_algo_are_refused_in_one_line(
        algo, actor, critic, space, targets, message):
    with pytest.raises(ConfigError, match=message):
        Watcher(actor, critic, BOX, space, run_name="r", config={"algo": algo}, **targets)
    assert not Path("logs/r").exists()


def test_a_multidiscrete_policys_map_counts_each_dimensions_choice(tmp_path):
    """A categorical policy over MultiDiscrete([3, 3]) (its logits side by side, as
    CleanRL's MultiDiscrete PPO splits them): each dimension has 3 bins, and an
    evaluation gives the env the policy's indices."""
    env = gym.make("fake_envs:FakeMultiDiscrete-v0")  # 20-step episodes
    torch.manual_seed(0)
    actor, critic = nn.Linear(2, 6), nn.Linear(2, 1)
    with torch.no_grad():  # dimension 0 follows the position's sign, dimension 1 is 2
        actor.weight.zero_()
        actor.bias.zero_()
        actor.weight[0, 0], actor.weight[2, 0], actor.bias[5] = -5.0, 5.0, 5.0
    watcher = Watcher(actor, critic, env.observation_space, env.action_space, run_name="md",
                      config={"algo": "ppo", "max_timesteps": 400})
    obs, _ = env.reset(seed=0)
    for _ in range(400):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        obs = next_obs if not (terminated or truncated) else env.reset()[0]
    watcher.evaluate(gym.make("fake_envs:FakeMultiDiscrete-v0"), episodes=2)
    watcher.close()
    (clusters,) = (tmp_path / "logs" / "md" / "heatmaps").glob("clusters_step_*.json")
    found = [c for c in json.loads(clusters.read_text())["clusters"].values() if c["samples"]]
    assert all(len(c["action_probs"]) == 2 and len(c["action_probs"][0]) == 3 for c in found)
    assert all(c["action_probs"][1] == [0.0, 0.0, 1.0] for c in found)
    chosen = {int(np.argmax(c["action_probs"][0])) for c in found}
    assert chosen == {0, 2}  # left of 0 and right of it
    (evaluation,) = [m for m in read_jsonl(tmp_path / "logs" / "md" / "metrics.jsonl")
                     if m["kind"] == "eval"]
    assert evaluation["env_steps"] == 400


@pytest.mark.parametrize("name, given, message", [
    (None, "x.pt", r"^continue_from needs the run_name of the run it continues$"),
    ("nothing", "x.pt", r"^no run 'nothing' to continue \(logs/nothing\); give the run_name "
                        r"of the run whose pause saved continue_from$"),
])
def test_continue_from_without_a_run_is_refused_in_one_line(name, given, message):
    env = gym.make("CartPole-v1")
    with pytest.raises(UserError, match=message):
        Watcher(None, nn.Linear(4, 2), env.observation_space, env.action_space,
                run_name=name, config={"algo": "dqn"}, continue_from=given)


def test_continue_from_a_file_no_pause_saved_is_refused_in_one_line(tmp_path):
    env = gym.make("CartPole-v1")
    q = nn.Linear(4, 2)
    Watcher(None, q, env.observation_space, env.action_space, run_name="q",
            config={"algo": "dqn"}).close()
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(UserError, match=r"^'other.pt' is not a file a Watcher's pause saved "
                                        r"\(no env_steps\)$"):
        Watcher(None, q, env.observation_space, env.action_space, run_name="q",
                config={"algo": "dqn"}, continue_from="other.pt")
    status = json.loads((tmp_path / "logs" / "q" / "status.json").read_text())
    assert status["state"] == "finished"  # the run is left as it was
