"""The fault benchmark's cases (benchmarks/faults/): each is a real, citable fault with
a rule that exists and a fix the config accepts; the table judges what a run found."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from benchmarks.faults.__main__ import judge, right_key, table, train_config
from benchmarks.faults.cases import CASES, FAULTY_ENV, HEALTHY, healthy
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.rules.registry import all_specs


def test_there_are_twenty_cases_of_every_kind_and_six_healthy_runs():
    assert len(CASES) >= 20 and len({c.id for c in CASES}) == len(CASES)
    assert {c.kind for c in CASES} == {"hyperparameter", "env", "code"}
    assert len([h for h in HEALTHY if h.algo != "loop"]) >= 6
    assert {h.algo for h in HEALTHY} >= {"ddpg", "td3", "sac"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_case_names_existing_rules_and_a_fix_the_config_takes(case, tmp_path):
    assert case.source and case.rules and set(case.rules) <= set(all_specs())
    run = healthy(case.healthy)
    if run.algo == "loop":
        assert case.loop is not None
        return
    raw = train_config(run, case, 2000, 0, tmp_path)
    config = config_from_dict(raw)  # the planted config is a valid one
    if case.key.startswith("env_kwargs."):  # a weight the planted env takes
        assert case.key.split(".", 1)[1] in config.env_kwargs
    elif case.key:  # the expected fix is a key of the run's config
        assert case.key in _keys(config)


def _keys(config) -> list[str]:
    from rltrain.utils.config.schema import iter_fields

    return [key for key, _, _ in iter_fields(config)]


@pytest.mark.parametrize("fault, kwargs", [
    ("reward_scale", {"factor": 1e-4}), ("observation_scale", {"factor": 1000.0}),
    ("time_limit_terminal", {}), ("ignored_action", {}), ("sparse_reward", {}),
    ("small_action_units", {"factor": 0.1}), ("reward_terms", {"ctrl_cost_weight": 300.0})])
def test_the_env_faults_run(fault, kwargs):
    env = gym.make(FAULTY_ENV, base="Pendulum-v1", fault=fault, **kwargs)
    env.reset(seed=0)
    ended = False
    for _ in range(200):
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert np.isfinite(reward)
        ended = terminated or truncated
    assert ended  # Pendulum's time limit
    if fault == "time_limit_terminal":
        assert terminated and not truncated


def test_pendulum_split_into_terms_pays_pendulums_reward_at_its_true_weights():
    """The healthy terms run (pendulum_terms_ddpg) learns Pendulum's own reward."""
    run = healthy("pendulum_terms_ddpg")
    split = gym.make(FAULTY_ENV, base=run.env, **run.env_fault)
    plain = gym.make(run.env)
    split.reset(seed=4)
    plain.reset(seed=4)
    for action in np.random.default_rng(0).uniform(-3, 3, (200, 1)).astype(np.float32):
        _, reward, *_, info = split.step(action)
        assert reward == pytest.approx(plain.step(action)[1], abs=1e-6)
        assert reward == pytest.approx(sum(v for k, v in info.items()
                                           if k.startswith("reward_")))
    assert set(info) >= {"reward_angle", "reward_velocity", "reward_ctrl"}


def test_the_table_judges_names_keys_and_false_alarms():
    case = next(c for c in CASES if c.id == "tau_one")
    hit = {"name": "tau_one", "seed": 0, "steps": 6000, "final_eval": -900.0, "findings": [
        {"env_steps": 3000, "rule": "target_update", "action": "warn",
         "suggested_set": {"tau": 0.005}}]}
    wrong = {**hit, "findings": [{**hit["findings"][0], "suggested_set": {"tau": 2.0}}]}
    assert judge(case, hit) == {"named": True, "right_key": True, "first_step": 3000}
    assert judge(case, wrong)["right_key"] is False
    assert not right_key(case, {})
    calm = {"name": "pendulum_ddpg", "seed": 0, "steps": 6000, "final_eval": -180.0,
            "findings": [{"env_steps": 10, "rule": "reward_scale", "action": "warn"}]}
    text = table([hit, calm])
    assert "| tau_one | hyperparameter | yes | yes | 3000 | -900.0 (-180.0) |" in text
    assert "recall: 1/1 named; right key 1/1; false alarms: 1 over 1 healthy runs" in text


def test_a_run_that_could_not_run_is_left_out_and_listed():
    broken = {"name": "pendulum_ddpg", "seed": 0, "steps": 0, "final_eval": None,
              "findings": [], "error": "TypeError: boom"}
    text = table([broken])
    assert "false alarms: 0 over 0 healthy runs" in text
    assert "could not run: pendulum_ddpg seed 0: TypeError: boom" in text
