"""A plain loop's own replay under the Watcher: batches holding transitions its env never
made (transition_integrity) or only its newest ones (sample_recency) are named; a loop
that stores and samples as CleanRL does is not; a critic fed transformed observations is
not judged."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rltrain.integrations import Watcher
from rltrain.integrations.sampled_batches import EVERY, SampledBatches

STEPS, START, HIDDEN = 1600, 200, 32


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=1))


def run_loop(tmp_path: Path, fault: str | None) -> list[str]:
    """A DDPG loop on Pendulum with `fault` in how it stores or samples; the warnings."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    env = gym.make("Pendulum-v1")
    actor = nn.Sequential(nn.Linear(3, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1), nn.Tanh())
    critic = Critic()
    actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_opt = torch.optim.Adam(actor.parameters(), 1e-3)
    critic_opt = torch.optim.Adam(critic.parameters(), 1e-3)
    buffer = np.zeros((STEPS, 9), np.float32)
    watcher = Watcher(lambda_actor(actor), critic, env.observation_space, env.action_space,
                      run_name=f"loop_{fault}", log_dir=str(tmp_path / "logs"),
                      checkpoint_dir=str(tmp_path / "ck"),
                      config={"env_name": "Pendulum-v1", "learning_starts": START,
                              "max_timesteps": STEPS, "batch_size": 64},
                      actor_target=actor_target, critic_target=critic_target)
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    for step in range(STEPS):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        stored_next = obs if fault == "next_obs_is_obs" else next_obs
        buffer[step] = np.concatenate([obs, stored_next, action, [reward, terminated]])
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        obs = env.reset()[0] if terminated or truncated else next_obs
        if step < START:
            continue
        low = max(0, step - 63) if fault == "recent_only" else 0
        high = STEPS if fault == "unfilled_rows" else step + 1
        rows = torch.as_tensor(buffer[rng.integers(low, high, 64)])
        o, o2, a, r, d = rows.split([3, 3, 1, 1, 1], dim=1)
        with torch.no_grad():
            target = r + 0.99 * (1 - d) * critic_target(o2, 2 * actor_target(o2))
        loss = (critic(o, a) - target).square().mean()
        critic_opt.zero_grad()
        loss.backward()
        critic_opt.step()
        actor_loss = -critic(o, 2 * actor(o)).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
        watcher.after_update(critic_loss=loss, actor_loss=actor_loss)
    watcher.close()
    events = tmp_path / "logs" / f"loop_{fault}" / "events.jsonl"
    return [json.loads(line)["rule"] for line in events.read_text().splitlines()
            if json.loads(line).get("action") == "warn"]


def lambda_actor(actor: nn.Module) -> nn.Module:
    """The actor in Pendulum's units (torque in [-2, 2])."""
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.actor = actor

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return 2 * self.actor(obs)
    return Scaled()


@pytest.mark.parametrize("fault, rule", [("next_obs_is_obs", "transition_integrity"),
                                         ("unfilled_rows", "transition_integrity"),
                                         ("recent_only", "sample_recency")])
def test_a_loop_that_stores_or_samples_wrongly_is_named(tmp_path, fault, rule):
    assert rule in run_loop(tmp_path, fault)


def test_a_loop_that_stores_and_samples_as_cleanrl_does_is_not(tmp_path):
    warned = run_loop(tmp_path, None)
    assert "transition_integrity" not in warned and "sample_recency" not in warned


def test_batches_of_transformed_observations_match_nothing_and_judge_nothing():
    critic = nn.Linear(4, 1)
    sampled = SampledBatches(critic, None, obs_dim=3, capacity=1000)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        sampled.env_step(np.random.default_rng(0).normal(size=3), np.zeros(3))
    sampled.arm(EVERY)
    critic(torch.randn(8, 4, generator=gen))  # observations the env never gave, all of them
    sampled.collect()
    stats, measured = sampled.state()
    assert measured == 1 and stats["known"] == 0 and "unknown" not in stats
    sampled.close()


def test_done_rows_are_counted_by_how_the_env_ended_their_step():
    """Rows stored as done are looked up among the env's steps: a time limit's row (the
    env said truncated only) counts apart from the task's end and from a step that did
    not end its episode; rows the env never gave, and rows not done, count nowhere."""
    batches = SampledBatches(nn.Linear(4, 1), None, obs_dim=3, capacity=100)
    steps = [(np.full(3, float(i), np.float32), np.full(3, i + 0.5, np.float32))
             for i in range(4)]
    for (obs, next_obs), (terminated, truncated) in zip(
            steps, [(False, False), (True, False), (False, True), (True, True)], strict=True):
        batches.env_step(obs, next_obs, terminated, truncated)
    obs = torch.tensor(np.stack([s[0] for s in steps] + [np.full(3, 9.0, np.float32)]))
    batches.done_rows({"obs": obs, "dones": np.ones(5)})
    assert batches.ended_rows == {"continued": 1, "terminated": 2, "truncated": 1}
    batches.done_rows({"obs": obs.numpy(), "dones": np.zeros(5)})
    assert batches.ended_rows == {"continued": 1, "terminated": 2, "truncated": 1}


def test_an_observation_met_again_that_once_terminated_is_no_time_limit():
    """A grid cell where an episode terminated, later reached at the time limit: a row
    stored as done there is the task's end, however often it is sampled."""
    batches = SampledBatches(nn.Linear(4, 1), None, obs_dim=3, capacity=100)
    cell, after = np.ones(3, np.float32), np.zeros(3, np.float32)
    batches.env_step(cell, after, terminated=True)
    batches.env_step(cell, after, truncated=True)
    for _ in range(20):
        batches.done_rows({"obs": cell[None], "dones": np.ones(1)})
    assert batches.ended_rows == {"continued": 0, "terminated": 20, "truncated": 0}


def watcher_of(tmp_path: Path) -> Watcher:
    env = gym.make("Pendulum-v1")
    return Watcher(nn.Linear(3, 1), Critic(), env.observation_space, env.action_space,
                   run_name="b", log_dir=str(tmp_path / "logs"),
                   checkpoint_dir=str(tmp_path / "ck"))


@pytest.mark.parametrize("batch, words", [
    ({"obs": np.zeros((2, 3))}, 'a dict with "obs" and "dones"'),
    ((np.zeros((2, 3)), np.zeros(2)), "not tuple"),
    ({"obs": np.zeros((4, 3)), "dones": np.zeros(5)}, "one row per flag"),
    ({"obs": torch.zeros(2, 2), "dones": torch.zeros(2, 1)}, "obs must be [2, 3 or more]"),
])
def test_a_batch_the_watcher_cannot_read_is_one_line(tmp_path, batch, words):
    from rltrain.utils.errors import ConfigError

    watcher = watcher_of(tmp_path)
    try:
        with pytest.raises(ConfigError, match=re.escape(words)):
            watcher.after_update(critic_loss=1.0, batch=batch)
    finally:
        watcher.close()


def test_flags_on_steps_that_ended_nothing_are_not_judged(tmp_path):
    """A not-done mask (1 - terminated) passed as `dones`: most flagged rows ended no
    episode, so the flags are not episode ends and the time limits' rows among them
    name nothing."""
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.diagnosis.rules.input_rules import TimeLimitTerminal
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    rule = TimeLimitTerminal(RuleContext(config_from_dict({"env_name": "Pendulum-v1"}), 3, 1))
    assert rule.stored(100, {"terminated": 0, "truncated": 12, "continued": 2400}) == []
    assert rule.stored(100, {"terminated": 0, "truncated": 12, "continued": 0})
