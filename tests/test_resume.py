"""Exact resume: a run continued from a mid-episode checkpoint equals one that never stopped."""

from __future__ import annotations

import shutil

import pytest
import torch
import yaml
from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.run.status import read_status

from conftest import DEVICE, tiny_config, tiny_dict

STATE_KEYS = ("actor", "critic", "actor_target", "critic_target")


def full_run(tmp_path, **overrides) -> Trainer:
    config = tiny_config(tmp_path, **{"run_name": "full", "keep_checkpoints": 100,
                                      "checkpoint_freq": 50, **overrides})
    trainer = Trainer(config, DEVICE, interactive=False)
    assert trainer.run(create_run(config)).status == "finished"
    return trainer


def metrics(path) -> list[dict]:
    lines = [x for x in read_jsonl(path) if x["kind"] != "resume"]
    for line in lines:
        line.pop("time")
    return lines


def assert_same_state(a: dict, b: dict) -> None:
    assert a["algo"] == b["algo"]
    for key in (k for k in STATE_KEYS if k in a or k in b):  # SAC has no actor_target,
        # CrossQ no target at all
        assert a[key].keys() == b[key].keys()
        for name in a[key]:
            assert torch.equal(a[key][name], b[key][name]), f"{key}.{name}"
    if "log_ent_coef" in a:  # SAC's temperature and its optimiser
        assert torch.equal(a["log_ent_coef"], b["log_ent_coef"])
    for key in ("actor_optimizer", "critic_optimizer", "ent_coef_optimizer"):
        if key not in a:
            continue
        for index, state in a[key]["state"].items():
            for name, value in state.items():
                assert torch.equal(value, b[key]["state"][index][name]), f"{key}.{name}"
    assert torch.equal(a["buffer"]["data"], b["buffer"]["data"])
    assert a["trainer"]["exploration"] == b["trainer"]["exploration"]
    assert a["updates"] == b["updates"]


def assert_fork_matches_the_full_run(tmp_path, step: int) -> None:
    """Fork run 'full' from its checkpoint at `step`: the fork's step-300 state and its
    metrics past `step` must equal the uninterrupted run's."""
    ckpt_dir = tmp_path / "checkpoints" / "full"
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(ckpt_dir / f"checkpoint_step_{step}.pt"),
                                      "--run-name", "fork"])
    assert result.exit_code == 0, result.output
    assert_same_state(load_checkpoint(ckpt_dir / "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "fork" /
                                      "checkpoint_step_300.pt"))
    uninterrupted = [x for x in metrics(tmp_path / "logs" / "full" / "metrics.jsonl")
                     if x["env_steps"] > step]
    assert metrics(tmp_path / "logs" / "fork" / "metrics.jsonl") == uninterrupted


@pytest.mark.parametrize("overrides", [
    {}, {"algo": "td3", "noise_type": "ou"}, {"algo": "sac"},
    {"algo": "sac", "sac": {"ent_coef": 0.05, "target_update_interval": 2}},
    {"algo": "crossq", "crossq": {"renorm_warmup_steps": 100}}, {"algo": "tqc"},
    {"update_backend": "autograd", "networks": {"critic": {"activation": "elu",
                                                           "layer_norm": True}}}])
def test_fork_from_a_mid_episode_checkpoint_is_bit_exact(tmp_path, overrides):
    full_run(tmp_path, **overrides)
    ckpt_dir = tmp_path / "checkpoints" / "full"
    middle = load_checkpoint(ckpt_dir / "checkpoint_step_150.pt")
    assert middle["trainer"]["episodes"][0]["length"] == 150  # taken mid-episode
    assert_fork_matches_the_full_run(tmp_path, 150)


