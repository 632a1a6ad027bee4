"""What the tests of the docs/examples Watcher loops share: each runs in its own folder
on one torch thread, reads `rltrain diagnose --json`, and checks that the Watcher's lines
are the marked few."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rltrain.scripts.cli import cli


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Imported by a test module, every test of it runs in tmp_path on one thread."""
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: one thread is fastest beside others
    yield
    torch.set_num_threads(threads)


def diagnose(run: str) -> dict:
    result = CliRunner().invoke(cli, ["diagnose", run, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def assert_watcher_lines_marked(example: Path, most: int) -> None:
    """At most `most` lines end in `# rltrain`, and every line naming the watcher does."""
    marked = [line for line in example.read_text().splitlines()
              if re.search(r"#\s*rltrain$", line)]
    assert len(marked) <= most
    code = example.read_text().split('"""', 2)[2]
    assert all(re.search(r"#\s*rltrain$", line) for line in code.splitlines()
               if "watcher" in line.lower())
