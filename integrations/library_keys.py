"""What every library integration needs of its settings: plain YAML data for
config.yaml's `library`, and a finding's fix restated in the library's own settings.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from rltrain.utils.hooks.findings import Finding


def plain(value: Any) -> Any:
    """`value` as plain YAML data: classes by name, arrays as lists, other objects as
    their repr (a library's setting can be any Python object)."""
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, type):
        return value.__name__
    return repr(value)


def translated(finding: Finding, library: str, changes: dict[str, Any], missing: list[str],
               note: str = "") -> Finding:
    """`finding` with its `suggested_set` as `changes` (the library's settings); its
    message ends with the change in the library's terms (and `note`), and names the
    rltrain keys in `missing`, which no setting of the library does."""
    message = finding.message
    if changes:
        change = ", ".join(f"{k}={v!r}" for k, v in changes.items())
        message += f" (in {library}: {change}{note})"
    if missing:
        message += (f" ({', '.join(f'{k}={finding.suggested_set[k]!r}' for k in missing)}"
                    f": no {library} setting does this)")
    return dataclasses.replace(finding, message=message, suggested_set=changes)