def test_a_fork_logs_the_same_rollout_means_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """Forked at step 250, after the episode that ended at 200: the last 100 episodes
    travel in the checkpoint, so the fork's rollout/ep_rew_mean at 300 is the full run's."""
    monkeypatch.chdir(tmp_path)  # a file outside its run's folders forks into ./logs
    full_run(tmp_path)
    assert_fork_matches_the_full_run(tmp_path, 250)
    full, fork = (EventAccumulator(str(tmp_path / "logs" / name)) for name in ("full", "fork"))
    full.Reload()
    fork.Reload()
    for tag in ("rollout/ep_rew_mean", "rollout/ep_len_mean"):
        after = [(e.step, e.value) for e in full.Scalars(tag) if e.step > 250]
        assert after and [(e.step, e.value) for e in fork.Scalars(tag)] == after, tag
    # A checkpoint from before the window resumes with it empty: no mean until an episode ends.
    payload = load_checkpoint(tmp_path / "checkpoints" / "full" / "checkpoint_step_250.pt")
    first = next(x for x in read_jsonl(tmp_path / "logs" / "full" / "metrics.jsonl")
                 if x["kind"] == "episode")
    assert payload["trainer"]["recent_episodes"] == [[first["episode_return"], 200]]
    del payload["trainer"]["recent_episodes"]
    torch.save(payload, old := tmp_path / "old.pt")
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(old), "--run-name", "old"])
    assert result.exit_code == 0, result.output
    resumed = EventAccumulator(str(tmp_path / "logs" / "old"))
    resumed.Reload()
    assert "rollout/ep_rew_mean" not in resumed.Tags()["scalars"]


def test_pause_and_resume_in_the_same_folders_matches_an_uninterrupted_run(tmp_path):
    full_run(tmp_path)
    raw = tiny_dict(tmp_path, keep_checkpoints=100, checkpoint_freq=50)
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(raw))
    runner = CliRunner()
    # Pause at step 130 through the outside-request path, then resume in place.
    log_dir = tmp_path / "logs" / "split"

    def request_pause_at_130(self, env_steps):
        if env_steps == 130:
            (log_dir / "pause.request").write_text("test pause")
        return original(self, env_steps)

    from rltrain.utils.run.monitor import TrainingMonitor

    original = TrainingMonitor.after_step
    TrainingMonitor.after_step = request_pause_at_130
    try:
        first = runner.invoke(cli, ["train", "--config", str(config_file), "--run-name", "split"])
    finally:
        TrainingMonitor.after_step = original
    assert first.exit_code == 3, first.output
    assert "paused at step 130 [outside_request]: test pause" in first.output
    paused = tmp_path / "checkpoints" / "split" / "paused_at_step_130.pt"
    second = runner.invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert second.exit_code == 0, second.output
    assert_same_state(load_checkpoint(tmp_path / "checkpoints" / "full" / "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "split" /
                                      "checkpoint_step_300.pt"))
    assert metrics(log_dir / "metrics.jsonl") == metrics(
        tmp_path / "logs" / "full" / "metrics.jsonl")
    # TensorBoard: the same points as the uninterrupted run, no gap, no duplicates.
    for tag in ("charts/episodic_return", "eval/mean_reward", "train/critic_loss"):
        split, full = EventAccumulator(str(log_dir)), EventAccumulator(
            str(tmp_path / "logs" / "full"))
        split.Reload()
        full.Reload()
        assert [(e.step, e.value) for e in split.Scalars(tag)] == \
            [(e.step, e.value) for e in full.Scalars(tag)], tag
    events = read_jsonl(log_dir / "events.jsonl")
    assert [e["action"] for e in events if e["action"] in ("pause", "paused", "resume")] == [
        "pause", "paused", "resume"]
    # Every log file marks where the continuation starts.
    for name in ("metrics.jsonl", "events.jsonl", "flow1.jsonl"):
        marks = [x["env_steps"] for x in read_jsonl(log_dir / name)
                 if "resume" in (x.get("kind"), x.get("action"))]
        assert marks == [130], name


