"""Forged checkpoints: every field rltrain reads is checked when the file is loaded, so
that `resume` and `eval` refuse a bad one in one line with exit code 2, before any file
is touched; `eval` refuses an actor whose weights are NaN."""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.io.checkpoint import load_checkpoint, save_tensors


def files_of(*folders: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for folder in folders
            for p in sorted(folder.rglob("*")) if p.is_file()}


def nested_set(payload: dict, key: str, value) -> None:
    *parents, last = key.split("/")
    for part in parents:
        payload = payload[part]
    payload[last] = value


# (where, forged value, the field the refusal names)
FORGERIES = [
    ("total_steps", "abc", "total_steps"), ("total_steps", -5, "total_steps"),
    ("total_steps", 2**64, "total_steps"), ("total_steps", 2.5, "total_steps"),
    ("kind", "weird", "kind"), ("run_name", "../../elsewhere", "run_name"),
    ("log_dir", 7, "log_dir"), ("spaces/obs_dim", 0, "spaces.obs_dim"),
    ("spaces/action_low", [float("nan")], "spaces.action_low"),
    ("spaces/action_high", [-5.0], "spaces.action_high"), ("actor", "not weights", "actor"),
    ("critic/net.0.weight", "a string", "critic.net.0.weight"),
    ("actor_target/net.0.weight", torch.zeros(2, 2), "actor_target"),
    ("buffer/size", 10**6, "buffer.size"), ("buffer/ptr", -1, "buffer.ptr"),
    ("buffer/width", 3, "buffer.width"), ("buffer/data", torch.zeros(3, 3), "buffer.data"),
    ("trainer/counters/env_steps", 150, "trainer.counters.env_steps"),
    ("trainer/counters/episodes", -1, "trainer.counters.episodes"),
    ("trainer/counters/last_return", "high", "trainer.counters.last_return"),
    ("trainer/monitor/best_eval", "-150", "trainer.monitor.best_eval"),
    ("trainer/monitor/evals_since_best", 10**6, "trainer.monitor.evals_since_best"),
    ("trainer/diagnostics/map/ptr", 10**12, "trainer.diagnostics.map.ptr"),
    ("trainer/diagnostics/map/states", torch.zeros(5, 7), "trainer.diagnostics.map.states"),
    ("trainer/diagnostics/map/episode_rows", [[(10**9, 0)]],
     "trainer.diagnostics.map.episode_rows"),
    # Stride 0: a few bytes in the file stand for 10^10 rows (10^11 bytes for the RNG).
    ("buffer/data", torch.zeros(1, 9).expand(10**10, 9), "buffer.data"),
    ("trainer/rng/torch", torch.zeros(1, dtype=torch.uint8).expand(10**11),
     "trainer.rng.torch"),
    ("agent_generator", torch.zeros(7, dtype=torch.uint8), "agent_generator"),
    ("buffer/generator", torch.zeros(5056), "buffer.generator"),
    ("actor/action_scale", torch.tensor([float("nan")]), "actor.action_scale"),
    ("actor_target/action_bias", torch.tensor([5.0]), "actor_target.action_bias"),
]


@pytest.fixture
def run_copy(trained_run, tmp_path) -> Path:
    """The trained run's checkpoint folder, copied: where forged files go."""
    folder = tmp_path / "checkpoints" / "trained"
    shutil.copytree(trained_run.checkpoint_dir, folder)
    return folder


@pytest.mark.parametrize("command", ["resume", "eval"])
@pytest.mark.parametrize("key, value, field", FORGERIES,
                         ids=[f"{k}={v!r}"[:40] for k, v, _ in FORGERIES])
def test_a_forged_field_is_refused_in_one_line_and_nothing_changes(
        trained_run, tmp_path, run_copy, command, key, value, field):
    payload = load_checkpoint(run_copy / "checkpoint_step_200.pt")
    nested_set(payload, key, value)
    save_tensors(forged := run_copy / "checkpoint_step_200.pt", payload)
    before = files_of(tmp_path, trained_run.log_dir, trained_run.checkpoint_dir)
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(forged)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert f"is refused: its field '{field}' is " in result.output, result.output
    assert files_of(tmp_path, trained_run.log_dir, trained_run.checkpoint_dir) == before


