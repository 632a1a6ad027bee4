"""The shape of every rule: its spec (`RuleSpec`, `Option`), what its check may know of
the run (`RuleContext`), and the check itself (`RuleCheck`, or `RuleHook` for a rule
that is its own hook). The package's docstring says where the rules live."""


from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

from rltrain.agents.registry import algorithm
from rltrain.utils.hooks.hook import Hook

if TYPE_CHECKING:
    from rltrain.utils.hooks.agent_view import AgentView
    from rltrain.utils.hooks.findings import Rule

Section = Literal["monitor", "diagnostics", "none"]


@dataclass(frozen=True)
class Option:
    """An extra config key of one rule (beside threshold and action)."""

    name: str
    default: Any
    help: str
    valid: Any = None  # a utils.config.Range, or None
    type: Any = None   # the value's type (default: the default's type)


@dataclass(frozen=True)
class RuleSpec:
    """One rule: where it is configured, what it means and what to do about it."""

    name: str
    section: Section  # "none": always reported, not configurable (a run stopped by its env)
    fires_when: str   # the config help text: what makes it fire
    hypothesis: str   # "if X, then Y should be observable"
    check: str        # what to look at or change
    threshold: float | None = None  # default (None: the rule has no threshold of its own)
    action: str = "warn"            # default: warn, pause or off
    fixed_threshold: str | None = None  # where a threshold-less rule's limit comes from
    hint: str | None = None         # after a pause: what to change before resuming
    weight_hint: str | None = None  # judged on the weights: a change that keeps them sound
    input_scaled: bool = False      # large rewards or observations set it off too
    group: str = "Training set-up"  # its section in the rule reference
    options: tuple[Option, ...] = ()
    config_class: type | None = None  # a custom config section instead of the generated one
    # The config change proposed as the fix, from the run's config: the findings'
    # `suggested_set` (None where no config change is the remedy).
    remedy: Callable[[Any], dict[str, Any]] | None = None
    # The algorithms whose runs it judges, by family (agents/families.py: ACTION_NOISE,
    # MAX_ENTROPY, ON_POLICY, Q_LEARNING, or a group of them such as ACTOR_Q_CRITICS) or
    # by name (`algo`); None: every one. A rule about the exploration noise, for example,
    # is silent on an algorithm that adds none; one that reads a critic's Q of a Box
    # action is not built for PPO or DQN. `rltrain diagnose` lists the rules a run's
    # algorithm is not judged by.
    algorithms: tuple[str, ...] | None = None

    def judges(self, algo: str) -> bool:
        return self.algorithms is None or algorithm(algo).is_of(self.algorithms)


@dataclass(frozen=True)
class RuleContext:
    """What a rule's check may know of the run: the config, the spaces, the agent's view
    (None where no agent is watched) and the env steps of random warm-up."""

    config: Any  # utils.config.TrainConfig
    obs_dim: int
    action_dim: int
    view: AgentView | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    device: Any = None  # the torch.device the agent trains on (None: the CPU)


class RuleCheck:
    """One rule's decision and words: `spec` says what it is; whoever has the rule's data
    (its own hook, or a family hook that collects the statistics of several rules, as
    the flow-1 diagnostics do) hands it over, and the rule returns `self.fire(...)`
    findings. `self.rule` has the configured threshold and action (from `configured()`);
    `self.settings` the rule's whole config section (its options too)."""

    spec: RuleSpec

    def __init__(self, context: RuleContext) -> None:
        # Here, not at the top: the config schema imports this package, the monitor
        # (with torch) is needed only once a run is watched.
        from rltrain.utils.hooks.findings import make_rule

        self.context = context
        self.settings = getattr(getattr(context.config, self.spec.section), self.spec.name)
        threshold, action = self.configured()
        if not self.spec.judges(context.config.algo):
            action = "off"  # its findings would not be about this algorithm
        remedy = None if self.spec.remedy is None else self.spec.remedy(context.config)
        self.rule: Rule = make_rule(self.spec.name, threshold, action,
                                    context.config.safe_mode, remedy)
        # `self.fire(...)`: the rule's finding, with the spec's remedy as its
        # suggested_set unless the call gives one (`Rule.fire`).
        self.fire = self.rule.fire

    def unjudged(self) -> str | None:
        """Why the rule has not judged the run so far (too little data: say what it
        needs), or None: it judged, or has nothing to wait for. A rule that is off, or
        not about this algorithm, is never unjudged."""
        return None

    def waiting(self, have: int, need: int, what: str, then: str = "") -> str | None:
        """`unjudged`'s words for a rule that needs `need` of `what` and has `have`."""
        if self.rule.action == "off" or have >= need:
            return None
        return f"{have} of the {need} {what} it needs" + (f" ({then})" if then else "")

    def record(self, env_steps: int, **stats: Any) -> None:
        """Log a statistic the rule measured (flow1.jsonl's "rule" lines), where the run's
        diagnostics keep logs (RuleContext.extra["record"]); otherwise nothing."""
        record = self.context.extra.get("record")
        if record is not None:
            record(self.spec.name, env_steps, stats)

    def configured(self) -> tuple[Any, str]:
        """The rule's threshold and action: its config section's, unless it says where
        else they come from (`RuleSpec.fixed_threshold`)."""
        return self.settings.threshold, self.settings.action


class RuleHook(RuleCheck, Hook):
    """A rule that is its own hook: its hook methods check it and return `self.fire(...)`
    findings (see `RuleCheck`)."""

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.name = f"rule:{self.spec.name}"