def test_resume_records_changes_and_refuses_ones_that_do_not_fit(tmp_path):
    full_run(tmp_path)
    ckpt = str(tmp_path / "checkpoints" / "full" / "checkpoint_step_200.pt")
    runner = CliRunner()
    for change, message in [("seed=1", "cannot change 'seed'"),
                            ("hidden_sizes=[8]", "cannot change 'hidden_sizes'"),
                            ("diagnostics.max_samples=10",
                             "cannot change 'diagnostics.max_samples'"),
                            ("gama=0.9", "did you mean 'gamma'")]:
        result = runner.invoke(cli, ["resume", "--checkpoint", ckpt, "--set", change])
        assert result.exit_code == 2 and message in result.output, result.output
    own = runner.invoke(cli, ["resume", "--checkpoint", ckpt, "--run-name", "full"])
    assert own.exit_code == 2 and "leave out --run-name" in own.output, own.output
    for bad, message in (("../escape", "plain folder name"), ("", "non-empty string")):
        named = runner.invoke(cli, ["resume", "--checkpoint", ckpt, "--run-name", bad])
        assert named.exit_code == 2 and message in named.output, named.output  # as in train
    assert not (tmp_path / "escape").exists()
    done = runner.invoke(cli, ["resume", "--checkpoint",
                               str(tmp_path / "checkpoints" / "full" / "checkpoint_step_300.pt")])
    assert done.exit_code == 2 and "already reached max_timesteps" in done.output
    changes = ["gamma=0.95", "critic_lr=0.0001", "max_timesteps=260"]
    result = runner.invoke(cli, ["resume", "--checkpoint", ckpt, "--run-name", "changed",
                                 *[arg for change in changes for arg in ("--set", change)]])
    assert result.exit_code == 0, result.output
    event = read_jsonl(tmp_path / "logs" / "changed" / "events.jsonl")[0]
    assert event["rule"] == "resume" and event["value"] == changes
    assert "of run 'full'" in event["message"]
    saved = yaml.safe_load((tmp_path / "logs" / "changed" / "config.yaml").read_text())
    assert saved["gamma"] == 0.95
    # The new learning rate is the one Adam used, not the checkpoint's.
    final = load_checkpoint(tmp_path / "checkpoints" / "changed" / "checkpoint_step_260.pt")
    assert final["critic_optimizer"]["param_groups"][0]["lr"] == 1e-4
    assert final["actor_optimizer"]["param_groups"][0]["lr"] == saved["actor_lr"] != 1e-4


def test_resuming_an_earlier_checkpoint_in_place_sets_the_later_files_aside(tmp_path):
    """The continuation from step 150 replaces what the run wrote after 150: those files
    move to a superseded_after_step_150_* folder, and the new run's files take their names."""
    full_run(tmp_path)
    ckpt_dir, log_dir = tmp_path / "checkpoints" / "full", tmp_path / "logs" / "full"
    # The earlier continuation's best model, saved at step 250, and diagnostics files.
    shutil.copy(ckpt_dir / "checkpoint_step_250.pt", ckpt_dir / "best_model.pt")
    (log_dir / "heatmaps").mkdir(exist_ok=True)
    for name in ("heatmaps/heatmap_step_100.png", "heatmaps/heatmap_step_200.png",
                 "videos/pause_250.mp4"):
        (log_dir / name).parent.mkdir(exist_ok=True)
        (log_dir / name).write_text("earlier")
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(ckpt_dir / "checkpoint_step_150.pt"),
                                      "--set", "critic_lr=0.01"])
    assert result.exit_code == 0, result.output
    assert "were moved aside, nothing deleted" in result.output

    def critic_lr(path):
        return load_checkpoint(path)["critic_optimizer"]["param_groups"][0]["lr"]

    [aside] = ckpt_dir.glob("superseded_after_step_150_*")
    assert sorted(p.name for p in aside.iterdir()) == [
        "best_model.pt", "checkpoint_step_200.pt", "checkpoint_step_250.pt",
        "checkpoint_step_300.pt"]
    assert all(critic_lr(p) != 0.01 for p in aside.iterdir())
    for step in (200, 250, 300):  # written by the resumed run
        assert critic_lr(ckpt_dir / f"checkpoint_step_{step}.pt") == 0.01
    for step in (50, 100, 150):
        assert (ckpt_dir / f"checkpoint_step_{step}.pt").exists()
    best = ckpt_dir / "best_model.pt"
    assert not best.exists() or critic_lr(best) == 0.01
    [logs_aside] = log_dir.glob("superseded_after_step_150_*")
    assert sorted(str(p.relative_to(logs_aside)) for p in logs_aside.rglob("*.*")) == [
        "heatmaps/heatmap_step_200.png", "videos/pause_250.mp4"]
    assert (log_dir / "heatmaps" / "heatmap_step_100.png").read_text() == "earlier"
    warning = [e for e in read_jsonl(log_dir / "events.jsonl") if e["rule"] == "resume"
               and "moved aside" in e["message"]]
    assert len(warning) == 1 and str(aside) in warning[0]["message"]
    assert "it has no best_model.pt until an evaluation beats its best up to step 150" in \
        warning[0]["message"]
    # A set-aside checkpoint continues only as a fork, not inside the set-aside folder.
    refused = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                       str(aside / "checkpoint_step_250.pt")])
    assert refused.exit_code == 2 and "fork it with --run-name NEW" in refused.output


