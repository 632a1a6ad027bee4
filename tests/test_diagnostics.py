"""Flow-1 diagnostics end to end: planted faults fire the right rule; the output formats."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.diagnosis.measure import snapshots
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl

from conftest import DEVICE, tiny_config, tiny_dict

# The names users script against (`rltrain diagnose --json`): never renamed.
RULE_NAMES = {
    "early_stopping", "catastrophic_reward", "non_finite", "critic_loss_explosion",
    "q_explosion", "grad_explosion", "memory", "state_bounds", "reward_spikes",
    "sparse_reward", "reward_scale", "blind_cluster", "chaotic_cluster", "fixated_cluster",
    "vanishing_gradient", "exploding_gradient", "value_policy_imbalance", "broken_gradient",
    "action_saturation", "q_overestimation", "dead_relu", "env_error", "write_failure",
    "constant_reward", "reward_drop", "observation_scale", "frozen_observation",
    "time_limit_terminal", "short_horizon", "small_replay", "ignored_action",
    "eval_collapse", "entropy_collapse", "learning_rate", "target_update", "long_horizon",
    "actor_stalled", "no_learning", "q_divergence", "reward_terms", "worker_starvation",
    "ray_cluster", "gradients_not_zeroed", "actor_loss_steps_critic", "action_range_unused",
    # the rules that judge mechanisms (rules/*: fit, pace, noise, episodes, observability)
    "critic_fit", "actor_fit", "actor_direction", "actor_pace", "gradient_noise",
    "excess_noise", "target_smoothing", "entropy_temperature", "short_episodes",
    "partial_observability", "transition_integrity", "sample_recency", "update_ratio",
    # PPO's, A2C's and DQN's own (rules/on_policy_rules.py, rules/q_learning_rules.py)
    "policy_entropy_collapse", "policy_step_size", "value_fit", "exploration_schedule",
    "q_beyond_returns",
    # when a replayed run learns (rules/replay_schedule.py)
    "learning_not_started", "update_schedule",
    # an entropy bonus that keeps PPO's or A2C's policy random (rules/entropy_bonus.py)
    "entropy_bonus"}
INPUT_RULES = {"observation_scale", "frozen_observation", "time_limit_terminal",
               "short_horizon", "small_replay", "ignored_action"}
FAST = {"diagnostics": {"grad_freq": 50, "heatmap_freq": 500}}


def train(tmp_path: Path, name: str = "r", **overrides) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **{"safe_mode": False, **overrides})))
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", name],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return tmp_path / "logs" / name


def warned(log_dir: Path) -> set[str]:
    return {e["rule"] for e in read_jsonl(log_dir / "events.jsonl") if e["action"] == "warn"}


@pytest.mark.parametrize("env, rule", [
    ("fake_envs:FakeSpikyPendulum-v0", "reward_spikes"),  # rare x1000 penalties
    ("fake_envs:FakeScaledPendulum-v0", "reward_scale"),  # rewards x 1e-5
    ("fake_envs:FakeNaNReward-v0", "non_finite"),  # NaN rewards
    ("fake_envs:FakeConstantRewardPendulum-v0", "constant_reward"),  # always 0
])
def test_planted_reward_faults_fire_their_rule(tmp_path, env, rule):
    log_dir = train(tmp_path, env_name=env, max_timesteps=1200, eval_freq=600, **FAST)
    assert rule in warned(log_dir)


SHORT = "fake_envs:FakeShortPendulum-v0"  # Pendulum with 50-step episodes


@pytest.mark.parametrize("overrides, rule", [
    ({"env_name": SHORT}, None),  # healthy: none of these rules
    ({"env_name": "fake_envs:FakeShortTimeLimitTerminalPendulum-v0"}, "time_limit_terminal"),
    ({"env_name": "fake_envs:FakeScaledObservationPendulum-v0"}, "observation_scale"),
    ({"env_name": "fake_envs:FakeStaleObservationPendulum-v0"}, "frozen_observation"),
    ({"env_name": SHORT, "gamma": 0.5}, "short_horizon"),  # 2 steps of 50: 0.04
    ({"replay_buffer_size": 100}, "small_replay"),  # 3 batches of 32
])
def test_planted_input_faults_fire_their_rule_and_no_other(tmp_path, overrides, rule):
    """What the env and config give the agent: each planted fault fires its own rule of
    these five, and only that one (thresholds set to fit 400 steps)."""
    diagnostics = {**FAST["diagnostics"], "time_limit_terminal": {"threshold": 3},
                   "frozen_observation": {"threshold": 200}, "short_horizon": {"threshold": 0.05}}
    log_dir = train(tmp_path, max_timesteps=400, eval_freq=400, diagnostics=diagnostics,
                    **overrides)
    assert warned(log_dir) & INPUT_RULES == ({rule} if rule else set())


def test_a_replay_buffer_smaller_than_the_frozen_threshold_is_judged_once_full(tmp_path):
    """frozen_observation's 200 rows cannot fit a 150-transition buffer: the full buffer
    is judged instead, and an inputs line that judged nothing says null, not []."""
    diagnostics = {**FAST["diagnostics"], "frozen_observation": {"threshold": 200}}
    log_dir = train(tmp_path, env_name="fake_envs:FakeStaleObservationPendulum-v0",
                    replay_buffer_size=150, max_timesteps=300, diagnostics=diagnostics,
                    monitor={"memory": {"action": "off"}})
    assert "frozen_observation" in warned(log_dir)
    lines = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "inputs"]
    assert lines[0]["rows"] == 100 and lines[0]["frozen"] is None  # the first update
    assert lines[-1]["rows"] == 150 and lines[-1]["frozen"] == [0, 1, 2]


def pauses_again_on_resume(tmp_path: Path, rule: str, hint: str, at: int,
                           **overrides) -> Path:
    """Train with `rule` set to pause: it pauses at step `at` with `hint`, and resuming
    the paused checkpoint pauses again on the first step. Returns that checkpoint."""
    diagnostics = {**FAST["diagnostics"], rule: {"action": "pause"}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, diagnostics=diagnostics, **overrides)))
    first = CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", "r"])
    assert first.exit_code == 3 and f"[{rule}]" in first.output, first.output
    assert hint in first.output
    paused = tmp_path / "checkpoints" / "r" / f"paused_at_step_{at}.pt"
    again = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert again.exit_code == 3 and f"paused at step {at + 1} [{rule}]" in again.output, \
        again.output
    return paused


def test_small_replay_pauses_again_on_resume_and_says_a_new_run_is_needed(tmp_path):
    pauses_again_on_resume(tmp_path, "small_replay", "train a new run with a larger one", 100,
                           replay_buffer_size=100)
    # Its fix, for a new run (and for diagnose --verify, which trains from the start).
    found = [e for e in read_jsonl(tmp_path / "logs/r/events.jsonl")
             if e.get("rule") == "small_replay"]
    assert found[0]["suggested_set"] == {"replay_buffer_size": 100_000}
    assert "--set replay_buffer_size=100000" in found[0]["message"]


def test_every_rule_off_with_a_null_threshold_runs(tmp_path):
    """`action: off` with `threshold: null` is accepted: the rule keeps its default
    threshold (nothing compares with null mid-run) and fires nothing."""
    from rltrain.utils.config.fields import RuleConfig
    from rltrain.utils.config.schema import DiagnosticsConfig, MonitorConfig

    def off(section) -> dict:
        return {name: {"action": "off", "threshold": None} for name, rule in
                vars(section).items() if isinstance(rule, RuleConfig)}

    config = tiny_config(tmp_path, diagnostics=off(DiagnosticsConfig()),
                         monitor=off(MonitorConfig()))
    assert config.diagnostics.reward_scale.threshold == DiagnosticsConfig().reward_scale.threshold
    log_dir = train(tmp_path, env_name=SHORT, max_timesteps=300, diagnostics={
        **FAST["diagnostics"], **off(DiagnosticsConfig())}, monitor=off(MonitorConfig()))
    rules = {e["rule"] for e in read_jsonl(log_dir / "events.jsonl")}
    assert not rules & set(off(DiagnosticsConfig())), rules


@pytest.mark.parametrize("env, fires", [
    ("Pendulum-v1", False),
    ("fake_envs:FakeDelayedActionPendulum-v0", False),  # shows one step late: still used
    ("fake_envs:FakeContextBandit-v0", False),  # reward a * context: zero on average
    ("fake_envs:FakeIgnoredActionPendulum-v0", True),
    ("fake_envs:FakeStaleObservationPendulum-v0", False),  # frozen_observation's case
])
def test_an_env_that_ignores_the_action_fires_ignored_action(tmp_path, env, fires):
    """Judged once, at the first update, on the warm-up's 1000 random actions."""
    log_dir = train(tmp_path, env_name=env, learning_starts=1000, max_timesteps=1010,
                    eval_freq=1010, diagnostics=FAST["diagnostics"])
    assert ("ignored_action" in warned(log_dir)) == fires
    lines = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "action_effect"]
    assert len(lines) == 1 and lines[0]["env_steps"] == 1000 and lines[0]["rows"] == 1000
    assert (lines[0]["action_effect"] < 1.5) == (fires or "Stale" in env)
    if "Delayed" in env:
        assert lines[0]["lag"] == 1 and lines[0]["target"] == "observation 2"  # velocity
    if "Bandit" in env:
        assert lines[0]["as"] == "value x observation 0" and lines[0]["target"] == "reward"


