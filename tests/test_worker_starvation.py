"""The health rule `worker_starvation`, fed readings of the pace as the env runners'
watcher (scripts/workers/worker_stats.py) hands them over: the learner waiting for chunks,
the runners waiting idle for the learner, and neither at a balanced pace."""

from __future__ import annotations

import pytest

from rltrain.utils.run.health import HealthRules

from conftest import DEVICE, tiny_config

AFTER_WARM_UP = 150  # tiny configs start learning at step 100


def rules(tmp_path, **overrides) -> HealthRules:
    return HealthRules(tiny_config(tmp_path, **{"num_workers": 2, **overrides}), 3, DEVICE)


def feed(health: HealthRules, readings: list[tuple[float, list[float]]],
         first_step: int = AFTER_WARM_UP) -> list:
    found = []
    for i, (learner, runners) in enumerate(readings):
        found += health.check_pace(first_step + 50 * i, learner, runners)
    return found


def test_the_learner_waiting_for_chunks_names_the_runners_and_proposes_more(tmp_path):
    health = rules(tmp_path)
    [finding] = feed(health, [(95.0, [5.0, 8.0])] * 3)
    assert finding.rule == "worker_starvation" and finding.action == "warn"
    assert finding.value == 95.0 and finding.env_steps == AFTER_WARM_UP + 100
    assert "the env runners starve it" in finding.message
    assert "worker_mode=async" in finding.message  # lockstep, the default
    assert finding.suggested_set == {"num_workers": 4}


@pytest.mark.parametrize(("overrides", "proposed"), [
    ({}, {"num_workers": 1}),
    ({"num_workers": 1, "utd_ratio": 4}, {"utd_ratio": 2}),
    ({"num_workers": 1}, {"num_workers": 0}),
])
def test_runners_waiting_for_the_learner_name_it_and_propose_less_work_for_it(
        tmp_path, overrides, proposed):
    health = rules(tmp_path, **overrides)
    idle = [92.0] * max(1, overrides.get("num_workers", 2))
    [finding] = feed(health, [(3.0, idle)] * 3)
    assert "the learner starves them" in finding.message
    assert finding.value == 92.0 and finding.suggested_set == proposed


def test_a_balanced_pace_an_interrupted_streak_and_the_warm_up_do_not_fire(tmp_path):
    health = rules(tmp_path)
    assert feed(health, [(45.0, [50.0, 55.0])] * 10) == []
    assert feed(health, [(95.0, [5.0, 5.0]), (95.0, [5.0, 5.0]), (40.0, [60.0, 60.0]),
                         (95.0, [5.0, 5.0]), (95.0, [5.0, 5.0])]) == []
    warm_up = rules(tmp_path)
    assert feed(warm_up, [(99.0, [1.0, 1.0])] * 3, first_step=0) == []  # steps 0..100


def test_the_threshold_and_readings_are_config_keys(tmp_path):
    monitor = {"worker_starvation": {"threshold": 50.0, "readings": 1, "action": "pause"}}
    [finding] = feed(rules(tmp_path, monitor=monitor), [(60.0, [10.0, 10.0])])
    assert finding.action == "pause" and finding.threshold == 50.0


def test_it_judges_only_runs_with_env_runners_and_says_what_it_waits_for(tmp_path):
    single = rules(tmp_path, num_workers=0)
    assert "worker_starvation" not in [h.spec.name for h in single.hooks]
    assert feed(single, [(99.0, [1.0])] * 5) == []
    assert single.by_name["worker_starvation"].unjudged() is None
    workers = rules(tmp_path)
    rule = workers.by_name["worker_starvation"]
    assert rule.unjudged() == ("0 of the 3 readings of the pace it needs (one a second at "
                               "most, every log_freq 50 env steps after learning_starts)")
    feed(workers, [(50.0, [50.0, 50.0])] * 3)
    assert rule.unjudged() is None
