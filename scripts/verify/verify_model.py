"""`rltrain.verify`: an A/B test of a settings change on a training of the user's own,
an SB3 model or a plain loop, over several seeds.

`rltrain diagnose --verify` forks an rltrain run from its checkpoint; a model another
library trains has no such checkpoint, so here each branch is trained from scratch by
the user's factory, `make_model(seed=S)` (the control) and `make_model(seed=S,
**change)` (the fix), for `steps` env steps, and its final policy evaluated. The
comparison is `diagnose --verify`'s own (scripts/verify/verify_stats.py): the mean over
seeds of mean(fix) - mean(control), its 95% bootstrap interval over seeds and episodes,
and the verdict.

The factory returns either a model with SB3's `learn(total_timesteps)` and
`predict(obs, deterministic=True)` (evaluated by rltrain on `eval_env`, by default a
fresh env of the model's env id), or a plain loop as a function `train(steps)` that
trains and returns the episode returns of its own final evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rltrain.utils.errors import UserError


@dataclass(frozen=True)
class Verification:
    """The A/B result: each branch's final evaluation returns per seed, the mean over
    seeds of mean(fix) - mean(control) with its 95% bootstrap interval [low, high], and
    the verdict: "confirmed", "not confirmed" or "inconclusive"."""

    change: dict[str, Any]
    seeds: list[int]
    control: list[list[float]]
    fix: list[list[float]]
    difference: float
    low: float
    high: float
    verdict: str


def verify(make_model: Callable[..., Any], change: Mapping[str, Any], steps: int,
           seeds: Sequence[int] = (0, 1), eval_env: Any = None,
           eval_episodes: int = 10) -> Verification:
    """Train `make_model(seed=S)` and `make_model(seed=S, **change)` for `steps` env steps
    on each seed in `seeds`, evaluate both, and judge the change (see the module)."""
    from rltrain.scripts.verify.verify_stats import pooled_difference, verdict  # numpy: when used

    if not change:
        raise UserError("verify needs a change to test, e.g. {'learning_rate': 1e-4}")
    if steps < 1 or eval_episodes < 1 or not seeds:
        raise UserError("verify needs steps >= 1, eval_episodes >= 1 and at least one seed")
    control, fix = [], []
    for seed in seeds:
        control.append(_branch(make_model(seed=seed), steps, seed, eval_env, eval_episodes))
        fix.append(_branch(make_model(seed=seed, **change), steps, seed, eval_env,
                           eval_episodes))
    diff = pooled_difference(list(zip(fix, control, strict=True)))
    base = sum(map(sum, control)) / sum(map(len, control))
    return Verification(dict(change), list(seeds), control, fix, diff["difference"],
                        diff["low"], diff["high"], verdict(diff, base))


def _branch(made: Any, steps: int, seed: int, eval_env: Any,
            eval_episodes: int) -> list[float]:
    """One branch trained and evaluated: its final evaluation's episode returns."""
    if hasattr(made, "learn") and hasattr(made, "predict"):
        made.learn(total_timesteps=steps)
        return _evaluate(made, seed, eval_env, eval_episodes)
    if callable(made):
        returns = [float(r) for r in made(steps)]
        if not returns:
            raise UserError("verify's plain loop returned no evaluation returns")
        return returns
    raise UserError(f"make_model returned {type(made).__name__}: verify needs a model with "
                    "learn() and predict() (SB3's) or a function train(steps) -> returns")


def _evaluate(model: Any, seed: int, eval_env: Any, episodes: int) -> list[float]:
    """rltrain's deterministic evaluation of the model's policy (seeded start states)."""
    import gymnasium as gym

    from rltrain.integrations.sb3_view import env_id
    from rltrain.utils.training.evaluation import evaluate

    env = eval_env
    if env is None or isinstance(env, str):
        name = env or env_id(model)
        if name == "unknown":
            raise UserError("verify cannot tell the model's env: pass eval_env")
        env = gym.make(name)
    result = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], env, episodes,
                      seed, getattr(model, "gamma", 0.99))
    return result.returns
