"""A webhook for tests: an HTTP server on 127.0.0.1 in a thread that records what it gets.

`mode`: "ok" answers 200, "hang" accepts and never answers (until the server closes),
"fail:N" answers 500 to the first N requests, then 200. Only loopback, each request read
whole and bounded, the server shut down by the context manager.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.received: list[dict[str, Any]] = []  # {"path", "headers", "body"}
        self.got_one = threading.Event()
        self._release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = min(int(self.headers.get("Content-Length", 0)), 1_000_000)
                body = json.loads(self.rfile.read(length))
                hook.received.append({"path": self.path, "headers": dict(self.headers),
                                      "body": body})
                hook.got_one.set()
                if hook.mode == "hang":
                    hook._release.wait(30)
                    return
                failing = hook.mode.startswith("fail:") and \
                    len(hook.received) <= int(hook.mode.split(":")[1])
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def events(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.received]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The events once `count` have arrived (delivery runs on the sender's own thread,
        so an event sent just before a status change may land just after it)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.events()

    def __enter__(self) -> Webhook:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def refused_url() -> str:
    """A loopback URL where nothing listens: the connection is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
