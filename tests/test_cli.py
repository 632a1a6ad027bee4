"""The `rltrain` command line: train, eval, help, exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli

from conftest import TESTS_DIR, tiny_dict


def write_config(tmp_path: Path, **overrides) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    return path


def run_cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_help_lists_every_command_and_option():
    result = run_cli("--help")
    assert result.exit_code == 0
    for command in ("train", "eval"):
        assert command in result.output
    train_help = run_cli("train", "--help").output
    for option in ("--config", "--set", "--run-name", "pendulum_ddpg.yaml"):
        assert option in train_help
    eval_help = run_cli("eval", "--help").output
    for option in ("--checkpoint", "--episodes", "--seed", "--json"):
        assert option in eval_help


def test_train_then_eval_through_the_console_script(tmp_path):
    """The installed `rltrain` entry point, in a real subprocess."""
    config = write_config(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    exe = Path(sys.executable).with_name("rltrain")
    train = subprocess.run([str(exe), "train", "--config", str(config), "--run-name", "r1",
                            "--set", "max_timesteps=250"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=300)
    assert train.returncode == 0, train.stderr
    assert "finished at step 250" in train.stdout
    log_dir = tmp_path / "logs" / "r1"
    for name in ("config.yaml", "command.txt", "metrics.jsonl"):
        assert (log_dir / name).is_file()
    assert any(p.name.startswith("events.out.tfevents") for p in log_dir.iterdir())
    assert "--run-name r1" in (log_dir / "command.txt").read_text()
    assert yaml.safe_load((log_dir / "config.yaml").read_text())["max_timesteps"] == 250
    checkpoint = tmp_path / "checkpoints" / "r1" / "best_model.pt"
    result = subprocess.run([str(exe), "eval", "--checkpoint", str(checkpoint), "--episodes",
                             "2", "--json"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["episodes"] == 2 and len(report["returns"]) == 2
    assert report["mean_return"] == pytest.approx(sum(report["returns"]) / 2)


def test_metrics_and_tensorboard_tags(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config(tmp_path)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    log_dir = tmp_path / "logs" / "r"
    lines = [json.loads(x) for x in (log_dir / "metrics.jsonl").read_text().splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds.count("eval") == 3 and kinds.count("episode") == 1  # 300 steps, 200/episode
    events = EventAccumulator(str(log_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    sb3_names = {"rollout/ep_rew_mean", "rollout/ep_len_mean", "eval/mean_reward",
                 "eval/mean_ep_length", "train/actor_loss", "train/critic_loss", "time/fps"}
    extras = {"charts/episodic_return", "rollout/episode_length", "eval/std_reward",
              "train/q_mean", "train/critic_grad_norm", "train/actor_grad_norm",
              "train/exploration_noise", "train/n_updates", "time/diagnostics_share"}
    assert sb3_names | extras <= tags, sorted(sb3_names | extras - tags)
    assert not {t for t in tags if t.startswith("losses/")}
    # TensorBoard sorts groups and tags by name: its first card is a return.
    assert sorted(tags)[0] == "charts/episodic_return"
    assert {t for t in tags if t.startswith("charts/")} == {"charts/episodic_return"}
    assert "config/text_summary" in events.Tags()["tensors"]
    # Per evaluation: the mean of its episodes' returns and lengths, as in metrics.jsonl.
    evals = [line for line in lines if line["kind"] == "eval"]
    assert [(e.step, e.value) for e in events.Scalars("eval/mean_reward")] == [
        (x["env_steps"], pytest.approx(x["mean_return"])) for x in evals]
    assert [e.value for e in events.Scalars("eval/mean_ep_length")] == [200.0] * 3


def test_rollout_means_are_over_the_last_100_episodes(tmp_path):
    """SB3's window: with 105 episodes of 2 steps, each log line's rollout/ep_rew_mean is
    the mean of the last <= 100 episode returns in metrics.jsonl."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config(tmp_path, env_name="fake_envs:FakeTwoStepPoint-v0",
                          max_timesteps=210, eval_freq=210, checkpoint_freq=210, log_freq=10)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    log_dir = tmp_path / "logs" / "r"
    lines = [json.loads(x) for x in (log_dir / "metrics.jsonl").read_text().splitlines()]
    episodes = [x for x in lines if x["kind"] == "episode"]
    assert len(episodes) == 105
    events = EventAccumulator(str(log_dir))
    events.Reload()
    for tag, field in (("rollout/ep_rew_mean", "episode_return"),
                       ("rollout/ep_len_mean", "length")):
        logged = [(e.step, e.value) for e in events.Scalars(tag)]
        expected = []
        for step in range(10, 211, 10):
            done = [x[field] for x in episodes if x["env_steps"] <= step][-100:]
            expected.append((step, pytest.approx(sum(done) / len(done), rel=1e-6)))
        assert logged == expected, tag


