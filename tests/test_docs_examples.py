"""Every code block of the docs runs, or says why it does not.

The blocks are found as the site finds them: each page rendered by Python-Markdown with
the site's extensions, snippets (`--8<--`) included. Each block is checked by its kind:

- `python`: run. A page's blocks run in order in one fresh process, in a temporary
  folder, sharing one namespace (a later block builds on an earlier one), with the
  training budgets of `BUDGETS` substituted so that the page trains for seconds. A
  line `print(...)  # TEXT` must print TEXT.
- `yaml`: a config (or a part of one) that rltrain resolves, as a config file would be.
- `sh`, `bash` or no language: each line a command. An `rltrain` command is parsed by
  the command line's own Click definitions, and its `--config`, `--set` and flags are
  resolved as `rltrain config show` resolves them (the config file must exist); other
  tools' lines (`OTHER_TOOLS`) are not run, but a `python SCRIPT` line's script must
  exist. Placeholders such as `<run>` stand for any name.

A block that is none of these, or is not meant to run (an output listing, a fragment of
a loop), says so on the line before it, `<!-- norun: REASON -->`: an HTML comment, which
the site does not show. Any other block is run: a new unmarked block is checked.
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import markdown
import pytest

from rltrain.scripts.cli import cli
from rltrain.scripts.commands.config_commands import flag_overrides
from rltrain.utils.config.resolve import ConfigRequest, resolve_config
from rltrain.utils.errors import ConfigError, UserError

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*.md"))

# Per page: (text in a python block, what the test runs instead). Each text must occur
# exactly once on its page, so an edit of the example fails here instead of silently
# training for minutes. Only budgets change: step counts, network and batch sizes.
TINY_RUN = ("max_timesteps=300, learning_starts=100, eval_freq=100, n_eval_episodes=1, "
            "batch_size=32, hidden_sizes=[16, 16], torch_threads=1")
BUDGETS: dict[str, list[tuple[str, str]]] = {
    "docs/api.md": [("max_timesteps=20_000", TINY_RUN)],
    "docs/integrations.md": [
        ('TD3("MlpPolicy", "Pendulum-v1")',
         'TD3("MlpPolicy", "Pendulum-v1", batch_size=32, policy_kwargs={"net_arch": [16, 16]})'),
        ("model.learn(50_000,", "model.learn(300,"),
        ('PPO("MlpPolicy", "CartPole-v1")',
         'PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1)'),
        ("model.learn(20_000,", "model.learn(256,"),
        ('"total_timesteps": 20_000, "learning_starts": 1_000,',
         '"total_timesteps": 300, "learning_starts": 100,'),
        ('"batch_size": 256, "hidden": 256,', '"batch_size": 32, "hidden": 16,'),
        ('"eval_every": 5_000,', '"eval_every": 300,'),
        ("total_timesteps: int = 20_000", "total_timesteps: int = 300"),
        ("learning_starts: int = 1_000", "learning_starts: int = 100"),
        ("batch_size: int = 256", "batch_size: int = 32"),
        ("hidden: int = 256", "hidden: int = 16"),
        ("eval_every: int = 5_000", "eval_every: int = 300"),
    ],
}
SHELL = {None, "sh", "bash", "shell"}
# Commands of other tools that a shell block may hold; they are not run.
OTHER_TOOLS = {"pip", "python", "python3", ".", "source", "tensorboard"}
# `<!-- norun -->` without a reason is a marker too, so that the test can refuse it.
NORUN = re.compile(r"<!--\s*norun(?::\s*(?P<reason>[^>]*?))?\s*-->")
BLOCK = re.compile(r"(?P<marker><!--[^>]*-->\s*)?<pre><code"
                   r"(?: class=\"language-(?P<lang>[\w-]+)\")?>(?P<code>.*?)</code></pre>", re.S)


@dataclass(frozen=True)
class Block:
    page: str
    lang: str | None
    code: str
    norun: str | None  # the reason its marker gives; None: no marker, it is run

    def where(self) -> tuple[Path, int]:
        """The file and line the block's code is at: its page, or a file the page
        includes as a snippet; line 1 of the page if it cannot be found."""
        page = ROOT / self.page
        code = self.code.rstrip("\n")
        indented = "\n".join("    " + line if line else line for line in code.split("\n"))
        for path in [page, *(ROOT / name for name in snippets(page.read_text()))]:
            source = path.read_text()
            for text in (code, indented):  # a fenced block's code, an indented block's
                index = source.find(text)
                if index >= 0:
                    return path, source.count("\n", 0, index) + 1
        return page, 1


def snippets(text: str) -> list[str]:
    """The files a page includes (`--8<-- "docs/examples/cleanrl_ddpg.py"`)."""
    return re.findall(r'^--8<-- "([^"]+)"$', text, re.M)


def page_blocks(page: str, text: str | None = None) -> list[Block]:
    """The code blocks of `page` (its file, or `text` in its place), in order."""
    renderer = markdown.Markdown(
        extensions=["fenced_code", "tables", "attr_list", "admonition", "pymdownx.snippets"],
        extension_configs={"pymdownx.snippets": {"base_path": [str(ROOT)], "check_paths": True}})
    rendered = renderer.convert((ROOT / page).read_text() if text is None else text)
    blocks = []
    for match in BLOCK.finditer(rendered):
        marker = NORUN.fullmatch((match["marker"] or "").strip())
        blocks.append(Block(page, match["lang"], html.unescape(match["code"]),
                            (marker["reason"] or "") if marker else None))
    return blocks


def run_blocks(page: str) -> list[Block]:
    return [block for block in page_blocks(page) if block.norun is None]


def test_every_skipped_block_gives_its_reason():
    blocks = [block for page in PAGES for block in page_blocks(page)]
    assert len(blocks) > 40  # the parser found the docs' blocks
    for block in blocks:
        assert block.norun is None or len(block.norun.split()) >= 2, block
        assert block.norun is not None or block.lang in SHELL | {"python", "yaml"}, (
            f"{block.page}: a ```{block.lang} block is not run; mark it "
            f"<!-- norun: REASON --> or give it a language this test runs:\n{block.code}")


def test_a_block_is_run_unless_marked_with_a_reason():
    text = ("<!-- norun: an output listing -->\n    out\n\n<!-- norun -->\n```python\nx = 1\n```\n"
            "\nText.\n\n```python\ny = 2\n```\n\n    rltrain runs\n")
    blocks = page_blocks("docs/index.md", text)
    assert [(b.lang, b.code, b.norun) for b in blocks] == [
        (None, "out\n", "an output listing"), ("python", "x = 1\n", ""),
        ("python", "y = 2\n", None), (None, "rltrain runs\n", None)]


def test_every_example_file_is_in_a_page():
    included = {name for page in PAGES for name in snippets((ROOT / page).read_text())}
    for path in (ROOT / "docs" / "examples").iterdir():
        assert path.relative_to(ROOT).as_posix() in included, path


# Python blocks ----------------------------------------------------------------------

# Runs (file, first line, code) triples in order in one namespace, each compiled at its
# place in its file so that a traceback names the docs page and line. A block's
# SystemExit(0) (an example's `raise SystemExit(main())`) lets the next one run.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for path, line, code in json.load(sys.stdin):
    try:
        exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
"""