@pytest.mark.parametrize("env, fires", [
    ("Pendulum-v1", False), ("fake_envs:FakeIgnoredActionPendulum-v0", True)])
def test_a_long_warm_up_is_judged_on_its_newest_5000_steps(tmp_path, env, fires):
    log_dir = train(tmp_path, env_name=env, learning_starts=6000, max_timesteps=6010,
                    replay_buffer_size=10_000,
                    eval_freq=6010, diagnostics=FAST["diagnostics"])
    lines = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "action_effect"]
    assert len(lines) == 1 and lines[0]["rows"] == 5000
    assert ("ignored_action" in warned(log_dir)) == fires


def test_a_warm_up_too_short_to_judge_the_action_says_so(tmp_path):
    log_dir = train(tmp_path, env_name="fake_envs:FakeIgnoredActionPendulum-v0",
                    max_timesteps=200)  # learning_starts 100
    lines = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "action_effect"]
    assert lines[0]["action_effect"] is None and lines[0]["rows"] == 100
    assert "fewer than 1000 warm-up transitions" in lines[0]["why"]
    assert "ignored_action" not in warned(log_dir)


@pytest.mark.parametrize("env, algo, fires", [
    ("Pendulum-v1", "ddpg", False),
    ("fake_envs:FakeIgnoredActionPendulum-v0", "ddpg", True),
    ("fake_envs:FakeIgnoredActionPendulum-v0", "sac", True),
])
def test_a_short_warm_up_is_judged_on_the_exploration_noise_after_it(tmp_path, env, algo, fires):
    """learning_starts 100: the first 1000 steps whose noise (DDPG's gaussian 0.3, SAC's
    sample) reached the env are judged instead of the warm-up. A healthy policy at the
    bounds, where the noise is clipped away, may leave it unjudged: never a warning."""
    noise = {"exploration_noise": 0.3} if algo != "sac" else {}
    log_dir = train(tmp_path, env_name=env, algo=algo, max_timesteps=2100, eval_freq=2100,
                    replay_buffer_size=3000, hidden_sizes=[64, 64], batch_size=64,
                    diagnostics=FAST["diagnostics"], **noise)
    lines = [d for d in read_jsonl(log_dir / "flow1.jsonl")
             if d["kind"] == "action_effect" and d.get("judged_on") == "exploration noise"]
    assert ("ignored_action" in warned(log_dir)) == fires
    if fires:
        assert len(lines) == 1 and lines[0]["rows"] == 1000 and lines[0]["env_steps"] >= 1100
        assert lines[0]["action_effect"] < 1.5
    else:
        assert all(line["action_effect"] >= 1.5 for line in lines)


