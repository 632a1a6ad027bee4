"""A vector step told to the hooks at once (`Steps`, `HookList.on_steps`) and the work
due at multiples of a step count (`Hook.step_end_every`, `HookList.on_steps_end`)."""

from __future__ import annotations

import numpy as np

from rltrain.utils.hooks.hook import Hook, HookList, Step, Steps


class Told(Hook):
    """Records what it is told."""

    def __init__(self, every: int = 1) -> None:
        self.step_end_every = every
        self.steps: list[Step] = []
        self.ends: list[int] = []

    def on_step(self, step: Step) -> list:
        self.steps.append(step)
        return []

    def on_step_end(self, env_steps: int) -> list:
        self.ends.append(env_steps)
        return [f"found at {env_steps}"] if env_steps % 10 == 0 else []


class AtOnce(Hook):
    def __init__(self) -> None:
        self.calls: list[Steps] = []

    def on_steps(self, steps: Steps) -> list:
        self.calls.append(steps)
        return []


def vector_step(env_steps: int = 12) -> Steps:
    n = 4
    obs = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return Steps(env_steps, obs, -obs[:, :2], np.array([1.0, np.nan, -7.0, np.inf]),
                 obs + 1, np.array([False, True, False, False]),
                 np.array([False, False, True, False]), np.array([True, False, True, False]))


def test_a_hook_of_single_steps_sees_each_step_of_a_vector_step_in_env_order():
    one_by_one, at_once = Told(), AtOnce()
    found: list = []
    hooks = HookList([one_by_one, at_once, Hook()], found.extend)
    steps = vector_step()
    hooks.on_steps(steps)
    assert at_once.calls == [steps]
    assert [(s.env_steps, s.env) for s in one_by_one.steps] == [(9, 0), (10, 1), (11, 2),
                                                                 (12, 3)]
    second = one_by_one.steps[1]
    assert np.isnan(second.reward) and second.terminated and not second.stored
    assert one_by_one.steps[2].truncated and one_by_one.steps[2].stored
    assert np.array_equal(second.next_obs, steps.next_obs[1]) and second.noise is None


def test_several_vector_steps_told_at_once_are_each_envs_steps_in_turn():
    """Two vector steps of 2 envs in one Steps (`envs=2`, as the SB3 callback tells a
    collection): row r is env r % 2's, env step first + r."""
    one_by_one = Told()
    rows = vector_step()  # 4 rows
    block = Steps(rows.env_steps, rows.obs, rows.action, rows.reward, rows.next_obs,
                  rows.terminated, rows.truncated, rows.stored, envs=2)
    HookList([one_by_one], [].extend).on_steps(block)
    assert [(s.env_steps, s.env) for s in one_by_one.steps] == [(9, 0), (10, 1), (11, 0),
                                                                 (12, 1)]
    assert vector_step().envs == 4  # one vector step: a row per env


def test_the_largest_reward_of_a_vector_step_leaves_out_nan_and_inf():
    assert vector_step().largest_abs_reward == 7.0
    nothing = Steps(1, np.zeros((1, 1)), np.zeros((1, 1)), np.array([np.nan]),
                    np.zeros((1, 1)), np.zeros(1, bool), np.zeros(1, bool), np.ones(1, bool))
    assert nothing.largest_abs_reward == 0.0


def test_step_end_work_is_called_at_its_multiples_in_step_order():
    every_step, every_five = Told(), Told(every=5)
    found: list = []
    hooks = HookList([every_five, every_step], found.extend)
    hooks.on_steps_end(3, 11)  # a vector step of 8 envs
    assert every_step.ends == list(range(4, 12))
    assert every_five.ends == [5, 10]
    assert found == ["found at 10", "found at 10"]
    hooks.on_step_end(12)  # one env step, as rltrain's own loop tells it
    hooks.on_step_end(15)
    assert every_five.ends == [5, 10, 15] and every_step.ends[-2:] == [12, 15]


def bounded_watcher():
    """A Watcher of two Pendulum envs whose first observation may not exceed 2."""
    import gymnasium as gym
    import torch

    from rltrain.integrations import Watcher

    env = gym.make("Pendulum-v1")
    return Watcher(torch.nn.Linear(3, 1), torch.nn.Bilinear(3, 1, 1),
                   env.observation_space, env.action_space, run_name="v", config={
                       "num_envs": 2, "max_timesteps": 100, "learning_starts": 10,
                       "monitor": {"state_bounds": {"high": [2.0, 2.0, 10.0]}}})


def test_a_vector_steps_findings_are_reported_as_its_envs_steps_in_turn(tmp_path,
                                                                        monkeypatch):
    """Env 0's next observation leaves the configured bounds and env 1's reward is NaN in
    one vector step: told env by env, state_bounds (env step 1) fires before non_finite
    (env step 2), so the pause is state_bounds', whatever the order of the hooks."""
    from rltrain.utils.run.log_files import read_jsonl

    monkeypatch.chdir(tmp_path)
    watcher = bounded_watcher()
    obs = np.zeros((2, 3), np.float32)
    next_obs = np.array([[5.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    watcher.after_env_step(obs, np.zeros((2, 1)), np.array([-1.0, np.nan]), next_obs,
                           np.zeros(2, bool), np.zeros(2, bool))
    assert watcher.should_pause and watcher.pause_reason.startswith("[state_bounds]")
    watcher.close()
    events = read_jsonl(tmp_path / "logs" / "v" / "events.jsonl")
    assert [(e["rule"], e["env_steps"]) for e in events] == [("state_bounds", 1),
                                                             ("non_finite", 2)]


def test_what_a_vector_step_found_is_reported_when_a_later_hook_raises(tmp_path,
                                                                       monkeypatch):
    """Env 0's finding comes before env 1's episode end, whose hook raises: the finding
    is still reported, as the env-by-env order would have reported it already."""
    import pytest

    from rltrain.utils.run.log_files import read_jsonl

    class Failing(Hook):
        def on_episode_end(self, episode) -> list:
            raise RuntimeError("a hook's bug")

    monkeypatch.chdir(tmp_path)
    watcher = bounded_watcher()
    hooks = watcher.session.hooks
    hooks.hooks = [*hooks.hooks, Failing()]
    obs = np.zeros((2, 3), np.float32)
    next_obs = np.array([[5.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    with pytest.raises(RuntimeError, match="a hook's bug"):
        watcher.after_env_step(obs, np.zeros((2, 1)), np.array([-1.0, -1.0]), next_obs,
                               np.array([False, True]), np.zeros(2, bool))
    assert watcher.should_pause and watcher.pause_reason.startswith("[state_bounds]")
    watcher.close()
    events = read_jsonl(tmp_path / "logs" / "v" / "events.jsonl")
    assert [(e["rule"], e["env_steps"]) for e in events] == [("state_bounds", 1)]
