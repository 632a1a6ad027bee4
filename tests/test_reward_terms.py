"""Reward terms: read from info, their statistics, the `reward_terms` rule, resume, outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.diagnosis.measure.reward_terms import TermWindow, term_stats
from rltrain.utils.diagnosis.rules.reward_terms import (
    RewardTerms,
    correlation_bound,
    weight_fix,
    weight_names,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.training import collector
from rltrain.utils.training.reward_terms import TermReader, step_terms, term_keys

from conftest import DEVICE, tiny_config

TERMS_ENV = "fake_envs:FakeTermsPoint-v0"
DOMINANT = {"ctrl_cost_weight": 100.0}  # random actions: ctrl is ~98% of the return
UNCORRELATED = {"noise": 5.0, "horizon": 5}  # the return follows the noise, not the goal


def train(tmp_path: Path, name: str, env_kwargs: dict | None = None,
          env_name: str = TERMS_ENV, **overrides) -> Path:
    """A 300-step run of random actions (learning starts at its last step), unless
    `overrides` say otherwise."""
    config = tiny_config(tmp_path, env_name=env_name, env_kwargs=env_kwargs or {},
                         run_name=name, **{"learning_starts": 299, **overrides})
    assert Trainer(config, DEVICE, interactive=False).run(create_run(config)).status == "finished"
    return tmp_path / "logs" / name


def fired(log_dir: Path) -> list[dict]:
    return [e for e in read_jsonl(log_dir / "events.jsonl") if e.get("rule") == "reward_terms"]


def rule(tmp_path: Path, **settings) -> RewardTerms:
    config = tiny_config(tmp_path, env_name=TERMS_ENV,
                         diagnostics={"reward_terms": settings} if settings else {})
    return RewardTerms(RuleContext(config, 2, 1))


# ------------------------------------------------------------------ reading info
def test_terms_are_read_from_flat_keys_and_from_a_dict_per_sub_env():
    infos = {"reward_ctrl": np.array([-0.5, -1.0]), "_reward_ctrl": np.array([True, False]),
             "reward_name": np.array(["a", "b"], dtype=object), "x_position": np.array([1, 2]),
             "reward_terms": {"goal": np.array([2.0, np.nan]), "_goal": np.array([True, True])},
             "_reward_terms": np.array([True, True])}
    keys = term_keys(infos)
    assert keys == ("reward_ctrl", "reward_terms")  # not the text, not x_position
    assert step_terms(infos, keys, 2) == [{"reward_ctrl": -0.5, "goal": 2.0}, {}]


def test_a_watched_loops_info_is_read_in_each_layout_and_once_without_terms():
    one = {"reward_ctrl": -0.5, "reward_terms": {"goal": 2.0}, "reward_note": "text"}
    assert TermReader().of_envs(one, 1) == [{"reward_ctrl": -0.5, "goal": 2.0}]
    assert TermReader().of_envs([one, {"reward_ctrl": np.float32(-1.0)}], 2) == [
        {"reward_ctrl": -0.5, "goal": 2.0}, {"reward_ctrl": -1.0}]
    vector = {"reward_ctrl": np.array([-0.5, -1.0]), "_reward_ctrl": np.array([True, True])}
    assert TermReader().of_envs(vector, 2) == [{"reward_ctrl": -0.5}, {"reward_ctrl": -1.0}]
    plain = TermReader()
    assert plain.of_envs({"x": 1.0}, 1) == [{}] and plain.keys == ()
    assert plain.of_env({"reward_ctrl": -1.0}) == {}  # looked at once: the first info
    assert plain.of_envs([{"reward_ctrl": -1.0}] * 3, 3) is None  # nothing read per step
    listed = TermReader()
    assert listed.of_envs([{"x": 1.0}, {"x": 2.0}], 2) == [{}, {}] and listed.keys == ()
    assert listed.of_envs([{"x": 1.0}, {"x": 2.0}], 2) is None
    assert TermReader().of_envs(None, 2) == [{}, {}]


# ------------------------------------------------------------------ statistics
def test_statistics_match_hand_computed_values():
    episodes = [{"a": 1.0, "b": -1.0}, {"a": 3.0, "b": -1.0}, {"a": 2.0}]  # b missing: 0
    returns = [0.0, 2.0, 2.0]
    stats = term_stats(episodes, returns)
    # a: mean 2, std sqrt(2/3); b: mean -2/3, std sqrt(2/9); shares 2/(8/3), (2/3)/(8/3).
    assert stats["a"]["mean"] == pytest.approx(2.0)
    assert stats["a"]["std"] == pytest.approx(np.sqrt(2 / 3))
    assert stats["b"]["mean"] == pytest.approx(-2 / 3)
    assert stats["b"]["std"] == pytest.approx(np.sqrt(2 / 9))
    assert stats["a"]["share"] == pytest.approx(0.75)
    assert stats["b"]["share"] == pytest.approx(0.25)
    # Pearson by hand: a - 2 = (-1, 1, 0), returns - 4/3 = (-4/3, 2/3, 2/3).
    cov = (4 / 3 + 2 / 3 + 0) / 3
    r = cov / (np.sqrt(2 / 3) * np.sqrt(np.mean(np.array([-4, 2, 2]) ** 2) / 9))
    assert stats["a"]["corr"] == pytest.approx(r)
    assert term_stats([{"a": 1.0}, {"a": 1.0}], [1.0, 2.0])["a"]["corr"] is None  # constant


def test_a_term_of_both_signs_counts_at_what_it_moves_not_at_its_mean(tmp_path):
    """A healthy Hopper SAC run as its forward reward turned positive (step 3,377): a
    window mean of 0.4 against episodes between -15 and +71 made its alive bonus look
    like 98% of the return, and reward_terms warned on a healthy run."""
    survive = [30.0, 40.0, 50.0, 60.0]
    forward = [-15.0, -10.0, 5.0, 21.6]  # mean 0.4, mean |.| 12.9
    episodes = [{"reward_survive": a, "reward_forward": f}
                for a, f in zip(survive, forward, strict=True)]
    stats = term_stats(episodes, [a + f for a, f in zip(survive, forward, strict=True)],
                       first=episodes[:1])
    assert stats["reward_forward"]["mean"] == pytest.approx(0.4)
    assert stats["reward_forward"]["size"] == pytest.approx(12.9)
    assert stats["reward_survive"]["size"] == stats["reward_survive"]["mean"] == 45.0
    assert stats["reward_survive"]["share"] == pytest.approx(45.0 / 57.9)  # not 45 / 45.4
    assert rule(tmp_path).check(3377, stats, 20) == []
    # A bonus twenty times Hopper's (healthy_reward 20) still outweighs everything.
    heavy_episodes = [{"reward_survive": 20 * a, "reward_forward": f}
                      for a, f in zip(survive, forward, strict=True)]
    heavy = term_stats(heavy_episodes, [20 * a + f for a, f in zip(survive, forward, strict=True)],
                       first=heavy_episodes[:1])
    assert heavy["reward_survive"]["share"] > 0.98
    [found] = rule(tmp_path).check(3377, heavy, 20)
    assert found.message.startswith("reward term reward_survive is 99% of the return")


def test_the_window_keeps_the_newest_episodes_and_counts_those_without_terms():
    window = TermWindow(3)
    for i in range(5):
        window.add({"a": float(i)}, float(i))
    assert not window.add(None, 1.0)
    assert list(window.returns) == [2.0, 3.0, 4.0] and window.without == 1
    copy = TermWindow(3)
    copy.load_state_dict(window.state_dict())
    assert copy.stats() == window.stats()
    # the run's first ENDS (3) episodes stay after the window has moved on
    assert window.first == [{"a": 0.0}, {"a": 1.0}, {"a": 2.0}]
    window.add({"a": 10.0}, 10.0)
    stats = window.stats()["a"]
    assert stats["start"] == pytest.approx(1.0) and stats["recent"] == pytest.approx(17 / 3)
    older = window.state_dict()
    del older["first"]  # saved before `first` was kept: the window's oldest stand for it
    copy.load_state_dict(older)
    assert copy.first == [{"a": 3.0}, {"a": 4.0}, {"a": 10.0}]


# ------------------------------------------------------------------ the rule
def stats_of(played: bool = True, **terms: tuple[float, float, float | None]) -> dict:
    """term -> (mean, share, corr), std 1; at the run's start each term was 2|mean| lower
    (`played`: the agent has moved it its way since) or at its mean."""
    return {n: {"mean": m, "share": s, "corr": c, "std": 1.0, "recent": m,
                "start": m - 2 * abs(m) if played else m} for n, (m, s, c) in terms.items()}


def test_the_rule_fires_on_a_dominating_cost_and_names_it(tmp_path):
    check = rule(tmp_path)
    found = check.check(500, stats_of(reward_goal=(3.0, 0.03, 0.9),
                                      reward_ctrl=(-97.0, 0.97, 0.99)), 12)
    assert len(found) == 1
    assert found[0].message.startswith("reward term reward_ctrl is 97% of the return")
    # The env takes ctrl_cost_weight (0.1 by default): lowered to make ctrl ~50%.
    assert found[0].suggested_set == {"env_kwargs.ctrl_cost_weight": float(f"{0.1 * 3 / 97:.3g}")}
    assert check.check(500, stats_of(reward_goal=(3.0, 0.03, 0.9),
                                     reward_ctrl=(-97.0, 0.97, 0.99)), 9) == []  # too few


def test_a_dominating_cost_the_agent_does_not_shrink_is_the_price_of_acting(tmp_path):
    """HalfCheetah's control cost is most of a healthy run's return in its first 10,000
    steps: the agent acts as much as at the start, or more; it has not learnt to avoid it."""
    check = rule(tmp_path)
    unplayed = stats_of(False, reward_forward=(3.0, 0.03, 0.9), reward_ctrl=(-97.0, 0.97, 0.99))
    assert check.check(500, unplayed, 12) == []
    grown = {n: {**s, "start": s["mean"] / 2} for n, s in unplayed.items()}  # paid more
    assert check.check(500, grown, 12) == []
    barely = {n: {**s, "start": s["mean"] * 1.9} for n, s in unplayed.items()}  # 47% less
    assert check.check(500, barely, 12) == []
    assert len(rule(tmp_path, min_rise=0.4).check(500, barely, 12)) == 1


def test_the_driving_term_may_carry_the_return_but_must_move_with_it(tmp_path):
    check = rule(tmp_path)
    balanced = stats_of(reward_forward=(940.0, 0.94, 0.95), reward_ctrl=(-60.0, 0.06, 0.4))
    assert check.driving(balanced) == "reward_forward"
    assert check.check(500, balanced, 20) == []
    drifting = stats_of(reward_forward=(50.0, 0.5, 0.1), reward_noise=(-50.0, 0.5, 0.98))
    # 0.1 over 20 episodes: its 95% bound is 0.46, no evidence it is under 0.3
    assert check.check(500, drifting, 20) == []
    found = check.check(500, drifting, 100)  # over 100: at most 0.26
    assert len(found) == 1 and found[0].value == 0.1
    assert "(at most 0.26 with 95% confidence)" in found[0].message
    assert "reward term reward_forward, the one meant to drive learning" in found[0].message
    assert "reweight the terms in the env" in found[0].message and not found[0].suggested_set
    named = rule(tmp_path, drive_term="reward_noise")
    assert [f.value for f in named.check(500, drifting, 100)] == []  # noise drives: fine
    assert named.driving(stats_of(reward_forward=(1.0, 1.0, 1.0))) is None  # not reported


def test_a_correlation_is_judged_by_its_95_percent_bound():
    """Fisher's z: atanh(r) has a standard error of 1 / sqrt(n - 3)."""
    assert correlation_bound(0.0, 103) == pytest.approx(np.tanh(1.645 / 10))
    assert correlation_bound(0.5, 3) == 1.0  # too few episodes to bound it
    # A healthy Hopper run's forward reward over its first played episodes: -0.02 says
    # nothing at 10 episodes, and 0.05 is evidence of no link at 400.
    assert correlation_bound(-0.02, 10) > 0.5 and correlation_bound(0.05, 400) < 0.15
    assert correlation_bound(1.0, 50) == pytest.approx(1.0)