def test_action_noise_too_small_to_tell_leaves_ignored_action_unjudged(tmp_path):
    log_dir = train(tmp_path, env_name="fake_envs:FakeIgnoredActionPendulum-v0",
                    max_timesteps=1300, eval_freq=1300, replay_buffer_size=2000,
                    exploration_noise=0.1)
    assert "ignored_action" not in warned(log_dir)
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    assert "(0.1 of the half-range) is too small to tell" in report["unjudged"]["ignored_action"]


def test_ignored_action_pauses_again_on_resume(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a file outside its run's folders forks into ./logs
    paused = pauses_again_on_resume(
        tmp_path, "ignored_action", "make the env apply the action", 1000,
        env_name="fake_envs:FakeIgnoredActionPendulum-v0", learning_starts=1000,
        max_timesteps=1100, eval_freq=1100)
    # The measurement is kept in the checkpoint; one saved before it existed resumes
    # without it, and nothing pauses.
    payload = load_checkpoint(paused)
    del payload["trainer"]["diagnostics"]["inputs"]["action_effect"]
    torch.save(payload, old := tmp_path / "old.pt")
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(old), "--run-name", "o"])
    assert resumed.exit_code == 0, resumed.output


def test_some_unchanged_observation_dimensions_are_noted_not_warned(tmp_path):
    """Goals fixed within an episode and contact forces of bodies touching nothing stay
    unchanged by design in standard envs: one stuck dimension of three is an info note,
    naming it; the stale observation above (none moves) is the warning."""
    diagnostics = {**FAST["diagnostics"], "frozen_observation": {"threshold": 200}}
    log_dir = train(tmp_path, env_name="fake_envs:FakeStuckSensorPendulum-v0",
                    max_timesteps=400, diagnostics=diagnostics)
    notes = [e for e in read_jsonl(log_dir / "events.jsonl")
             if e["rule"] == "frozen_observation"]
    assert notes and {e["action"] for e in notes} == {"info"} and notes[0]["value"] == [2]