def test_eval_refuses_an_actor_with_nan_weights(trained_run, run_copy):
    payload = load_checkpoint(run_copy / "best_model.pt")
    for net in ("actor", "actor_target"):
        payload[net]["net.0.weight"][0, 0] = float("nan")
    save_tensors(run_copy / "best_model.pt", payload)
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(run_copy / "best_model.pt")])
    assert result.exit_code == 2, result.output
    assert "the actor's weights contain NaN/inf" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_copied_checkpoint_is_not_resumed_into_its_run_unless_forked(trained_run, tmp_path):
    """The checkpoint records its run's folders; a copy elsewhere (to experiment with)
    must not continue that run's history."""
    copy = tmp_path / "experiments" / "mine.pt"
    copy.parent.mkdir()
    shutil.copy2(trained_run.checkpoint_dir / "checkpoint_step_200.pt", copy)
    before = files_of(trained_run.log_dir, trained_run.checkpoint_dir)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(copy)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "is a copy, not in the checkpoint folder of run 'trained'" in result.output
    assert "fork it with --run-name NEW" in result.output
    forked = CliRunner().invoke(cli, [
        "resume", "--checkpoint", str(copy), "--run-name", "fork",
        "--set", f"log_dir={tmp_path / 'logs'}", "--set", f"checkpoint_dir={tmp_path / 'ck'}"])
    assert forked.exit_code == 0, forked.output
    assert (tmp_path / "ck" / "fork" / "checkpoint_step_300.pt").is_file()
    assert files_of(trained_run.log_dir, trained_run.checkpoint_dir) == before
    assert sorted(p.name for p in copy.parent.iterdir()) == ["mine.pt"]


def test_resuming_when_the_log_folder_is_a_file_says_not_a_directory(trained_run, tmp_path):
    payload = load_checkpoint(trained_run.checkpoint_dir / "checkpoint_step_200.pt")
    folder = tmp_path / "checkpoints" / "trained"
    payload["log_dir"], payload["checkpoint_dir"] = str(tmp_path / "logs"), str(folder)
    save_tensors(checkpoint := folder / "checkpoint_step_200.pt", payload)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "trained").write_text("not a folder")
    before = files_of(tmp_path)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--set", f"log_dir={tmp_path / 'logs'}"])
    assert result.exit_code == 4, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert f"'{tmp_path / 'logs' / 'trained'}': it is not a directory" in result.output
    assert files_of(tmp_path) == before


def forged(trained_run, target: Path, **config) -> tuple[Path, dict]:
    """The trained run's checkpoint at step 200 saved as `target`, its config's keys
    replaced by `config` (dotted: notify.command)."""
    payload = load_checkpoint(trained_run.checkpoint_dir / "checkpoint_step_200.pt")
    for key, value in config.items():
        nested_set(payload["config"], key.replace(".", "/"), value)
    target.parent.mkdir(parents=True, exist_ok=True)
    save_tensors(target, payload)
    return target, payload


def test_a_checkpoint_s_notify_command_never_runs_when_it_is_resumed(
        trained_run, tmp_path, monkeypatch):
    """A downloaded checkpoint forked into a new run: its notify.command is not run, its
    webhook not called, and the resume says so (with the URL's token masked)."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "the_command_ran"
    checkpoint, _ = forged(
        trained_run, tmp_path / "downloads" / "model.pt",
        **{"notify.command": f"{sys.executable} -c \"open({str(marker)!r}, 'w')\"",
           "notify.url": "http://127.0.0.1:9/hook?token=SECRET"})
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--run-name", "mine"])
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    assert "not taken from the checkpoint" in result.output
    assert "notify.command" in result.output and "notify.url" in result.output
    assert "SECRET" not in result.output
    events = (tmp_path / "logs" / "mine" / "events.jsonl").read_text()
    assert "not taken from the checkpoint" in events and "SECRET" not in events
    given = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                     "--run-name", "mine2", "--set",
                                     f"notify.command={sys.executable} -c \"open("
                                     f"{str(marker)!r}, 'w')\""])
    assert given.exit_code == 0, given.output
    assert marker.exists()  # the user's own --set runs


def test_a_fork_writes_into_the_users_folders_not_the_ones_its_checkpoint_names(
        trained_run, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    checkpoint, _ = forged(trained_run, tmp_path / "downloads" / "model.pt",
                           log_dir=str(elsewhere / "logs"),
                           checkpoint_dir=str(elsewhere / "checkpoints"))
    (work := tmp_path / "work").mkdir()
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--run-name", "mine"])
    assert result.exit_code == 0, result.output
    assert not elsewhere.exists()
    assert (work / "logs" / "mine" / "metrics.jsonl").is_file()
    assert (work / "checkpoints" / "mine" / "checkpoint_step_300.pt").is_file()
    assert f"log_dir '{elsewhere / 'logs'}'" in result.output


def test_a_checkpoint_naming_another_run_s_log_folder_is_not_resumed_into_it(
        trained_run, tmp_path, monkeypatch):
    """A file whose run name and checkpoint folder fit where it lies, and whose log_dir
    names another run's log folder: continuing it in place would overwrite that run's
    config.yaml and status.json and move its later videos aside. Refused; that folder
    is not touched; the user's own --set log_dir is followed."""
    victim = tmp_path / "logs" / "victim"
    shutil.copytree(trained_run.log_dir, victim)
    for later in ("videos/pause_900.mp4", "heatmaps/heatmap_step_900.png"):
        (victim / later).parent.mkdir(exist_ok=True)
        (victim / later).write_bytes(b"the victim's")
    folder = tmp_path / "downloads" / "evil"
    checkpoint, payload = forged(trained_run, folder / "checkpoint_step_200.pt")
    payload.update(run_name="evil", checkpoint_dir=str(folder), log_dir=str(victim))
    save_tensors(checkpoint, payload)
    (work := tmp_path / "work").mkdir()
    monkeypatch.chdir(work)
    before = files_of(victim)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert f"names '{victim}' as its run's log folder, which does not name" in result.output
    assert files_of(victim) == before
    assert not (work / "logs").exists()
    given = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                     "--set", f"log_dir={work / 'mine'}"])
    assert given.exit_code == 0, given.output
    assert (work / "mine" / "evil" / "metrics.jsonl").is_file()
    assert files_of(victim) == before