def test_in_a_reward_of_costs_the_objective_may_dominate_a_regularizer_may_not(tmp_path):
    """Pendulum split: its angle cost is ~94% of a healthy run's return as it learns."""
    check = rule(tmp_path)
    healthy = stats_of(reward_angle=(-1355.0, 0.94, 0.99), reward_velocity=(-80.0, 0.06, 0.5),
                       reward_ctrl=(-2.0, 0.0, 0.1))
    assert check.driving(healthy) == "reward_angle" and check.check(500, healthy, 20) == []
    heavy = stats_of(reward_angle=(-1200.0, 0.04, 0.1), reward_velocity=(-84.0, 0.0, 0.2),
                     reward_ctrl=(-30800.0, 0.96, 0.99))
    found = check.check(500, heavy, 100)
    assert [f.message.split(" is ")[0] for f in found][:1] == ["reward term reward_ctrl"]
    assert "reward term reward_angle, the one meant to drive learning (the largest cost " \
           "that is no regularizer), correlates 0.10" in found[1].message
    only_effort = stats_of(reward_ctrl=(-5.0, 0.5, 0.9), reward_contact=(-5.0, 0.5, 0.9))
    assert check.driving(only_effort) is None


def test_an_alive_bonus_drives_only_where_no_other_term_could(tmp_path):
    """Hopper early on: 7-step episodes earn 7 of reward_survive and a little forward
    reward; the task is to move forward, whatever most of the return is."""
    check = rule(tmp_path)
    hopper = stats_of(False, reward_survive=(7.0, 0.6, -0.2), reward_forward=(-4.5, 0.4, 0.62),
                      reward_ctrl=(-0.01, 0.0, 0.1))
    assert check.driving(hopper) == "reward_forward" and check.check(500, hopper, 58) == []
    ahead = {**hopper, "reward_forward": {**hopper["reward_forward"], "mean": 3.0}}
    assert check.driving(ahead) == "reward_forward"
    survival = stats_of(reward_healthy=(200.0, 0.99, 0.9), reward_ctrl=(-2.0, 0.01, 0.1))
    assert check.driving(survival) == "reward_healthy"
    # Hopper SAC learning to stand: its alive bonus 91% of the return, and rising
    standing = stats_of(reward_survive=(91.0, 0.91, 0.9), reward_forward=(9.0, 0.09, 0.5))
    assert check.check(500, standing, 20) == []
    # A bonus weighted so heavily that staying alive is the agent's whole return
    heavy = stats_of(reward_survive=(4000.0, 0.97, 0.99), reward_forward=(120.0, 0.03, 0.3))
    found = check.check(500, heavy, 20)
    assert [f.message.split(" is ")[0] for f in found] == ["reward term reward_survive"]
    assert weight_names("reward_survive")[:2] == ["healthy_cost_weight", "healthy_reward_weight"]
    assert "healthy_reward" in weight_names("reward_survive")