def test_eval_is_deterministic_and_seed_dependent(tmp_path):
    config = write_config(tmp_path)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    checkpoint = str(tmp_path / "checkpoints" / "r" / "checkpoint_step_300.pt")
    first = json.loads(run_cli("eval", "--checkpoint", checkpoint, "--json").output)
    again = json.loads(run_cli("eval", "--checkpoint", checkpoint, "--json").output)
    other = json.loads(run_cli("eval", "--checkpoint", checkpoint, "--json",
                               "--seed", "11").output)
    assert first["returns"] == again["returns"]
    assert first["returns"] != other["returns"]
    text = run_cli("eval", "--checkpoint", checkpoint).output
    assert "mean return" in text and "over 1 episodes" in text


def test_user_env_with_asymmetric_bounds_trains(tmp_path):
    config = write_config(tmp_path, env_name="fake_envs:FakePoint-v0", max_timesteps=150,
                          eval_freq=50, checkpoint_freq=50)
    result = run_cli("train", "--config", str(config), "--run-name", "p")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, message", [
    (["--set", "gama=0.9"], "did you mean 'gamma'"),
    (["--set", "gamma=2"], r"'gamma' must be a number in \(0, 1\]"),
    (["--set", "env_name=Pendulm-v1"], "closest registered ids: Pendulum-v1"),
    (["--set", "env_name=CartPole-v1"], "continuous bounded actions"),
    (["--set", "device=cuda"], "CUDA is not available"),
])
def test_bad_training_input_is_one_line_and_exit_2(tmp_path, args, message):
    if "device=cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    config = write_config(tmp_path)
    result = CliRunner().invoke(cli, ["train", "--config", str(config), *args])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert __import__("re").search(message, lines[0]), lines[0]
    assert not (tmp_path / "logs").exists()  # nothing was created


def test_missing_config_file_is_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["train", "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "not found" in result.output


def test_an_existing_run_is_never_overwritten(tmp_path):
    config = write_config(tmp_path, max_timesteps=150)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    before = sorted(p.name for p in (tmp_path / "checkpoints" / "r").iterdir())
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "r"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "r").iterdir()) == before


@pytest.mark.parametrize("content, message", [(b"", "truncated or corrupt"),
                                              ([1, 2], "not an rltrain")])
def test_eval_of_a_bad_checkpoint_is_exit_2(tmp_path, content, message):
    import torch

    path = tmp_path / "bad.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(path)])
    assert result.exit_code == 2 and message in result.output
    missing = CliRunner().invoke(cli, ["eval", "--checkpoint", str(tmp_path / "none.pt")])
    assert missing.exit_code == 2 and "not found" in missing.output


def test_eval_refuses_a_checkpoint_for_another_env(tmp_path, monkeypatch):
    config = write_config(tmp_path, max_timesteps=150)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    checkpoint = tmp_path / "checkpoints" / "r" / "best_model.pt"
    import rltrain.scripts.commands.eval_command as eval_module

    real_make_env = eval_module.make_env
    monkeypatch.setattr(eval_module, "make_env",
                        lambda name, **kwargs: real_make_env("MountainCarContinuous-v0"))
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(checkpoint)])
    assert result.exit_code == 2 and "does not fit env" in result.output


