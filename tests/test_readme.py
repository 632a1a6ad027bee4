"""The README's promises that drift silently: its opening commands and config reference."""

from __future__ import annotations

from pathlib import Path

from rltrain.utils.config import TrainConfig, iter_fields

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


def documented(key: str, line: str) -> bool:
    """`a.b.c` in a table row, or a row of siblings: `a.b.x` / `.c`."""
    parent, _, leaf = key.rpartition(".")
    return line.startswith("|") and (f"`{key}`" in line or (
        bool(parent) and f"`{parent}." in line and f"`.{leaf}`" in line))


def test_config_reference_lists_every_key():
    lines = (ROOT / "README.md").read_text().splitlines()
    for key, _, _ in iter_fields(TrainConfig):
        assert any(documented(key, line) for line in lines), key
