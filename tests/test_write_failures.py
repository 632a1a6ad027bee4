"""Files that cannot be written (a full disk, a path that is not a folder): one line, the
newest checkpoint named, nothing lost, no folder left behind that blocks the run's name."""

from __future__ import annotations

import errno
import json

import torch
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.errors import OutputError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.run.status import read_status

from conftest import tiny_dict

NO_SPACE = OSError(errno.ENOSPC, "No space left on device")


def train(tmp_path, *args: str):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    return CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "r", *args])


def test_an_output_folder_that_cannot_be_made_is_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    for key in ("log_dir", "checkpoint_dir"):
        result = train(tmp_path, "--set", f"{key}={tmp_path / 'a_file' / 'x'}")
        assert result.exit_code == 4, result.output
        assert "cannot create the run folder" in result.output and "Not a directory" in \
            result.output and "Traceback" not in result.output
    # The log folder made before the checkpoint folder failed is gone again: the name is free.
    assert not (tmp_path / "logs" / "r").exists()
    assert train(tmp_path, "--set", "max_timesteps=150").exit_code == 0


def test_a_full_disk_at_a_checkpoint_stops_with_exit_4_naming_the_newest(tmp_path,
                                                                          monkeypatch):
    real_save = torch.save

    def save(obj, f):  # as torch reports it: a RuntimeError raised during the OSError
        if "_200" in f.name or "paused" in f.name:
            try:
                raise NO_SPACE
            except OSError:
                raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos")  # noqa: B904 (implicit chaining, as torch does)
        real_save(obj, f)

    monkeypatch.setattr(torch, "save", save)  # what utils/io/checkpoint.py calls
    result = train(tmp_path)
    newest = tmp_path / "checkpoints" / "r" / "checkpoint_step_100.pt"
    assert result.exit_code == 4, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: stopped at step 200: cannot write "
        f"'{tmp_path / 'checkpoints' / 'r' / 'checkpoint_step_200.pt'}': No space left on "
        f"device; no checkpoint could be written; the newest is {newest}")
    assert load_checkpoint(newest)["total_steps"] == 100
    assert not list((tmp_path / "checkpoints" / "r").glob(".*tmp*"))  # no half-written file
    assert read_status(tmp_path / "logs" / "r" / "status.json")["state"] == "crashed"
    status = CliRunner().invoke(cli, ["status", "r", "--log-dir", str(tmp_path / "logs")])
    assert "[write_failure] cannot write" in status.output, status.output  # the reason
    diagnosed = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "logs" / "r"), "--json"])
    assert [f["rule"] for f in json.loads(diagnosed.output)["findings"]] == ["write_failure"]


def test_a_failed_log_write_between_steps_still_leaves_a_checkpoint_to_resume(tmp_path,
                                                                              monkeypatch):
    real_metric = RunLogger.metric

    def metric(self, kind, env_steps, **fields):
        if kind == "eval" and env_steps == 200:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.paths.metrics_file))
        real_metric(self, kind, env_steps, **fields)

    def close(self):  # the log folder is full too: closing the logs fails as well
        real_close(self)
        raise OSError(errno.ENOSPC, "No space left on device", str(self.paths.events_file))

    real_close = RunLogger.close
    monkeypatch.setattr(RunLogger, "metric", metric)
    monkeypatch.setattr(RunLogger, "close", close)
    result = train(tmp_path)
    monkeypatch.setattr(RunLogger, "close", real_close)
    assert "warning: closing the run: No space left on device" in result.output
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_200.pt"
    assert result.exit_code == 4, result.output
    assert "stopped at step 200: No space left on device: '" in result.output
    assert f"once that is fixed: rltrain resume --checkpoint {paused}" in result.output
    status = read_status(tmp_path / "logs" / "r" / "status.json")
    assert status["state"] == "paused" and "No space left" in status["pause_reason"]
    monkeypatch.setattr(RunLogger, "metric", real_metric)
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0, resumed.output