def test_a_dead_actor_layer_fires_broken_gradient_and_dead_relu(tmp_path, monkeypatch):
    from rltrain.networks.actor import Actor

    import fake_envs

    monkeypatch.setattr(Actor, "__init__", fake_envs.dead_first_layer(Actor.__init__))
    log_dir = train(tmp_path, max_timesteps=400, **FAST)
    events = [e for e in read_jsonl(log_dir / "events.jsonl")
              if e["rule"] == "broken_gradient"]
    assert events and all(layer.startswith("actor.net.") for layer in events[0]["value"])
    assert "actor.net.0.weight" in events[0]["value"]
    dead = [e for e in read_jsonl(log_dir / "events.jsonl") if e["rule"] == "dead_relu"]
    assert dead and dead[0]["value"] == 1.0 and "actor.0" in dead[0]["message"]


def test_an_action_scale_that_saturates_tanh_is_noted_by_action_saturation(tmp_path):
    """A note, not a warning: healthy bang-bang policies sit at their bounds too."""
    log_dir = train(tmp_path, env_name="fake_envs:FakeWeakPoint-v0", max_timesteps=3000,
                    learning_starts=200, eval_freq=1000, actor_lr=3e-3, critic_lr=3e-3,
                    **FAST)
    saturated = [e for e in read_jsonl(log_dir / "events.jsonl")
                 if e["rule"] == "action_saturation"]
    assert saturated and {e["action"] for e in saturated} == {"info"}
    assert "action_saturation" not in warned(log_dir)


def test_diagnostics_do_not_change_what_the_agent_learns(tmp_path):
    states = []
    for name, enabled in (("on", True), ("off", False)):
        config = tiny_config(tmp_path, run_name=name, max_timesteps=450, diagnostics={
            "enabled": enabled, "grad_freq": 20, "heatmap_freq": 50})
        trainer = Trainer(config, DEVICE, interactive=False)
        trainer.run(create_run(config))
        states.append(trainer.state.agent.state_dict())
    for net in ("actor", "critic", "actor_target", "critic_target"):
        assert all(torch.equal(states[0][net][k], states[1][net][k]) for k in states[0][net])
    assert list((tmp_path / "logs" / "on" / "heatmaps").glob("heatmap_step_*.png"))
    assert not (tmp_path / "logs" / "off" / "flow1.jsonl").read_text()


