"""`target_update`: target networks that are frozen, or that chase the online ones.

Measured every `every_updates` updates on the critic and its target (the networks the
agent's view names `critic_target`; an integration without targets is not judged): the
distance ||target - online|| / ||online||, in units of one update's own step
||dw||/||w||, a lag in updates. Soft updates with the usual tau (0.001..0.05) keep the
target some tens to hundreds of updates behind. A lag below the threshold means the
target follows within an update or two (tau near 1): the TD target moves with every
update and the critic chases itself. A distance above `frozen` (a share of the weights'
norm) means the target stayed near where it started (tau near 0) while the online
critic moved on: the TD targets come from a critic that no longer exists. A target
that did not change at all over `measurements` spans of `every_updates` updates while
the online critic moved, with a tau of the usual size, is not a tau to tune: the loop
never updates it (a code fault).

DQN (the Q_LEARNING family) copies its Q network into the target every
`target_update_interval` env steps (SB3's; RLlib's target_network_update_freq): the
target is some number of updates behind, then none. A copy every few updates is RL
Zoo's tuned CartPole (every 10 env steps), so a DQN is judged for a frozen target only:
further than `frozen` of the Q network's norm, its TD targets come from a network it no
longer is (SB3's default of 10,000 env steps is Atari's scale: a 50,000-step CartPole run
copies it five times). The fix proposed is a copy about every 1/tau updates
(PROPOSED_TAU's), in env steps at the run's own updates per env step; where the library's
own `tau` (Polyak averaging at each of its updates, 1 by default) makes the target lag
although the interval is short, tau 1. A target that did
not change over the newest spans is a target never updated only where the interval is
known and shorter than those spans. A frozen target copied at least as often as
proposed is left to the rules on the rate: the Q network itself moves too fast.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS, Q_LEARNING
from rltrain.agents.registry import algorithm
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules._weights import USUAL_TAU, flat, relative_change
from rltrain.utils.diagnosis.rules.on_policy_rules import library_setting
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Update

if TYPE_CHECKING:
    import torch

PROPOSED_TAU = 0.005

SPECS = (RuleSpec(
    name="target_update", section="diagnostics", threshold=2.0, action="warn",
    algorithms=(*ACTOR_Q_CRITICS, Q_LEARNING),
    fires_when="the critic's target is fewer than this many updates' steps behind the "
               "online critic (chasing; not judged for DQN, whose copies every few updates "
               "are a tuned setting), or further than `frozen` of its norm (frozen)",
    hypothesis="if tau is far too high, then the target network equals the online one "
               "within an update or two and the TD targets move with every update; if far "
               "too low, the target stays near its start while the online critic moves away",
    check="set tau into the usual 0.001..0.05 (0.005 is common); DQN: copy the target "
          "every few hundred updates (target_update_interval)",
    options=(Option("frozen", 0.5, "a target further than this share of the online "
                    "critic's weight norm counts as frozen", POSITIVE),
             Option("every_updates", 250, "updates between two measurements", AT_LEAST_ONE),
             Option("measurements", 5, "newest measurements whose median is judged",
                    AT_LEAST_ONE)),
),)


class TargetUpdate(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.lags: list[float] = []
        self.distances: list[float] = []
        self.before: torch.Tensor | None = None
        # The target's own change from one measurement to the next (0: it never moved)
        # and the online critic's over the same span.
        self.target_moves: list[float] = []
        self.online_moves: list[float] = []
        self.then: tuple[torch.Tensor, torch.Tensor] | None = None
        self.copied = algorithm(self.context.config.algo).family == Q_LEARNING  # DQN's copies
        self.updates_per_step = 0.0  # the run's updates per env step since learning began

    def _networks(self) -> tuple[Any, Any] | None:
        view = self.context.view
        if view is None:
            return None
        nets = view.networks()
        target = nets.get("critic_target", nets.get("q_net_target"))
        return None if target is None else (view.critic, target)

    def on_update(self, update: Update) -> list[Finding]:
        learning = update.env_steps - int(self.context.config.learning_starts)
        self.updates_per_step = update.updates / max(learning, 1)
        due = update.updates % max(1, self.settings.every_updates) == 0
        if self.before is None and not due:  # nothing to measure (this runs per update)
            return []
        nets = self._networks()
        if nets is None:
            return []
        online, target = nets
        # TD3's targets move with its actor's updates; a DQN's target at its copies only
        if self.before is not None and ("actor_loss" in update.metrics or self.copied):
            after = flat(online)
            step = relative_change(self.before, after)
            distance = relative_change(after, flat(target))
            keep = self.settings.measurements
            self.lags = [*self.lags, distance / step if step > 0 else float("inf")][-keep:]
            self.distances = [*self.distances, distance][-keep:]
            self.before = None
        if due:
            self.before = flat(online)
            self._span(self.before, flat(target))
            return self._judge(update.env_steps)
        return []

    def _span(self, online: torch.Tensor, target: torch.Tensor) -> None:
        """How far the target and the online critic moved since the last measurement."""
        if self.then is not None:
            keep = self.settings.measurements
            self.online_moves = [*self.online_moves,
                                 relative_change(self.then[0], online)][-keep:]
            self.target_moves = [*self.target_moves,
                                 relative_change(self.then[1], target)][-keep:]
        self.then = (online, target)

    def _judge(self, env_steps: int) -> list[Finding]:
        never = self._never_updated(env_steps)
        if never or len(self.lags) < self.settings.measurements:
            return never
        lag, distance = statistics.median(self.lags), statistics.median(self.distances)
        self.record(env_steps, distance=round(distance, 4), lag_updates=round(lag, 2)
                    if math.isfinite(lag) else None)
        if self.copied:
            return self._judge_copies(env_steps, distance)
        tau = self.context.config.tau
        if lag < self.rule.threshold:
            what = (f"the critic's target is {lag:.2g} updates' steps behind the online "
                    f"critic (distance {distance:.2g} of its norm): it chases it, tau {tau:g}")
        elif distance > self.settings.frozen:
            what = (f"the critic's target is {distance:.2g} of the online critic's norm away "
                    f"({lag:.3g} updates' steps): it is frozen near its start, tau {tau:g}")
        else:
            return []
        return self.rule.fire(env_steps, {"lag_updates": float(f"{lag:.3g}"),
                                     "distance": float(f"{distance:.3g}")},
                         f"{what}; the usual tau is {USUAL_TAU[0]:g}..{USUAL_TAU[1]:g}: "
                         f"resume with --set tau={PROPOSED_TAU}",
                         suggested_set={"tau": PROPOSED_TAU})

    def _judge_copies(self, env_steps: int, distance: float) -> list[Finding]:
        """A DQN's target, copied every `target_update_interval` env steps: frozen only."""
        if distance <= self.settings.frozen:
            return []
        interval = library_setting(self.context.config, "target_update_interval")
        tau = self._copy_tau()
        proposed = self._proposed_interval()
        if isinstance(interval, int) and proposed >= interval / tau:
            return []  # copied often enough: the Q network itself moves too fast
        every = (f"copied every {interval} env steps" if isinstance(interval, int)
                 else "copied rarely")
        fix: dict[str, Any] = {}
        if isinstance(interval, int) and tau < 1 and proposed >= interval:
            every += f" but moved only tau {tau:g} of the way each time"
            fix = {"tau": 1.0}
            how = "tau 1 (a copy at each of those updates)"
        elif isinstance(interval, int):
            fix = {"target_update_interval": proposed}
            how = (f"target_update_interval {proposed} (about {1 / PROPOSED_TAU:.0f} updates "
                   f"at this run's {self.updates_per_step:.2g} updates per env step)")
        else:
            how = f"copy it about every {1 / PROPOSED_TAU:.0f} updates"
        # (no lag: SB3 hands a DQN's gradient steps on in bursts, between which the
        # weights the rule sees do not move)
        return self.rule.fire(env_steps, {"distance": float(f"{distance:.3g}")},
                              f"the Q network's target is {distance:.2g} of the Q network's "
                              f"norm away, {every}: its TD targets come from a network it "
                              f"no longer is; {how}", suggested_set=fix)

    def _copy_tau(self) -> float:
        """How far each of a DQN's target updates moves it (SB3's and RLlib's `tau`: 1, a
        copy, by default; Polyak averaging below)."""
        tau = library_setting(self.context.config, "tau", 1.0)
        return float(tau) if isinstance(tau, (int, float)) and 0 < tau <= 1 else 1.0

    def _proposed_interval(self) -> int:
        """Env steps between two copies for a copy about every 1/PROPOSED_TAU updates."""
        per_step = self.updates_per_step if self.updates_per_step > 0 else 1.0
        return max(int(round(1 / PROPOSED_TAU / per_step, -1)), 10)

    def _copy_interval_updates(self) -> float | None:
        """A DQN's updates between two copies of its target (None: not known)."""
        interval = library_setting(self.context.config, "target_update_interval")
        if not isinstance(interval, (int, float)):
            return None
        return float(interval) * self.updates_per_step / self._copy_tau()

    def _never_updated(self, env_steps: int) -> list[Finding]:
        """The target did not change in any of the newest spans; the online critic did.
        A DQN whose copies are further apart than those spans, or whose interval is not
        known (a loop of your own), is `_judge_copies`'s."""
        updates = len(self.target_moves) * self.settings.every_updates
        between = self._copy_interval_updates()
        if (len(self.target_moves) < self.settings.measurements or any(self.target_moves)
                or not all(self.online_moves)
                or (self.copied and (between is None or between >= updates))
                or self.context.config.tau < USUAL_TAU[0]):  # a tau too small explains it
            return []
        moved = sum(self.online_moves)
        return self.rule.fire(
            env_steps, {"target_moved": 0.0, "online_moved": float(f"{moved:.3g}")},
            f"the critic's target has not changed in {updates} updates while the online "
            f"critic moved {moved:.2g} of its norm: the loop does not update its target "
            "networks (tau is not the cause); after each update move each target toward "
            "its network, target = (1 - tau) * target + tau * online",
            suggested_set={})

    def unjudged(self) -> str | None:
        if self._networks() is None:
            return None
        return self.waiting(len(self.lags), self.settings.measurements, "measurements",
                            f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"lags": self.lags, "distances": self.distances,
                "target_moves": self.target_moves, "online_moves": self.online_moves}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lags = [float(x) for x in state["lags"]]
        self.distances = [float(x) for x in state["distances"]]
        # (saved before the spans were measured: they start afresh)
        self.target_moves = [float(x) for x in state.get("target_moves", [])]
        self.online_moves = [float(x) for x in state.get("online_moves", [])]
