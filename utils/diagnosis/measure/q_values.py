"""The Q values of the actions a Q network's run took (DQN, the Q_LEARNING family): every
`q_beyond_returns.every_updates` updates, the mean Q(s, a) of the newest `ROWS`
transitions of the replay buffer under the online network as it is now, and the
smallest and largest rewards among them; handed to rules/q_learning_rules.py's
`QBeyondReturns`, which keeps the rewards' range over the run and judges the Q values
against the returns any policy could reach.

It reads the network under `torch.no_grad()` and draws nothing from the run's random
streams (the newest rows, not a sample): a run with it learns what it learns without it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from rltrain.utils.diagnosis.rules.q_learning_rules import QBeyondReturns
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

ROWS = 1024  # newest transitions the Q values are read on


@torch.no_grad()
def taken_q(view: AgentView, batch: Batch) -> dict[str, float]:
    """`q_mean`: the mean Q of the taken actions (a Discrete action's index, the view's
    critic giving every action's Q, [B, n]); `reward_low`, `reward_high`: the rewards'."""
    first = float(view.action_low[0]) + 0.5  # the index of the first action
    index = (batch.actions - first).round().long()  # [B, 1]
    q = view.critic(batch.obs).gather(1, index)  # [B, 1]
    return {"q_mean": float(q.double().mean()), "reward_low": float(batch.rewards.min()),
            "reward_high": float(batch.rewards.max())}


class TakenActionQ:
    """The measurement on the buffer's newest rows, logged (flow1.jsonl's "q_values"
    lines) and handed to the rule; `report` takes its findings. Measured only for a run
    the rule judges (a Q network over Discrete actions)."""

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 report: Callable[[list[Finding]], None]) -> None:
        self.view, self.buffer, self.logger, self.report = context.view, buffer, logger, report
        self.rule = QBeyondReturns(context)
        self.every = self.rule.settings.every_updates
        self.active = (self.rule.rule.action != "off" and self.view is not None
                       and self.view.discrete_actions is not None)

    def after_update(self, env_steps: int, updates: int) -> None:
        if not self.active or updates % self.every or len(self.buffer) == 0:
            return
        stats = taken_q(self.view, self.buffer.newest(ROWS))
        self.logger.diagnostic("q_values", env_steps, updates=updates,
                               **{k: float(f"{v:.5g}") for k, v in stats.items()})
        self.report(self.rule.check(env_steps, stats))

    def unjudged(self) -> dict[str, str]:
        why = self.rule.unjudged() if self.active else None
        return {} if why is None else {self.rule.spec.name: why}

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rule.load_state_dict(state)
