"""The fault benchmark's cases (benchmarks/faults/): each is a real, citable fault with
a rule that exists and a fix the config accepts; the table judges what a run found;
`--verify` tries the fix that named a case on the case's run."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rltrain
from benchmarks.faults import __main__ as bench
from benchmarks.faults import verify as bench_verify
from benchmarks.faults.__main__ import run_one, train_config
from benchmarks.faults.case_types import PLANNED_RULES
from benchmarks.faults.cases import (
    CASES,
    FAMILIES,
    FAULTY_ENV,
    HALVES,
    HEALTHY,
    SPLIT_SEED,
    half,
    healthy,
)
from benchmarks.faults.loop import FAULTS as LOOP_FAULTS
from benchmarks.faults.sb3_runs import CLASSES as SB3_CLASSES
from benchmarks.faults.table import judge, real_fault, right_key, table
from benchmarks.faults.verify import naming_finding, verify_case
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.rules.registry import all_specs


def test_the_benchmark_is_large_and_spread_over_families_envs_and_halves():
    assert len(CASES) >= 50 and len({c.id for c in CASES}) == len(CASES)
    assert {c.kind for c in CASES} == set(FAMILIES)
    assert len({healthy(c.healthy).env for c in CASES}) >= 6
    assert len(HEALTHY) >= 12
    for env in {h.env for h in HEALTHY if h.algo != "loop"}:  # two algorithms per env
        assert len({h.algo for h in HEALTHY if h.env == env}) >= 2, env
    assert {c.half for c in CASES} == set(HALVES) == {h.half for h in HEALTHY}


def test_the_split_is_a_seeded_hash_of_the_id():
    assert half("tau_one") == half("tau_one")
    assert {half(f"case_{i}") for i in range(20)} == {"tune", "test"}
    digest = hashlib.sha256(f"{SPLIT_SEED}:tau_one".encode()).digest()
    assert half("tau_one") == HALVES[digest[0] % 2]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_case_names_known_rules_and_a_fix_the_config_takes(case, tmp_path):
    assert case.source and case.source != "SOURCE" and case.rules
    assert set(case.rules) <= set(all_specs()) | PLANNED_RULES
    run = healthy(case.healthy)
    if run.algo == "loop":
        assert case.loop in LOOP_FAULTS
        return
    if run.algo in SB3_CLASSES:
        _check_sb3_case(case, run)
        return
    raw = train_config(run, case, 2000, 0, tmp_path)
    config = config_from_dict(raw)  # the planted config is a valid one
    for key in case.key.split("|") if case.key else ():
        if key.startswith("env_kwargs."):  # a keyword the planted env takes
            kwargs = {**config.env_kwargs, **config.env_kwargs.get("base_kwargs", {})}
            assert key.split(".", 1)[1] in kwargs
        else:  # the expected fix is a key of the run's config
            assert key in _keys(config)


def _check_sb3_case(case, run) -> None:
    """An SB3 case's settings are its model's keyword arguments and build it on its
    (faulty) env where that env can be made; the expected fix is one of the model's
    keyword arguments or RL Zoo's VecNormalize switch."""
    import inspect

    stable_baselines3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks.faults.sb3_runs import make_env, settings

    _, kwargs = settings(run.algo, run.env, case.sets)
    kwargs.pop("normalize", None)
    cls = getattr(stable_baselines3, SB3_CLASSES[run.algo])
    assert set(kwargs) <= set(inspect.signature(cls).parameters)
    try:  # and the model is built, where the env can be made here (Box2D is optional)
        env = make_vec_env(make_env(run.env, case.env_fault or run.env_fault), n_envs=1)
    except gym.error.DependencyNotInstalled:
        return
    cls("MlpPolicy", env, device="cpu", **kwargs)
    for key in case.key.split("|") if case.key else ():
        assert key in inspect.signature(cls).parameters or key.startswith("normalize."), key


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
    assert judge(case, hit) == {"named": True, "right_key": True, "first_step": 3000,
                                "lead": "target_update", "led": True}
    assert judge(case, wrong)["right_key"] is False
    assert not right_key(case, {})
    calm = {"name": "pendulum_ddpg", "seed": 0, "steps": 6000, "final_eval": -180.0,
            "findings": [{"env_steps": 10, "rule": "reward_scale", "action": "warn"}]}
    text = table([hit, calm])
    assert ("| tau_one | test | hyperparameter | yes | yes | target_update | 3000 | "
            "-900.0 (-180.0) |") in text
    half = case.half
    assert (f"{half}: recall 1/1 named (100%); right key 1/1 (100%); led by a case's rule "
            f"1/1; false alarms: {1 if healthy('pendulum_ddpg').half == half else 0} over") in text
    assert ("all: recall 1/1 named (100%); right key 1/1 (100%); led by a case's rule 1/1; "
            "false alarms: 1 over 1") in text


