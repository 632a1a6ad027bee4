"""Deliver a run's events (pause, finish, crash, warning) to a webhook and a command.

Delivery never holds training up and never ends it: `send` only puts the event on a
queue; one daemon thread POSTs it (urllib, `notify.timeout` per try) and runs the
command (the event as JSON on its stdin), retrying `notify.retries` times with a
doubling backoff. A delivery that fails for good is a `notify` warning in events.jsonl
(and one line on stderr). When the process ends, `close` waits at most
`notify.timeout` seconds for what is still queued: from then on nothing is retried,
and what is left undelivered is recorded as failed.
"""

from __future__ import annotations

import base64
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote

from rltrain.utils.config.schema import NotifyConfig
from rltrain.utils.io.checkpoint import to_json
from rltrain.utils.run.logger import append_event
from rltrain.utils.run.notify_target import command_argv, mask_text, mask_url, split_url_credentials
from rltrain.utils.version import __version__

QUEUE_SIZE = 100  # events waiting for delivery; more are dropped (and recorded)


class DeliveryError(Exception):
    """One try at one target failed; the message says why (no secrets in it)."""


def post_json(url: str, body: bytes, timeout: float) -> None:
    """POST `body` to `url`; a reply other than 2xx is a DeliveryError."""
    bare, userinfo = split_url_credentials(url)
    headers = {"Content-Type": "application/json", "User-Agent": f"rltrain/{__version__}"}
    if userinfo is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            unquote(userinfo).encode()).decode()
    request = urllib.request.Request(bare, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 (http(s) only, checked at load)
            reply.read(1024)
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DeliveryError(mask_text(str(exc.reason))) from None
    except (TimeoutError, OSError) as exc:  # a reply that stops halfway
        raise DeliveryError(mask_text(str(exc) or type(exc).__name__)) from None


def run_command(command: str, body: bytes, timeout: float) -> None:
    """Run `command` with `body` on its stdin; a non-zero exit is a DeliveryError. It runs
    in a process group of its own, ended with it: a child it left in the background (which
    would also hold its output open) is killed, at its end or at the timeout."""
    try:
        proc = subprocess.Popen(command_argv(command), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=os.name == "posix")
    except OSError as exc:
        raise DeliveryError(exc.strerror or str(exc)) from None
    try:
        _, stderr = proc.communicate(body, timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_group(proc)
        proc.communicate()
        raise DeliveryError(f"did not end within {timeout:g} s (killed)") from None
    finally:
        _end_group(proc)
    if proc.returncode != 0:
        said = stderr.decode(errors="replace").strip().splitlines()
        raise DeliveryError(f"exited with code {proc.returncode}"
                            + (f": {said[-1]}" if said else ""))


def _end_group(proc: subprocess.Popen) -> None:
    """Kill `proc` and what is left of its process group (POSIX; elsewhere `proc` only)."""
    with contextlib.suppress(OSError):
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()


Deliver = Callable[[bytes], None]


class Notifier:
    """Sends the selected events of one run to its notify targets, in a daemon thread."""

    def __init__(self, config: NotifyConfig, events_file: Path | None) -> None:
        self.config, self.events_file = config, events_file
        self.targets: list[tuple[str, Deliver]] = []
        if config.url is not None:
            url = config.url
            self.targets.append((mask_url(url), lambda body: post_json(url, body,
                                                                       config.timeout)))
        if config.command is not None:
            command = config.command
            self.targets.append((f"command {command_argv(command)[0]}",
                                 lambda body: run_command(command, body, config.timeout)))
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(QUEUE_SIZE)
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._current: dict[str, Any] | None = None  # the event being delivered
        self._dropped = 0  # events dropped in a row, the queue being full

    def wants(self, kind: str) -> bool:
        return bool(self.targets) and kind in self.config.on

    def send(self, event: dict[str, Any]) -> None:
        """Queue `event` (a dict with at least "event" and "env_steps") if it is selected."""
        if not self.wants(event["event"]) or self._closing.is_set():
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="rltrain-notify",
                                            daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(event)
        except queue.Full:  # recorded once per run of drops, not per event
            self._dropped += 1
            if self._dropped == 1:
                self._record(event, self._names(), f"{QUEUE_SIZE} events were already "
                             "waiting (more dropped are counted when the process ends)")
            return
        if self._dropped > 1:
            self._note(event.get("env_steps"), "dropped", f"{self._dropped - 1} more events "
                       f"were not sent to {self._names()}: {QUEUE_SIZE} were already waiting")
        self._dropped = 0

    def _names(self) -> str:
        return ", ".join(name for name, _ in self.targets)

    def close(self) -> None:
        """Wait at most `timeout` seconds for the queued events, then give up on the rest."""
        self._closing.set()
        if self._thread is None:
            return
        deadline = time.monotonic() + self.config.timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)
        left = []
        with self._lock:
            if self._current is not None:  # still being sent: recorded here, not there
                left.append(self._current)
                self._current = None
            with contextlib.suppress(queue.Empty):
                while True:
                    left.append(self._queue.get_nowait())
        targets = self._names()
        if self._dropped > 1:
            self._note(None, "dropped", f"{self._dropped - 1} more events were not sent to "
                       f"{targets}: {QUEUE_SIZE} were already waiting")
        for event in left:
            self._record(event, targets, "the process ended before it was delivered",
                         quiet=len(left) > 1)
        if len(left) > 1:
            print(f"warning: {len(left)} events were not delivered to {targets}: the process "
                  "ended before they were (see events.jsonl)", file=sys.stderr)

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            with self._lock:
                self._current = event
            body = to_json(event).encode()
            failed = [(name, problem) for name, deliver in self.targets
                      if (problem := self._deliver(deliver, body)) is not None]
            with self._lock:
                given_up = self._current is None  # close() has recorded it already
                self._current = None
            if not given_up:
                for name, problem in failed:
                    self._record(event, name, problem)
            self._queue.task_done()

    def _deliver(self, deliver: Deliver, body: bytes) -> str | None:
        """Try, and retry with a doubling backoff (not once the process ends); None when
        delivered, else why not."""
        tries = self.config.retries + 1
        for attempt in range(tries):
            try:
                deliver(body)
                return None
            except DeliveryError as exc:
                problem = str(exc)
            except Exception as exc:  # noqa: BLE001 (a bug here must not end training)
                problem = f"{type(exc).__name__}: {mask_text(str(exc))}"
            if attempt + 1 == tries or self._closing.wait(self.config.backoff * 2 ** attempt):
                return f"{problem} (tries: {attempt + 1})"
        raise AssertionError("unreachable")

    def _record(self, event: dict[str, Any], target: str, problem: str,
                quiet: bool = False) -> None:
        message = f"the {event['event']} event was not delivered to {target}: {problem}"
        self._note(event.get("env_steps"), event["event"], message, quiet)

    def _note(self, env_steps: int | None, kind: str, message: str, quiet: bool = False) -> None:
        """A failed delivery: a warning in events.jsonl and (unless `quiet`) on stderr,
        never an exception."""
        if not quiet:
            with contextlib.suppress(Exception):
                print(f"warning: {message}", file=sys.stderr)
        if self.events_file is None:
            return
        with contextlib.suppress(OSError, ValueError):
            append_event(self.events_file, env_steps, rule="notify", value=kind,
                         threshold=None, action="warn", message=message)
