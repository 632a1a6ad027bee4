"""RunLogger's TensorBoard scalars (utils/run/logger.py): handed to the writer's thread in
batches, each record with the wall time of its own call, none lost at `flush` or `close`."""

from __future__ import annotations

from types import SimpleNamespace

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.utils.run import logger as run_logger
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.logger import PENDING_RECORDS, RunLogger


def scalars_in(log_dir) -> dict[str, list]:
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


def logger(tmp_path) -> RunLogger:
    paths = RunPaths("r", tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r")
    paths.log_dir.mkdir(parents=True)
    return RunLogger(paths)


def test_each_record_keeps_the_time_of_its_call_and_close_writes_the_pending(
        tmp_path, monkeypatch):
    """The logger's clock is set by hand (no real time passes): each record carries the
    time of its own `scalars` call, not the later time it was handed over at."""
    log = logger(tmp_path)
    clock = iter([1000.0, 1000.25, 1000.5])
    monkeypatch.setattr(run_logger, "time", SimpleNamespace(time=lambda: next(clock)))
    for step in (1, 2, 3):
        log.scalars(step, {"charts/episodic_return": float(step), "rollout/episode_length": 5.0})
    monkeypatch.undo()  # the hand-over at close, and the writer's own clock: real time
    log.close()
    found = scalars_in(tmp_path / "logs" / "r")
    returns = found["charts/episodic_return"]
    assert [e.step for e in returns] == [1, 2, 3]
    assert [e.value for e in returns] == [1.0, 2.0, 3.0]
    assert [e.step for e in found["rollout/episode_length"]] == [1, 2, 3]
    assert [e.wall_time for e in returns] == [1000.0, 1000.25, 1000.5]


def test_flush_writes_the_pending_records_and_a_full_batch_goes_without_it(tmp_path):
    log = logger(tmp_path)
    try:
        log.scalars(1, {"x": 1.0})
        log.flush()
        assert [e.step for e in scalars_in(tmp_path / "logs" / "r")["x"]] == [1]
        for step in range(2, 2 + PENDING_RECORDS):  # a batch's worth: handed over
            log.scalars(step, {"x": float(step)})
        log.writer.flush()  # the writer's own flush: only what it was handed
        steps = [e.step for e in scalars_in(tmp_path / "logs" / "r")["x"]]
        assert steps == list(range(1, 2 + PENDING_RECORDS))
    finally:
        log.close()


def test_a_record_left_waiting_is_handed_over_once_it_is_due(tmp_path, monkeypatch):
    """A slow run's last record reaches the writer at the loop's next `hand_over_due`
    once it has waited PENDING_SECONDS, with no later record to carry it."""
    log = logger(tmp_path)
    now = [1000.0]
    monkeypatch.setattr(run_logger, "time", SimpleNamespace(time=lambda: now[0]))
    try:
        log.scalars(1, {"x": 1.0})
        now[0] += run_logger.PENDING_SECONDS / 2
        log.hand_over_due()  # not yet due: still pending
        log.writer.flush()
        assert "x" not in scalars_in(tmp_path / "logs" / "r")
        now[0] += run_logger.PENDING_SECONDS / 2
        log.hand_over_due()
        log.writer.flush()
        assert [e.step for e in scalars_in(tmp_path / "logs" / "r")["x"]] == [1]
    finally:
        monkeypatch.undo()
        log.close()
