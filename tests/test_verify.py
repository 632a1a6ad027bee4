"""Suggested changes are valid config changes that resume accepts; a planted fault in a
tiny real run is found with its suggested_set; `diagnose --verify` forks and judges it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.training.resume import FIXED_ON_RESUME, resume_config
from rltrain.scripts.verify.verify import difference, fork_point, verdict
from rltrain.utils.config.loader import apply_overrides, config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.diagnosis.rules.registry import remedies
from rltrain.utils.run.log_files import read_jsonl

from conftest import tiny_dict

REMEDIES = remedies()  # every rule whose spec proposes a config change

# A tiny run with both learning rates at 0.1, measured every 20 updates.
FAULT = {"actor_lr": 0.1, "critic_lr": 0.1, "safe_mode": False, "max_timesteps": 400,
         "diagnostics": {"learning_rate": {"every_updates": 20, "measurements": 2}}}


def check_suggestion(config: TrainConfig, suggested: dict) -> TrainConfig:
    """`suggested` applied as `--set`, and through resume's own check."""
    from rltrain.utils.config.resolve import override_strings

    assert suggested and not {k.split(".")[0] for k in suggested} & set(FIXED_ON_RESUME)
    sets = override_strings(suggested)
    changed = config_from_dict(apply_overrides(config_to_dict(config), sets))
    resumed = resume_config({"config": config_to_dict(config)}, sets, "ck.pt", trusted=config)
    assert resumed == changed
    return changed


def test_the_older_rules_with_a_config_remedy_declare_it_in_their_spec() -> None:
    assert sorted(REMEDIES) == ["critic_loss_explosion", "dead_relu", "exploding_gradient",
                                "grad_explosion", "q_explosion", "q_overestimation",
                                "short_horizon"]


@pytest.mark.parametrize("rule", sorted(REMEDIES))
def test_older_rules_suggest_valid_resumable_changes(rule: str) -> None:
    config = config_from_dict({"gamma": 0.5})  # short_horizon fires with this gamma
    changed = check_suggestion(config, REMEDIES[rule](config))
    assert changed != config


def train(tmp_path: Path, name: str, **overrides) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", name])
    assert result.exit_code == 0, result.output
    return tmp_path / "logs" / name