def test_no_fix_is_proposed_where_the_env_takes_no_weight(tmp_path):
    config = tiny_config(tmp_path, env_name="Pendulum-v1")
    assert weight_fix(config, "reward_ctrl", 0.1) is None
    assert weight_fix(tiny_config(tmp_path, env_name=TERMS_ENV,
                                  env_kwargs={"ctrl_cost_weight": 2.0}), "ctrl", 0.25) == (
        "env_kwargs.ctrl_cost_weight", 0.5)


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("as_dict", [False, True])
def test_a_dominating_control_cost_fires_with_its_weight_as_the_fix(tmp_path, as_dict):
    """Random actions pay the cost for 300 steps: the price of acting, silent. Learning
    from step 60, the agent shrinks the cost (to under half its size at the start) while
    it is still over 90% of the return: the cost is what it learns."""
    random_only = train(tmp_path, "random", {**DOMINANT, "as_dict": as_dict})
    assert fired(random_only) == []
    log_dir = train(tmp_path, "dominant", {**DOMINANT, "as_dict": as_dict},
                    learning_starts=60, max_timesteps=600)
    found = fired(log_dir)
    term = "ctrl" if as_dict else "reward_ctrl"
    assert found and found[0]["message"].startswith(f"reward term {term} is 9")
    weight = found[0]["suggested_set"]["env_kwargs.ctrl_cost_weight"]
    assert 0 < weight < DOMINANT["ctrl_cost_weight"]