def test_the_time_the_diagnostics_take_is_counted_and_logged(tmp_path, monkeypatch):
    """The diagnostics' clock made to advance 10 ms per training action the map samples
    (a fake clock: what the test checks is the bookkeeping, not the machine's speed,
    which benchmarks/diagnostics_timing.py measures): `seconds` holds exactly those, and
    each logged window's share x its length is exactly its actions' 0.5 s; with the
    diagnostics off both are 0."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rltrain.utils.diagnosis.measure import timing
    from rltrain.utils.diagnosis.measure.state_action import StateActionMap

    clock = {"now": 0.0}
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    original = StateActionMap.hook

    def costly_hook(self, *args):
        if self.collecting:  # the training steps' actions, not evaluations
            clock["now"] += 0.01
        original(self, *args)

    monkeypatch.setattr(StateActionMap, "hook", costly_hook)
    shares, rates, counted = {}, {}, {}
    for name, enabled in (("on", True), ("off", False)):
        config = tiny_config(tmp_path, run_name=name, diagnostics={"enabled": enabled})
        trainer = Trainer(config, DEVICE, interactive=False)
        trainer.run(create_run(config))
        counted[name] = trainer.diagnostics.seconds
        events = EventAccumulator(str(tmp_path / "logs" / name))
        events.Reload()
        shares[name] = [e.value for e in events.Scalars("time/diagnostics_share")]
        rates[name] = [e.value for e in events.Scalars("time/fps")]
    # The policy acts on 200 of the 300 steps (the rest are random warm-up).
    assert counted["on"] == pytest.approx(200 * 0.01) and counted["off"] == 0
    # A window's share is its diagnostics' time over its length, its fps 50 steps over
    # that length: share x 50 / fps is the window's diagnostics' time, whatever its length.
    assert len(shares["on"]) == 6
    per_window = [share * 50 / rate for share, rate in zip(shares["on"], rates["on"], strict=True)]
    assert per_window == pytest.approx([0.0, 0.0, 0.5, 0.5, 0.5, 0.5], rel=1e-4, abs=1e-6)
    assert shares["off"] == [0.0] * 6


def test_close_stops_and_attach_resumes_sampling_the_actor(tmp_path, monkeypatch):
    """What benchmarks/throughput.py relies on to compare on and off in one process."""
    from rltrain.utils.diagnosis.measure.state_action import StateActionMap

    calls = []
    monkeypatch.setattr(StateActionMap, "hook", lambda self, *args: calls.append(1))
    config = tiny_config(tmp_path)
    trainer = Trainer(config, DEVICE, interactive=False)
    trainer.run(create_run(config))  # closes the diagnostics at the end
    diagnostics, agent = trainer.diagnostics, trainer.state.agent
    obs = torch.zeros(agent.actor.net[0].in_features).numpy()
    assert calls, "the hook sampled during training"
    calls.clear()
    agent.act(obs)
    assert calls == []
    diagnostics.attach()
    agent.act(obs)
    assert calls == [1]
    diagnostics.attach()  # a second attach replaces the hook, it does not add one
    agent.act(obs)
    assert calls == [1, 1]
    diagnostics.close()
    agent.act(obs)
    assert calls == [1, 1]


def test_outputs_heatmaps_gradients_and_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # every due picture drawn (heatmap_time_share 1), however fast the run
    log_dir = train(tmp_path, max_timesteps=1000,
                    diagnostics={**FAST["diagnostics"], "heatmap_time_share": 1.0})
    assert (log_dir / "heatmaps" / "heatmap_step_1000.png").stat().st_size > 1000
    clusters = json.loads((log_dir / "heatmaps" / "clusters_step_1000.json").read_text())
    assert clusters["env_steps"] == 1000 and clusters["clusters"]
    kinds = {r["kind"] for r in read_jsonl(log_dir / "flow1.jsonl")}
    assert {"reward", "gradients", "heatmap", "ddpg"} <= kinds
    events = EventAccumulator(str(log_dir), size_guidance={"images": 0, "histograms": 0})
    events.Reload()
    tags = events.Tags()
    assert "flow1/heatmap" in tags["images"]
    # TensorBoard holds each picture as its PNG file holds it, at its step
    pictures = {image.step: image for image in events.Images("flow1/heatmap")}
    drawn = pictures[1000]
    assert drawn.encoded_image_string == (log_dir / "heatmaps" / "heatmap_step_1000.png"
                                          ).read_bytes()
    assert drawn.width > drawn.height > 100
    assert {"gradients/actor", "gradients/critic"} <= set(tags["histograms"])
    for tag in ("flow1/reward_cv", "flow1/reward_spike_ratio", "flow1/reward_trend",
                "gradients/actor/net.0.weight", "flow1/action_saturation"):
        assert tag in tags["scalars"], tag


def test_heatmap_pictures_keep_to_their_share_of_the_time(tmp_path):
    """A picture a moment after the last one is left out (the time since it is under
    its cost over heatmap_time_share); its clusters and findings are still made."""
    log_dir = train(tmp_path, max_timesteps=1000,
                    diagnostics={**FAST["diagnostics"], "heatmap_freq": 250,
                                 "heatmap_time_share": 1e-6})
    folder = log_dir / "heatmaps"
    rows = [r for r in read_jsonl(log_dir / "flow1.jsonl") if r["kind"] == "heatmap"]
    assert len(rows) >= 2  # the map is ready once it has samples enough
    first = rows[0]["env_steps"]
    assert [p.name for p in folder.glob("*.png")] == [f"heatmap_step_{first}.png"]
    assert len(list(folder.glob("clusters_step_*.json"))) == len(rows)
    assert [r["png"] is not None for r in rows] == [True] + [False] * (len(rows) - 1)


def test_diagnose_json_format_table_and_report(tmp_path, monkeypatch):
    # A trace_drop this small makes the run trace the return drops it sees.
    log_dir = train(tmp_path, env_name="fake_envs:FakeSpikyPendulum-v0",
                    max_timesteps=1200, eval_freq=600,
                    diagnostics={**FAST["diagnostics"], "trace_drop": 0.001})
    result = CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert set(report) == {"run", "most_likely_cause", "findings", "diagnostics_enabled",
                           "unjudged", "not_judged_for", "verifications", "reward_terms"}
    assert report["run"] == "r"
    # DDPG's run: the rules of SAC's temperature do not judge it
    assert report["not_judged_for"]["rules"] == [
        "entropy_bonus", "entropy_collapse", "entropy_temperature",
        "policy_entropy_collapse", "policy_step_size", "value_fit", "exploration_schedule",
        "q_beyond_returns"]
    assert report["diagnostics_enabled"] is True
    assert report["findings"]
    for finding in report["findings"]:
        assert {"rule", "step", "first_step", "count", "evidence", "severity", "message",
                "suggested_set", "caused_by"} <= set(finding) <= {
            "rule", "step", "first_step", "count", "evidence", "severity", "message",
            "suggested_set", "caused_by", "withdrawn_set", "last_proposal"}
        assert finding["rule"] in RULE_NAMES
        assert finding["severity"] in {"info", "warning", "pause"}
        assert isinstance(finding["step"], int) and finding["message"]
        assert 0 < finding["first_step"] <= finding["step"] and finding["count"] >= 1
    # Notes last; before them causes first (ranking.py), then the most severe, then
    # in the order the findings first appeared.
    from rltrain.utils.diagnosis.ranking import cause_rank

    order = {"pause": 0, "warning": 1, "info": 2}
    keys = [(f["severity"] == "info", cause_rank(f["rule"]), order[f["severity"]],
             f["first_step"]) for f in report["findings"]]
    assert keys == sorted(keys)
    # Each finding counts every event of its rule and severity, held-back ones included.
    from rltrain.utils.diagnosis.report.findings import SEVERITY

    events = read_jsonl(log_dir / "events.jsonl")
    for finding in (f for f in report["findings"] if f["rule"] != "reward_drop"):
        seen = [e for e in events if e["rule"] == finding["rule"]
                and SEVERITY.get(e["action"]) == finding["severity"]]
        assert finding["count"] == len(seen) + sum(e.get("held_back", 0) for e in seen)
        assert finding["first_step"] == seen[0]["env_steps"]
    assert any(f["rule"] == "reward_spikes" and f["severity"] == "warning"
               for f in report["findings"])
    # Every gradient trace follows a detected return drop, which diagnose lists.
    flow1 = read_jsonl(log_dir / "flow1.jsonl")
    drops = [d["env_steps"] for d in flow1 if d["kind"] == "reward_drop"]
    traces = {d["env_steps"] for d in flow1 if d["kind"] == "trace"}
    assert traces and traces <= set(drops)
    [listed] = [f for f in report["findings"] if f["rule"] == "reward_drop"]
    assert listed["count"] == len(drops) and listed["first_step"] == drops[0]
    # 80 columns (CliRunner's): one block per finding; from 120 columns: a table.
    blocks = CliRunner().invoke(cli, ["diagnose", "r", "--log-dir", str(tmp_path / "logs")])
    assert blocks.exit_code == 0 and "[warning] reward_spikes, steps " in blocks.output
    assert "hypothesis: if rare large penalties" in blocks.output.replace("\n", " ")
    assert "│" not in blocks.output
    monkeypatch.setenv("COLUMNS", "160")
    table = CliRunner().invoke(cli, ["diagnose", "r", "--log-dir", str(tmp_path / "logs")])
    assert table.exit_code == 0 and "│ reward_spikes" in table.output
    # --fail-on: the same report, then exit 6 when a finding is that severe or more.
    assert not any(f["severity"] == "pause" for f in report["findings"])
    calm = CliRunner().invoke(cli, ["diagnose", str(log_dir), "--fail-on", "pause"])
    assert calm.exit_code == 0 and "reward_spikes" in calm.stdout, calm.output
    for severity in ("warning", "info"):
        failing = CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json",
                                           "--fail-on", severity])
        assert failing.exit_code == 6 and json.loads(failing.stdout) == report
        assert f"at {severity} or more severe (" in failing.stderr
        assert "reward_spikes" in failing.stderr
    page = (log_dir / "report.html").read_text()
    assert "reward_spikes" in page and page.count("data:image/png;base64,") >= 3
    assert not re.search(r'(src|href)="(?!data:)', page)  # self-contained


def test_diagnose_says_when_the_diagnostics_were_off(tmp_path):
    log_dir = train(tmp_path, diagnostics={"enabled": False})
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    assert report["diagnostics_enabled"] is False
    table = CliRunner().invoke(cli, ["diagnose", str(log_dir)])
    assert "diagnostics were off in this run" in table.output.replace("\n", " ")


def test_diagnose_names_the_rules_that_had_too_little_data(tmp_path):
    """A 300-step run with a 100-step warm-up: the ignored-action check needs 1000 random
    steps (its exploration noise 0.1 is too small to judge by) and no_learning 5
    evaluations; diagnose says so instead of only "no problems found", in the table, the
    JSON and the page."""
    log_dir = train(tmp_path)
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(log_dir), "--json"]).output)
    assert report["unjudged"]["ignored_action"].startswith(
        "a random warm-up of 100 env steps (it needs 1000, learning_starts), and the "
        "exploration noise after it (0.1 of the half-range) is too small to tell")
    assert report["unjudged"]["no_learning"] == (
        "3 of the 5 evaluations it needs (one every eval_freq 100 env steps)")
    assert report["unjudged"]["learning_rate"].startswith("0 of the 5 measurements")
    table = CliRunner().invoke(cli, ["diagnose", str(log_dir)]).output
    assert "not judged (too little data so far):" in table
    assert "ignored_action: a random warm-up of 100 env steps" in table.replace("\n", " ")
    assert "no_learning: 3 of the 5 evaluations" in (log_dir / "report.html").read_text()


def test_rules_and_docs_agree():
    from rltrain.utils.config.fields import RuleConfig
    from rltrain.utils.config.schema import DiagnosticsConfig
    from rltrain.utils.diagnosis.report.findings import RULES

    assert set(RULES) == RULE_NAMES
    diagnostics = {f for f, v in vars(DiagnosticsConfig()).items() if isinstance(v, RuleConfig)}
    assert diagnostics <= RULE_NAMES


@pytest.mark.skipif(not snapshots.video_available(), reason="the [video] extra is not installed")
def test_behaviour_snapshots_and_eval_record_video(tmp_path):
    log_dir = train(tmp_path, max_timesteps=300, diagnostics={"snapshot_freq": 300})
    assert (log_dir / "videos" / "step_300.mp4").stat().st_size > 0
    checkpoint = tmp_path / "checkpoints" / "r" / "best_model.pt"
    out = CliRunner().invoke(cli, ["eval", "--checkpoint", str(checkpoint), "--json",
                                   "--record-video", str(tmp_path / "videos")])
    assert out.exit_code == 0, out.output
    video = Path(json.loads(out.output)["video"])
    assert video.name == "r_best_model_seed3.mp4" and video.stat().st_size > 0
    again = CliRunner().invoke(cli, ["eval", "--checkpoint", str(checkpoint), "--json",
                                     "--record-video", str(tmp_path / "videos")])
    assert Path(json.loads(again.output)["video"]).name == "r_best_model_seed3-2.mp4"
    assert video.stat().st_size > 0  # the first one is still there


@pytest.mark.skipif(not snapshots.video_available(), reason="the [video] extra is not installed")
def test_an_env_that_cannot_render_turns_videos_off_not_the_run(tmp_path):
    # FakePoint takes no render_mode: the first snapshot fails, training goes on and ends
    # normally, and eval --record-video is one line and exit code 2.
    log_dir = train(tmp_path, env_name="fake_envs:FakePoint-v0", max_timesteps=400,
                    diagnostics={"snapshot_freq": 100})
    failed = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "video_failed"]
    assert [d["env_steps"] for d in failed] == [100]  # said once, then off
    assert "cannot be recorded" in failed[0]["error"] and "TypeError" in failed[0]["error"]
    assert json.loads((log_dir / "status.json").read_text())["state"] == "finished"
    checkpoint = tmp_path / "checkpoints" / "r" / "best_model.pt"
    out = CliRunner().invoke(cli, ["eval", "--checkpoint", str(checkpoint),
                                   "--record-video", str(tmp_path / "videos")])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "cannot be recorded as video" in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_without_the_video_extra_videos_are_off_and_said_once(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "video_available", lambda: False)
    log_dir = train(tmp_path, max_timesteps=300, diagnostics={"snapshot_freq": 100})
    failed = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "video_failed"]
    assert [d["env_steps"] for d in failed] == [100]
    assert "[video] extra" in failed[0]["error"]
    assert not (log_dir / "videos").exists()


def test_a_fork_reports_the_warnings_its_parent_gave_recently(tmp_path):
    """ignored_action comes again at a resume's first update; a fork (new run name) logs
    it in its own events.jsonl even within monitor.warn_every steps of the parent's."""
    train(tmp_path, env_name="fake_envs:FakeIgnoredActionPendulum-v0", learning_starts=1000,
          max_timesteps=1300, eval_freq=1300, checkpoint_freq=100)
    saved = tmp_path / "checkpoints" / "r" / "checkpoint_step_1200.pt"
    fork = CliRunner().invoke(cli, ["resume", "--checkpoint", str(saved), "--run-name", "f"])
    assert fork.exit_code == 0, fork.output
    assert "ignored_action" in warned(tmp_path / "logs" / "f")
