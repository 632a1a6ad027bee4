"""`reward_terms`: one term of the reward outweighs the others, or the term meant to drive
learning does not move with the return.

Where the env reports the terms of its reward in `info` (`reward_*` entries, as
Gymnasium's MuJoCo envs do, or a `reward_terms` dict), the flow-1 hook keeps each
episode's sum of every term (utils/diagnosis/measure/reward_terms.py) and hands their
statistics over the window of recent episodes here, once per episode. Two things fire:

- a term other than the driving one that is more than `threshold` of the return (its
  size, the mean of |its sum| per episode, over the sum of every term's size: a term
  that pays in some episodes and costs in others counts at what it moves, not at its
  mean near 0), with 2+ terms, which the agent has
  learnt to play: over the newest episodes it has risen by `min_rise` of its size at the
  run's start or more (a cost paid less, a bonus earned more). That is a control cost
  weighted so that paying it is most of what the agent does, which then learns not to
  act. A cost that is most of the return but that the agent does not shrink is the
  env's price of acting while the task's own reward is still small: HalfCheetah's
  control cost is up to 80% of the return in its first 10,000 steps of healthy training.
  The driving term itself may be all of the return: a walker that has learned to run is
  meant to earn far more forward reward than it pays in control cost.
- the driving term correlating under `min_correlation` with the episode return over
  the episodes the policy played (`min_episodes` of them; a random warm-up's returns
  move with what its random actions cost), with 95% confidence (the correlation's
  one-sided upper bound, tanh(atanh(r) + 1.645 / sqrt(n - 3)) by Fisher's z, under
  `min_correlation`): the return moves with the other terms, and what the agent learns
  from it is theirs. A correlation of 10 episodes says little (its bound lies about
  0.55 above it): early in a healthy Hopper run the return follows how long the walker
  survives, and its forward reward correlated -0.02 with it over the first played
  episodes (the fault benchmark's hopper_sac, seed 1).

The driving term is `drive_term` where set; else the term with the largest positive
mean (a bonus the agent collects: `reward_forward`, a goal bonus), leaving out a bonus
for staying alive (`ALIVE`: survive, healthy, alive; Hopper's `reward_survive` is most
of an early return, paid whatever the agent does while it stands, and drives only where
no other term could); in a reward made of
costs only (Pendulum's, split), the largest cost whose name does not mark it as a
regularizer (`REGULARIZERS`: ctrl, control, action, energy, effort, torque, contact):
Pendulum's angle cost was 94% of the return of a healthy run as it learned (the fault
benchmark's `pendulum_terms_ddpg`, step 2000), and is its objective. Where every term
is a regularizer there is none.

The fix, where the env takes the term's weight as a keyword (its constructor names it,
or the run's `env_kwargs` already set it), is that weight, lowered: `reward_ctrl` ->
`ctrl_cost_weight` (or `control_cost_weight`, `reward_control_weight`...),
`reward_survive` -> `healthy_reward`. `env_kwargs` cannot change on resume: it is a new
run's setting. Elsewhere the message says to reweight the term in the env.
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING, Any

from rltrain.utils.config.fields import Range
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

# Words that name a term as a regularizer (a cost on the agent's effort), never the
# objective: MuJoCo's reward_ctrl and reward_contact, "action_rate", "energy"...
REGULARIZERS = ("ctrl", "control", "action", "energy", "effort", "torque", "contact")
# Words that name a term as a bonus for staying alive: it drives only a task that has
# no other term (Hopper's reward_survive is most of an early return, not its task).
ALIVE = ("survive", "healthy", "alive")
TARGET_SHARE = 0.5  # the proposed weight makes the term about this share of the return
Z_ONE_SIDED_95 = 1.645  # the standard normal's 95th percentile
# A term's name (without `reward_`) -> the other names its weight goes by.
SYNONYMS = {"ctrl": ("ctrl", "control"), "control": ("control", "ctrl"),
            "survive": ("healthy", "survive"), "healthy": ("healthy", "survive")}

SPECS = (RuleSpec(
    name="reward_terms", section="diagnostics", group="Reward signal",
    threshold=0.95, action="warn",
    fires_when="a reward term other than the driving one carries more than this share of "
               "the return (2+ terms reported in info) and has risen by min_rise of its "
               "size at the run's start (the agent learns to avoid the cost); or the "
               "driving term correlates under min_correlation with the episode return, "
               "with 95% confidence",
    hypothesis="if one term of the reward outweighs the others (a control cost weighted too "
               "heavily), then it is most of the return and the agent learns to avoid it "
               "(not to act); if the term meant to drive learning barely moves with the "
               "return, then the agent learns the other terms, not the task",
    check="the env's weights of its reward terms (env_kwargs: ctrl_cost_weight, "
          "forward_reward_weight, healthy_reward...); the driving term is drive_term, else "
          "the term with the largest positive mean, else the largest cost not named as a "
          "regularizer (ctrl, control, action, energy, effort, torque, contact), leaving "
          "out an alive bonus (survive, healthy, alive) where another term exists",
    hint="the weights of the reward terms are the env's (env_kwargs), which a resume "
         "cannot change: start a new run with the term reweighted",
    options=(
        Option("min_correlation", 0.3, "the driving term correlating with the episode "
               "return under this (with 95% confidence) fires", Range(-1, 1)),
        Option("min_rise", 0.5, "a dominant term counts once its sum per episode over "
               "the newest 3 episodes has risen by this share of its size over the run's "
               "first 3 (a cost paid less, a bonus earned more)", Range(0, None)),
        Option("min_episodes", 10, "episodes with reward terms in the window before the "
               "rule judges (the correlation needs 4 played ones at least)",
               Range(2, None)),
        Option("drive_term", None, "the reward term meant to drive learning (e.g. "
               "reward_forward); none: the term with the largest positive mean, else the "
               "largest cost not named as a regularizer, an alive bonus only where no "
               "other term is", type=str | None),
    ),
),)

Stats = dict[str, dict[str, Any]]  # utils/diagnosis/measure/reward_terms.term_stats


class RewardTerms(RuleCheck):
    spec = SPECS[0]

    def driving(self, stats: Stats) -> str | None:
        """The term meant to drive learning: `drive_term`; else, leaving out an alive
        bonus, the largest positive mean, else (costs only) the largest cost not named as
        a regularizer; else the alive bonus itself (a task of staying alive)."""
        named = self.settings.drive_term
        if named is not None:
            return named if named in stats else None
        task = {n: s for n, s in stats.items() if not alive_bonus(n)}
        positive = {n: s["mean"] for n, s in task.items() if s["mean"] > 0}
        if positive:
            return max(positive, key=lambda n: positive[n])
        costs = {n: -s["mean"] for n, s in task.items() if not regularizer(n)}
        if costs:
            return max(costs, key=lambda n: costs[n])
        alive = {n: s["mean"] for n, s in stats.items() if alive_bonus(n)}
        return max(alive, key=lambda n: alive[n]) if alive else None

    def check(self, env_steps: int, stats: Stats, episodes: int) -> list[Finding]:
        if episodes < self.settings.min_episodes:
            return []
        drive = self.driving(stats)
        return self._dominant(env_steps, stats, drive) + self._uncorrelated(
            env_steps, stats, drive, episodes)

    def _dominant(self, env_steps: int, stats: Stats, drive: str | None) -> list[Finding]:
        if len(stats) < 2:
            return []
        shares = {n: s["share"] for n, s in stats.items() if n != drive}
        if not shares:
            return []
        name = max(shares, key=lambda n: shares[n])
        if not shares[name] > self.rule.threshold or not self._played(stats[name]):
            return []
        others = sum(_size(s) for n, s in stats.items() if n != name)
        mean, size = stats[name]["mean"], _size(stats[name])
        # a term of both signs: what it moves an episode by, beside its mean
        moved = f", {size:.4g} in size" if size > 1.01 * abs(mean) else ""
        message = (f"reward term {name} is {shares[name]:.0%} of the return (mean {mean:.4g} "
                   f"per episode{moved}; the other terms together {others:.4g} in size)")
        fix = weight_fix(self.context.config, name, others / size * TARGET_SHARE
                         / (1 - TARGET_SHARE) if size else 1.0)
        if fix is None:
            return self.fire(env_steps, round(shares[name], 4),
                             f"{message}: lower its weight in the env")
        key, value = fix
        return self.fire(env_steps, round(shares[name], 4),
                         f"{message}: start a new run with --set {key}={value:g}, which makes "
                         f"it about {TARGET_SHARE:.0%} of the return at today's behaviour",
                         suggested_set={key: value})

    def _played(self, term: dict[str, Any]) -> bool:
        """Whether the agent has moved the term its own way since the run's start: its
        newest episodes' sum has risen by `min_rise` of its size at the start."""
        start = term.get("start")
        if start is None:
            return False
        return term["recent"] - start >= self.settings.min_rise * abs(start)

    def _uncorrelated(self, env_steps: int, stats: Stats, drive: str | None,
                      episodes: int) -> list[Finding]:
        if drive is None or stats[drive]["corr"] is None:
            return []
        played = stats[drive].get("played", episodes)
        if played < self.settings.min_episodes:  # the warm-up's are not what it learns
            return []
        episodes, corr = played, stats[drive]["corr"]
        bound = correlation_bound(corr, episodes)
        if not bound < self.settings.min_correlation:
            return []
        why = ("drive_term" if self.settings.drive_term else "an alive bonus, the only "
               "term that is no regularizer" if alive_bonus(drive) else "the largest "
               "positive mean" if stats[drive]["mean"] > 0 else "the largest cost that is "
               "no regularizer")
        moving = max((n for n in stats if n != drive and stats[n]["corr"] is not None),
                     key=lambda n: stats[n]["std"], default=None)
        other = "" if moving is None else (
            f"; it moves most with {moving} (correlation {stats[moving]['corr']:.2f}, std "
            f"{stats[moving]['std']:.4g} per episode against {stats[drive]['std']:.4g})")
        return self.fire(env_steps, round(corr, 3),
                         f"reward term {drive}, the one meant to drive learning ({why}), "
                         f"correlates {corr:.2f} with the episode return over the last "
                         f"{episodes} episodes (at most {bound:.2f} with 95% confidence)"
                         f"{other}: reweight the terms in the env so that the return "
                         "follows it", suggested_set={})

    def waiting_for(self, with_terms: int, without_terms: int) -> str | None:
        """`unjudged`'s reason, from the episodes that ended with and without terms."""
        if self.rule.action == "off":
            return None
        if with_terms == 0 and without_terms > 0:
            workers = (" (with num_workers the env runners do not send them)"
                       if self.context.config.num_workers else "")
            return ("no reward terms reported in info (reward_* entries or a "
                    f"reward_terms dict){workers}")
        return self.waiting(with_terms, self.settings.min_episodes,
                            "episodes with reward terms")