def test_a_fork_starts_with_its_parents_best_model_if_saved_by_then(tmp_path):
    full_run(tmp_path)
    ckpt_dir = tmp_path / "checkpoints" / "full"
    for saved_at, inherited in ((100, True), (250, False)):
        shutil.copy(ckpt_dir / f"checkpoint_step_{saved_at}.pt", ckpt_dir / "best_model.pt")
        fork = f"fork{saved_at}"
        result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                          str(ckpt_dir / "checkpoint_step_150.pt"),
                                          "--run-name", fork, "--set", "max_timesteps=160"])
        assert result.exit_code == 0, result.output  # no evaluation before 160: no new best
        best = tmp_path / "checkpoints" / fork / "best_model.pt"
        assert best.exists() == inherited
        if inherited:
            assert best.read_bytes() == (ckpt_dir / "best_model.pt").read_bytes()


def test_resume_from_another_folder_continues_the_runs_own_logs(tmp_path, monkeypatch):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(start)  # relative log_dir and checkpoint_dir, as in the shipped configs
    config = tiny_config(tmp_path, log_dir="logs", checkpoint_dir="checkpoints", run_name="r")
    Trainer(config, DEVICE, interactive=False).run(create_run(config))
    # A stale request left by `rltrain pause --no-wait` on a run that had already ended.
    (start / "logs" / "r" / "pause.request").write_text("too late")
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(
        start / "checkpoints" / "r" / "checkpoint_step_300.pt"), "--set", "max_timesteps=400"])
    assert result.exit_code == 0, result.output  # not paused by the earlier request
    assert not (elsewhere / "logs").exists()
    steps = [m["env_steps"] for m in metrics(start / "logs" / "r" / "metrics.jsonl")]
    assert steps[-1] == 400
    assert not (start / "logs" / "r" / "pause.request").exists()


def test_a_resumed_run_names_its_checkpoint_as_the_latest_until_it_writes_one(tmp_path,
                                                                            monkeypatch):
    """Killed right after resuming, the run's status still says what to resume from."""
    full_run(tmp_path)
    ckpt = tmp_path / "checkpoints" / "full" / "checkpoint_step_150.pt"

    def killed(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_step", killed)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(ckpt)])
    assert result.exit_code == 1  # Click's "Aborted!"
    status = read_status(tmp_path / "logs" / "full" / "status.json")
    assert status["state"] == "aborted" and status["env_steps"] == 150
    assert status["latest_checkpoint"] == str(ckpt.resolve())


def test_resume_prints_paths_inside_the_current_folder_relative_to_it(tmp_path,
                                                                      monkeypatch):
    full_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      "checkpoints/full/checkpoint_step_250.pt"])
    assert result.exit_code == 0, result.output
    assert "checkpoint: checkpoints/full/checkpoint_step_300.pt" in result.output
    # What the run writes names its files relative to the current folder too.
    status = read_status(tmp_path / "logs" / "full" / "status.json")
    assert status["latest_checkpoint"] == "checkpoints/full/checkpoint_step_300.pt"


def test_best_model_cannot_be_resumed(tmp_path):
    full_run(tmp_path)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(tmp_path / "checkpoints" / "full" / "best_model.pt")])
    assert result.exit_code == 2 and "holds a model only" in result.output