@pytest.fixture(scope="module")
def hot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted-fault run, trained once for the module. Tests only add to its folders
    (reports, forks); one that removes files works on its own copy (`own_copy`)."""
    return train(tmp_path_factory.mktemp("verify"), "hot", **FAULT)


def own_copy(folder: Path, tmp_path: Path) -> Path:
    """The run's log and checkpoint folders copied under tmp_path, its config.yaml
    pointing at the copies: a run of its own, as if trained there."""
    logs, checkpoints = tmp_path / "logs", tmp_path / "checkpoints"
    shutil.copytree(folder, logs / folder.name)
    shutil.copytree(folder.parent.parent / "checkpoints" / folder.name,
                    checkpoints / folder.name)
    config_file = logs / folder.name / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    config.update(log_dir=str(logs), checkpoint_dir=str(checkpoints))
    config_file.write_text(yaml.safe_dump(config))
    return logs / folder.name


def test_a_tiny_run_with_planted_learning_rates_names_them(hot: Path, tmp_path: Path) -> None:
    events = [e for e in read_jsonl(hot / "events.jsonl") if e.get("rule") == "learning_rate"]
    assert events, "the learning_rate rule did not fire"
    suggested = events[0]["suggested_set"]
    assert set(suggested) <= {"actor_lr", "critic_lr"} and suggested
    assert all(v <= 1e-3 for v in suggested.values())
    changed = check_suggestion(config_from_dict(tiny_dict(tmp_path, **FAULT)), suggested)
    assert changed.actor_lr <= 1e-3 or "actor_lr" not in suggested
    report = CliRunner().invoke(cli, ["diagnose", str(hot), "--json"])
    assert report.exit_code == 0
    found = json.loads(report.output)["findings"]
    assert all("suggested_set" in f for f in found)
    assert any(f["rule"] == "learning_rate" and f["suggested_set"] for f in found)


def test_verify_forks_both_branches_and_gives_a_verdict(hot: Path) -> None:
    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--steps", "200",
                                      "--fork-step", "400", "--seeds", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    checked = [v for v in report["verifications"] if v["rule"] == "learning_rate"]
    assert len(checked) == 1
    v = checked[0]
    assert v["verdict"] in ("confirmed", "not confirmed", "inconclusive")
    assert v["fork_step"] <= v["first_step"] or v["fork_step"] == FAULT["max_timesteps"]
    for kind in ("fix", "control"):
        branch = v["branches"][kind]
        assert branch["exit_code"] == 0 and branch["returns"], branch
        status = json.loads((hot.parent / branch["run"] / "status.json").read_text())
        assert status["env_steps"] == v["fork_step"] + 200
    fix_config = yaml.safe_load(
        (hot.parent / v["branches"]["fix"]["run"] / "config.yaml").read_text())
    assert fix_config["actor_lr"] == v["suggested_set"].get("actor_lr", 0.1)
    assert "Verified fixes" in (hot / "report.html").read_text()


def test_verify_without_a_checkpoint_says_so(hot: Path, tmp_path: Path) -> None:
    folder = own_copy(hot, tmp_path)
    for checkpoint in (tmp_path / "checkpoints" / "hot").glob("*.pt"):
        checkpoint.unlink()
    result = CliRunner().invoke(cli, ["diagnose", str(folder), "--verify", "--fork-step",
                                      "400"])
    assert result.exit_code != 0
    assert "no checkpoint" in result.output and len(result.output.strip().splitlines()) == 1
    assert list((hot.parent.parent / "checkpoints" / "hot").glob("*.pt"))  # the original's


def test_a_fork_step_before_every_kept_checkpoint_is_refused(hot: Path) -> None:
    kept = sorted(int(p.stem.rsplit("_", 1)[1]) for p in
                  (hot.parent.parent / "checkpoints" / "hot").glob("checkpoint_step_*.pt"))
    runs = sorted(hot.parent.iterdir())
    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--fork-step",
                                      str(kept[0] - 1)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"Error: --fork-step {kept[0] - 1}: run 'hot' keeps no checkpoint at or before it "
        f"(the oldest is step {kept[0]}); choose a later --fork-step, or train with a "
        f"larger keep_checkpoints"]
    assert sorted(hot.parent.iterdir()) == runs  # no branch was started


def test_verify_refuses_no_pairs(hot: Path) -> None:
    for option in ("--seeds", "--last"):
        result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", option, "0"])
        assert result.exit_code == 2, result.output
        assert result.output.strip() == f"Error: {option} must be at least 1 (got 0)"


def test_fork_point_takes_the_newest_before_the_finding(tmp_path: Path) -> None:
    for step in (100, 200, 300):
        (tmp_path / f"checkpoint_step_{step}.pt").write_bytes(b"")
    (tmp_path / "best_model.pt").write_bytes(b"")
    assert fork_point(tmp_path, 250)[0] == 200
    assert fork_point(tmp_path, 50)[0] == 300  # none before: the newest
    assert fork_point(tmp_path / "none", 50) is None


def test_verdicts_follow_the_bootstrap_interval() -> None:
    better = difference([10.0, 11.0, 12.0, 10.5], [0.0, 1.0, -1.0, 0.5])
    assert better["low"] > 0 and verdict(better, 0.1) == "confirmed"
    worse = difference([0.0, 1.0, -1.0, 0.5], [10.0, 11.0, 12.0, 10.5])
    assert verdict(worse, 10.9) == "not confirmed"
    noisy = difference([0.0, 20.0, -20.0, 5.0], [1.0, -15.0, 18.0, 2.0])
    assert verdict(noisy, 1.5) == "inconclusive"


def test_the_verdict_judges_where_the_branches_end_up() -> None:
    from rltrain.scripts.verify.verify_stats import common_steps, compared_steps, returns_at

    steps = [100 * s for s in range(1, 7)]
    fix = [(s, [-10.0, -11.0, -9.0] if s < 500 else [85.0, 81.0, 89.0]) for s in steps]
    control = [(s, [0.0, -0.1, 0.1]) for s in steps]
    common = common_steps([fix, control[:5]])  # the control stopped after step 500
    assert common == steps[:5]
    assert compared_steps(steps, None) == [500, 600]  # the last third
    assert compared_steps(steps[:4], None) == [400]  # at least one
    assert compared_steps(steps, 3) == [400, 500, 600]
    assert compared_steps(steps, 10) == steps and compared_steps([], None) == []
    last = compared_steps(steps, None)
    found = difference(returns_at(fix, last), returns_at(control, last))
    assert found["difference"] == pytest.approx(85.0) and verdict(found, 0.0) == "confirmed"


def test_reseeded_pairs_are_judged_over_pairs_and_episodes() -> None:
    from rltrain.scripts.verify.verify_stats import pooled_difference

    one = pooled_difference([([10.0, 11.0, 12.0, 10.5], [0.0, 1.0, -1.0, 0.5])])
    assert one == {**difference([10.0, 11.0, 12.0, 10.5], [0.0, 1.0, -1.0, 0.5]),
                   "pairs": [pytest.approx(10.75)]}
    # Each pair is clear on its own, but the two seeds disagree: the interval spans 0.
    split = pooled_difference([([20.0, 20.1, 19.9], [0.0, 0.1, -0.1]),
                               ([-18.0, -18.1, -17.9], [0.0, 0.1, -0.1])])
    assert split["pairs"] == [pytest.approx(20.0), pytest.approx(-18.0)]
    assert split["difference"] == pytest.approx(1.0)
    assert split["low"] < 0 < split["high"] and verdict(split, 0.0) == "inconclusive"


def fork_of(tmp_path: Path, checkpoint: Path, name: str, *extra: str) -> dict:
    """`checkpoint` forked into run `name`; its checkpoint at step 300."""
    from rltrain.utils.io.checkpoint import load_checkpoint

    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--run-name", name, *extra])
    assert result.exit_code == 0, result.output
    return load_checkpoint(tmp_path / "checkpoints" / name / "checkpoint_step_300.pt")


def test_a_reseeded_fork_is_repeatable_and_resumes_exactly(tmp_path: Path) -> None:
    train(tmp_path, "base")  # Pendulum: episodes of 200 steps, checkpoints every 100
    at_100 = tmp_path / "checkpoints" / "base" / "checkpoint_step_100.pt"
    exact = fork_of(tmp_path, at_100, "exact")["buffer"]["data"]
    seven = fork_of(tmp_path, at_100, "seven", "--fork-seed", "7")
    again = fork_of(tmp_path, at_100, "again", "--fork-seed", "7")["buffer"]["data"]
    eight = fork_of(tmp_path, at_100, "eight", "--fork-seed", "8")["buffer"]["data"]
    data = seven["buffer"]["data"]
    assert torch.equal(data, again)  # the same seed: the same branch
    assert torch.equal(data[:100], exact[:100])  # the history before the fork
    assert torch.equal(data[100, :3], exact[100, :3])  # the episode in progress goes on
    assert not torch.equal(data[100:200], exact[100:200])  # new exploration noise
    assert not torch.equal(data[200, :3], exact[200, :3])  # the next episode: a new reset
    assert not torch.equal(data, eight)
    resumed = fork_of(tmp_path, tmp_path / "checkpoints" / "seven" / "checkpoint_step_200.pt",
                      "resumed")  # a re-seeded fork's checkpoint resumes it exactly
    assert torch.equal(resumed["buffer"]["data"], data)
    assert all(torch.equal(resumed["actor"][k], seven["actor"][k]) for k in seven["actor"])
    refused = CliRunner().invoke(cli, ["resume", "--checkpoint", str(at_100), "--fork-seed", "7"])
    assert refused.exit_code == 2 and "--run-name" in refused.output


def test_verify_with_reseeded_pairs_reports_each_pair(hot: Path, tmp_path: Path) -> None:
    from rltrain.scripts.verify.verify import summary_lines
    from rltrain.utils.io.checkpoint import load_checkpoint
    from rltrain.utils.seeding import FORKS, derive_seed

    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--steps", "100",
                                      "--seeds", "2", "--top", "1", "--fork-step", "400",
                                      "--json"])
    assert result.exit_code == 0, result.output
    [v] = json.loads(result.stdout)["verifications"]
    seed = tiny_dict(tmp_path)["seed"]
    assert [p["seed"] for p in v["pairs"]] == [derive_seed(seed, FORKS, k) for k in (0, 1)]
    assert v["branches"] == v["pairs"][0]["branches"] and len(v["compared_steps"]) >= 1
    streams = []  # the exploration noise's random state after the branch, per branch
    for pair in v["pairs"]:
        for branch in pair["branches"].values():
            assert branch["exit_code"] == 0 and branch["mean"] is not None, branch
            done = load_checkpoint(hot.parent.parent / "checkpoints" / branch["run"] /
                                   f"checkpoint_step_{v['fork_step'] + 100}.pt")
            streams.append(done["trainer"]["exploration"]["rng"])
    assert streams[0] == streams[1] and streams[2] == streams[3]  # one seed per pair
    assert streams[0] != streams[2]  # a seed of its own per pair
    assert v["difference"] == pytest.approx(np.mean([p["difference"] for p in v["pairs"]]))
    [line] = summary_lines([v])
    assert "2 re-seeded pairs, differences" in line and v["verdict"] in line


def test_a_fault_of_the_set_up_is_verified_from_the_start(hot: Path) -> None:
    """The learning rates were 0.1 from step 0: by default the branches are fresh runs of
    the run's config, as long as the run, one seed per pair, with and without the fix;
    the cost is said before they start."""
    from rltrain.utils.seeding import FORKS, derive_seed

    result = CliRunner().invoke(cli, ["diagnose", str(hot), "--verify", "--seeds", "2",
                                      "--top", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert "verify: 1,600 env steps in all (learning_rate: 2 seed(s) x 2 branches x 400 " \
        "env steps from the start)" in result.stderr
    [v] = json.loads(result.stdout)["verifications"]
    assert v["fork_step"] == 0 and v["checkpoint"] is None
    assert v["start"].startswith("from the start: the fault is in the set-up")
    for k, pair in enumerate(v["pairs"]):
        for kind, branch in pair["branches"].items():
            assert branch["exit_code"] == 0 and branch["evaluations"], branch
            config = yaml.safe_load((hot.parent / branch["run"] / "config.yaml").read_text())
            assert config["seed"] == derive_seed(3, FORKS, k)
            assert config["max_timesteps"] == 400
            wanted = v["suggested_set"].get("critic_lr") if kind == "fix" else 0.1
            assert config["critic_lr"] == (wanted or 0.1)
            assert [e["env_steps"] for e in read_jsonl(hot.parent / branch["run"] /
                                                        "metrics.jsonl")][0] <= 400
    assert v["verdict"] in ("confirmed", "not confirmed", "inconclusive")


def test_a_fault_set_on_a_resume_is_verified_from_a_checkpoint_before_it(tmp_path: Path):
    from rltrain.scripts.verify.verify import start_point

    folder = tmp_path / "logs" / "r"
    (tmp_path / "checkpoints" / "r").mkdir(parents=True)
    for step in (100, 200, 300):
        (tmp_path / "checkpoints" / "r" / f"checkpoint_step_{step}.pt").write_bytes(b"")
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    finding = {"rule": "learning_rate", "first_step": 250,
               "suggested_set": {"critic_lr": 0.001}}
    assert start_point(folder, finding, None)[0] == (0, None)  # set from step 0
    (folder / "events.jsonl").write_text(json.dumps(
        {"env_steps": 150, "rule": "resume", "action": "resume",
         "value": ["critic_lr=0.1"]}) + "\n")
    (start, checkpoint), why = start_point(folder, finding, None)
    assert start == 200 and checkpoint.name == "checkpoint_step_200.pt"
    assert "a resume at step 150 set the value" in why
    assert start_point(folder, finding, 120)[0][0] == 100  # --fork-step
    assert start_point(folder, finding, None, from_start=True)[0] == (0, None)


def test_fork_branches_that_end_alike_are_too_late_not_no_difference(tmp_path: Path):
    from rltrain.scripts.verify.verify import _verify_plan, summary_lines

    folder = tmp_path / "logs" / "r"
    for name in ("r", "f", "c"):
        (tmp_path / "logs" / name).mkdir(parents=True)
        (tmp_path / "logs" / name / "metrics.jsonl").write_text("".join(
            json.dumps({"kind": "eval", "env_steps": s, "time": 0.0,
                        "returns": [-1633.0, -1633.0]}) + "\n" for s in (3100, 3200, 3300)))
    plan = {"finding": {"rule": "learning_rate", "first_step": 1600,
                        "suggested_set": {"critic_lr": 0.001}},
            "start": (3000, tmp_path / "checkpoint_step_3000.pt"), "why": "from --fork-step",
            "steps": 300, "pairs": [{"seed": None, "names": {"fix": "f", "control": "c"}}]}
    result = _verify_plan(folder, plan, None, [(0, ""), (0, "")])
    assert result["verdict"] == "too late"
    [line] = summary_lines([result])
    assert "too late: both branches ended exactly alike from step 3000: the damage was " \
           "done before the fork; rerun with rltrain diagnose r --verify --from-start" in line


def test_a_fix_is_confirmed_only_when_it_gains_a_fifth_of_the_control():
    small = difference([-930.0, -931.0, -929.0, -930.5], [-1010.0, -1011.0, -1009.0,
                                                         -1010.5])
    assert small["low"] > 0 and verdict(small, -1010.1) == "inconclusive"  # 8% better
    large = difference([-700.0, -701.0, -699.0], [-1010.0, -1011.0, -1009.0])
    assert verdict(large, -1010.0) == "confirmed"  # 31% better


def test_two_rules_proposing_one_change_are_one_experiment():
    from rltrain.scripts.verify.verify_plan import distinct

    found = [{"rule": "actor_stalled", "suggested_set": {"actor_lr": 0.001}},
             {"rule": "learning_rate", "suggested_set": {"actor_lr": 0.001}},
             {"rule": "tau", "suggested_set": {"tau": 0.005}}]
    assert [(f["rule"], f.get("also")) for f in distinct(found)] == [
        ("actor_stalled", ["learning_rate"]), ("tau", None)]


def test_verify_tries_a_rules_last_proposal_where_its_latest_finding_has_none(tmp_path):
    from rltrain.scripts.verify.verify_plan import proposing
    from rltrain.utils.diagnosis.report.findings import findings

    events = [{"env_steps": 2000, "rule": "reward_terms", "action": "warn", "value": 0.97,
               "message": "reward term reward_ctrl is 97% of the return",
               "suggested_set": {"env_kwargs.ctrl_cost_weight": 0.02}},
              {"env_steps": 3000, "rule": "reward_terms", "action": "warn", "value": 0.96,
               "message": "reward term reward_ctrl is 96% of the return",
               "suggested_set": {"env_kwargs.ctrl_cost_weight": 0.03}},
              {"env_steps": 4000, "rule": "reward_terms", "action": "warn", "value": -0.2,
               "message": "reward term reward_forward correlates -0.20 with the return"},
              {"env_steps": 4000, "rule": "short_horizon", "action": "warn", "value": 0.5,
               "message": "horizon"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    found = {f["rule"]: f for f in findings(tmp_path)}
    terms = found["reward_terms"]
    assert terms["suggested_set"] == {} and terms["step"] == 4000  # the report's is the latest
    assert terms["last_proposal"] == {"step": 3000,
                                      "suggested_set": {"env_kwargs.ctrl_cost_weight": 0.03}}
    tried = proposing(terms)
    assert tried["suggested_set"] == {"env_kwargs.ctrl_cost_weight": 0.03}
    assert tried["proposed_at"] == 3000
    assert proposing(found["short_horizon"]) is None  # never proposed anything
    assert proposing({**terms, "withdrawn_set": {"x": 1}}) is None  # against its cause


def test_a_change_to_the_env_is_judged_on_the_env_as_it_makes_it(tmp_path: Path) -> None:
    """A reward weight or a time limit changes what a return measures: both branches are
    evaluated on the env as the change makes it (eval_env_kwargs), training on their own."""
    from rltrain.scripts.verify.verify_plan import evaluated_on

    assert evaluated_on({"env_kwargs.max_episode_steps": 200, "actor_lr": 1e-3}) == {
        "eval_env_kwargs.max_episode_steps": 200}
    assert evaluated_on({"critic_lr": 1e-3}) == {}
    run = train(tmp_path, "short_evals", max_timesteps=300, eval_freq=100,
                **{"eval_env_kwargs": {"max_episode_steps": 5}})
    lines = read_jsonl(run / "metrics.jsonl")
    evals = [r for line in lines if line["kind"] == "eval" for r in line["returns"]]
    # Pendulum pays at most 16.3 a step: 5-step returns, where its 200 steps lose ~1000
    assert evals and all(r > -5 * 16.3 for r in evals)
    assert [line["length"] for line in lines if line["kind"] == "episode"][:1] == [200]


def test_an_earlier_proposal_a_resume_has_made_is_not_kept(tmp_path):
    from rltrain.utils.diagnosis.report.findings import findings

    events = [{"env_steps": 1000, "rule": "target_update", "action": "warn", "value": 1.0,
               "message": "chases", "suggested_set": {"tau": 0.005}},
              {"env_steps": 1500, "rule": "resume", "action": "resume",
               "value": ["tau=0.005"], "message": "resumed"},
              {"env_steps": 2000, "rule": "target_update", "action": "warn", "value": 1.0,
               "message": "chases still"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    [found] = findings(tmp_path)
    assert found["suggested_set"] == {} and "last_proposal" not in found


def test_an_earlier_proposal_against_its_cause_is_withdrawn_too(tmp_path):
    """A symptom whose latest event proposes nothing keeps no earlier proposal that its
    cause contradicts: verify does not try it."""
    from rltrain.scripts.verify.verify_plan import proposing
    from rltrain.utils.diagnosis.ranking import explains
    from rltrain.utils.diagnosis.report.findings import findings

    assert explains("learning_rate", "actor_stalled")
    events = [{"env_steps": 1000, "rule": "actor_stalled", "action": "warn", "value": 0.0,
               "message": "stalled", "suggested_set": {"actor_lr": 0.01, "tau": 0.01}},
              {"env_steps": 2000, "rule": "actor_stalled", "action": "warn", "value": 0.0,
               "message": "stalled"},
              {"env_steps": 2000, "rule": "learning_rate", "action": "warn", "value": 0.1,
               "message": "too high", "suggested_set": {"actor_lr": 0.001}}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    stalled = {f["rule"]: f for f in findings(tmp_path)}["actor_stalled"]
    assert stalled["caused_by"] == ["learning_rate"]
    assert stalled["last_proposal"]["suggested_set"] == {"tau": 0.01}  # actor_lr withdrawn
    assert proposing(stalled)["suggested_set"] == {"tau": 0.01}


def test_eval_env_kwargs_that_change_the_spaces_are_refused(tmp_path: Path) -> None:
    from rltrain.scripts.training.run_state import check_same_spaces
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.errors import ConfigError
    from rltrain.utils.training.envs import make_env

    # (Hopper-v5's exclude_current_positions_from_observation=False is such a keyword;
    # here another env's spaces stand in for it: MuJoCo is an extra)
    config = config_from_dict(tiny_dict(tmp_path, eval_env_kwargs={"g": 9.81}))
    with pytest.raises(ConfigError, match="changes the env's observation or action space"):
        check_same_spaces(config, make_env("MountainCarContinuous-v0"))
    same = config_from_dict(tiny_dict(tmp_path, eval_env_kwargs={"max_episode_steps": 5}))
    check_same_spaces(same, make_env("Pendulum-v1", env_kwargs={"max_episode_steps": 5}))


@pytest.mark.parametrize("made, max_timesteps, expected", [
    (1000, 6000, 6000),    # paused in its first updates: past the warm-up, to its budget
    (1000, 20000, 6000),   # ... 5000 steps past the 1000-step warm-up
    (12000, 20000, 12000),  # as long as the run
    (None, 3000, 3000),    # no metrics yet: the run's budget
])
def test_branches_from_the_start_train_past_the_warm_up(tmp_path: Path, made, max_timesteps,
                                                         expected) -> None:
    from rltrain.scripts.verify.verify_plan import plan_finding

    folder = tmp_path / "logs" / "r"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(tiny_dict(
        tmp_path, learning_starts=1000, max_timesteps=max_timesteps)))
    lines = [] if made is None else [{"kind": "eval", "env_steps": made, "mean_return": -1.0}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    finding = {"rule": "learning_rate", "first_step": 900, "suggested_set": {"critic_lr": 1e-3}}
    plan = plan_finding(folder, finding, None, 3, None, False)
    assert plan["start"] == (0, None) and plan["steps"] == expected


def test_the_cost_line_times_the_run_after_its_warm_up(tmp_path: Path) -> None:
    """The warm-up's random steps run far faster than the updates: the estimate leaves
    them out, and says nothing where the run never got past them."""
    from rltrain.scripts.verify.verify_plan import cost_line, plan_finding

    folder = tmp_path / "logs" / "r"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(tiny_dict(
        tmp_path, learning_starts=1000, max_timesteps=6000)))
    finding = {"rule": "learning_rate", "first_step": 900, "suggested_set": {"critic_lr": 1e-3}}
    warmup = [{"kind": "episode", "env_steps": s, "time": s / 1000} for s in (200, 1000)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in warmup))
    plans = [plan_finding(folder, finding, None, 3, None, False)]
    assert "about" not in cost_line(folder, plans, 2)  # only warm-up steps: no estimate
    later = [{"kind": "episode", "env_steps": s, "time": 1 + (s - 1000) / 50}
             for s in (1200, 2200)]  # 50 env steps/s once it updates
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in warmup + later))
    line = cost_line(folder, plans, 2)
    assert "at this run's 50 env steps/s" in line  # 6000 steps x 2 x 3 = 36,000: 6 min
    assert "about 6 min" in line