def correlation_bound(corr: float, episodes: int) -> float:
    """The one-sided 95% upper bound of a Pearson correlation measured over `episodes`
    pairs (Fisher's z transform: atanh(r) has a standard error of 1 / sqrt(n - 3));
    1.0 with too few to bound it."""
    if episodes <= 3:
        return 1.0
    z = math.atanh(min(max(corr, -0.999999), 0.999999))
    return math.tanh(z + Z_ONE_SIDED_95 / math.sqrt(episodes - 3))


def _size(term: dict[str, Any]) -> float:
    """What a term pays or costs an episode (`size`; |mean| in statistics kept before
    it was measured)."""
    return float(term.get("size", abs(term["mean"])))


def alive_bonus(term: str) -> bool:
    """Whether `term`'s name marks it as a bonus per step alive (MuJoCo's
    reward_survive, healthy_reward): paid whatever the agent does while it stands, not
    the task it is meant to learn."""
    stem = term[len("reward_"):] if term.startswith("reward_") else term
    return any(part in ALIVE for part in stem.lower().split("_"))


def regularizer(term: str) -> bool:
    """Whether `term`'s name marks it as a cost on the agent's effort."""
    stem = term[len("reward_"):] if term.startswith("reward_") else term
    return any(part in REGULARIZERS for part in stem.lower().split("_"))


