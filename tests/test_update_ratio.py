"""`update_ratio` (utils/diagnosis/rules/update_ratio.py): the actor's optimiser steps
per critic step, counted in a watched loop, in SB3 and in rltrain's own update."""

from __future__ import annotations

import pytest
from stable_baselines3 import SAC, TD3

from benchmarks.faults.loop import run as run_loop
from rltrain.integrations.sb3 import RltrainCallback
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl

from conftest import DEVICE, tiny_config

EVERY = {"diagnostics": {"update_ratio": {"every_updates": 50}}}


def fired(log_dir) -> list[dict]:
    path = log_dir / "events.jsonl"
    return [e for e in read_jsonl(path) if e.get("rule") == "update_ratio"] \
        if path.exists() else []


@pytest.mark.parametrize("fault", [None, "actor_updates_per_critic"])
def test_a_loop_that_steps_the_actor_in_an_inner_loop_is_named(tmp_path, fault):
    log_dir = run_loop(fault, "Pendulum-v1", 320, 0, tmp_path, "loop", hidden=16,
                       learning_starts=200, eval_every=10_000, watch=EVERY)
    found = fired(log_dir)
    if fault is None:
        assert found == []
        return
    assert len(found) == 1 and found[0]["value"] == 5.0  # the loop's 5 steps per critic's
    assert found[0]["message"].startswith("the actor's optimiser stepped 5 times per critic "
                                          "step over the last 50 critic steps")
    assert "suggested_set" not in found[0]  # a loop's code: no setting to change


@pytest.mark.parametrize("algo, delay, expected", [
    ("td3", 2, None), ("ddpg", None, None), ("sac", None, None), ("td3", 25, 0.04)])
def test_rltrains_own_update_counts_its_actor_steps(tmp_path, algo, delay, expected):
    sets = {"td3": {"policy_delay": delay}} if delay else {}
    config = tiny_config(tmp_path, algo=algo, run_name="r", **EVERY, **sets)
    assert Trainer(config, DEVICE, interactive=False).run(create_run(config)).status == \
        "finished"
    found = fired(tmp_path / "logs" / "r")
    if expected is None:
        assert found == []
        return
    assert [f["value"] for f in found] == [expected]
    assert found[0]["suggested_set"] == {"td3.policy_delay": 2}
    assert "stepped once per 25 critic steps over the last 50" in found[0]["message"]
    assert "--set td3.policy_delay=2 (today 25)" in found[0]["message"]


@pytest.mark.parametrize("algo", [TD3, SAC])
def test_sb3_steps_are_counted_from_its_optimisers(tmp_path, monkeypatch, algo):
    monkeypatch.chdir(tmp_path)
    model = algo("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [16, 16]},
                 batch_size=32, learning_starts=100, seed=0, device="cpu",
                 **({"policy_delay": 20} if algo is TD3 else {}))
    callback = RltrainCallback("sb3", config=EVERY)
    model.learn(300, callback=callback)
    found = fired(tmp_path / "logs" / "sb3")
    if algo is SAC:
        assert found == []
    else:  # 200 critic steps, the actor's every 20th: 0.05 over each 50
        assert [f["value"] for f in found] == [pytest.approx(0.04, abs=0.021)]
        assert found[0]["suggested_set"] == {"policy_delay": 2}