def test_an_uncorrelated_driving_term_fires_and_balanced_terms_do_not(tmp_path):
    """Judged on the episodes the policy played: a random warm-up's returns move with
    whatever its random actions cost, not with what the agent learns."""
    assert fired(train(tmp_path, "warm-up", UNCORRELATED)) == []
    found = fired(train(tmp_path, "uncorrelated", UNCORRELATED, learning_starts=100,
                        max_timesteps=700))
    assert found and "reward term reward_goal, the one meant to drive" in found[0]["message"]
    assert found[0]["env_steps"] >= 150  # 10 episodes of 5 steps from step 100 on
    assert fired(train(tmp_path, "balanced", learning_starts=100)) == []


def test_an_env_without_terms_is_not_read_per_step_and_is_unjudged(tmp_path, monkeypatch):
    def no_call(*args):
        raise AssertionError("step_terms called for an env that reports no terms")

    monkeypatch.setattr(collector, "step_terms", no_call)
    log_dir = train(tmp_path, "plain", env_name="Pendulum-v1")
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    assert report["unjudged"]["reward_terms"].startswith("no reward terms reported in info")
    assert report["reward_terms"] is None
    assert not [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "reward_terms"]


def test_too_few_episodes_leave_the_rule_unjudged(tmp_path):
    log_dir = train(tmp_path, "short", env_kwargs={"horizon": 50})  # 6 episodes
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    assert report["unjudged"]["reward_terms"] == (
        "6 of the 10 episodes with reward terms it needs")


