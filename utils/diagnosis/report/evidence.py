"""A finding's evidence as readable (key, value) rows, for the report's table and page.

A finding's evidence is whatever its rule fired with (events.jsonl's `value`): a number,
a list of clusters or dimensions, or a mapping such as layer -> gradient norm, nested
at times. `--json` keeps it as it is; people read it here: each leaf one row, keyed by
its path ("actor.net.0.weight", "states[2]"), numbers to 4 significant digits, a list
of plain values on one row ("[4, 8, 11]"). Nothing is cut inside a value: a long list
shows its first `MAX_VALUES` values whole and says how many more there are.
"""

from __future__ import annotations

from typing import Any

MAX_VALUES = 20  # values of one list written out; the rest are counted
MAX_ROWS = 40  # rows of one finding's evidence; the rest are counted
SINGLE = ""  # the key of evidence that is one plain value


def number(value: Any) -> str:
    """A plain value as text: a float to 4 significant digits ("0.0001235", "1.235e+06",
    "nan", "inf"), an int whole, None as "none"."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _plain(value: Any) -> bool:
    return not isinstance(value, (dict, list, tuple))


def _values(values: list[Any]) -> str:
    """A list of plain values on one row, in brackets as the findings' messages write
    them ("clusters [4, 8]"), the first `MAX_VALUES` of them."""
    shown = ", ".join(number(v) for v in values[:MAX_VALUES])
    more = len(values) - MAX_VALUES
    return f"[{shown}]" + (f" and {more} more" if more > 0 else "")


def _flatten(value: Any, key: str) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        if not value:
            return [(key, "none")]
        return [row for k, v in value.items()
                for row in _flatten(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, (list, tuple)):
        if all(_plain(v) for v in value):
            return [(key, _values(list(value)))]
        return [row for i, v in enumerate(value) for row in _flatten(v, f"{key}[{i}]")]
    return [(key, number(value))]


def rows(value: Any) -> list[tuple[str, str]]:
    """The evidence as (key, value) rows; one row keyed `SINGLE` when it is one plain
    value or one list of them. At most `MAX_ROWS` rows, then one that counts the rest."""
    found = _flatten(value, SINGLE)
    if len(found) > MAX_ROWS:
        found = [*found[:MAX_ROWS], ("...", f"{len(found) - MAX_ROWS} more")]
    return found


def text(value: Any) -> str:
    """The evidence as plain text: the value alone, or one "key: value" line per row."""
    found = rows(value)
    if len(found) == 1 and found[0][0] == SINGLE:
        return found[0][1]
    return "\n".join(f"{k}: {v}" if k else v for k, v in found)


def one_line(value: Any) -> str:
    """The evidence on one line: its rows as "key value" joined by "; " (one plain
    value as it is), for the report's "most likely cause" line."""
    return "; ".join(f"{key} {shown}" if key != SINGLE else shown
                     for key, shown in rows(value))
