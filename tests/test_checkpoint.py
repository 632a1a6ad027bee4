"""Checkpoint files: contents, weights_only loading, atomic writes, refusal of bad files."""

from __future__ import annotations

import os
import pickle
import zipfile

import pytest
import torch

from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.errors import CheckpointError, OutputError
from rltrain.utils.io.checkpoint import (
    REQUIRED_KEYS,
    atomic_write,
    load_checkpoint,
    periodic_checkpoints,
    prune_periodic,
    remove_stale_temp_files,
    save_checkpoint,
)
from rltrain.utils.run.folders import create_run

from conftest import DEVICE, tiny_config


def tensors(value):
    """Every tensor in nested dicts, lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors(item)


@pytest.fixture
def finished_run(tmp_path):
    config = tiny_config(tmp_path, run_name="run")
    trainer = Trainer(config, DEVICE, interactive=False)
    paths = create_run(config)
    trainer.run(paths)
    return trainer, paths


def test_training_writes_periodic_best_and_final_checkpoints(finished_run):
    trainer, paths = finished_run
    steps = [s for s, _ in periodic_checkpoints(paths.checkpoint_dir)]
    assert steps == [100, 200, 300]  # every checkpoint_freq and at the end
    assert paths.best_model.exists()


def test_checkpoint_is_a_plain_dict_that_weights_only_loads(finished_run):
    trainer, paths = finished_run
    data = torch.load(paths.periodic_checkpoint(300), weights_only=True)
    assert set(REQUIRED_KEYS) <= set(data)
    assert data["total_steps"] == 300 and data["config"]["seed"] == trainer.config.seed
    for net in ("actor", "critic", "actor_target", "critic_target"):
        saved = data[net]
        live = getattr(trainer.state.agent, net).state_dict()
        assert all(torch.equal(saved[k], live[k].cpu()) for k in live)
    # Every tensor is saved on the CPU (from a CUDA run too, RLTRAIN_TEST_DEVICE=cuda): the
    # plain torch.load above restores each where it was saved, which needs no CUDA then.
    assert {t.device.type for t in tensors(data)} == {"cpu"}
    assert data["buffer"]["data"].shape[0] == 300  # only the filled part
    # Pendulum's time limit truncates (at every 200th step) but never terminates.
    truncated = data["buffer"]["truncated"]
    assert truncated.nonzero().flatten().tolist() == [199]
    assert not data["buffer"]["data"][:, -1].any()  # the terminated column
    best = load_checkpoint(paths.best_model)
    assert best["kind"] == "best" and "buffer" not in best


def test_retention_keeps_the_newest_periodic_checkpoints(tmp_path):
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path / f"checkpoint_step_{step}.pt",
                        {k: 0 for k in REQUIRED_KEYS})
    (tmp_path / "best_model.pt").write_bytes(b"x")
    (tmp_path / "paused_at_step_5.pt").write_bytes(b"x")
    prune_periodic(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best_model.pt", "checkpoint_step_30.pt", "checkpoint_step_40.pt",
        "paused_at_step_5.pt"]


def test_a_failed_write_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {k: 1 for k in REQUIRED_KEYS})
    before = path.read_bytes()

    def crash(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OutputError, match=f"cannot write '{path}': disk full"):
        atomic_write(path, crash)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temp file left


def test_temp_files_of_dead_writers_are_removed(tmp_path):
    dead = tmp_path / ".checkpoint_step_5.pt.tmp-999999999"
    alive = tmp_path / f".checkpoint_step_6.pt.tmp-{os.getpid()}"
    for path in (dead, alive):
        path.write_bytes(b"partial")
    assert remove_stale_temp_files(tmp_path) == [dead]
    assert alive.exists() and not dead.exists()


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_malicious_pickle_is_refused_without_running(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    torch.save({"format": "rltrain-checkpoint", "payload": Exploit()}, path)
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(path)
    raw = tmp_path / "evil.pkl"
    raw.write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(CheckpointError):
        load_checkpoint(raw)
    assert not (tmp_path / "PWNED").exists()


def test_truncated_corrupt_missing_and_foreign_files(finished_run, tmp_path):
    _, paths = finished_run
    good = paths.periodic_checkpoint(300).read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="not an rltrain checkpoint"):
        load_checkpoint(garbage)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nope.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(CheckpointError, match="not an rltrain checkpoint"):
        load_checkpoint(foreign)
    assert zipfile.is_zipfile(paths.periodic_checkpoint(300))  # the original is untouched


def test_a_checkpoint_damaged_inside_its_tensor_data_is_refused(finished_run, tmp_path):
    """torch.load does not check the archive's checksums: damaged weights would load."""
    _, paths = finished_run
    data = bytearray(paths.periodic_checkpoint(300).read_bytes())
    with zipfile.ZipFile(paths.periodic_checkpoint(300)) as archive:
        tensor = max((i for i in archive.infolist() if "/data/" in i.filename),
                     key=lambda info: info.file_size)  # a tensor's bytes, stored as they are
    header = tensor.header_offset  # local header: 30 bytes, then the name and extra field
    start = header + 30 + int.from_bytes(data[header + 26:header + 28], "little") + \
        int.from_bytes(data[header + 28:header + 30], "little")
    data[start:start + 64] = bytes(64)
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(data))
    torch.load(damaged, weights_only=True)  # what the check is for: torch alone loads it
    with pytest.raises(CheckpointError, match="fails its checksum"):
        load_checkpoint(damaged)
    text = tmp_path / "notes.pt"
    text.write_text("some notes, not a checkpoint")
    with pytest.raises(CheckpointError, match="not an rltrain checkpoint"):
        load_checkpoint(text)


def test_a_different_action_size_is_named_as_such():
    from rltrain.utils.io.checkpoint import check_spaces

    payload = {"spaces": {"obs_dim": 3, "action_low": [-1.0], "action_high": [1.0]}}
    env = {"env_name": "E", "obs_dim": 3, "action_low": [-1.0, -1.0],
           "action_high": [1.0, 1.0]}
    with pytest.raises(CheckpointError, match="action_dim is 1 in the checkpoint but 2 in"):
        check_spaces(payload, env, "c.pt")
    check_spaces(payload, {**env, "action_low": [-1.0], "action_high": [1.0]}, "c.pt")
