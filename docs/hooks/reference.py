"""MkDocs hook: the config and rule reference pages, generated from the code at build time.

The config reference is read from the schema (the dataclasses of `utils/config/schema.py`, each
field's default, help text and allowed range), the rule reference from the rules' specs
(`utils/diagnosis/rules/`: each rule's group, what its finding means and what to check)
and their config. The pages exist only in the build, never in `docs/`, so they cannot drift
from the code. `tests/test_docs.py` calls the two page functions directly.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any, Callable

from rltrain.agents.registry import ALGORITHMS
from rltrain.utils.config.fields import RuleConfig
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.report.findings import RULES
from rltrain.utils.diagnosis.rules.registry import all_specs

# The rule reference's sections, in the order `rltrain diagnose` thinks about a run.
# Each heading names the section of diagnosing.md that tells how the rules were set.
# Each rule's spec names its group; the order of the groups and their anchors (the
# sections of diagnosing.md with their calibration) are the page's own.
GROUPS: dict[str, str] = {
    "Health rules": "health-rules",
    "Runs stopped from outside the training": "runs-stopped-from-outside",
    "Reward signal": "reward-signal",
    "State-action map": "state-action-map",
    "Gradient flow": "gradient-flow",
    "Critic checks": "critic-checks",
    "What goes into learning": "what-goes-into-learning",
}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the build."""
    from mkdocs.structure.files import File

    pages: dict[str, Callable[[], str]] = {
        "reference/config.md": config_page, "reference/rules.md": rules_page}
    for uri, make in pages.items():
        files.append(File.generated(config, uri, content=make()))
    return files


# Tags the rendered CLI page may hold; any other `<word>` is a placeholder of the help
# text (`<run>`, `<log_dir>`), which a browser would take for an unknown tag and hide.
HTML_TAGS = {"a", "p", "strong", "em", "code", "pre", "ul", "ol", "li", "br", "hr", "table",
             "thead", "tbody", "tr", "th", "td", "dl", "dt", "dd", "blockquote", "div",
             "span", "h1", "h2", "h3", "h4", "h5", "h6"}


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Show the `<run>`-style placeholders of the generated CLI page as text, without
    Click's no-rewrap marker (a backspace line opening a code block of the help)."""
    if page.file.src_uri != "reference/cli.md":
        return html
    html = html.replace("\b\n", "").replace("\b", "")
    return re.sub(r"<(/?)(\w+)([^<>]*)>", lambda m: m.group(0) if m.group(2) in HTML_TAGS
                  else "&lt;" + m.group(0)[1:-1] + "&gt;", html)


def show(value: Any) -> str:
    """A default as YAML writes it: null, true, [256, 256], 1e6."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    return str(value)


def escape(text: str) -> str:
    """Plain text made safe for Markdown: `<run>` is no HTML tag, `a*b` no emphasis
    (code spans, between backticks, are left as they are)."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace("*", "\\*")
    return "`".join(parts)


def cell(text: str) -> str:
    """Help text made safe inside a Markdown table cell."""
    return escape(text).replace("|", "\\|")


def meaning(cls: type, f: dataclasses.Field) -> str:
    """A field's help, with its allowed values or range."""
    text = f.metadata.get("help", "")
    hint = typing.get_type_hints(cls)[f.name]
    choices = typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()
    if choices and f.name != "action":
        text += " (one of " + ", ".join(f"`{c}`" for c in choices) + ")"
    elif f.metadata.get("range") is not None:
        text += f" ({f.metadata['range']})"
    return text


def rows(section: Any, prefix: str) -> list[str]:
    """One table row per key of a section; a rule's threshold and action share one row."""
    out = []
    for f in dataclasses.fields(section):
        value, key = getattr(section, f.name), prefix + f.name
        if isinstance(value, RuleConfig):
            out.append(f"| `{key}.threshold` / `.action` | `{show(value.threshold)}` / "
                       f"`{value.action}` | {cell(f.metadata['help'])} "
                       f"([rule](rules.md#{f.name})) |")
            out += [f"| `{key}.{o.name}` | `{show(getattr(value, o.name))}` | "
                    f"{cell(meaning(type(value), o))} |"
                    for o in dataclasses.fields(value) if o.name not in ("threshold", "action")]
        elif dataclasses.is_dataclass(value):
            if prefix:  # a group inside a section (monitor.memory, networks.actor)
                out += rows(value, key + ".")
        else:
            out.append(f"| `{key}` | `{show(value)}` | {cell(meaning(type(section), f))} |")
    return out