def test_a_failed_write_inside_an_env_step_names_the_newest_checkpoint(tmp_path, monkeypatch):
    """An episode's end half recorded is no state to checkpoint: the newest one is named."""
    real_metric = RunLogger.metric

    def metric(self, kind, env_steps, **fields):
        if kind == "episode" and env_steps == 200:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_metric(self, kind, env_steps, **fields)

    monkeypatch.setattr(RunLogger, "metric", metric)
    result = train(tmp_path)
    assert result.exit_code == 4, result.output
    assert result.output.strip().endswith(
        "no checkpoint was written halfway through an env step; the newest is "
        f"{tmp_path / 'checkpoints' / 'r' / 'checkpoint_step_100.pt'}")
    assert not list((tmp_path / "checkpoints" / "r").glob("paused_*"))


def test_a_resume_that_cannot_open_its_logs_names_the_checkpoint_to_resume(tmp_path,
                                                                           monkeypatch):
    assert train(tmp_path, "--set", "max_timesteps=150").exit_code == 0
    checkpoint = tmp_path / "checkpoints" / "r" / "checkpoint_step_150.pt"
    real_write = RunLogger.write_run_files

    def denied(self, config, argv=None):
        raise PermissionError(errno.EACCES, "Permission denied", str(self.paths.config_file))

    monkeypatch.setattr(RunLogger, "write_run_files", denied)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--set", "max_timesteps=300"])
    assert result.exit_code == 4, result.output
    assert "the run could not start: Permission denied: '" in result.output
    assert f"once that is fixed, rltrain resume --checkpoint {checkpoint}" in result.output
    monkeypatch.setattr(RunLogger, "write_run_files", real_write)
    assert load_checkpoint(checkpoint)["total_steps"] == 150  # unchanged


def test_a_background_thread_that_cannot_write_says_so_in_one_line(capsys):
    """TensorBoard writes its event files from a thread of its own."""
    import threading

    import rltrain.scripts

    error = OSError(errno.ENOSPC, "No space left on device", "logs/r/events.out.tfevents.1")
    rltrain.scripts._thread_failed(threading.ExceptHookArgs(
        [OSError, error, None, threading.Thread(name="EventWriter")]))
    assert capsys.readouterr().err == ("warning: No space left on device: "
                                       "'logs/r/events.out.tfevents.1' (in EventWriter)\n")


def test_a_link_planted_in_a_run_folder_is_not_written_through(tmp_path):
    assert train(tmp_path, "--set", "max_timesteps=200").exit_code == 0
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("precious\n")
    metrics = tmp_path / "logs" / "r" / "metrics.jsonl"
    metrics.unlink()
    metrics.symlink_to(outside)
    checkpoint = tmp_path / "checkpoints" / "r" / "checkpoint_step_200.pt"
    before = checkpoint.read_bytes()
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--set", "max_timesteps=300"])
    assert result.exit_code == 4, result.output
    assert f"'{metrics}' is a link: rltrain writes a run's files only inside its folders" \
        in result.output and "Traceback" not in result.output
    assert outside.read_text() == "precious\n" and checkpoint.read_bytes() == before


def test_a_full_disk_for_the_final_heatmap_is_exit_4_naming_the_file(tmp_path, monkeypatch):
    """The run finishes (its checkpoint written), then its last heatmap cannot be written:
    not exit 0 with a warning, but exit 4 naming the file and the checkpoint."""
    from rltrain.utils.diagnosis.report import heatmap_image

    real = heatmap_image.atomic_write

    def atomic_write(path, write, durable=True):
        if path.suffix == ".png":
            raise OutputError(f"cannot write '{path}': No space left on device")
        real(path, write, durable)

    monkeypatch.setattr(heatmap_image, "atomic_write", atomic_write)
    result = train(tmp_path, "--set", "max_timesteps=500")  # no heatmap scheduled before
    checkpoint = tmp_path / "checkpoints" / "r" / "checkpoint_step_500.pt"
    assert result.exit_code == 4, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: the run finished at step 500 (checkpoint {checkpoint}), but its last files "
        f"could not all be written: cannot write "
        f"'{tmp_path / 'logs' / 'r' / 'heatmaps' / 'heatmap_step_500.png'}': No space left "
        f"on device")
    assert load_checkpoint(checkpoint)["total_steps"] == 500