def weight_fix(config: Any, term: str, factor: float) -> tuple[str, float] | None:
    """(`env_kwargs.<weight>`, its value times `factor`) for the env keyword that weighs
    `term`, where the env takes one and its value is known: set in `env_kwargs`, or the
    env's default where rltrain made the env from the config (a watched library's env,
    `library` set, was made by the user's code with keywords the config does not see)."""
    if not math.isfinite(factor) or factor <= 0:
        return None
    taken = {} if config.library else env_keywords(config.env_name)
    for name in weight_names(term):
        value = config.env_kwargs.get(name, taken.get(name))
        if (name in config.env_kwargs or name in taken) and _number(value):
            return f"env_kwargs.{name}", float(f"{value * factor:.3g}")
    return None


def weight_names(term: str) -> list[str]:
    """The keyword names an env's weight of `term` goes by (MuJoCo's and the like)."""
    stem = term[len("reward_"):] if term.startswith("reward_") else term
    names = []
    for s in SYNONYMS.get(stem, (stem,)):
        names += [f"{s}_cost_weight", f"{s}_reward_weight", f"reward_{s}_weight",
                  f"{s}_weight", f"{s}_reward"]
    return names


def env_keywords(env_name: str) -> dict[str, Any]:
    """The keywords the env's constructor names, with their values (the registration's
    kwargs over the defaults); none where it cannot be looked up."""
    from gymnasium.envs.registration import _find_spec, load_env_creator  # as gym.make

    try:
        spec = _find_spec(env_name)
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(
            spec.entry_point)
        target = creator.__init__ if inspect.isclass(creator) else creator
        parameters = inspect.signature(target).parameters
    except Exception:  # an env that cannot be looked up has no weights to propose
        return {}
    taken = {name: p.default for name, p in parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {**taken, **{k: v for k, v in spec.kwargs.items() if k in taken}}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


CHECKS = (RewardTerms,)