def test_progress_prints_plain_lines_when_not_on_a_terminal(monkeypatch, capsys):
    import rltrain.utils.run.progress as progress

    monkeypatch.setattr(progress, "PLAIN_EVERY_SECONDS", 0.0)
    display = progress.ProgressDisplay(1000, 0, interactive=False)
    display.update(100, -1234.5, None)
    display.close()
    out = capsys.readouterr().out
    assert "step 100/1000" in out and "last return -1234.5" in out and "best eval n/a" in out
    assert "steps/s" in out and "ETA" in out


def test_progress_bar_on_a_terminal():
    import io

    from rich.console import Console

    import rltrain.utils.run.progress as progress

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200)
    display = progress.ProgressDisplay(1000, 0, interactive=True, console=console)
    display.update(500, -200.0, -150.0)
    display.close()
    out = screen.getvalue()
    assert "500/1000" in out and "last return -200.0" in out and "best eval -150.0" in out
    # An 80-column terminal still shows every number of a 20k-step run in full.
    screen = io.StringIO()
    display = progress.ProgressDisplay(
        20000, 0, interactive=True, console=Console(file=screen, force_terminal=True, width=80))
    display.update(15000, -1234.5, -1111.1)
    display.close()
    out = screen.getvalue()
    assert "15000/20000" in out and "last return -1234.5" in out and "best eval -1111.1" in out


def test_status_tells_a_damaged_status_file_from_a_run_not_started(tmp_path):
    folder = tmp_path / "logs" / "r"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("env_name: Pendulum-v1\n")
    for command in ("status", "pause"):
        result = CliRunner().invoke(cli, [command, "r", "--log-dir", str(tmp_path / "logs")])
        assert result.exit_code == 2 and "has not started training" in result.output
    (folder / "status.json").write_text('{"state": "runn')
    result = CliRunner().invoke(cli, ["status", "r", "--log-dir", str(tmp_path / "logs")])
    assert result.exit_code == 2 and "cannot be read as JSON" in result.output, result.output


def test_output_cut_short_by_a_pipe_ends_quietly():
    """`rltrain diagnose RUN | head`: the reader may go away while the command writes. Not
    "Error: Broken pipe" and exit 4 (a file that cannot be written), but Click's quiet
    exit 1, as when the pipe breaks after the command."""
    from rltrain.scripts.cli import RLTrainGroup

    group = RLTrainGroup()

    @group.command()
    def show() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    result = CliRunner().invoke(group, ["show"])
    assert result.exit_code == 1 and "Error" not in result.output, result.output


