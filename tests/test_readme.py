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


def test_config_reference_lists_every_key():
    readme = (ROOT / "README.md").read_text()
    for key, _ in iter_fields(TrainConfig):
        assert f"| `{key}` |" in readme, key
