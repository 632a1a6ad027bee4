"""Code faults of a watched loop that the order of its backward passes and optimiser
steps shows (integrations/gradient_sources.py counts them; the agent's view hands the
counts over as `step_sources`; rltrain's own update is not watched so):

- `gradients_not_zeroed`: an optimiser steps with a `.grad` that still holds what it
  stepped with before: nothing cleared it (`zero_grad()`) before the next backward, so
  the gradients of every update add up and each step is larger and older than the
  last one's loss.
- `actor_loss_steps_critic`: the critic's optimiser steps with gradients from a backward
  that also reached the actor's own parameters: the actor's loss, -Q(s, actor(s)), was
  backpropagated into the critic and then stepped, which trains the critic to raise its
  own value of the policy's actions instead of fitting the TD target.

Both are judged on counts of optimiser steps, so a single odd step is not a finding;
each fires once: code does not heal itself in a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.agent_view import StepSources
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Update

SPECS = (
    RuleSpec(
        name="gradients_not_zeroed", section="diagnostics", group="Gradient flow",
        threshold=10.0, action="warn",
        fires_when="optimiser steps (of the actor's or the critic's) whose gradients still "
                   "held the previous step's: at least this many",
        hypothesis="if the loop never clears a network's gradients between updates, then "
                   "at each of its optimiser's steps `.grad` still holds the tensor it "
                   "stepped with last time, with the new backward added to it",
        check="call the optimiser's zero_grad() (or set .grad to None) before each "
              "backward of that network's loss (judged on a loop of your own that the "
              "Watcher watches)"),
    RuleSpec(
        name="actor_loss_steps_critic", section="diagnostics", group="Gradient flow",
        algorithms=ACTOR_Q_CRITICS,
        threshold=10.0, action="warn",
        fires_when="critic optimiser steps with gradients from a backward that also "
                   "reached the actor's parameters (the actor's loss): at least this many",
        hypothesis="if the loop backpropagates the actor's loss into the critic and then "
                   "steps the critic's optimiser, then the critic's gradients at its step "
                   "come from a backward that ran through the actor too",
        check="backpropagate the actor's loss into the actor only "
              "(loss.backward(inputs=list(actor.parameters())), or freeze the critic's "
              "parameters for it) and step only the actor's optimiser after it; clear the "
              "critic's gradients before its own backward (judged on a loop of your own "
              "that the Watcher watches)"),
)


class _StepCount:
    """A rule on the view's optimiser-step counts, judged after each update (mixed into
    a `RuleHook`: the registry takes each `RuleHook` of the module for a rule)."""

    context: Any
    fired = False
    update_batches = True  # the counts as they stand: the same for a batch's updates

    def on_update(self, update: Update) -> list[Finding]:
        view = self.context.view
        if self.fired or view is None or view.step_sources is None:
            return []
        found = self.judge(update.env_steps, view.step_sources())
        self.fired = bool(found)
        return found

    def judge(self, env_steps: int, counts: StepSources) -> list[Finding]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"fired": self.fired}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fired = bool(state["fired"])


class GradientsNotZeroed(_StepCount, RuleHook):
    spec = SPECS[0]

    def judge(self, env_steps: int, counts: StepSources) -> list[Finding]:
        stale = {name: n for name, n in counts.stale.items() if n >= self.rule.threshold}
        if not stale:
            return []
        name = max(stale, key=lambda k: stale[k])
        also = [other for other in stale if other != name]
        return self.rule.fire(
            env_steps, stale[name],
            f"the {name}'s optimiser stepped {stale[name]} of {counts.steps[name]} times with "
            f"gradients that still held its previous step's"
            + (f" (the {also[0]}'s too)" if also else "")
            + ": the loop never clears them, so every update's gradients add up; call "
              f"the {name} optimiser's zero_grad() before each backward of its loss")


class ActorLossStepsCritic(_StepCount, RuleHook):
    spec = SPECS[1]

    def judge(self, env_steps: int, counts: StepSources) -> list[Finding]:
        n = counts.through_actor
        if n < self.rule.threshold:
            return []
        return self.rule.fire(
            env_steps, n,
            f"the critic's optimiser stepped {n} of {counts.steps.get('critic', n)} times "
            "with gradients from a backward that also reached the actor: the actor's loss "
            "is backpropagated into the critic, which its optimiser then steps (the critic "
            "learns to raise its own Q of the policy's actions); backpropagate the actor's "
            "loss into the actor only (backward(inputs=list(actor.parameters()))) and step "
            "only the actor's optimiser after it")
