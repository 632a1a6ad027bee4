"""What a webhook that hangs or refuses costs a run: wall time of the same tiny training
(in this process, through the CLI) without notify, with a healthy webhook, one that
hangs, and one where nothing listens; `notify.timeout` 1 s.

Each run sends a warning at every update (`q_explosion` with a tiny threshold, warned
every step) and its finish, so that the queue is never empty. The claim measured:
training is slowed by at most the timeout, which the end of the run may wait.

    python benchmarks/notify_slowdown.py [--steps 1500] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import yaml
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from webhook import Webhook, refused_url  # noqa: E402

from rltrain.scripts.cli import cli  # noqa: E402
from rltrain.utils.run.notify import Notifier  # noqa: E402

BLOCKED = {"send": 0.0, "sends": 0, "close": 0.0}  # seconds the training thread spent


def timed(name: str, method):
    def wrapper(self, *args):
        started = time.perf_counter()
        try:
            return method(self, *args)
        finally:
            BLOCKED[name] += time.perf_counter() - started
            BLOCKED["sends"] += name == "send"
    return wrapper


Notifier.send = timed("send", Notifier.send)
Notifier.close = timed("close", Notifier.close)

TIMEOUT = 1.0


def one_run(folder: Path, steps: int, url: str | None) -> float:
    raw = {"env_name": "Pendulum-v1", "seed": 0, "device": "cpu", "max_timesteps": steps,
           "batch_size": 64, "replay_buffer_size": 10_000, "learning_starts": 200,
           "hidden_sizes": [64, 64], "eval_freq": 10_000, "checkpoint_freq": 10_000,
           "torch_threads": 1, "log_dir": str(folder / "logs"),
           "checkpoint_dir": str(folder / "checkpoints"),
           "diagnostics": {"enabled": False},
           "monitor": {"q_explosion": {"threshold": 1e-9, "action": "warn"}, "warn_every": 1}}
    if url is not None:
        raw["notify"] = {"url": url, "on": ["warning", "finish"], "timeout": TIMEOUT,
                         "retries": 2, "backoff": 0.5}
    config = folder / "c.yaml"
    folder.mkdir(parents=True)
    config.write_text(yaml.safe_dump(raw))
    BLOCKED.update(send=0.0, sends=0, close=0.0)
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    took = time.perf_counter() - started
    print(f"  {url or 'none'}: {took:.2f} s; in send {BLOCKED['send'] * 1e3:.1f} ms for "
          f"{BLOCKED['sends']} events, in close {BLOCKED['close']:.2f} s")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        os.environ.pop(name, None)
    times: dict[str, list[float]] = {"none": [], "ok": [], "hang": [], "refuse": []}
    with tempfile.TemporaryDirectory() as tmp, Webhook() as ok, Webhook("hang") as hang:
        urls = {"none": None, "ok": ok.url(), "hang": hang.url(), "refuse": refused_url()}
        for round_ in range(args.rounds):  # alternating: the machine's speed drifts
            for kind, url in urls.items():
                times[kind].append(one_run(Path(tmp) / f"{kind}{round_}", args.steps, url))
    base = median(times["none"])
    print(f"{args.steps} env steps, notify.timeout {TIMEOUT:g} s, median of {args.rounds}")
    for kind, values in times.items():
        print(f"  {kind:7s} {median(values):6.2f} s  ({median(values) - base:+.2f} s)")


if __name__ == "__main__":
    main()