def test_terms_reach_tensorboard_and_the_report(tmp_path):
    log_dir = train(tmp_path, "outputs", DOMINANT, learning_starts=100)
    board = EventAccumulator(str(log_dir))
    board.Reload()
    for tag in ("reward_terms/reward_ctrl/share", "reward_terms/reward_goal/corr",
                "reward_terms/reward_ctrl/mean", "reward_terms/reward_goal/std"):
        assert tag in board.Tags()["scalars"], tag
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    terms = report["reward_terms"]
    assert terms["episodes"] == 15 and terms["drive"] == "reward_goal"
    assert terms["terms"]["reward_ctrl"]["share"] > 0.9
    assert "unjudged" not in report or "reward_terms" not in report["unjudged"]
    table = CliRunner().invoke(cli, ["diagnose", str(log_dir)], terminal_width=160).output
    assert "reward terms over the last 15 episodes" in table
    assert "reward_goal *" in table and "* drives learning" in table
    assert "Reward terms</h2>" in (log_dir / "report.html").read_text()


def test_an_sb3_run_reads_the_terms_from_its_infos(tmp_path, monkeypatch):
    from stable_baselines3 import TD3

    import rltrain
    from rltrain.integrations.sb3 import RltrainCallback

    monkeypatch.chdir(tmp_path)
    # weight 30: this TD3 learns to shrink it (at 100 its actions saturate at the bounds)
    env = __import__("gymnasium").make(TERMS_ENV, ctrl_cost_weight=30.0)
    model = TD3("MlpPolicy", env, policy_kwargs={"net_arch": [8]}, batch_size=32, seed=0,
                device="cpu", learning_starts=60, learning_rate=0.01)
    # learns to shrink the cost; the correlation half of the rule off, so that the
    # report's one reward_terms entry is the dominant term's
    model.learn(600, callback=RltrainCallback("sb3", config={
        "diagnostics": {"reward_terms": {"min_correlation": -1}}}))
    found = [f for f in rltrain.diagnose("sb3") if f["rule"] == "reward_terms"
             and re.match(r"reward term reward_ctrl is (9\d|100)% ", f["message"])]
    assert found
    # The env was made by the user's code: its weight (30, not the default) is unknown.
    assert found[0]["suggested_set"] == {}
    assert "lower its weight in the env" in found[0]["message"]


# ------------------------------------------------------------------ resume
def test_terms_of_an_episode_in_progress_survive_a_fork_bit_exactly(tmp_path):
    """Forked at step 150, mid-episode (two sub-envs, 20-step episodes: each at step 15
    of its fourth): the fork's statistics and its checkpoint's term sums equal the
    uninterrupted run's."""
    log_dir = train(tmp_path, "full", DOMINANT, num_envs=2, checkpoint_freq=50,
                    keep_checkpoints=100)
    ckpt = tmp_path / "checkpoints" / "full"
    middle = load_checkpoint(ckpt / "checkpoint_step_150.pt")["trainer"]
    assert all(e["length"] % 20 and e["reward_terms"] for e in middle["episodes"])
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(ckpt / "checkpoint_step_150.pt"), "--run-name", "fork"])
    assert result.exit_code == 0, result.output

    def terms_after(run: Path) -> list[dict]:
        return [d for d in read_jsonl(run / "flow1.jsonl")
                if d["kind"] == "reward_terms" and d["env_steps"] > 150]

    assert terms_after(log_dir) and terms_after(tmp_path / "logs" / "fork") == terms_after(log_dir)
    full, fork = (load_checkpoint(tmp_path / "checkpoints" / run / "checkpoint_step_300.pt")
                  for run in ("full", "fork"))
    for a, b in zip(full["trainer"]["episodes"], fork["trainer"]["episodes"], strict=True):
        assert a["reward_terms"] == b["reward_terms"] and a["reward_terms"]
        assert torch.equal(a["actions"], b["actions"])
    assert fork["trainer"]["diagnostics"]["reward_terms"] == \
        full["trainer"]["diagnostics"]["reward_terms"]
