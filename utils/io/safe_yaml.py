"""Reading YAML that may be hostile: configs and `--set` values.

PyYAML's SafeLoader (what `yaml.safe_load` uses: plain data only, never code), extended
to refuse a key given twice and to read booleans and exponents as YAML 1.2 does: only
true/false are booleans, so that `action: off` is the word off and a `no` or `on` is
refused rather than silently read as a boolean; `1e6` and `1.0e6` are numbers. A config
is small: a file over MAX_CONFIG_BYTES, nesting deeper than MAX_DEPTH, or aliases that
expand to more than MAX_VALUES values (a "billion laughs" file: anchors of anchors of
anchors) is refused before any of it is built, in time and memory bounded by the file's
size.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rltrain.utils.errors import ConfigError

BOOL_TAG = "tag:yaml.org,2002:bool"
MAX_CONFIG_BYTES = 1 << 20  # the shipped configs are about 1 KiB
MAX_DEPTH = 32  # a config nests 3 levels deep
MAX_VALUES = 100_000  # values after alias expansion (a Humanoid's state_bounds: 752)


class ConfigTooLarge(yaml.YAMLError):
    """A YAML text beyond what a config can be: refused before it is built."""


class _ConfigLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a key given twice in one mapping (plain YAML keeps
    the last silently: `seed: 1 ... seed: 2` would train seed 2 without a word), with
    YAML 1.2's booleans (below), and nesting bounded while the text is composed (PyYAML
    composes recursively: a deep enough `[[[...]]]` would end in a RecursionError)."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ConfigTooLarge(f"it nests deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: keys given there
                continue  # may be overridden here, as YAML intends
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


# YAML 1.1 (PyYAML's default) also reads yes/no/on/off as booleans: `monitor.X.action: no`
# was quietly "off", and `on` gave "got True".
_ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_ConfigLoader.add_implicit_resolver(
    BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
# YAML 1.1 reads `1e6` (an exponent without a dot) as the text "1e6"; YAML 1.2, and
# everyone writing `replay_buffer_size: 1e6`, mean the number. Read so, a number given
# as text (quoted: "0.99") can be refused instead of taken.
_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_yaml(text: str) -> Any:
    """Compose the text into nodes (an alias is one shared node there), check what the
    aliases would expand to, and only then build Python values from it."""
    loader = _ConfigLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set(), 1)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int],
                   depth: int) -> int:
    """How many values `node` holds with every alias expanded (an alias is the node it
    names, shared; each shared node is counted once per use, computed once)."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in open_nodes:
        raise ConfigTooLarge("an alias refers to the node it is in (a structure without end)")
    if depth > MAX_DEPTH:
        raise ConfigTooLarge(f"its aliases nest deeper than {MAX_DEPTH} levels")
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    open_nodes.add(id(node))
    size = 1 + sum(_expanded_size(child, sizes, open_nodes, depth + 1) for child in children)
    open_nodes.discard(id(node))
    if size > MAX_VALUES:
        raise ConfigTooLarge(f"its aliases expand to more than {MAX_VALUES} values (a YAML "
                             "alias bomb?)")
    sizes[id(node)] = size
    return size


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping at the top level."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config '{path}': {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config '{path}' is refused: it is larger than "
                          f"{MAX_CONFIG_BYTES >> 20} MiB, far beyond any config")
    try:
        data = load_yaml(text)
    except ConfigTooLarge as exc:
        raise ConfigError(f"config '{path}' is refused: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"config '{path}' is not valid YAML{line}: "
                          f"{getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config '{path}' must be a YAML mapping of key: value, "
                          f"got {type(data).__name__}")
    return data