def with_budgets(page: str, code: str, used: set[str]) -> str:
    for text, tiny in BUDGETS.get(page, []):
        if text in code:
            assert code.count(text) == 1 and "\n" not in text + tiny, text
            code = code.replace(text, tiny)
            used.add(text)
    return code


PYTHON_PAGES = [page for page in PAGES
                if any(block.lang == "python" for block in run_blocks(page))]


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_blocks_run(page, tmp_path):
    used: set[str] = set()
    blocks = [(str(path), line, with_budgets(page, block.code, used))
              for block in run_blocks(page) if block.lang == "python"
              for path, line in [block.where()]]
    assert used == {text for text, _ in BUDGETS.get(page, [])}, "a budget's text is gone"
    # One torch thread, as the tiny configs of conftest.py: the suite's two workers share
    # two cores, and nets this small gain nothing from more.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(blocks),
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for _, _, code in blocks:  # `print(exc)   # unknown config key ...`: what it prints
        for promised in re.findall(r"^\s*print\(.*\)\s+#\s*(.+)$", code, re.M):
            assert promised in result.stdout, promised


def test_the_budgets_name_pages_with_python_blocks():
    assert set(BUDGETS) <= set(PYTHON_PAGES)


# YAML blocks ------------------------------------------------------------------------

YAML_BLOCKS = [block for page in PAGES for block in run_blocks(page) if block.lang == "yaml"]