@pytest.mark.parametrize("command", ["eval", "resume"])
def test_a_folder_given_as_the_checkpoint_lists_its_checkpoints(trained_run, command):
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(trained_run.checkpoint_dir)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "is a folder; give one of its checkpoints: best_model.pt" in result.output
    logs = CliRunner().invoke(cli, [command, "--checkpoint", str(trained_run.log_dir)])
    assert logs.exit_code == 2 and "is a run's log folder" in logs.output, logs.output


def test_a_part_state_that_does_not_load_is_one_line_not_a_traceback(trained_run, run_copy,
                                                                     tmp_path):
    """Beyond the fields checked at load: a part of the trainer's state that its owner
    cannot load (here the reward analysis's, emptied) is a one-line refusal."""
    payload = load_checkpoint(run_copy / "checkpoint_step_200.pt")
    payload["trainer"]["diagnostics"]["reward"] = {"unexpected": 1}
    save_tensors(forged := run_copy / "checkpoint_step_200.pt", payload)
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(forged), "--run-name", "f",
                                      "--set", f"log_dir={tmp_path / 'logs'}",
                                      "--set", f"checkpoint_dir={tmp_path / 'checkpoints'}"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"checkpoint '{forged}' does not fit this run: its diagnostics state" in result.output


def run_folders(tmp_path: Path) -> None:
    """A run `r1` (its log folder, its checkpoint folder with two checkpoints) and a run
    `r2` with one checkpoint; no file is a real checkpoint (none is read)."""
    (tmp_path / "logs" / "r1").mkdir(parents=True)
    (tmp_path / "logs" / "r1" / "config.yaml").write_text("checkpoint_dir: checkpoints\n")
    for name in ("r1/checkpoint_step_200.pt", "r1/best_model.pt", "r2/final_model.pt"):
        (tmp_path / "checkpoints" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "checkpoints" / name).write_bytes(b"")


@pytest.mark.parametrize("folder, says", [
    ("checkpoints/r1", "'checkpoints/r1' is a folder; give one of its checkpoints: "
     "best_model.pt, checkpoint_step_200.pt (e.g. checkpoints/r1/best_model.pt)"),
    ("logs/r1", "'logs/r1' is a run's log folder; its checkpoints are in 'checkpoints/r1': "
     "best_model.pt, checkpoint_step_200.pt (e.g. checkpoints/r1/best_model.pt)"),
    ("checkpoints", "'checkpoints' holds runs' checkpoint folders (r1/, r2/); give a "
     "checkpoint of one (e.g. checkpoints/r1/best_model.pt)"),
    ("logs", "'logs' is a folder with no checkpoint (*.pt) in it"),
])
@pytest.mark.parametrize("command", ["eval", "resume"])
def test_a_run_folder_given_as_the_checkpoint_points_to_its_checkpoint_files(
        tmp_path, monkeypatch, command, folder, says):
    monkeypatch.chdir(tmp_path)
    run_folders(tmp_path)
    before = files_of(tmp_path)
    result = CliRunner().invoke(cli, [command, "--checkpoint", folder])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [f"Error: {says}"]
    assert files_of(tmp_path) == before


def rewritten(source: Path, target: Path, change=lambda name, data: data,
              compression: int = zipfile.ZIP_STORED) -> Path:
    """`source`'s zip archive written again as `target`, each entry's bytes through
    `change`, with `compression`."""
    with zipfile.ZipFile(source) as archive:
        entries = [(e.filename, archive.read(e)) for e in archive.infolist()]
    with zipfile.ZipFile(target, "w", compression=compression) as archive:
        for name, data in entries:
            archive.writestr(name, change(name, data))
    return target