def test_a_real_fault_ends_clearly_below_its_healthy_runs_mean_or_paused_below_it():
    def run(final: float, paused: bool = False) -> dict:
        return {"final_eval": final, "findings": [
            {"env_steps": 10, "rule": "x", "action": "pause" if paused else "warn"}]}

    tau = next(c for c in CASES if c.id == "tau_one")
    healthy = [run(-546.3), run(-191.1)]  # pendulum_sac's two seeds: mean -368.7
    assert real_fault(tau, [run(-900.0)], healthy)
    assert not real_fault(tau, [run(-390.0)], healthy)  # within 10% of the mean
    assert real_fault(tau, [run(-390.0, paused=True)], healthy)  # a rule stopped it below
    assert not real_fault(tau, [run(-360.0, paused=True)], healthy)
    assert not real_fault(tau, [run(5.0)], [run(12.0)])  # under 10 below
    assert not real_fault(tau, [{"final_eval": None, "findings": []}], healthy)
    # A reward-scale fault's return is judged in the healthy env's units: Pendulum's
    # rewards times 1e-4 ending at -0.15 is -1500 there, far below -169.
    small = next(c for c in CASES if c.id == "reward_too_small")
    assert small.env_fault == {"fault": "reward_scale", "factor": 1e-4}
    assert real_fault(small, [run(-0.15)], [run(-169.2)])
    assert not real_fault(small, [run(-0.015)], [run(-169.2)])  # -150: better than it


def test_a_run_that_could_not_run_is_left_out_and_listed():
    broken = {"name": "pendulum_ddpg", "seed": 0, "steps": 0, "final_eval": None,
              "findings": [], "error": "TypeError: boom"}
    text = table([broken])
    assert "false alarms: 0 over 0 healthy runs" in text
    assert "could not run: pendulum_ddpg seed 0: TypeError: boom" in text


def _case(name):
    return next(c for c in CASES if c.id == name)


def _warn(rule, step, suggested=None):
    return {"env_steps": step, "rule": rule, "action": "warn", "value": 1.0,
            "suggested_set": suggested}


def _tried(rule, suggested, verdict, difference=None, interval=None, also=()):
    """One finding's result as scripts/verify/verify.py's `verify` returns it (the keys
    read)."""
    return {"rule": rule, "also": list(also), "suggested_set": suggested,
            "verdict": verdict, "difference": difference, "interval": interval,
            "steps": 3000, "seeds": 3}


def test_the_verify_column_and_the_confirmed_fixes_in_the_totals():
    hit = {"name": "tau_one", "seed": 0, "steps": 3000, "final_eval": -1200.0,
           "findings": [_warn("target_update", 2099, {"tau": 0.005})],
           "verify": {"rule": "target_update", "suggested_set": {"tau": 0.005},
                      "verdict": "confirmed", "difference": 412.34,
                      "interval": [201.0, 610.55], "env_steps": 18000}}
    missed = {"name": "lr_far_too_high", "seed": 0, "steps": 3000, "final_eval": -1300.0,
              "findings": [_warn("learning_rate", 2099, {"critic_lr": 0.001})],
              "verify": {"rule": "learning_rate", "suggested_set": {"critic_lr": 0.001},
                         "verdict": "inconclusive", "difference": -5.0,
                         "interval": [-80.0, 70.0], "env_steps": 36000}}
    code = {"name": "no_zero_grad", "seed": 0, "steps": 3000, "final_eval": -1500.0,
            "findings": [_warn("grad_explosion", 900)]}
    text = table([hit, missed, code])
    assert ("| case | half | family | named | right key | leads with | first step "
            "| final eval (healthy) | verify |") in text
    assert ("| tau_one | test | hyperparameter | yes | yes | target_update | 2099 | "
            "-1200.0 (-) | confirmed +412.3 [+201.0, +610.5] |") in text
    assert ("| lr_far_too_high | test | hyperparameter | yes | yes | learning_rate | 2099 | "
            "-1300.0 (-) | inconclusive -5.0 [-80.0, +70.0] |") in text
    assert ("| no_zero_grad | tune | code | yes | - | grad_explosion | 900 | -1500.0 (-) "
            "| - |") in text
    assert "verified: 1/2 named fixes confirmed (54,000 env steps of verify branches)" in text