def table(section: Any, prefix: str) -> str:
    return "\n".join(["| key | default | meaning |", "|---|---|---|", *rows(section, prefix)])


def config_page() -> str:
    config = TrainConfig()
    return "\n\n".join([
        "# Config reference",
        "Every key of a training config, its default and what it means, as the code "
        "defines them (this page is generated from the schema). How configs are read and "
        "overridden: [Training and configs](../training.md).",
        "## Top-level keys", table(config, ""),
        *algorithm_sections(config),
        "## `monitor:` health rules",
        "Each rule has a threshold and an action (`pause`, `warn` or `off`); "
        "`safe_mode: false` turns every pause into a warning. See "
        "[the rules](rules.md#health-rules).", table(config.monitor, "monitor."),
        "## `diagnostics:`",
        "Each rule has a threshold and an action, `warn` by default. See "
        "[the rules](rules.md).", table(config.diagnostics, "diagnostics."),
        *other_sections(config),
    ]) + "\n"


def algorithm_sections(config: TrainConfig) -> list[str]:
    """One section per algorithm with options of its own (agents/registry.py)."""
    parts = []
    for algorithm in ALGORITHMS.values():
        if algorithm.section is not None:
            parts += [f"## `{algorithm.section}:`",
                      f"Allowed only with `algo: {algorithm.name}` ({algorithm.summary}).",
                      table(getattr(config, algorithm.section), algorithm.section + ".")]
    return parts


def other_sections(config: TrainConfig) -> list[str]:
    """Every other section of the schema, with its help as the introduction."""
    parts = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and f.name not in (
                "monitor", "diagnostics", *ALGORITHMS):
            parts += [f"## `{f.name}:`", cell(f.metadata.get("help", "")) + ".",
                      table(value, f.name + ".")]
    return parts


def rule_config(name: str) -> str:
    """Where a rule is configured, with its defaults, or that it cannot be configured."""
    config = TrainConfig()
    for section in ("monitor", "diagnostics"):
        rule = getattr(getattr(config, section), name, None)
        if rule is not None:
            help_text = next(f.metadata["help"] for f in dataclasses.fields(
                getattr(config, section)) if f.name == name)
            threshold = getattr(rule, "threshold", None)
            limit = "" if threshold is None else f"threshold `{show(threshold)}`, "
            return (f"`{section}.{name}`: {limit}action `{rule.action}`. "
                    f"Fires when: {escape(help_text)}.")
    return "Not configurable: it is always reported."


def rules_page() -> str:
    groups: dict[str, tuple[str, list[str]]] = {
        title: (anchor, []) for title, anchor in GROUPS.items()}
    for name, spec in all_specs().items():
        anchor = GROUPS.get(spec.group, spec.group.lower().replace(" ", "-"))
        groups.setdefault(spec.group, (anchor, []))[1].append(name)
    grouped = [name for _, names in groups.values() for name in names]
    others = [name for name in RULES if name not in grouped]
    if others:
        groups["Other rules"] = ("other-rules", others)
    parts = ["# Rule reference",
             "Every rule `rltrain diagnose` can report, generated from the rules' code. "
             "The names are stable: scripts can rely on them. For each rule: where it is "
             "configured, what its finding means (stated as a hypothesis to check) and "
             "what to do. How each threshold was chosen: "
             "[Diagnosing a run](../diagnosing.md)."]
    for title, (anchor, names) in groups.items():
        parts.append(f"## {title}")
        if anchor != "other-rules":
            parts.append(f"How these were calibrated: [{title}](../diagnosing.md#{anchor}).")
        for name in names:
            hypothesis, check = RULES[name]
            judges = all_specs()[name].algorithms
            only = [f"Judges runs of {', '.join(judges)} only."] if judges else []
            parts += [f"### `{name}` {{#{name}}}", rule_config(name), *only,
                      f"**What it means:** {escape(hypothesis)}.",
                      f"**What to do:** {escape(check)}."]
    return "\n\n".join(parts) + "\n"