def test_run_folders_deleted_mid_run_are_named_as_such(tmp_path, monkeypatch):
    """Both folders go (moved away: as `rm -rf` from another shell, but atomic) at step
    150: the run stops before its next step saying so, with exit code 4 and a paused
    checkpoint in a checkpoint folder made again."""
    from rltrain.scripts.training.trainer import Trainer

    real_step = Trainer._step

    def step(self):
        real_step(self)
        if self.state.counters.env_steps == 150:
            for folder in (self.paths.log_dir, self.paths.checkpoint_dir):
                folder.rename(tmp_path / f"gone_{folder.parent.name}")

    monkeypatch.setattr(Trainer, "_step", step)
    result = train(tmp_path)
    logs, checkpoints = tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r"
    assert result.exit_code == 4, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: stopped at step 150: the run's folders '{logs}' and '{checkpoints}' were "
        f"deleted while the run wrote to them; a checkpoint was still written; once that is "
        f"fixed: rltrain resume --checkpoint {checkpoints / 'paused_at_step_150.pt'}")
    assert "b'" not in result.output


class FillsAtEval200:
    """metrics.jsonl on a disk that is full when the evaluation at step 200 is written."""

    def __init__(self, file, path) -> None:
        self.file, self.path = file, path

    def write(self, text: str) -> int:
        line = json.loads(text)
        if line["kind"] == "eval" and line["env_steps"] == 200:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        return self.file.write(text)

    def __getattr__(self, name: str):
        return getattr(self.file, name)


def test_an_evaluation_the_full_disk_refused_is_written_on_resume(tmp_path, monkeypatch):
    """The evaluation at step 200 is done, but its metrics.jsonl line cannot be written:
    the paused checkpoint keeps the line, the resume writes it, once (resumed twice too),
    and the run's files and state equal those of a run that never stopped."""
    from test_resume import assert_same_state, metrics

    assert train(tmp_path, "--run-name", "full").exit_code == 0  # the last --run-name wins
    real_init = RunLogger.__init__

    def init(self, paths, resume_step=None):
        real_init(self, paths, resume_step)
        self._metrics = FillsAtEval200(self._metrics, paths.metrics_file)

    monkeypatch.setattr(RunLogger, "__init__", init)
    result = train(tmp_path)
    monkeypatch.setattr(RunLogger, "__init__", real_init)  # space freed
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_200.pt"
    log_dir = tmp_path / "logs" / "r"
    assert result.exit_code == 4, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: stopped at step 200: No space left on device: '{log_dir / 'metrics.jsonl'}'; "
        f"a checkpoint was still written; once that is fixed: rltrain resume --checkpoint "
        f"{paused}")
    for _ in range(2):  # the second resume of the same checkpoint adds no second line
        resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
        assert resumed.exit_code == 0, resumed.output
    written = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum(x["kind"] == "eval" and x["env_steps"] == 200 for x in written) == 1
    # Read as one history (the second resume's steps past 200 replace the first's).
    assert [x["env_steps"] for x in metrics(log_dir / "metrics.jsonl")
            if x["kind"] == "eval"] == [100, 200, 300]
    assert metrics(log_dir / "metrics.jsonl") == metrics(tmp_path / "logs" / "full" /
                                                         "metrics.jsonl")
    full = read_status(tmp_path / "logs" / "full" / "status.json")
    split = read_status(log_dir / "status.json")
    for key in ("evaluations", "latest_eval", "best_eval", "best_eval_step", "evals_since_best"):
        assert split[key] == full[key], key
    assert_same_state(load_checkpoint(tmp_path / "checkpoints" / "full" /
                                      "checkpoint_step_300.pt"),
                      load_checkpoint(tmp_path / "checkpoints" / "r" / "checkpoint_step_300.pt"))