def test_read_jsonl_drops_lines_past_a_resume_point(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"kind": "episode", "env_steps": 100}\n'
                    '{"kind": "episode", "env_steps": 200}\n'
                    '{"kind": "episode", "env_steps": 300}\n'
                    '{"kind": "episo\n'
                    '{"kind": "resume", "env_steps": 200}\n'
                    '{"kind": "episode", "env_steps": 300}\n')
    assert [(x["kind"], x["env_steps"]) for x in read_jsonl(path)] == [
        ("episode", 100), ("episode", 200), ("resume", 200), ("episode", 300)]


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_resume_refuses_bad_files_with_exit_2_and_touches_nothing(tmp_path, monkeypatch):
    full_run(tmp_path)
    folder = tmp_path / "checkpoints" / "full"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    good = (folder / "checkpoint_step_200.pt").read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good[:-1000])

    class Exploit:
        def __reduce__(self):
            import os

            return (os.system, ("touch PWNED",))

    evil = tmp_path / "evil.pt"
    torch.save({"format": "rltrain-checkpoint", "x": Exploit()}, evil)
    # Well-formed files whose parts do not fit: an edited weight, a lost Adam entry.
    payload = load_checkpoint(folder / "checkpoint_step_200.pt")
    payload["actor"]["net.0.weight"] = payload["actor_target"]["net.0.weight"] = \
        torch.zeros(5, 5)  # (a network and its target of different shapes: refused earlier)
    torch.save(payload, bad_weight := tmp_path / "bad_weight.pt")
    payload = load_checkpoint(folder / "checkpoint_step_200.pt")
    del payload["critic_optimizer"]["state"][3]
    torch.save(payload, bad_adam := tmp_path / "bad_adam.pt")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for path, message in [(truncated, "truncated or corrupt"), (evil, "refused to load"),
                          (tmp_path / "missing.pt", "not found"),
                          (bad_weight, "does not fit this run: size mismatch for net.0.weight"),
                          (bad_adam, "does not fit this run: missing entry 3")]:
        result = runner.invoke(cli, ["resume", "--checkpoint", str(path)])
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "PWNED").exists()
    # A checkpoint whose shapes do not fit the env (the env changed under the run).
    import rltrain.scripts.training.run_state as trainer_module

    real = trainer_module.make_env
    monkeypatch.setattr(trainer_module, "make_env",
                        lambda name, **kwargs: real("MountainCarContinuous-v0"))
    result = runner.invoke(cli, ["resume", "--checkpoint", str(folder / "checkpoint_step_200.pt")])
    assert result.exit_code == 2 and "does not fit env" in result.output
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_an_env_that_does_not_replay_is_detected_and_its_episode_restarted(tmp_path):
    config = tiny_config(tmp_path, run_name="drift", env_name="fake_envs:FakeDriftingPoint-v0",
                         max_timesteps=150, learning_starts=50, checkpoint_freq=50,
                         eval_freq=1000)
    assert Trainer(config, DEVICE, False).run(create_run(config)).status == \
        "finished"
    checkpoint = tmp_path / "checkpoints" / "drift" / "checkpoint_step_150.pt"
    assert load_checkpoint(checkpoint)["trainer"]["episodes"][0]["length"] == 10  # mid-episode
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint), "--set",
                                      "max_timesteps=200", "--run-name", "drift2"])
    assert result.exit_code == 0, result.output
    assert "did not reproduce episode 7" in result.output
    warning = [e for e in read_jsonl(tmp_path / "logs" / "drift2" / "events.jsonl")
               if e["action"] == "warn"]
    assert "not bit-exact" in warning[0]["message"]


def test_a_checkpoint_from_the_other_kind_of_device_resumes_with_new_random_streams(
        tmp_path, monkeypatch):
    """A CUDA run's checkpoint holds CUDA generator states (a Philox seed and offset, 16
    bytes), which a CPU generator cannot take; the reverse holds too. Resuming on the
    other kind of device (`--set device=cpu`) warns and continues, the same way each time."""
    monkeypatch.chdir(tmp_path)  # a file outside its run's folders forks into ./logs
    full_run(tmp_path, algo="td3")  # TD3: the agent's generator draws target noise
    saved = load_checkpoint(tmp_path / "checkpoints" / "full" / "checkpoint_step_150.pt")
    philox = torch.arange(16, dtype=torch.uint8)  # the shape of a CUDA generator's state
    saved["agent_generator"], saved["buffer"]["generator"] = philox, philox.clone()
    from_cuda = tmp_path / "from_cuda.pt"
    torch.save(saved, from_cuda)
    for fork in ("fork1", "fork2"):
        result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(from_cuda),
                                          "--run-name", fork, "--set", "device=cpu"])
        assert result.exit_code == 0, result.output
        assert "written on another kind of device" in result.output
        warnings = [e["message"] for e in read_jsonl(tmp_path / "logs" / fork / "events.jsonl")
                    if e["action"] == "warn"]
        assert any("not bit-identically" in w for w in warnings)
    ends = [load_checkpoint(tmp_path / "checkpoints" / name / "checkpoint_step_300.pt")
            for name in ("fork1", "fork2", "full")]
    assert_same_state(ends[0], ends[1])  # deterministic: new streams, but the same ones
    assert not torch.equal(ends[0]["critic"]["layers.1.weight"],
                           ends[2]["critic"]["layers.1.weight"])  # the streams did change


