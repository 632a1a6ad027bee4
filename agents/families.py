"""The families of algorithms: what is true of every algorithm of a kind. A family is
described once, by three things a watcher must know of a run: its policy's kind, its
value estimate and the data it learns from, and by the action spaces it acts in
(`FAMILY_TRAITS`).

Each algorithm's entry (agents/registry.py `Algorithm.family`) names its family, and
what depends on how a run is made reads the family, not the algorithm: a rule says which
runs it judges by family (`RuleSpec.algorithms`, often a group derived from the traits
with `families_where`: `ACTOR_Q_CRITICS`, `REPLAYED`); the collector adds the config's
action noise for `ACTION_NOISE` and lets the others sample their own policy; the config's
noise keys (`exploration_noise`, ...) are refused for an algorithm outside
`ACTION_NOISE`; the SB3 callback and the Watcher read a watched-only run by its family
(`ON_POLICY`, `Q_LEARNING`: SB3's PPO, A2C and DQN). Torch-free, like the registry.
"""

from __future__ import annotations

from dataclasses import dataclass

# The families, each described once in `FAMILY_TRAITS` (below):
# a deterministic policy, explored with the config's action noise (exploration_noise, ...)
ACTION_NOISE = "action_noise"
# a tanh-squashed Gaussian policy that explores by sampling itself, its entropy kept up by
# a temperature: the options `ent_coef` (fixed, or learnt: "auto") and `target_entropy`
# (what a learnt one aims at), in the algorithm's own section
MAX_ENTROPY = "max_entropy"
# watched only (another library trains them): a policy gradient on rollouts of the
# current policy (PPO, A2C), a Gaussian policy for Box actions, a categorical one for
# Discrete actions, and a state value V as its baseline; no replay buffer
ON_POLICY = "on_policy"
# watched only: a Q network over Discrete actions, acted on epsilon-greedily (DQN), fit
# from a replay buffer
Q_LEARNING = "q_learning"
FAMILIES = (ACTION_NOISE, MAX_ENTROPY, ON_POLICY, Q_LEARNING)

# A policy's kind
DETERMINISTIC, GAUSSIAN, CATEGORICAL, EPSILON_GREEDY = (
    "a deterministic policy", "a Gaussian policy", "a categorical policy",
    "an epsilon-greedy choice over Q values")
# A value estimate
Q_CRITICS, STATE_VALUE, Q_NETWORK = ("Q critics", "a state value V", "a Q network")
# The data it learns from
REPLAY, ROLLOUTS = "a replay buffer", "on-policy rollouts"


@dataclass(frozen=True)
class Family:
    """What a family's runs are made of."""

    policies: tuple[str, ...]  # its policy's kind (two: by the action space, Box first)
    value: str                 # its value estimate
    data: str                  # what it learns from
    box_actions: bool          # acts in a Box (in the env's units) always
    discrete_actions: bool     # may act in a Discrete space

    def describe(self) -> str:
        """In words: "a Gaussian policy or a categorical policy, a state value V,
        on-policy rollouts"."""
        return f"{' or '.join(self.policies)}, {self.value}, {self.data}"


FAMILY_TRAITS = {
    ACTION_NOISE: Family((DETERMINISTIC,), Q_CRITICS, REPLAY, True, False),
    MAX_ENTROPY: Family((GAUSSIAN,), Q_CRITICS, REPLAY, True, False),
    ON_POLICY: Family((GAUSSIAN, CATEGORICAL), STATE_VALUE, ROLLOUTS, False, True),
    Q_LEARNING: Family((EPSILON_GREEDY,), Q_NETWORK, REPLAY, False, True),
}


def families_where(value: str | None = None, data: str | None = None,
                   box_actions: bool | None = None) -> tuple[str, ...]:
    """The families with these traits, for a rule's `RuleSpec.algorithms`: e.g.
    `families_where(value=Q_CRITICS)` for a rule that reads a critic's Q of a Box action."""
    return tuple(name for name, f in FAMILY_TRAITS.items()
                 if value in (None, f.value) and data in (None, f.data)
                 and box_actions in (None, f.box_actions))


# The families whose value estimate is Q critics of a Box actor's actions in [low, high]
# (rltrain's own algorithms): what the critic checks, the fit checks and the actor's
# rules read.
ACTOR_Q_CRITICS = families_where(value=Q_CRITICS)
# The families that learn from a replay buffer (its size, its batches' integrity).
REPLAYED = families_where(data=REPLAY)
