"""The terms of the reward, as an env reports them in `info`.

Two conventions are read, both per env step:

- flat entries whose key starts with `reward_` and whose value is a number: Gymnasium's
  MuJoCo envs report theirs so (`reward_forward`, `reward_ctrl`, `reward_survive`,
  `reward_contact`, Reacher's `reward_dist`), each signed as it enters the reward;
- one dict under `info["reward_terms"]`, of term name -> number (`{"goal": 1.0,
  "energy": -0.2}`), its names taken as they are.

Which keys an env reports is looked at once, on the run's first env step
(`term_keys`): an env that reports none then costs nothing more per step. The
collector (utils/training/collector.py) sums each step's terms into its episode; the
episode's sums reach the diagnostics on its `EpisodeEnd`
(utils/diagnosis/measure/reward_terms.py). A term that is NaN or infinite at a step is
left out of that step, as a non-finite reward is left out of the return.

`step_terms` reads a vector env's infos (Gymnasium's layout: each entry an array over
the sub-envs with a `_key` mask of the sub-envs that reported it); `env_terms` one env's
own info dict, as SB3's callback and a watched loop hand them over (integrations/).
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


def env_terms(info: dict[str, Any], keys: tuple[str, ...]) -> dict[str, float]:
    """One env's finite reward terms in its own info dict (name -> value)."""
    found: dict[str, float] = {}
    for key in keys:
        values = info.get(key)
        items = values.items() if key == DICT_KEY and isinstance(values, dict) else (
            [(key, values)] if key != DICT_KEY else [])
        for name, value in items:
            if value is not None and _numeric(value) and np.size(value) == 1:
                number = float(np.asarray(value).reshape(()))
                if math.isfinite(number):
                    found[name] = number
    return found


class TermReader:
    """A watched loop's reward terms (integrations/): which info keys hold them is read
    on the first info it is handed; none there, and nothing more is read per step."""

    def __init__(self) -> None:
        self.keys: tuple[str, ...] | None = None

    def of_env(self, info: dict[str, Any]) -> dict[str, float]:
        """The terms in one env's own info dict."""
        if self.keys is None:
            self.keys = term_keys(info)
        return env_terms(info, self.keys) if self.keys else {}

    def of_envs(self, info: Any, num_envs: int) -> list[dict[str, float]] | None:
        """Each env's terms in a list of info dicts (SB3's VecEnv, or a collection of
        its steps), a vector env's info dict (Gymnasium's layout) or, with one env, its
        own info dict. None once the first info read had no terms: nothing is read per
        step then (a collection of 16,384 SB3 infos took milliseconds to scan)."""
        if self.keys == ():
            return None
        if isinstance(info, (list, tuple)):
            return [self.of_env(i) if isinstance(i, dict) else {} for i in info]
        if not isinstance(info, dict):
            return [{} for _ in range(num_envs)]
        if num_envs == 1 and not any(k.startswith("_") for k in info):
            return [self.of_env(info)]
        if self.keys is None:
            self.keys = term_keys(info)
        return step_terms(info, self.keys, num_envs) if self.keys else [
            {} for _ in range(num_envs)]


def add_terms(sums: dict[str, float], terms: dict[str, float]) -> None:
    """Add one step's terms to an episode's sums."""
    for name, value in terms.items():
        sums[name] = sums.get(name, 0.0) + value