def test_a_case_counts_as_confirmed_only_when_every_seed_confirmed_it():
    def seed(k, verdict):
        return {"name": "tau_one", "seed": k, "steps": 3000, "final_eval": -1200.0,
                "findings": [_warn("target_update", 2099, {"tau": 0.005})],
                "verify": {"verdict": verdict, "difference": None, "interval": None,
                           "env_steps": 100}}
    text = table([seed(0, "confirmed"), seed(1, "not tried")])
    assert "| confirmed; not tried |" in text
    assert "verified: 0/1 named fixes confirmed (200 env steps" in text


def test_old_results_without_verify_data_still_make_a_table(tmp_path, capsys, monkeypatch):
    old = {"seeds": 1, "scale": 0.5, "runs": [
        {"name": "tau_one", "seed": 0, "steps": 3000, "final_eval": -1207.1,
         "findings": [_warn("target_update", 2099, {"tau": 0.005})]}]}
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(old))
    monkeypatch.setattr(sys, "argv", ["faults", "--table", str(path)])
    bench.main()
    out = capsys.readouterr().out
    assert ("| tau_one | test | hyperparameter | yes | yes | target_update | 2099 | "
            "-1207.1 (-) | - |") in out
    assert "; verified: -" in out


def test_the_naming_finding_is_one_of_the_case_rules_with_a_fix_the_right_key_first():
    tau = _case("tau_one")
    wrong, right = {"tau": 2.0}, {"tau": 0.005}
    result = {"findings": [_warn("reward_scale", 100, {"normalize.rewards": True}),
                           _warn("target_update", 1500, wrong),
                           _warn("target_update", 2000, right)]}
    assert naming_finding(tau, result)["suggested_set"] == right
    assert naming_finding(tau, {"findings": [_warn("target_update", 1500, wrong)]}
                          )["suggested_set"] == wrong
    assert naming_finding(tau, {"findings": [_warn("target_update", 1500)]}) is None
    assert naming_finding(tau, {"findings": [_warn("reward_scale", 1, right)]}) is None
    named = {"findings": [_warn("grad_explosion", 900, {"critic_lr": 1e-4})]}
    assert naming_finding(_case("no_zero_grad"), named) is None  # a plain-loop case
    assert naming_finding(_case("ignored_action"),  # no config key fixes it
                          {"findings": [_warn("ignored_action", 1, {"x": 1})]}) is None


def test_verify_case_keeps_the_verdict_of_the_naming_fix_and_the_cost(tmp_path):
    calls = []

    def recorder(folder, **options):
        calls.append((folder, options))
        return [_tried("reward_scale", {"normalize.rewards": True}, "inconclusive"),
                _tried("target_update", {"tau": 0.005}, "confirmed", 300.0, [100.0, 500.0])]

    result = {"findings": [_warn("target_update", 2000, {"tau": 0.005})]}
    options = {"steps": None, "seeds": 3, "jobs": 1}
    got = verify_case(_case("tau_one"), result, tmp_path, options, run_verify=recorder)
    assert calls == [(tmp_path, {"steps": None, "seeds": 3, "jobs": 1, "say": None,
                                 "threads": None})]
    assert got["rule"] == "target_update" and got["verdict"] == "confirmed"
    assert got["difference"] == 300.0 and got["interval"] == [100.0, 500.0]
    assert got["env_steps"] == 2 * (2 * 3 * 3000)  # both experiments verify ran
    assert [t["verdict"] for t in got["tried"]] == ["inconclusive", "confirmed"]
    outside = verify_case(_case("tau_one"), result, tmp_path, options,
                          run_verify=lambda folder, **o: [_tried("reward_scale", {}, "x")])
    assert outside["verdict"] == "not tried"  # not among the top findings verify tried

    def broken(folder, **options):
        raise RuntimeError("no checkpoint")

    failed = verify_case(_case("tau_one"), result, tmp_path, options, run_verify=broken)
    assert failed["verdict"] == "error" and failed["error"] == "RuntimeError: no checkpoint"


