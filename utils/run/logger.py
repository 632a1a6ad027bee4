"""What a run records: TensorBoard events and append-only JSON Lines files.

TensorBoard tags use Stable-Baselines3's groups and names: `eval/` (evaluations),
`rollout/` (episodes), `time/` (throughput), `train/` (losses, noise, updates), plus
`flow1/` and `gradients/` from the diagnostics.
`metrics.jsonl` gets one line per episode and per evaluation, `events.jsonl` one line
per finding, pause or resume, `flow1.jsonl` the diagnostics' statistics; all are only
ever appended to, never re-read or re-written by the training loop (a log re-read and
re-written every episode would cost time quadratic in run length).
On resume, TensorBoard events after the checkpoint's step are purged and the JSON
Lines files get a `resume` line: readers drop earlier lines past that step.
A metrics.jsonl line that could not be written (a full disk: the run stops) is kept in
the checkpoint written as it stops, and the resumed run writes it first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.io.checkpoint import to_json
from rltrain.utils.io.run_files import open_run_file, write_run_file
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.notify_target import mask_config_dict, mask_text

# Scalar records are handed to TensorBoard's writer thread together, at most this many
# or this old: its thread then wakes once per batch, not once per record (each wake
# costs the loop's thread about as much again as the record).
PENDING_RECORDS = 64
PENDING_SECONDS = 1.0


class RunLogger:
    """Writes one run's TensorBoard events, metrics.jsonl and events.jsonl."""

    def __init__(self, paths: RunPaths, resume_step: int | None = None) -> None:
        self.paths = paths
        self.on_event: Callable[[int, dict[str, Any]], None] | None = None  # after each line
        # purge_step drops events a crashed/paused process wrote after the checkpoint.
        purge = resume_step + 1 if resume_step is not None else None
        from torch.utils.tensorboard import SummaryWriter  # slow to import: only to write

        self.writer = SummaryWriter(log_dir=str(paths.log_dir), purge_step=purge,
                                    flush_secs=30, max_queue=2 * PENDING_RECORDS)
        self._pending: list[tuple[Any, int, float]] = []  # (summary, step, wall time)
        self._metrics = open_run_file(paths.metrics_file, line_buffered=True)
        self._events = open_run_file(paths.events_file, line_buffered=True)
        self._diagnostics = open_run_file(paths.diagnostics_file, line_buffered=True)
        self.unwritten: list[str] = []  # metrics.jsonl lines a failed write left out

    def write_run_files(self, config: TrainConfig, argv: list[str] | None = None) -> None:
        """config.yaml (the resolved config), command.txt, and the config in TensorBoard."""
        plain = mask_config_dict(config_to_dict(config))  # a webhook's token stays out
        write_run_file(self.paths.config_file, yaml.safe_dump(plain, sort_keys=False))
        command = mask_text(" ".join(argv if argv is not None else sys.argv))
        with open_run_file(self.paths.command_file) as f:
            f.write(command + "\n")
        text = "\n".join(f"    {line}" for line in yaml.safe_dump(plain, sort_keys=False)
                         .splitlines())
        self.writer.add_text("config", text, 0)
        flat = {k: (v if isinstance(v, (int, float, str, bool)) else str(v))
                for k, v in _flatten(plain).items()}
        from torch.utils.tensorboard.summary import hparams

        for summary in hparams(flat, {"eval/mean_reward": float("nan")}):
            self.writer.file_writer.add_summary(summary)

    def scalars(self, env_steps: int, values: dict[str, float]) -> None:
        """One TensorBoard event holding every value (what `add_scalar` of each would
        write, as one record: this runs at every episode's end), handed to the writer
        with the records pending (`PENDING_RECORDS`) and stamped with the time now."""
        if not values or self.writer.file_writer is None:  # none, or the run's end
            return
        from tensorboard.compat.proto.summary_pb2 import Summary

        now = time.time()
        self._pending.append((Summary(value=[
            Summary.Value(tag=tag, simple_value=float(value))
            for tag, value in values.items()]), env_steps, now))
        if len(self._pending) >= PENDING_RECORDS:
            self._hand_over()
        else:
            self.hand_over_due(now)

    def hand_over_due(self, now: float | None = None) -> None:
        """The pending scalar records to the writer where the oldest has waited
        `PENDING_SECONDS` (at `now`, default the time now): the loops call this after
        each step, so that a slow run's records reach TensorBoard without waiting for
        the next record."""
        if self._pending and (time.time() if now is None else now) - self._pending[0][2] \
                >= PENDING_SECONDS:
            self._hand_over()

    def _hand_over(self) -> None:
        """The pending scalar records to the writer, before any other record."""
        pending, self._pending = self._pending, []
        file_writer = self.writer.file_writer
        if file_writer is None:
            return
        for summary, env_steps, wall_time in pending:
            file_writer.add_summary(summary, env_steps, wall_time)

    def text(self, tag: str, message: str, env_steps: int) -> None:
        self._hand_over()
        self.writer.add_text(tag, message, env_steps)

    def metric(self, kind: str, env_steps: int, **fields: Any) -> None:
        """Append one line to metrics.jsonl."""
        line = {"kind": kind, "env_steps": env_steps, "time": round(time.time(), 3), **fields}
        text = to_json(line) + "\n"
        try:
            self._metrics.write(text)
        except OSError:  # the run stops; the checkpoint it writes keeps the line
            self.unwritten.append(text)
            raise

    def write_unwritten(self) -> None:
        """Write the lines the stopped run could not; one that is there already (this
        checkpoint resumed before, or the line written after all when the file was
        closed) is not written again. Read once, on resume only."""
        if not self.unwritten:
            return
        with open(self.paths.metrics_file, "rb") as f:
            written = f.read()
        if written and not written.endswith(b"\n"):  # a line cut short by the full disk
            self._metrics.write("\n")
        present = set(written.decode("utf-8", errors="replace").splitlines(keepends=True))
        while self.unwritten:
            if self.unwritten[0] not in present:
                self._metrics.write(self.unwritten[0])
            self.unwritten.pop(0)

    def event(self, env_steps: int, **fields: Any) -> None:
        """Append one line to events.jsonl (warnings, pauses, resumes)."""
        self._events.write(event_line(env_steps, **fields))
        if self.on_event is not None:
            self.on_event(env_steps, fields)

    def diagnostic(self, kind: str, env_steps: int, **fields: Any) -> None:
        """Append one line to flow1.jsonl (the flow-1 diagnostics' statistics)."""
        line = {"kind": kind, "env_steps": env_steps, **fields}
        self._diagnostics.write(to_json(line) + "\n")

    def resume(self, env_steps: int, message: str, **fields: Any) -> None:
        """Mark where a resumed run continues, in metrics.jsonl, events.jsonl and
        flow1.jsonl: `read_jsonl` drops older lines past the mark. First, the lines the
        stopped run could not write."""
        self.write_unwritten()
        self.metric("resume", env_steps, **fields)
        self.diagnostic("resume", env_steps)
        self.event(env_steps, rule="resume", value=fields.get("changes"), threshold=None,
                   action="resume", message=message)

    def state_dict(self) -> dict[str, Any]:
        return {"unwritten": list(self.unwritten)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        lines = list(state["unwritten"])
        if not all(isinstance(line, str) and line.endswith("\n") and line.count("\n") == 1
                   for line in lines):
            raise ValueError("unwritten metrics lines must be single lines of text")
        self.unwritten = lines

    def histogram(self, tag: str, values: Any, env_steps: int) -> None:
        self._hand_over()
        self.writer.add_histogram(tag, values, env_steps)

    def image(self, tag: str, png: bytes, height: int, width: int, env_steps: int) -> None:
        """A PNG-encoded RGB image of `height` x `width` pixels. Handed over encoded:
        SummaryWriter.add_image converts an image to float32 and encodes it again, which
        for a four-panel heatmap raised a run's peak memory by about 70 MiB."""
        if self.writer.file_writer is None:  # the run's end: never reopened
            return
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._hand_over()
        picture = Summary.Image(height=height, width=width, colorspace=3,
                                encoded_image_string=png)
        # the record add_image writes, to the same event file
        self.writer.file_writer.add_summary(
            Summary(value=[Summary.Value(tag=tag, image=picture)]), env_steps)

    def flush(self) -> None:
        self._hand_over()
        self.writer.flush()

    def close(self) -> None:
        self._hand_over()
        self.writer.close()
        self._metrics.close()
        self._events.close()
        self._diagnostics.close()


def event_line(env_steps: int | None, **fields: Any) -> str:
    """One line of events.jsonl."""
    return to_json({"env_steps": env_steps, "time": round(time.time(), 3), **fields}) + "\n"


def append_event(path: Path, env_steps: int | None, **fields: Any) -> None:
    """Append one line to an events.jsonl that no RunLogger has open (a run that waits
    after its pause, a notification that failed after the run ended)."""
    with open_run_file(path) as f:
        f.write(event_line(env_steps, **fields))


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat
