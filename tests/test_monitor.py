"""Health rules: each one fires, pauses with its reason and exit code 3, or only warns."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.health import HealthRules
from rltrain.utils.run.log_files import read_jsonl

from conftest import tiny_config, tiny_dict

# rule -> config overrides that make it fire in a 300-step Pendulum run
PLANTED = {
    # The policy does not change before learning starts, so evaluations at 50, 100, 150
    # are identical: no new best after the first, patience 2 runs out at step 150.
    "early_stopping": {"patience": 2, "eval_freq": 50, "learning_starts": 250},
    "catastrophic_reward": {"min_reward_threshold": 0.0},  # Pendulum returns are < 0
    "non_finite": {"env_name": "fake_envs:FakeNaNReward-v0"},  # NaN reward at step 120
    "critic_loss_explosion": {"monitor": {"critic_loss_explosion": {"threshold": 1e-9}}},
    "q_explosion": {"monitor": {"q_explosion": {"threshold": 1e-9}}},
    "grad_explosion": {"monitor": {"grad_explosion": {"threshold": 1e-9}}},
    "memory": {"monitor": {"memory": {"threshold": 1}, "memory_check_freq": 50}},
    "state_bounds": {"monitor": {"state_bounds": {"low": [-1, -1, -0.5],
                                                  "high": [1, 1, 0.5]}}},
}


def train(tmp_path: Path, **overrides):
    """A tiny run with the flow-1 diagnostics off: these tests are about the monitor."""
    path = tmp_path / "c.yaml"
    overrides.setdefault("diagnostics", {"enabled": False})
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", "r"],
                                catch_exceptions=False)
    return result, read_jsonl(tmp_path / "logs" / "r" / "events.jsonl")


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_each_rule_pauses_with_its_reason_and_exit_code_3(tmp_path, rule):
    result, events = train(tmp_path, **PLANTED[rule])
    assert result.exit_code == 3, result.output
    assert f"[{rule}]" in result.output and "resume with: rltrain resume --checkpoint" in \
        result.output
    pause = [e for e in events if e["action"] == "pause"]
    assert pause[0]["rule"] == rule and pause[0]["message"]
    step = pause[0]["env_steps"]
    checkpoint = tmp_path / "checkpoints" / "r" / f"paused_at_step_{step}.pt"
    data = load_checkpoint(checkpoint)
    assert data["kind"] == "paused" and data["total_steps"] == step
    for net in ("actor", "critic"):  # the agent never learned from a NaN
        assert all(torch.isfinite(v).all() for v in data[net].values())


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_safe_mode_false_turns_pauses_into_warnings(tmp_path, rule):
    result, events = train(tmp_path, safe_mode=False, **PLANTED[rule])
    assert result.exit_code == 0, result.output
    warnings = [e for e in events if e["action"] == "warn"]
    assert warnings and warnings[0]["rule"] == rule
    assert not list((tmp_path / "checkpoints" / "r").glob("paused_at_step_*.pt"))


def test_action_off_silences_a_rule(tmp_path):
    overrides = {**PLANTED["catastrophic_reward"],
                 "monitor": {"catastrophic_reward": {"action": "off"}}}
    result, events = train(tmp_path, **overrides)
    assert result.exit_code == 0 and events == []


def test_every_rule_failing_at_the_pause_is_recorded_not_only_the_first(tmp_path):
    result, events = train(tmp_path, monitor={"critic_loss_explosion": {"threshold": 1e-9},
                                              "q_explosion": {"threshold": 1e-9}})
    assert result.exit_code == 3 and "paused at step 100 [critic_loss_explosion]" in \
        result.output, result.output
    asked = [(e["env_steps"], e["rule"]) for e in events if e["action"] == "pause"]
    assert asked == [(100, "critic_loss_explosion"), (100, "q_explosion")]
    assert "pause requested at step 100: [q_explosion] mean Q" in result.output
    status = json.loads(CliRunner().invoke(cli, ["status", str(tmp_path / "logs" / "r"),
                                                 "--json"]).output)
    assert status["last_pause_reason"].startswith("[critic_loss_explosion]"), status


def test_a_rule_judged_on_the_weights_points_to_an_earlier_checkpoint(tmp_path):
    """The critic's loss at step 100 judged the weights of step 99: the paused checkpoint's
    weights fail the rule whatever --set changes, so the hint names checkpoint 50."""
    planted = {"critic_loss_explosion": {"threshold": 1e-9}}
    result, _ = train(tmp_path, checkpoint_freq=50, monitor=planted)
    folder = tmp_path / "checkpoints" / "r"
    assert result.exit_code == 3, result.output
    hint = (f"resume an earlier checkpoint with a change, e.g. rltrain resume --checkpoint "
            f"{folder / 'checkpoint_step_50.pt'} --set critic_lr=1e-4 --set grad_clip_norm=10")
    assert "already fail the rule" in result.output and hint in result.output, result.output
    assert "names reward_scale or observation_scale, the rewards or the observations are " \
        "the cause" in result.output
    paused = folder / "paused_at_step_100.pt"
    again = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused),
                                     "--set", "critic_lr=1e-4"])
    assert again.exit_code == 3 and "still failing after resume: critic loss" in again.output
    assert "probed" not in again.output and hint in again.output, again.output
    earlier = CliRunner().invoke(cli, [
        "resume", "--checkpoint", str(folder / "checkpoint_step_50.pt"),
        "--set", "monitor.critic_loss_explosion.threshold=1e6"])
    assert earlier.exit_code == 0, earlier.output


def test_a_probe_of_restored_weights_says_so_and_skipped_no_step(tmp_path):
    rules = HealthRules(tiny_config(tmp_path), obs_dim=3, device=torch.device("cpu"))
    [update] = rules.check_update(7, {"critic_loss": float("nan")})
    [probe] = rules.check_update(7, {"critic_loss": float("nan")}, probe=True)
    assert update.message.endswith("in the update at env step 7; that optimiser step was "
                                   "skipped") and update.on_weights
    assert probe.message == ("non-finite critic_loss in the restored weights, probed on the "
                             "newest replay batch") and probe.on_weights
    assert rules.check_transition(7, np.full(3, np.nan), np.zeros(1), 0.0)[0][0].on_weights \
        is False


def test_an_update_with_a_nan_is_non_finite_s_alone(tmp_path):
    """Each health rule checks an update on its own; the explosion rules leave an update
    with a NaN/inf metric to non_finite, also when non_finite is off."""
    cpu = torch.device("cpu")
    nan = {"critic_loss": float("nan"), "q_mean": 1e9, "critic_grad_norm": 1e9}
    rules = HealthRules(tiny_config(tmp_path), obs_dim=3, device=cpu)
    assert [f.rule for f in rules.check_update(7, nan)] == ["non_finite"]
    off = HealthRules(tiny_config(tmp_path, monitor={"non_finite": {"action": "off"}}),
                      obs_dim=3, device=cpu)
    assert off.check_update(7, nan) == []
    big = {"critic_loss": 2e6, "q_mean": -2e6, "critic_grad_norm": 2e6,
           "actor_grad_norm": 2e6}
    found = rules.check_update(7, big)
    assert [(f.rule, f.message) for f in found] == [
        ("critic_loss_explosion", "critic loss 2e+06 is above 1e+06"),
        ("q_explosion", "mean Q -2e+06 is below -1e+06"),
        ("grad_explosion", "critic gradient norm 2e+06 is above 1e+06"),
        ("grad_explosion", "actor gradient norm 2e+06 is above 1e+06")]
    assert found[1].suggested_set == {"critic_lr": 3e-5} and found[1].on_weights


def test_rules_not_judged_on_the_weights_keep_their_own_hint(tmp_path):
    result, _ = train(tmp_path, **PLANTED["non_finite"])
    assert result.exit_code == 3 and "fix the env" in result.output, result.output
    assert "already fail the rule" not in result.output


def test_running_out_of_device_memory_is_a_pause_by_the_memory_rule(tmp_path, monkeypatch):
    from rltrain.agents.deterministic import DDPGAgent

    real_update = DDPGAgent.update

    def update(self, batch):
        if self.updates == 50:  # the 51st update, at env step 150
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_update(self, batch)

    monkeypatch.setattr(DDPGAgent, "update", update)
    result, events = train(tmp_path)
    assert result.exit_code == 3, result.output
    assert "paused at step 150 [memory]: out of cpu memory: CUDA out of memory. Tried to " \
           "allocate 2.00 GiB" in result.output and "smaller replay_buffer_size" in result.output
    assert [(e["rule"], e["action"]) for e in events] == [("memory", "pause")]
    monkeypatch.setattr(DDPGAgent, "update", real_update)
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_150.pt"
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0, resumed.output


def test_the_gpu_memory_rule_counts_every_process_on_the_device(tmp_path, monkeypatch):
    """Emulated on the CPU: 70 of 80 GiB in use on the device (by whoever), threshold 90%."""
    gib = 1024**3
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: types.SimpleNamespace(total_memory=80 * gib))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * gib, 80 * gib))
    rules = HealthRules(tiny_config(tmp_path), obs_dim=3, device=torch.device("cuda"))
    assert rules.check_memory(5) == []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (4 * gib, 80 * gib))
    [found] = rules.check_memory(5)
    assert found.rule == "memory" and found.value == 76 * 1024 and "all processes" in \
        found.message


def test_early_stopping_is_announced_after_the_evaluation_it_is_about(tmp_path):
    result, _ = train(tmp_path, **PLANTED["early_stopping"])
    lines = result.output.splitlines()
    evaluation = next(i for i, line in enumerate(lines) if line.startswith("step 150: eval"))
    pause = next(i for i, line in enumerate(lines) if "[early_stopping]" in line)
    assert evaluation < pause, result.output


def test_episodes_of_the_random_warm_up_are_never_catastrophic(tmp_path):
    """The first episode (steps 1-200) is all random actions: only the second, which the
    policy acted in, is judged."""
    result, events = train(tmp_path, min_reward_threshold=0.0, learning_starts=250,
                           max_timesteps=450)
    assert result.exit_code == 3 and "paused at step 400 [catastrophic_reward]" in \
        result.output, result.output
    assert {e["env_steps"] for e in events if e["rule"] == "catastrophic_reward"} == {400}


def test_repeated_warnings_are_rate_limited(tmp_path):
    overrides = {"safe_mode": False, "monitor": {"q_explosion": {"threshold": 1e-9},
                                                 "warn_every": 100}}
    result, events = train(tmp_path, **overrides)
    q = [e for e in events if e["rule"] == "q_explosion"]
    assert [e["env_steps"] for e in q] == [100, 200, 300]  # updates start at step 100
    assert "(99 more since the last report)" in q[1]["message"]


def test_non_finite_transitions_are_never_stored(tmp_path):
    result, _ = train(tmp_path, safe_mode=False, **PLANTED["non_finite"])
    data = load_checkpoint(tmp_path / "checkpoints" / "r" / "checkpoint_step_300.pt")
    rewards = data["buffer"]["data"][:, 4]  # obs(3) | action(1) | reward
    assert data["buffer"]["size"] == 299 and torch.isfinite(rewards).all()


def test_a_nan_reward_is_non_finite_not_a_catastrophic_return(tmp_path):
    _, events = train(tmp_path, safe_mode=False, min_reward_threshold=-3300,
                      **PLANTED["non_finite"])
    assert {e["rule"] for e in events if e["action"] == "warn"} == {"non_finite"}
    episodes = [m for m in read_jsonl(tmp_path / "logs" / "r" / "metrics.jsonl")
                if m["kind"] == "episode"]
    assert episodes and all(abs(m["episode_return"]) < 3300 for m in episodes)  # finite
    # ... and what the return leaves out is said: in the episode's line and in status.
    assert [m.get("non_finite_rewards") for m in episodes] == [1]  # the NaN at step 120
    status = CliRunner().invoke(cli, ["status", str(tmp_path / "logs" / "r")])
    assert "(1 NaN/inf rewards left out)" in status.output, status.output
    assert "latest eval            nan" in status.output  # the evaluations' NaN reward too
    assert any(e["value"] == "evaluation return" for e in events), "a NaN evaluation too"
    diagnosed = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "logs" / "r")])
    assert diagnosed.exit_code == 0 and "non_finite" in diagnosed.output, diagnosed.output


def test_a_rule_still_failing_on_resume_pauses_again_at_once(tmp_path):
    result, _ = train(tmp_path, **PLANTED["early_stopping"])
    assert result.exit_code == 3
    paused = str(tmp_path / "checkpoints" / "r" / "paused_at_step_150.pt")
    again = CliRunner().invoke(cli, ["resume", "--checkpoint", paused])
    assert again.exit_code == 3, again.output
    assert "still failing after resume" in again.output and "[early_stopping]" in again.output
    assert "--set patience=N" in again.output
    onward = CliRunner().invoke(cli, ["resume", "--checkpoint", paused, "--set", "patience=50"])
    assert onward.exit_code == 0, onward.output
    assert "finished at step 300" in onward.output
    # diagnose says the pause was resumed from, and with what change.
    report = json.loads(CliRunner().invoke(cli, ["diagnose", str(tmp_path / "logs" / "r"),
                                                 "--json"]).output)
    [pause] = [f for f in report["findings"] if f["severity"] == "pause"]
    assert pause["message"].endswith("; resumed at step 150 (patience=50)"), pause


@pytest.mark.parametrize("reward, fix", [
    (-16.0, {"critic_lr": 1e-4, "grad_clip_norm": 1.0}),     # Pendulum's own rewards
    (-16_000.0, {"normalize.rewards": True}),                 # Pendulum's rewards x1000
])
def test_an_explosion_of_large_rewards_proposes_scaling_them(tmp_path, reward, fix):
    """A reward x1000 blows the critic's loss past 1e6 before the reward rules judge:
    the explosion's finding proposes what reward_scale would, and keeps the largest
    reward across a resume."""
    from rltrain.utils.hooks.hook import Step, Update

    rules = HealthRules(tiny_config(tmp_path, critic_lr=1e-3), obs_dim=3,
                        device=torch.device("cpu"))
    [explosion] = [r for r in rules.hooks if r.spec.name == "critic_loss_explosion"]
    obs = np.zeros(3, dtype=np.float32)
    explosion.on_step(Step(1, 0, obs, np.zeros(1), reward, obs, False, False, True))
    again = HealthRules(tiny_config(tmp_path, critic_lr=1e-3), obs_dim=3,
                        device=torch.device("cpu")).by_name["critic_loss_explosion"]
    again.load_state_dict(explosion.state_dict())
    [found] = again.on_update(Update(600, 100, {"critic_loss": 1.3e8}))
    assert found.suggested_set == fix
    assert ("the largest |reward| so far is -1.6e+04" not in found.message and
            ("the largest |reward| so far is 1.6e+04" in found.message) == (reward < -1e3))


@pytest.mark.parametrize("reward, loss, theirs", [
    (1000.0, 1.4e7, True),   # CartPole's reward x1000: returns up to 50,000, not fit yet
    (1.0, 1.4e7, False),     # rewards of 1 (returns up to 50): a diverging critic
    (16.3, 1.2e6, False),    # Pendulum's rewards at gamma 0.98 (returns up to 815)
])
def test_an_explosion_within_what_the_returns_allow_is_the_rewards(tmp_path, reward, loss,
                                                                    theirs):
    """A critic loss under RETURN_SHARE of the squared largest return the rewards allow
    is what an unfit critic of such returns has: the rewards' scale is named, not a
    learning rate, even where each reward is at most LARGE_REWARD."""
    from rltrain.utils.hooks.hook import Step, Update

    rules = HealthRules(tiny_config(tmp_path, critic_lr=1e-3, gamma=0.98), obs_dim=3,
                        device=torch.device("cpu"))
    explosion = rules.by_name["critic_loss_explosion"]
    obs = np.zeros(3, dtype=np.float32)
    explosion.on_step(Step(1, 0, obs, np.zeros(1), reward, obs, False, False, True))
    [found] = explosion.on_update(Update(256, 8, {"critic_loss": loss}))
    assert (found.suggested_set == {"normalize.rewards": True}) == theirs
    assert ("blow up the critic's targets" in found.message) == theirs


def fake_cgroup(tmp_path, monkeypatch, version: int, limit: int, used: int,
                inactive_file: int = 0):
    """A cgroup of `version` at `tmp_path / "cg"` holding this process, its memory limit
    `limit` and `used` bytes in use (`inactive_file` of them cache the kernel drops)."""
    from rltrain.utils import cgroup

    root = tmp_path / "cg"
    if version == 2:
        folder = root / "job"
        folder.mkdir(parents=True)
        (root / "memory.max").write_text("max\n")
        (folder / "memory.max").write_text(f"{limit}\n")
        (folder / "memory.current").write_text(f"{used}\n")
        (folder / "memory.stat").write_text(f"anon 1\ninactive_file {inactive_file}\n")
        proc = "0::/job\n"
    else:
        folder = root / "memory" / "job"
        folder.mkdir(parents=True)
        (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (folder / "memory.usage_in_bytes").write_text(f"{used}\n")
        (folder / "memory.stat").write_text(f"total_inactive_file {inactive_file}\n")
        proc = "4:memory:/job\n1:cpu:/\n"
    (tmp_path / "proc_cgroup").write_text(proc)
    monkeypatch.setattr(cgroup, "CGROUP_ROOT", root)
    monkeypatch.setattr(cgroup, "PROC_CGROUP", tmp_path / "proc_cgroup")


@pytest.mark.parametrize("version", [1, 2])
def test_the_memory_rule_reads_the_limit_of_the_runs_cgroup(tmp_path, monkeypatch, version):
    """In a container or a SLURM job the kernel ends the run at the cgroup's limit (a
    leaking env was OOM-killed): 90% of that limit is the rule's, and what all of the
    cgroup's processes use counts, without the file cache the kernel drops first."""
    mib = 1024**2
    fake_cgroup(tmp_path, monkeypatch, version, limit=4096 * mib, used=3000 * mib,
                inactive_file=1000 * mib)
    rules = HealthRules(tiny_config(tmp_path), obs_dim=3, device=torch.device("cpu"))
    assert rules.by_name["memory"].rule.threshold == round(0.9 * 4096, 1)
    assert rules.check_memory(5) == []  # 2000 MiB in use
    fake_cgroup(tmp_path / "later", monkeypatch, version, limit=4096 * mib, used=3900 * mib)
    [found] = rules.check_memory(5)
    assert found.rule == "memory" and found.value == 3900
    assert found.message == ("memory in use by this run's cgroup 3900 MiB is above 3686 MiB "
                             "(the cgroup's limit: 4096 MiB)")
