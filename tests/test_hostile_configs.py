"""Hostile and extreme configs: a YAML alias bomb, endless nesting, a huge file, sizes
beyond the machine. Each is refused before training starts, in one line with exit code 2,
and no run folder is made."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from rltrain.scripts.cli import cli
from rltrain.utils.io.safe_yaml import MAX_CONFIG_BYTES
from rltrain.utils.run.progress import ProgressDisplay, format_eta

from conftest import tiny_dict


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" file: each anchor is a list of `width` aliases of the one before,
    9**10 strings once expanded."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines + [f"seed: *a{levels}"]) + "\n"


def train(tmp_path, text: str, *options: str):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return CliRunner().invoke(cli, ["train", "--config", str(path), *options])


def assert_refused(result, tmp_path, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    for word in words:
        assert word in result.output, result.output
    assert not (tmp_path / "logs").exists() and not (tmp_path / "checkpoints").exists()


def test_an_alias_bomb_is_refused_in_bounded_memory(tmp_path):
    """In a child process with its address space capped at 2 GiB (without the check,
    expanding the aliases would take gigabytes and minutes): the refusal takes next to no
    memory. (How long it takes is the machine's: not asserted here.)"""
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    child = textwrap.dedent("""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from rltrain.utils.config.loader import load_config
        from rltrain.utils.errors import ConfigError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            load_config(sys.argv[1])
        except ConfigError as exc:
            print(json.dumps({"error": str(exc),
                              "extra_mib": (resource.getrusage(resource.RUSAGE_SELF)
                                            .ru_maxrss - before) / 1024}))
    """)
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "bomb.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert "aliases expand to more than" in report["error"]
    assert report["extra_mib"] < 100, report


@pytest.mark.parametrize("text, words", [
    (alias_bomb(), ("refused", "aliases expand to more than 100000 values")),
    # An anchor whose list holds its own alias: a structure without end.
    ("seed: &a [*a]\n", ("refused", "refers to the node it is in")),
    ("seed: " + "[" * 5000 + "]" * 5000 + "\n", ("refused", "nests deeper than 32")),
    # Merge keys expand too: each level merges nine copies of the one before.
    ("a0: &a0 {x: 1}\n" + "".join(
        f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 9)}]}}\n" for i in range(1, 10))
     + "seed: 1\n", ("refused", "aliases expand")),
])
def test_hostile_yaml_is_refused_in_one_line(tmp_path, text, words):
    assert_refused(train(tmp_path, text), tmp_path, *words)


def test_a_bomb_in_a_set_value_is_refused_too(tmp_path):
    config = tmp_path / "ok.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    bomb = "[" + ", ".join(["&a0 [" + ", ".join(["x"] * 9) + "]"] + ["*a0"] * 8) + "]"
    for level in range(1, 9):  # one flow value: [&a1 [*a0 x9], *a1 x8] ... nested
        bomb = f"[&a{level} {bomb}, " + ", ".join([f"*a{level}"] * 8) + "]"
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--set",
                                      f"hidden_sizes={bomb}"])
    assert_refused(result, tmp_path, "--set hidden_sizes: value refused", "aliases expand")


def test_a_file_larger_than_any_config_is_refused_unread(tmp_path):
    text = "seed: 1\n" + "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1)
    assert_refused(train(tmp_path, text), tmp_path, "refused", "larger than 1 MiB")


@pytest.mark.parametrize("overrides, words", [
    (["max_timesteps=1e29"], ("'max_timesteps' must be an integer below 2**63",)),
    (["eval_freq=9223372036854775808"], ("'eval_freq' must be an integer below 2**63",)),
    (["hidden_sizes=[100000000,100000000]"], ("'hidden_sizes' [100000000, 100000000] needs",
                                              "GiB for the networks", "use smaller layers")),
    (["algo=td3", "hidden_sizes=[60000,60000,60000,60000,60000,60000,60000,60000]"],
     ("GiB for the networks",)),
    (["torch_threads=100000"], ("'torch_threads' is 100000, beyond 4 per core",)),
])
def test_sizes_beyond_the_machine_are_refused_before_training(tmp_path, overrides, words):
    config = tmp_path / "ok.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    sets = [item for o in overrides for item in ("--set", o)]
    result = CliRunner().invoke(cli, ["train", "--config", str(config), *sets])
    assert_refused(result, tmp_path, *words)


@pytest.mark.parametrize("seconds, text", [
    (None, "n/a"), (5.5, "00:00:05"), (3 * 3600 + 62, "03:01:02"),
    (25 * 3600, "1d 01:00:00"), (400 * 86400, "> 1 year"), (float("inf"), "> 1 year")])
def test_an_eta_over_24_hours_shows_its_days(seconds, text):
    assert format_eta(seconds) == text


def test_the_progress_display_takes_step_counts_near_int64():
    console = Console(file=io.StringIO(), width=100)
    display = ProgressDisplay(2**63 - 1, 0, interactive=False, console=console)
    display._rate, display._last_plain = 1000.0, 0.0  # as after a few seconds of training
    display.update(10**6, -3.0, None)
    display.close()
    assert "> 1 year" in console.file.getvalue()


@pytest.mark.parametrize("path, says", [("/dev/zero", "is not a regular file"),
                                        ("/tmp", "is a folder")])
def test_a_config_that_is_no_regular_file_is_named_for_what_it_is(path, says):
    result = CliRunner().invoke(cli, ["config", "show", "--config", path])
    assert result.exit_code == 2 and says in result.output, result.output
