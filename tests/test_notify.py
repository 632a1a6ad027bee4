"""notify: events to a webhook and a command, delivered off the training thread, never
holding training up for longer than the timeout; tokens in URLs never written."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from click.testing import CliRunner
from webhook import Webhook, refused_url

from rltrain.scripts.cli import cli
from rltrain.utils.config.schema import NotifyConfig
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.run.notify import Notifier
from rltrain.utils.run.notify_target import mask_text, mask_url

from conftest import tiny_dict

EVENT = {"run": "r", "event": "pause", "env_steps": 7, "reason": "because"}


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """Loopback requests go straight to the test's server, whatever the machine's proxy."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("url, shown", [
    ("https://user:s3cret@hooks.example/p?token=s3cret&x=1",
     "https://***@hooks.example/p?token=***&x=***"),
    ("https://s3cret@hooks.example:8443/p", "https://***@hooks.example:8443/p"),
    ("http://hooks.example/p#s3cret", "http://hooks.example/p#***"),
    ("http://hooks.example/plain", "http://hooks.example/plain"),
])
def test_a_urls_userinfo_query_values_and_fragment_are_masked(url, shown):
    assert mask_url(url) == shown
    assert mask_text(f"--set notify.url={url} --run-name r") == \
        f"--set notify.url={shown} --run-name r"


def notifier(tmp_path: Path, **fields) -> Notifier:
    return Notifier(NotifyConfig(**fields), tmp_path / "events.jsonl")


def test_an_event_is_posted_as_json_with_basic_auth_from_the_userinfo(tmp_path):
    with Webhook() as hook:
        url = hook.url("/hook?token=s3cret").replace("http://", "http://me:pw@")
        sender = notifier(tmp_path, url=url, timeout=2)
        sender.send(EVENT)
        sender.send({**EVENT, "event": "warning"})  # not in notify.on by default
        sender.close()
    [request] = hook.received
    assert request["body"] == EVENT and request["path"] == "/hook?token=s3cret"
    assert request["headers"]["Authorization"] == "Basic bWU6cHc="  # me:pw
    assert request["headers"]["Content-Type"] == "application/json"
    assert not (tmp_path / "events.jsonl").exists()  # nothing failed


def test_a_failing_server_is_retried_with_backoff(tmp_path):
    with Webhook("fail:2") as hook:
        sender = notifier(tmp_path, url=hook.url(), retries=2, backoff=0.05, timeout=2)
        sender.send(EVENT)
        deadline = time.monotonic() + 5
        while len(hook.received) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        sender.close()
    assert len(hook.received) == 3
    assert not (tmp_path / "events.jsonl").exists()


@pytest.mark.parametrize("mode", ["hang", "refuse", "fail:99"])
def test_a_server_that_hangs_or_refuses_holds_the_run_up_no_longer_than_the_timeout(
        tmp_path, mode, monkeypatch):
    """`send` never delivers in the training thread (training goes on); `close`, at the
    run's end, waits for deliveries at most the timeout on its clock (a fake one here:
    the machine's speed is not what is tested); the failure is a notify warning in
    events.jsonl with the URL masked."""
    import threading
    import types

    from rltrain.utils.run import notify as notify_module

    delivered_on, delivering = [], threading.Event()
    deliver = Notifier._deliver

    def recording(self, *args):
        delivered_on.append(threading.get_ident())
        delivering.set()
        return deliver(self, *args)

    monkeypatch.setattr(Notifier, "_deliver", recording)
    clock = {"now": 0.0}
    monkeypatch.setattr(notify_module, "time", types.SimpleNamespace(
        monotonic=lambda: clock["now"],
        sleep=lambda seconds: clock.update(now=clock["now"] + seconds)))
    with Webhook("hang" if mode == "hang" else mode) as hook:
        url = (refused_url() if mode == "refuse" else hook.url()) + "?token=s3cret"
        sender = notifier(tmp_path, url=url, timeout=0.5, retries=3, backoff=0.2)
        for step in range(50):
            sender.send({**EVENT, "env_steps": step})
        assert delivering.wait(60)
        if mode == "hang":
            assert hook.got_one.wait(60)
        sender.close()
    assert threading.get_ident() not in delivered_on
    assert 0.5 <= clock["now"] < 0.5 + 0.05  # close's wait: the timeout, in its 20 ms polls
    [*_, event] = read_jsonl(tmp_path / "events.jsonl")
    assert event["rule"] == "notify" and event["action"] == "warn"
    assert "s3cret" not in (tmp_path / "events.jsonl").read_text()
    assert "token=***" in event["message"]


def test_a_command_gets_the_event_on_stdin_and_a_failing_one_is_recorded(tmp_path):
    out = tmp_path / "got.json"
    copy = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    sender = notifier(tmp_path, command=f"{sys.executable} -c \"{copy}\"", timeout=10)
    sender.send(EVENT)
    sender.close()
    assert json.loads(out.read_text()) == EVENT
    failing = notifier(tmp_path, command=f"{sys.executable} -c \"import sys; "
                                         f"sys.exit('no such channel')\"", retries=0, timeout=10)
    failing.send(EVENT)
    failing.close()
    [event] = read_jsonl(tmp_path / "events.jsonl")
    assert "exited with code 1: no such channel" in event["message"]


