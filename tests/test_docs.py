"""The documentation site: its generated reference pages cover the code, and it builds."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from rltrain.utils.config.schema import TrainConfig, iter_fields
from rltrain.utils.diagnosis.report.findings import RULES

ROOT = Path(__file__).resolve().parent.parent


def reference_hook():
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented(key: str, page: str) -> bool:
    """`a.b.c` in a table row, or a rule's row: `a.b.threshold` / `.action`."""
    parent, _, leaf = key.rpartition(".")
    rows = [line for line in page.splitlines() if line.startswith("|")]
    return any(f"`{key}`" in row or (f"`{parent}.threshold`" in row and f"`.{leaf}`" in row)
               for row in rows)


def test_config_reference_lists_every_key():
    page = reference_hook().config_page()
    for key, _, _ in iter_fields(TrainConfig):
        assert documented(key, page), key


def test_rule_reference_lists_every_rule_once():
    page = reference_hook().rules_page()
    for name in RULES:
        assert page.count(f"### `{name}` {{#{name}}}") == 1, name
    assert "Other rules" not in page  # each rule has its section (GROUPS in the hook)


def test_site_builds_strict_without_broken_links(tmp_path):
    # --strict turns every warning into a failure: a link to a missing page or anchor,
    # a page missing from nav. The theme's web fonts are off, so no network is needed.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "reference" / "config" / "index.html").exists()
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    assert "rltrain resume" in cli and "&lt;run&gt;" in cli
    # The quick start is a code block, one command a line (it ran into one paragraph).
    assert "<pre><code>rltrain train --config pendulum_ddpg.yaml\nrltrain train --algo td3" \
        in cli and "\b" not in cli
    # The site's own CSS (docs/stylesheets/extra.css): tables and code fit the column.
    assert (tmp_path / "stylesheets" / "extra.css").exists()
    assert 'href="../../stylesheets/extra.css"' in cli