def test_a_cuda_run_resumed_where_there_is_no_cuda_says_how_to_go_on(tmp_path, monkeypatch):
    full_run(tmp_path)
    payload = load_checkpoint(tmp_path / "checkpoints" / "full" / "checkpoint_step_200.pt")
    payload["config"]["device"] = "cuda"
    torch.save(payload, from_gpu := tmp_path / "from_gpu.pt")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(from_gpu)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "CUDA is not available" in result.output
    assert f"rltrain resume --checkpoint {from_gpu} --set device=cpu" in result.output


def test_eval_curve_reads_nan_evaluations_back_as_numbers(tmp_path):
    """JSON has no NaN: metrics.jsonl holds it as "nan", which the sweep's summary (max of
    the curve) and diagnose's plot must get back as a float."""
    import math

    from rltrain.utils.run.log_files import eval_curve

    path = tmp_path / "m.jsonl"
    path.write_text('{"kind": "eval", "env_steps": 100, "mean_return": -150.5}\n'
                    '{"kind": "eval", "env_steps": 200, "mean_return": "nan"}\n')
    curve = eval_curve(read_jsonl(path))
    assert curve[0] == (100, -150.5) and curve[1][0] == 200 and math.isnan(curve[1][1])
    assert all(isinstance(v, float) for _, v in curve)  # max() of the curve works


def test_a_run_another_process_holds_is_not_resumed_into(tmp_path, monkeypatch):
    # Two resumes of one checkpoint started together used to both pass the status check
    # (the run was not yet marked running) and write the same folders.
    from rltrain.utils.run.folders import RunLock, paths_for

    full_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "checkpoints" / "full"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    # flock is per open file: holding it here is what another process would do.
    held = RunLock(paths_for(tiny_config(tmp_path), "full"))
    try:
        result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                          str(folder / "checkpoint_step_200.pt")])
        assert result.exit_code == 2, result.output
        assert "in use by another rltrain process" in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing moved
    finally:
        held.release()
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(folder / "checkpoint_step_200.pt")])
    assert result.exit_code == 0, result.output


def test_the_input_rules_bookkeeping_resumes_and_old_checkpoints_start_it_afresh(
        tmp_path, monkeypatch):
    """`time_limit_terminal` counts episodes across a resume: with 50-step episodes it
    fires at step 150 (the third) whether the run stopped mid-episode at step 125 or not.
    A checkpoint from before these rules resumes with the count at zero."""
    monkeypatch.chdir(tmp_path)  # a file outside its run's folders forks into ./logs
    full_run(tmp_path, env_name="fake_envs:FakeShortTimeLimitTerminalPendulum-v0",
             checkpoint_freq=25, diagnostics={"time_limit_terminal": {"threshold": 3}})

    def fired(run: str) -> list[int]:
        return [e["env_steps"] for e in read_jsonl(tmp_path / "logs" / run / "events.jsonl")
                if e["rule"] == "time_limit_terminal"]

    assert fired("full") == [150]  # then held back (monitor.repeat_every) and counted
    saved = tmp_path / "checkpoints" / "full" / "checkpoint_step_125.pt"
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(saved), "--run-name", "fork"])
    assert result.exit_code == 0, result.output
    assert fired("fork") == [150]
    payload = load_checkpoint(saved)
    del payload["trainer"]["diagnostics"]["inputs"]
    torch.save(payload, old := tmp_path / "old.pt")
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(old), "--run-name", "old"])
    assert result.exit_code == 0, result.output
    assert fired("old") == [250]  # counted afresh from step 125: episodes 150, 200, 250


def test_a_child_process_the_env_forked_does_not_keep_the_run_locked(tmp_path):
    """The run lock is a flock, which a forked child's copy of the file keeps held after
    the run's own process has let go (an env that forks a helper kept its run locked)."""
    import os
    import signal

    from rltrain.utils.run.folders import RunLock, RunPaths

    paths = RunPaths("r", tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r")
    held = RunLock(paths)
    ready, told = os.pipe()
    child = os.fork()
    if child == 0:  # the env's helper: lives on past the run
        os.write(told, b"x")  # running (the fork's own handlers have run)
        signal.pause()
        os._exit(0)
    try:
        assert os.read(ready, 1) == b"x"
        held.release()  # the run's process lets go of its run
        RunLock(paths).release()  # another resume may take it
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(ready)
        os.close(told)