@pytest.mark.parametrize("then", ["sleep 60", "true"])
def test_a_command_s_background_children_end_with_it(tmp_path, then):
    """`then` = sleep 60: the command outlives its timeout; true: it exits at once. Either
    way the child it left in the background (holding its output open) is ended."""
    pid_file = tmp_path / "child.pid"
    sender = notifier(tmp_path, command=f"sh -c 'sleep 60 & echo $! > {pid_file}; {then}'",
                      retries=0, timeout=1)
    started = time.monotonic()
    sender.send(EVENT)
    sender.close()
    assert time.monotonic() - started < 10
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != "zombie" and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"


def train(tmp_path: Path, *extra: str, **overrides):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    return CliRunner().invoke(cli, ["train", "--config", str(path), "--run-name", "r", *extra])


def test_a_pause_reaches_the_webhook_and_the_token_is_written_nowhere(tmp_path):
    with Webhook() as hook:
        result = train(tmp_path, "--set", f"notify.url={hook.url()}?token=s3cret",
                       min_reward_threshold=0.0)  # Pendulum's first episode pauses
    assert result.exit_code == 3, result.output
    [event] = hook.events()
    checkpoint = tmp_path / "checkpoints" / "r" / "paused_at_step_200.pt"
    assert event["event"] == "pause" and event["env_steps"] == 200
    assert event["rule"] == "catastrophic_reward" and "below the catastrophic" in event["reason"]
    assert event["checkpoint"] == str(checkpoint)
    assert event["resume_command"] == f"rltrain resume --checkpoint {checkpoint}"
    assert event["waiting"] is False and event["run"] == "r"
    written = [p for p in (tmp_path / "logs" / "r").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"config.yaml", "command.txt", "status.json"}
    assert any(p.name.startswith("events.out.tfevents") for p in written)
    for path in written:
        assert b"s3cret" not in path.read_bytes(), path
    assert "token=***" in (tmp_path / "logs" / "r" / "config.yaml").read_text()


def test_a_finished_run_sends_finish_and_warnings_only_when_asked(tmp_path):
    with Webhook() as hook:
        result = train(tmp_path, "--set", f"notify.url={hook.url()}",
                       "--set", "notify.on=[finish, warning]",
                       "--set", "monitor.q_explosion.threshold=1e-9",
                       "--set", "monitor.q_explosion.action=warn")
    assert result.exit_code == 0, result.output
    kinds = [e["event"] for e in hook.events()]
    assert kinds[-1] == "finish" and hook.events()[-1]["env_steps"] == 300
    warnings = [e for e in hook.events() if e["event"] == "warning"]
    assert warnings and warnings[0]["rule"] == "q_explosion"
    assert warnings[0]["env_steps"] == 100  # the first update
    assert "pause" not in kinds


@pytest.mark.parametrize("change, says", [
    ("notify.url=ftp://me:s3cret@host/x", "must be an http:// or https:// URL"),
    ("notify.url=http://:s3cret@/x", "names no host"),
    ('notify.command=say "unclosed', "cannot be split"),
    ("notify.on=[pause, lunch]", "must be one of pause, finish, crash, warning"),
    ("notify.timeout=0", "must be a number in (0, 60]"),
    ("on_pause=maybe", "must be one of exit, wait"),
])
def test_a_bad_notify_config_is_one_line_and_exit_2(tmp_path, change, says):
    result = train(tmp_path, "--set", change)
    assert result.exit_code == 2, result.output
    assert says in result.output and "s3cret" not in result.output
    assert not (tmp_path / "logs").exists()


def test_an_env_that_raises_sends_a_crash_event_with_its_resume_command(tmp_path):
    with Webhook() as hook:
        result = train(tmp_path, "--set", f"notify.url={hook.url()}",
                       env_name="fake_envs:FakeCrashingPendulum-v0", eval_freq=1000)
    assert result.exit_code == 5, result.output
    [event] = hook.events()
    checkpoint = tmp_path / "checkpoints" / "r" / "paused_at_step_149.pt"
    assert event["event"] == "crash" and event["rule"] == "EnvFailure"
    assert event["env_steps"] == 149 and "simulator crashed" in event["reason"]
    assert event["resume_command"] == f"rltrain resume --checkpoint {checkpoint}"


def test_events_beyond_a_full_queue_are_dropped_and_counted_once(tmp_path):
    with Webhook("hang") as hook:
        sender = notifier(tmp_path, url=hook.url(), timeout=0.3, retries=0)
        for step in range(250):
            sender.send({**EVENT, "env_steps": step})
        sender.close()
    notes = [e["message"] for e in read_jsonl(tmp_path / "events.jsonl")]
    # Each run of drops: a note at its first event, and a count of the rest.
    firsts = [m for m in notes if "(more dropped are counted" in m]
    counts = [int(m.split()[0]) for m in notes if "more events were not sent" in m]
    dropped = len(firsts) + sum(counts)
    assert len(firsts) + len(counts) <= 6
    accepted = [m for m in notes if m.startswith("the pause event was not delivered")
                and m not in firsts]
    assert 100 <= len(accepted) == 250 - dropped <= 103  # the queue, and what left it
