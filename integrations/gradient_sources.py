"""Where the gradients each optimiser steps with came from: two code faults of a plain
loop that only the order of its backward passes and optimiser steps shows.

Every watched parameter gets a hook before its gradient is accumulated
(`Tensor.register_hook`) and one after (`register_post_accumulate_grad_hook`); a
multi-grad hook marks the start of each backward pass. At an optimiser's step (the
global step pre-hook of `StepGradients`, integrations/views.py) each watched parameter
it steps tells:

- stale: the `.grad` it steps with still holds what it held at its previous step
  (neither set to None nor zeroed in place since): the gradients add up over updates.
  Known from the `.grad` tensor's identity and its version counter, which every
  in-place change raises: the accumulations of a backward are seen by the hooks, any
  other change (`zero_()`) or a new tensor is a clearing.
- through the actor: a critic parameter's `.grad` holds a contribution of a backward
  that also reached the actor's own parameters: the actor's loss, -Q(s, actor(s)),
  steps the critic. Not counted at a stale step, whose `.grad` holds every backward
  since the first: that fault comes first.

SB3 and CleanRL backpropagate the actor's loss through the critic after the critic's
step and clear the critic's gradients before its next backward: neither counts then.

Each hook is a Python call per parameter in every backward pass (6-7% of the time of a
PPO update on CartPole's 64x64 networks), so only a loop of the user's own is traced
(the `Watcher`). A library's update (SB3's, RLlib's) is its own tested code, as
rltrain's own update is: there only the optimiser steps are counted
(`trace_backwards=False`; SB3's counts are what `update_ratio` reads).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

from rltrain.utils.hooks.agent_view import StepSources


class _Param:
    """What is known of one watched parameter's `.grad`."""

    def __init__(self, role: str) -> None:
        self.role = role  # "critic", or "actor" for the actor's own parameters
        self.known: weakref.ref[torch.Tensor] | None = None  # .grad as the hooks left it
        self.version = -1
        self.held = False  # .grad still holds what its optimiser last stepped with
        self.backward_since_step = False
        self.sources: set[str] = set()  # roles the finished backwards into .grad reached
        self.pending: set[str] | None = None  # those of the newest one (may still grow)

    def remember(self, grad: torch.Tensor) -> None:
        self.known, self.version = weakref.ref(grad), grad._version

    def cleared(self, grad: torch.Tensor | None) -> bool:
        """`.grad` is not what the hooks or the last step left: None, new, or changed."""
        return (grad is None or self.known is None or self.known() is not grad
                or grad._version != self.version)


class GradientSources:
    """The backward passes into the watched networks' parameters and what each
    optimiser step stepped with, counted per network (`counts()`)."""

    def __init__(self, networks: dict[str, nn.Module], trace_backwards: bool = True) -> None:
        critic_ids = {id(p) for p in networks["critic"].parameters()}
        self.params: dict[int, tuple[nn.Parameter, _Param]] = {}
        for name, net in networks.items():
            for p in net.parameters():
                role = "critic" if id(p) in critic_ids else name
                if p.requires_grad and id(p) not in self.params:
                    self.params[id(p)] = (p, _Param(role))
        self.current: set[str] = set()  # the roles the running backward reached
        self._counts = StepSources({}, {}, 0, traced=trace_backwards)
        tensors = [p for p, _ in self.params.values()] if trace_backwards else []
        # Registered first: on the first watched parameter a backward pass reaches, it
        # runs before that parameter's own hook below and starts the pass's set of roles.
        self._handles: list[Any] = [torch.autograd.graph.register_multi_grad_hook(
            tensors, self._new_backward, mode="any")] if tensors else []
        for p, state in self.params.values() if trace_backwards else ():
            self._handles.append(p.register_hook(self._before_accumulation(p, state)))
            self._handles.append(p.register_post_accumulate_grad_hook(
                lambda param, state=state: state.remember(param.grad)))

    def _new_backward(self, grad: torch.Tensor) -> None:
        self.current = set()

    def _before_accumulation(self, p: nn.Parameter, state: _Param) -> Any:
        def hook(grad: torch.Tensor) -> None:
            if state.cleared(p.grad):
                state.held, state.sources, state.pending = False, set(), None
            if state.pending is not None:  # that backward has finished
                state.sources |= state.pending
            state.pending = self.current
            state.backward_since_step = True
            self.current.add(state.role)
        return hook

    def stepped(self, optimizer: torch.optim.Optimizer, owner: dict[int, str]) -> None:
        """`optimizer` is about to step: count what its watched parameters hold."""
        stale: set[str] = set()
        through_actor = False
        stepped: set[str] = set()
        for group in optimizer.param_groups:
            for p in group["params"]:
                entry = self.params.get(id(p))
                if entry is None or p.grad is None:
                    continue
                state = entry[1]
                stepped.add(owner[id(p)])
                if state.held and state.backward_since_step:
                    stale.add(owner[id(p)])
                elif state.role == "critic":  # (a stale .grad holds every loss ever)
                    through_actor |= "actor" in state.sources | (state.pending or set())
                state.held, state.backward_since_step = True, False
                state.remember(p.grad)
        c = self._counts
        for name in stepped:
            c.steps[name] = c.steps.get(name, 0) + 1
            c.stale[name] = c.stale.get(name, 0) + (name in stale)
        c.through_actor += through_actor

    @property
    def traced(self) -> bool:
        return self._counts.traced

    def count_steps(self, names: list[str]) -> None:
        """Steps of `names` counted alone, where backward passes are not traced (what
        `stepped` counts there: nothing can be stale or come through the actor)."""
        c = self._counts
        for name in names:
            c.steps[name] = c.steps.get(name, 0) + 1
            c.stale[name] = c.stale.get(name, 0)

    def counts(self) -> StepSources:
        return self._counts

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
