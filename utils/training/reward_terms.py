"""The terms of the reward, as an env reports them in `info`.

Two conventions are read, both per env step:

- flat entries whose key starts with `reward_` and whose value is a number: Gymnasium's
  MuJoCo envs report theirs so (`reward_forward`, `reward_ctrl`, `reward_survive`,
  `reward_contact`, Reacher's `reward_dist`), each signed as it enters the reward;
- one dict under `info["reward_terms"]`, of term name -> number (`{"goal": 1.0,
  "energy": -0.2}`), its names taken as they are.

Which keys an env reports is looked at once, on the run's first env step
(`term_keys`): an env that reports none then costs nothing more per step. The
collector (scripts/collector.py) sums each step's terms into its episode; the episode's
sums reach the diagnostics on its `EpisodeEnd` (utils/diagnostics/reward_terms.py). A
term that is NaN or infinite at a step is left out of that step, as a non-finite
reward is left out of the return.

Infos here are a vector env's (Gymnasium's layout): each entry an array over the
sub-envs with a `_key` mask of the sub-envs that reported it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PREFIX = "reward_"
DICT_KEY = "reward_terms"


def term_keys(infos: dict[str, Any]) -> tuple[str, ...]:
    """The info keys that hold reward terms: flat numeric `reward_*` entries, and
    `reward_terms` where it is a dict."""
    keys = []
    for key, value in infos.items():
        if key == DICT_KEY:
            if isinstance(value, dict):
                keys.append(key)
        elif key.startswith(PREFIX) and _numeric(value):
            keys.append(key)
    return tuple(keys)


def _numeric(value: Any) -> bool:
    return np.asarray(value).dtype.kind in "biuf"


def step_terms(infos: dict[str, Any], keys: tuple[str, ...],
               num_envs: int) -> list[dict[str, float]]:
    """Each sub-env's finite reward terms at this vector step (name -> value)."""
    found: list[dict[str, float]] = [{} for _ in range(num_envs)]
    for key in keys:
        if key not in infos:
            continue
        if key == DICT_KEY:
            for name, values in infos[key].items():
                if not name.startswith("_"):  # a mask
                    _put(found, name, values, infos[key].get("_" + name))
        else:
            _put(found, key, infos[key], infos.get("_" + key))
    return found


def _put(found: list[dict[str, float]], name: str, values: Any, mask: Any) -> None:
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        return
    for env in range(len(found)):
        if mask is not None and not mask[env]:
            continue
        value = float(values[env])
        if math.isfinite(value):
            found[env][name] = value


def add_terms(sums: dict[str, float], terms: dict[str, float]) -> None:
    """Add one step's terms to an episode's sums."""
    for name, value in terms.items():
        sums[name] = sums.get(name, 0.0) + value
