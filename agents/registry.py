"""Every algorithm rltrain trains or watches, one entry each: its name, a line that says what it is,
its own config options, how it explores, which target networks it keeps, and the module
that implements it.

This is the one place that names algorithms: the config schema (the `algo` choices and
one option section per algorithm), RL Zoo's and Stable-Baselines3's names for an
option (`option(library=...)`), other tools' names for the "did you mean", the keys a
checkpoint holds, and which rules judge a run (a rule names families, or an algorithm)
are all read from here. Each entry names its family (agents/families.py: what runs of
its kind are made of). Some entries are watched only: rltrain watches another library's
training of them (SB3's PPO, A2C and DQN) and never trains them itself. It imports
neither torch nor the algorithms' modules: commands that must start quickly build the
config from it. A run loads the module's `IMPLEMENTATION` (agents/base.py) when it
builds the agent.

Adding an algorithm: its module in `agents/` (the agent and `IMPLEMENTATION`), its
entry below (with its options dataclass, if it has options), and its configs. An entry
made elsewhere (a plug-in, a test) is added with `register` before the config is first
imported (the schema is built from the entries once, at import).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any

from rltrain.agents.families import (
    ACTION_NOISE,
    FAMILIES,
    FAMILY_TRAITS,
    MAX_ENTROPY,
    ON_POLICY,
    Q_LEARNING,
    Family,
)


def option(default: Any, help: str, low: float | None = None, high: float | None = None,
           low_open: bool = False, library: str | None = None,
           aliases: tuple[str, ...] = ()) -> Any:
    """A field of an algorithm's options: its default, its help (the config reference's
    text) and its allowed interval, which the config turns into its own range check.
    `library`: what RL Zoo's files and Stable-Baselines3 (or sb3-contrib) call it, a
    constructor argument or `policy_kwargs.<name>` (None: the field's own name; "": they
    have none); `aliases`: other tools' names for it (CleanRL, reference code)."""
    return field(default=default, metadata={"help": help, "bounds": (low, high, low_open),
                                            "library": library, "aliases": aliases})