def with_flag(source: Path, target: Path, offset_in_header: int, value: bytes) -> Path:
    """`source` with bytes of the first central directory header replaced."""
    data = bytearray(source.read_bytes())
    at = data.find(b"PK\x01\x02") + offset_in_header
    data[at:at + len(value)] = value
    target.write_bytes(bytes(data))
    return target


def nested(depth: int) -> dict:
    top = node = {}
    for _ in range(depth):
        node["x"] = {}
        node = node["x"]
    return top


def forged_archive(kind: str, source: Path, target: Path) -> Path:
    if kind == "compressed":  # a few KB that torch unpacks to whatever the entry says
        padding = lambda name, data: data + bytes(10**7) if name.endswith("/version") else data  # noqa: E731
        return rewritten(source, target, padding, zipfile.ZIP_DEFLATED)
    if kind == "compression_method_flipped":
        return with_flag(source, target, 10, b"\x63\x00")  # method 99
    if kind == "encryption_bit_flipped":
        return with_flag(source, target, 8, b"\x01\x08")
    if kind == "record_shorter_than_its_storage":
        payload = load_checkpoint(source)
        payload["trainer"]["probe"] = torch.arange(91.0).reshape(7, 13)
        save_tensors(target, payload)
        with zipfile.ZipFile(target) as archive:
            record = next(e.filename for e in archive.infolist()
                          if e.file_size == 91 * 4 and "/data/" in e.filename)
        return rewritten(target, target.with_suffix(".x"),
                         lambda name, data: data[:16] if name == record else data)
    if kind == "tensor_past_its_storage":
        payload = load_checkpoint(source)
        payload["trainer"]["probe"] = torch.arange(91.0).reshape(7, 13)
        save_tensors(target, payload)
        size, larger = b"K\x07K\x0d\x86", b"K\x08K\x0d\x86"
        return rewritten(target, target.with_suffix(".x"), lambda name, data: (
            data.replace(size, larger) if name.endswith("data.pkl") else data))
    assert kind == "nested_5000_deep"
    payload = load_checkpoint(source)
    payload["trainer"]["deep"] = nested(5000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)  # torch.save's pickler recurses
    try:
        save_tensors(target, payload)
    finally:
        sys.setrecursionlimit(limit)
    return target


ARCHIVES = {
    "compressed": "is compressed (torch.save writes none",
    "compression_method_flipped": "is compressed (torch.save writes none",
    "encryption_bit_flipped": "is encrypted",
    "record_shorter_than_its_storage": "claims 91 elements of 4 bytes, but its record "
                                       "holds 16 bytes",
    "tensor_past_its_storage": "a tensor of shape [8, 13] reaches element 103 of storage",
    "nested_5000_deep": "its data is nested deeper than 64 levels",
}


@pytest.mark.parametrize("command", ["resume", "eval"])
@pytest.mark.parametrize("kind", list(ARCHIVES))
def test_an_archive_that_would_cost_more_than_its_bytes_is_refused_before_loading(
        trained_run, tmp_path, run_copy, command, kind):
    """Memory is bounded before torch allocates: a compressed entry (54 MB that unpack
    to 12 GiB were OOM-killed after 73 s), a storage claiming more than its record, a
    tensor past its storage, data 5000 deep (a RecursionError); a flipped compression
    or encryption flag was a NotImplementedError or RuntimeError traceback."""
    forged = forged_archive(kind, run_copy / "checkpoint_step_200.pt",
                            tmp_path / "forged.pt")
    forged.replace(target := run_copy / "checkpoint_step_200.pt")
    before = files_of(trained_run.log_dir, trained_run.checkpoint_dir, run_copy)
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(target)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert ARCHIVES[kind] in result.output, result.output
    assert files_of(trained_run.log_dir, trained_run.checkpoint_dir, run_copy) == before


@pytest.mark.parametrize("names_run", [False, True])
@pytest.mark.parametrize("command", ["resume", "eval"])
def test_an_sb3_model_names_a_run_only_where_there_is_one(tmp_path, monkeypatch, command,
                                                          names_run):
    """A model the user saved into a folder `sb3` was said to be run 'sb3''s, which did
    not exist."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "checkpoints" / "sb3"
    folder.mkdir(parents=True)
    if names_run:  # an RltrainCallback run's log folder
        (tmp_path / "logs" / "sb3").mkdir(parents=True)
        (tmp_path / "logs" / "sb3" / "status.json").write_text("{}")
    name = "model.zip"
    with zipfile.ZipFile(folder / name, "w") as archive:
        archive.writestr("_stable_baselines3_version", "2.3.0")
        archive.writestr("data", "{}")
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(folder / name)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "is a Stable-Baselines3 model, not an rltrain checkpoint" in result.output
    assert ("RltrainCallback(run_name=\"sb3\")" in result.output) == names_run
    assert ("rltrain status sb3" in result.output) == names_run
