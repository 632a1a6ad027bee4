"""The README's promises that drift silently: its opening commands and its links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def opening_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()[:12]
    return [line.strip() for line in lines if line.startswith("    ")]


def test_readme_opens_with_the_train_and_test_commands():
    train, test = opening_commands()[:2]
    assert "pip install" in train and train.endswith("rltrain train --config pendulum_ddpg.yaml")
    assert '".[dev]"' in test and test.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    test = opening_commands()[1]
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_is_short_and_its_links_and_images_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert "docs/images/report.png" in local and "docs/images/tensorboard.png" in local
    for target in local:
        assert (ROOT / target).exists(), target