def test_training_goes_on_when_the_reader_of_its_output_goes_away(tmp_path):
    """`rltrain train ... | head -1`: the run finishes, its console output dropped."""
    exe = str(Path(sys.executable).with_name("rltrain"))
    proc = subprocess.Popen([exe, "train", "--config", str(write_config(tmp_path)),
                             "--run-name", "r"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0 and stderr == b"", stderr
    status = json.loads((tmp_path / "logs" / "r" / "status.json").read_text())
    assert status["state"] == "finished" and status["env_steps"] == 300


def test_eval_json_is_strict_json_when_a_return_is_nan(tmp_path):
    config = write_config(tmp_path, env_name="fake_envs:FakeNaNReward-v0", safe_mode=False)
    assert run_cli("train", "--config", str(config), "--run-name", "r").exit_code == 0
    checkpoint = str(tmp_path / "checkpoints" / "r" / "checkpoint_step_300.pt")
    out = run_cli("eval", "--checkpoint", checkpoint, "--json")

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    result = json.loads(out.output, parse_constant=refuse)
    assert result["mean_return"] == "nan" and result["returns"] == ["nan"]


def test_a_refused_start_closes_its_envs(tmp_path, monkeypatch):
    # The envs are made before the run's folders; when the name is taken they are closed
    # (async workers left to the garbage collector can print "Exception ignored ...").
    from rltrain.scripts.training.trainer import Trainer

    closed = []
    real_close = Trainer.close
    monkeypatch.setattr(Trainer, "close", lambda self: closed.append(real_close(self)))
    config = write_config(tmp_path, num_envs=2, vector_mode="async")
    (tmp_path / "logs" / "taken").mkdir(parents=True)
    (tmp_path / "logs" / "taken" / "metrics.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "taken"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert len(closed) == 1


def test_the_progress_shows_an_evaluations_best_at_once():
    """An evaluation comes after its step's display update: the final line would keep
    the best from before it."""
    import numpy as np

    from rltrain.utils.hooks.eval_result import EvalResult
    from rltrain.utils.hooks.hook import Evaluation
    from rltrain.utils.run.progress import ProgressHook

    class Display:
        def __init__(self) -> None:
            self.shown: list[tuple] = []

        def update(self, *values) -> None:
            self.shown.append(values)

    display = Display()
    hook = ProgressHook(display, None, None)
    hook.on_step_end(2000)
    result = EvalResult([-150.0], [200], [-80.0], np.zeros((1, 3)), np.zeros((1, 3)), [True])
    hook.on_eval(Evaluation(2000, result, best=-150.0, evals_since_best=0))
    assert display.shown[-1] == (2000, None, -150.0)


def test_a_run_started_with_stdout_closed_trains_and_leaves_no_traceback(tmp_path):
    """`rltrain train ... >&-`: Python's sys.stdout is None; the progress display failed
    on it with a traceback and left empty run folders."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    exe = Path(sys.executable).with_name("rltrain")
    result = subprocess.run(["sh", "-c", f'exec "{exe}" train --config "{config}" '
                             "--run-name closed >&-"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "checkpoints" / "closed" / "checkpoint_step_300.pt").is_file()


@pytest.mark.parametrize("args, hint", [
    (["train", "--set", "gamma", "0.98"], "--set takes KEY=VALUE as one word: --set gamma=0.98"),
    (["config", "show", "--set", "tau", "0.01"], "--set tau=0.01"),
    (["sweep", "--env", "Pendulum-v1", "--grid", "tau", "0.01,0.02"],
     "--grid takes KEY=VALUE as one word: --grid tau=0.01,0.02"),
])
def test_a_key_and_value_given_as_two_words_get_the_key_value_hint(args, hint):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "Got unexpected extra argument" in result.output and hint in result.output


@pytest.mark.parametrize("command", ["status", "diagnose", "pause", "stop"])
def test_a_mistyped_run_name_gets_the_close_ones(tmp_path, command):
    for name in ("tour", "tour-2", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text("{}\n")
    result = CliRunner().invoke(cli, [command, "tuor", "--log-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: run 'tuor' not found (neither a run folder nor a run name under "
        f"'{tmp_path}/'); did you mean 'tour' or 'tour-2'?"]


def test_an_empty_config_file_is_announced(tmp_path):
    """An empty file trained silently with the defaults (a wrong file, or one saved
    empty, looked like a config)."""
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(tmp_path / "empty.yaml")])
    assert result.exit_code == 0
    assert f"config '{tmp_path / 'empty.yaml'}' is empty: every key takes rltrain's default" \
        in result.output


def test_the_progress_line_shows_the_speed_of_the_steps_from_the_first_ones(monkeypatch,
                                                                            capsys):
    """A warm-up at 500 steps/s showed "0 steps/s" (no 2 s window had passed), and the
    first speed shown counted the run's start-up as if it were steps. A fake clock."""
    import types

    import rltrain.utils.run.progress as progress

    clock = {"now": 1000.0}
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))
    monkeypatch.setattr(progress, "PLAIN_EVERY_SECONDS", 0.0)
    display = progress.ProgressDisplay(10_000, 0, interactive=False)
    clock["now"] += 30.0  # the envs, logs and first checkpoint made before the first step
    for step in range(100, 1100, 100):  # 500 steps/s
        clock["now"] += 0.2
        display.update(step, None, None)
    display.close()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[1] for line in lines[3:]] == ["500 steps/s"] * 7