@dataclass(frozen=True)
class Algorithm:
    """One algorithm's entry."""

    name: str      # the config's `algo` value
    summary: str   # what it is, in a few words (`--help`, the config reference)
    # the module whose `IMPLEMENTATION` builds its agent; None: rltrain does not train it,
    # it only watches another library's training of it (SB3's PPO, A2C, DQN)
    module: str | None
    # Its own config section (`td3:`, `sac:`), a frozen dataclass of `option` fields;
    # None: it has none.
    options: type | None = None
    # Its family (agents/families.py): ACTION_NOISE, MAX_ENTROPY, ON_POLICY or
    # Q_LEARNING.
    family: str = ACTION_NOISE
    # The networks it keeps a Polyak-averaged target copy of; the config's `tau` is
    # refused for an algorithm that keeps none (it would silently change nothing).
    targets: tuple[str, ...] = ("actor", "critic")
    # The class name of its Stable-Baselines3 (or sb3-contrib) counterpart, which the
    # SB3 callback records under this algorithm's name; None: none.
    sb3_class: str | None = None

    def __post_init__(self) -> None:
        assert self.family in FAMILIES, f"{self.name}: unknown family {self.family!r}"

    @property
    def section(self) -> str | None:
        return self.name if self.options is not None else None

    @property
    def adds_action_noise(self) -> bool:
        """Explores with the config's action noise added to a deterministic policy; False:
        by sampling its own policy."""
        return self.family == ACTION_NOISE

    @property
    def trained(self) -> bool:
        """rltrain trains it itself (else it only watches another library's training)."""
        return self.module is not None

    @property
    def traits(self) -> Family:
        return FAMILY_TRAITS[self.family]

    def implementation(self) -> Any:
        """The module's `IMPLEMENTATION` (imports torch)."""
        assert self.module is not None, f"{self.name} is watched only"
        return importlib.import_module(self.module).IMPLEMENTATION

    def options_from(self, values: dict[str, Any] | None) -> Any:
        """The options dataclass from a mapping of its fields (None: the defaults)."""
        if self.options is None:
            return None
        known = {f.name for f in dataclasses.fields(self.options)}
        return self.options(**{k: v for k, v in (values or {}).items() if k in known})

    def is_of(self, names: tuple[str, ...]) -> bool:
        """Whether `names` (algorithm names and families) name this algorithm."""
        return self.name in names or self.family in names

    def library_names(self) -> dict[str, str]:
        """Its options by the name RL Zoo and SB3 give them -> rltrain's dotted key
        (`{"policy_delay": "td3.policy_delay"}`); policy_kwargs' as `policy_kwargs.<name>`."""
        return {library: f"{self.section}.{name}" for name, library, _ in self._names()
                if library}

    def aliases(self) -> dict[str, str]:
        """Other tools' names of its options (SB3's and RL Zoo's among them) -> rltrain's
        dotted key."""
        found: dict[str, str] = {}
        for name, library, others in self._names():
            for alias in (library.rpartition(".")[2], *others):
                if alias:
                    found[alias] = f"{self.section}.{name}"
        return found

    def _names(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(field, library name or "", other tools' names) of every option."""
        if self.options is None:
            return []
        found = []
        for f in dataclasses.fields(self.options):
            library = f.metadata.get("library")
            found.append((f.name, f.name if library is None else library,
                          tuple(f.metadata.get("aliases", ()))))
        return found


@dataclass(frozen=True)
class TD3Options:
    """Fujimoto et al., 2018: delayed actor updates and target policy smoothing."""

    policy_delay: int = option(
        2, "actor and target updates happen every this many critic updates", low=1,
        aliases=("policy_frequency",))  # CleanRL's name
    target_policy_noise: float = option(
        0.2, "std of the target policy smoothing noise, relative to the action half-range",
        low=0, aliases=("policy_noise",))  # sfujim/TD3's and CleanRL's
    target_noise_clip: float = option(
        0.5, "the smoothing noise is clipped to +/- this, relative to the action half-range",
        low=0, aliases=("noise_clip",))


def ent_coef_option() -> Any:
    """The temperature of every MAX_ENTROPY algorithm (as Stable-Baselines3 names it)."""
    return option(
        "auto", "entropy temperature alpha: auto (learnt, starting at 1), auto_<start> "
        "(learnt, starting at <start>, e.g. auto_0.1), or a fixed positive number", low=0,
        low_open=True)


def target_entropy_option() -> Any:
    return option(
        "auto", "the policy entropy the learnt temperature aims at: auto (-dim(action)) or a "
        "number")


@dataclass(frozen=True)
class SACOptions:
    """Haarnoja et al., 2018: the entropy temperature (as Stable-Baselines3 names it)."""

    ent_coef: str | float = ent_coef_option()
    target_entropy: str | float = target_entropy_option()
    target_update_interval: int = option(
        1, "updates between Polyak updates of the target critic", low=1)


@dataclass(frozen=True)
class CrossQOptions:
    """Bhatt et al., ICLR 2024: no target networks; batch renormalisation in the actor and
    the critic, whose statistics cover the current and the next state-actions together.
    Defaults are sb3-contrib's."""

    ent_coef: str | float = ent_coef_option()
    target_entropy: str | float = target_entropy_option()
    policy_delay: int = option(
        3, "the actor and the temperature are stepped every this many critic updates", low=1)
    batch_norm_momentum: float = option(
        0.01, "how fast the batch renormalisation's running statistics follow the batches'",
        low=0, high=1, low_open=True, library="policy_kwargs.batch_norm_momentum")
    batch_norm_eps: float = option(
        0.001, "added to the variance before its square root in batch renormalisation",
        low=0, low_open=True, library="policy_kwargs.batch_norm_eps")
    renorm_warmup_steps: int = option(
        100_000, "training passes of each batch renormalisation layer that normalise with the "
        "batch's statistics alone (plain batch normalisation) before the running ones "
        "correct them", low=0, library="policy_kwargs.renorm_warmup_steps")


@dataclass(frozen=True)
class TQCOptions:
    """Kuznetsov et al., 2020: critics that predict quantiles of the return; the target
    drops the highest ones of their pooled prediction. Defaults are sb3-contrib's."""

    ent_coef: str | float = ent_coef_option()
    target_entropy: str | float = target_entropy_option()
    target_update_interval: int = option(
        1, "updates between Polyak updates of the target critics", low=1)
    top_quantiles_to_drop_per_net: int = option(
        2, "per critic, this many of the highest target quantiles are dropped (the "
        "overestimation control)", low=0)
    n_quantiles: int = option(
        25, "quantiles each critic predicts", low=1, library="policy_kwargs.n_quantiles")
    n_critics: int = option(
        2, "critics, whose quantiles are pooled", low=1, library="policy_kwargs.n_critics")

    def __post_init__(self) -> None:
        if self.top_quantiles_to_drop_per_net >= self.n_quantiles:
            raise ValueError(
                f"config key 'tqc.top_quantiles_to_drop_per_net' "
                f"({self.top_quantiles_to_drop_per_net}) must be below tqc.n_quantiles "
                f"({self.n_quantiles}): the target would keep no quantile")


ALGORITHMS: dict[str, Algorithm] = {}


def register(entry: Algorithm) -> Algorithm:
    """Add `entry` (an algorithm of this package, a plug-in's or a test's). Call it before
    the config is first imported: the schema's `algo` choices and sections are built
    from the entries then."""
    if entry.name in ALGORITHMS:
        raise ValueError(f"algo {entry.name!r} is registered already")
    ALGORITHMS[entry.name] = entry
    return entry


for _entry in (
    Algorithm("ddpg", "deterministic policy, explores with action noise", "rltrain.agents.ddpg",
              sb3_class="DDPG"),
    Algorithm("td3", "delayed actor, smoothed targets", "rltrain.agents.td3", TD3Options,
              sb3_class="TD3"),
    Algorithm("sac", "stochastic policy, explores by its entropy (soft actor-critic)",
              "rltrain.agents.sac", SACOptions, family=MAX_ENTROPY, targets=("critic",),
              sb3_class="SAC"),
    Algorithm("crossq", "SAC without target networks, batch-renormalised actor and critic",
              "rltrain.agents.crossq", CrossQOptions, family=MAX_ENTROPY, targets=(),
              sb3_class="CrossQ"),
    Algorithm("tqc", "SAC with quantile critics whose highest target quantiles are dropped",
              "rltrain.agents.tqc", TQCOptions, family=MAX_ENTROPY, targets=("critic",),
              sb3_class="TQC"),
    # Watched only (RltrainCallback on Stable-Baselines3's classes); `rltrain train`
    # refuses them (utils/config/cross_checks.py).
    Algorithm("ppo", "watched only: proximal policy optimisation (SB3's PPO)", None,
              family=ON_POLICY, targets=(), sb3_class="PPO"),
    Algorithm("a2c", "watched only: advantage actor-critic (SB3's A2C)", None,
              family=ON_POLICY, targets=(), sb3_class="A2C"),
    Algorithm("dqn", "watched only: deep Q-network, Discrete actions (SB3's DQN)", None,
              family=Q_LEARNING, targets=("critic",), sb3_class="DQN"),
):
    register(_entry)


def section_of(config: Any) -> Any:
    """The config's section of its own algorithm (`config.sac` for algo sac; None where
    the algorithm has no options): what a rule reads instead of naming the algorithm."""
    section = algorithm(config.algo).section
    return None if section is None else getattr(config, section)


def trained_names() -> tuple[str, ...]:
    """The algorithms rltrain trains itself (`rltrain train`'s `algo` choices)."""
    return tuple(name for name, entry in ALGORITHMS.items() if entry.trained)


def algorithm(name: str) -> Algorithm:
    """The entry of `name`; a ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algo {name!r}; one of {', '.join(ALGORITHMS)}") from None