def test_run_one_verifies_the_named_case_in_its_run_folder(monkeypatch):
    """The plumbing, with the training and the verify swapped for stand-ins: a real
    verify trains 2 x seeds branches, minutes on two shared cores."""
    seen = []

    def fake_train(config, run_name):
        log_dir = Path(config["log_dir"]) / run_name
        log_dir.mkdir(parents=True)
        (log_dir / "events.jsonl").write_text(json.dumps(
            _warn("target_update", 1899, {"tau": 0.005})) + "\n")
        (log_dir / "metrics.jsonl").write_text(json.dumps(
            {"kind": "eval", "env_steps": 2000, "mean_return": -1300.0}) + "\n")

    def recorder(folder, steps, seeds, jobs, say, threads):
        seen.append({"exists": (folder / "events.jsonl").exists(), "name": folder.name,
                     "steps": steps, "seeds": seeds, "jobs": jobs, "threads": threads})
        say("verify: 600 env steps in all")
        return [_tried("target_update", {"tau": 0.005}, "confirmed", 50.0, [10.0, 90.0])]

    monkeypatch.setattr(rltrain, "train", fake_train)
    monkeypatch.setattr(bench_verify, "verify", recorder)
    options = {"steps": 300, "seeds": 1, "jobs": 1, "threads": 1}
    result = run_one("tau_one", 0, 0.1, options)
    assert seen == [{"exists": True, "name": "tau_one_s0", "steps": 300, "seeds": 1,
                     "jobs": 1, "threads": 1}]  # before the temporary folder went
    assert result["verify"]["verdict"] == "confirmed"
    assert result["final_eval"] == -1300.0
    assert "verify" not in run_one("tau_one", 0, 0.1)  # off by default
    assert "verify" not in run_one("pendulum_ddpg", 0, 0.1, options)  # a healthy run


@pytest.mark.parametrize("option", ["--verify-seeds", "--verify-jobs", "--verify-steps"])
def test_a_verify_option_below_one_is_refused_in_one_line(option, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["faults", "--verify", option, "0"])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 2
    assert "must be at least 1 (got 0)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, cores, jobs", [
    ([], 2, 2), (["--jobs", "2"], 2, 1), (["--jobs", "3"], 2, 1), (["--jobs", "2"], 16, 8),
    (["--verify-jobs", "3"], 2, 3)])
def test_verify_runs_about_one_training_per_core_by_default(argv, cores, jobs):
    args = bench.arguments().parse_args(["--verify", *argv])
    assert bench.verify_options(args, cores) == {"steps": None, "seeds": 3, "jobs": jobs,
                                                 "threads": 1, "top": None}
    assert bench.verify_options(bench.arguments().parse_args(argv), cores) is None


def test_the_cost_of_verify_is_said_before_anything_runs():
    """Per case with a config fix: top experiments x seed pairs x 2 branches x budget."""
    names = ["tau_one", "no_zero_grad", "pendulum_ddpg"]  # a fix, a code fault, healthy
    line = bench.verify_cost(names, 1.0, {"seeds": 3, "top": 1})
    assert line.startswith(f"verify: at most {6000 * 1 * 3 * 2:,} env steps of branches: "
                           "1 cases with a config fix")


def test_results_are_written_after_every_run(tmp_path, monkeypatch):
    """A benchmark stopped halfway (hours of --verify) keeps the runs it finished."""
    class Pool:  # one run finishes, then the benchmark is stopped
        def __init__(self, max_workers):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def map(self, fn, jobs):
            yield {"name": "tau_one", "seed": 0, "steps": 1, "final_eval": -1.0,
                   "findings": []}
            raise KeyboardInterrupt

    monkeypatch.setattr(bench, "ProcessPoolExecutor", Pool)
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["faults", "--only", "tau_one", "--only", "pendulum_ddpg",
                                      "--out", str(out)])
    with pytest.raises(KeyboardInterrupt):
        bench.main()
    assert [r["name"] for r in json.loads(out.read_text())["runs"]] == ["tau_one"]


def test_the_seeds_run_start_at_first_seed():
    assert list(bench.run_seeds("pendulum_ddpg", 1)) == [0]
    assert list(bench.run_seeds("pendulum_ddpg", 1, first=1)) == [1]
    assert list(bench.run_seeds("pendulum_sac", 1, first=2)) == [2, 3]  # it asks for 2
    assert bench.arguments().parse_args(["--first-seed", "1"]).first_seed == 1