@pytest.mark.parametrize("block", YAML_BLOCKS,
                         ids=[f"{b.page}:{b.where()[1]}" for b in YAML_BLOCKS])
def test_yaml_blocks_are_configs_rltrain_accepts(block, tmp_path):
    # Read from a file, as a config is: rltrain's YAML reading (`on:` is the word on).
    path = tmp_path / "config.yaml"
    path.write_text(block.code)
    resolve_config(ConfigRequest(path))


# Shell blocks -----------------------------------------------------------------------

def commands(code: str) -> list[list[str]]:
    """The block's commands, each as its words: lines joined at a trailing backslash,
    comments dropped, `a || b` split; a placeholder `<run>` read as the name `run`."""
    text = re.sub(r"<(\w+)>", r"\1", code.replace("\\\n", " "))
    found = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for word in lexer:
            if word in ("||", "&&", ";", "|"):
                found.append(words)
                words = []
            else:
                words.append(word)
        found.append(words)
    return [words for words in found if words]


def parse(args: list[str]) -> click.Context:
    """The context Click makes for `rltrain ARGS` (subcommands of groups followed), so a
    wrong command or option is Click's own error."""
    command: click.Command = cli
    parent = None
    name = "rltrain"
    while isinstance(command, click.Group):
        parent = click.Context(command, info_name=name, parent=parent)
        assert args, f"rltrain {name}: no command given"
        name, *args = args
        sub = command.get_command(parent, name)
        assert sub is not None, f"no command 'rltrain {name}'"
        command = sub
    return command.make_context(name, list(args), parent=parent)


def users_own_file(name: str | None) -> bool:
    """The docs name a reader's own files `my_...` (`my_config.yaml`)."""
    return name is not None and any(part.startswith("my_") for part in Path(name).parts)


def check_rltrain(args: list[str]) -> None:
    params = parse(args).params
    if "overrides" not in params:
        return
    flags = {key: value for key, value in params.items() if key.startswith("flag_")}
    config = params.get("config_name")
    resolve_config(ConfigRequest(None if users_own_file(config) else config,
                                 flag_overrides(params["overrides"], **flags)))


def check_line(words: list[str]) -> None:
    program = words[0]
    if program == "rltrain":
        check_rltrain(words[1:])
        return
    assert program in OTHER_TOOLS, (
        f"'{' '.join(words)}' is no command this test knows: an output listing wants "
        "<!-- norun: REASON --> on the line before its block")
    if program.startswith("python") and words[1:] and words[1].endswith(".py"):
        assert (ROOT / words[1]).is_file(), words[1]


SHELL_BLOCKS = [block for page in PAGES for block in run_blocks(page) if block.lang in SHELL]


@pytest.mark.parametrize("block", SHELL_BLOCKS,
                         ids=[f"{b.page}:{b.where()[1]}" for b in SHELL_BLOCKS])
def test_shell_blocks_parse_and_their_configs_resolve(block):
    for words in commands(block.code):
        check_line(words)


def test_a_wrong_option_or_key_in_a_shell_block_fails():
    with pytest.raises(click.UsageError):
        check_line(["rltrain", "train", "--confg", "pendulum_ddpg.yaml"])
    with pytest.raises(ConfigError, match="did you mean 'gamma'"):
        check_line(["rltrain", "train", "--config", "pendulum_ddpg.yaml", "--set", "gama=1"])
    with pytest.raises(UserError, match="no_such.yaml"):
        check_line(["rltrain", "config", "show", "--config", "no_such.yaml"])
    with pytest.raises(AssertionError, match="no command"):
        check_line(["rltrain", "trian"])


# Install commands -------------------------------------------------------------------

def test_docs_install_torch_as_the_readme_pins_it():
    readme = set(re.findall(r"pip install torch\S*", (ROOT / "README.md").read_text()))
    assert len(readme) == 1 and "==" in next(iter(readme))
    for page in PAGES:
        assert set(re.findall(r"pip install torch\S*", (ROOT / page).read_text())) <= readme
