"""Networks rltrain did not build, in the terms of its hooks' `AgentView`.

`Mirror` shows another library's module with a forward of rltrain's convention (the
actor maps observations to env-unit actions; the critic maps (observation, env-unit
action) to every Q head, [B, n_q]) while sharing its submodules and parameters under
their own names, so gradient tags and dead-ReLU layers read as in that library.
`StepGradients` reads each network's gradients at its optimiser's step, `LeftGradients`
where a library whose update leaves them alone left them.
`ddpg_probe` measures losses and per-layer gradients with no agent object: a DDPG-style
critic loss (one-step target from the online networks) and actor loss (-Q1 of the
policy's action), taken with `torch.autograd.grad` so that nothing is changed, as
`agents/probes.py` does for rltrain's own agent.
"""

from __future__ import annotations

import weakref
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rltrain.agents.probes import Probe, loss_layer_norms
from rltrain.integrations.gradient_sources import GradientSources
from rltrain.utils.training.replay_buffer import Batch

QFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (obs, action) -> [B, 1]


class Mirror(nn.Module):
    """`inner`'s submodules and direct parameters, registered under their own names, with
    `forward` in place of `inner`'s (`inner` itself is not a submodule: no name prefix)."""

    def __init__(self, inner: nn.Module, forward: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        for name, child in inner.named_children():
            self.add_module(name, child)
        for name, parameter in inner.named_parameters(recurse=False):
            self.register_parameter(name, parameter)
        self._forward = forward  # a plain attribute (not a Module)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self._forward(*inputs)


class Critics(nn.Module):
    """Several Q-networks (CleanRL's TD3 has qf1 and qf2) as one critic: every head."""

    def __init__(self, networks: list[nn.Module]) -> None:
        super().__init__()
        for i, net in enumerate(networks):
            self.add_module(f"qf{i + 1}", net)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.cat([net(obs, action) for net in self.children()], dim=-1)


class StepGradients:
    """The gradients each watched network was stepped with, read at its optimiser's step.

    Another library's loop may backpropagate a second loss into a network after stepping
    it (SB3 and CleanRL run the actor's loss through the critic without clearing the
    critic's `.grad`), so `.grad` after the update is not what the critic learnt from. A
    global optimiser step pre-hook (`torch.optim.Optimizer`'s, for every optimiser of
    the process) copies the gradients of the watched parameters an optimiser is about to
    step into buffers kept per network; `gradients(name)` gives the newest copy of a
    network's, by parameter name, valid until that network's next step (its readers
    take their norms at once). `sources` counts where those gradients came from
    (integrations/gradient_sources.py; `trace_backwards=False`: the steps only, for a
    library's own update). `close()` removes the hooks.

    `by_reference`: networks whose stepped gradients are kept as the `.grad` tensors
    themselves, not copied, where the library's update may change none of them after its
    step (the SB3 callback holds both networks of TD3, DDPG and SAC so: the actor's stay,
    the critic's are found changed by the actor's loss and copied). Each tensor's
    version counter, which every in-place change raises, is kept with it: a network
    whose held gradients changed after all is copied from its next step on, and read
    as having no stepped gradients until then."""

    def __init__(self, networks: dict[str, nn.Module], trace_backwards: bool = True,
                 by_reference: tuple[str, ...] = ()) -> None:
        self.named = {name: list(net.named_parameters()) for name, net in networks.items()}
        self._params = {name: [p for _, p in named] for name, named in self.named.items()}
        self.owner = {id(p): name for name, params in self.named.items() for _, p in params}
        self.latest: dict[str, dict[str, torch.Tensor | None]] = {}  # the buffers by name
        self._buffers: dict[str, list[torch.Tensor | None]] = {}  # in `named`'s order
        self._by_reference = set(by_reference)  # less any whose held gradients changed
        # per network kept by reference: its .grad tensors at its newest step (`named`'s
        # order) and their versions then
        self._held: dict[str, tuple[list[torch.Tensor | None], list[int]]] = {}
        self.sources = GradientSources(networks, trace_backwards)
        # per optimiser: its parameter groups' signature when last read, and the watched
        # networks it steps with their parameters in it (this runs at every step)
        self._plans: weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple[
            tuple[tuple[int, int], ...], list[tuple[str, list[nn.Parameter]]]]] = (
            weakref.WeakKeyDictionary())
        # Here, not at the top: a loop with an optimiser has imported torch.optim already.
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._handle = register_optimizer_step_pre_hook(self._before)

    def _networks(self, optimizer: torch.optim.Optimizer
                  ) -> list[tuple[str, list[nn.Parameter]]]:
        """The watched networks `optimizer` steps, each with its parameters there."""
        signature = tuple((id(g["params"]), len(g["params"])) for g in optimizer.param_groups)
        plan = self._plans.get(optimizer)
        if plan is None or plan[0] != signature:
            stepped: dict[str, list[nn.Parameter]] = {}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if id(p) in self.owner:
                        stepped.setdefault(self.owner[id(p)], []).append(p)
            plan = self._plans[optimizer] = (signature, list(stepped.items()))
        return plan[1]

    def _before(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        networks = self._networks(optimizer)
        if not networks:
            return
        if self.sources.traced:
            self.sources.stepped(optimizer, self.owner)
        targets, sources, with_grads = [], [], []
        for name, _ in networks:
            grads = [p.grad for p in self._params[name]]
            if not self.sources.traced and any(g is not None for g in grads):
                with_grads.append(name)
            if name in self._by_reference:
                if not self._changed(name):
                    self._held[name] = (grads, versions(grads))
                    continue
                self._unhold(name)  # copied from this step on
            buffers = self._buffers.get(name)
            if buffers is None or any((g is None) is not (b is None) for g, b in zip(
                    grads, buffers, strict=True)) or self._moved(grads, buffers):
                buffers = self._buffers[name] = [None if g is None else torch.empty_like(
                    g, memory_format=torch.contiguous_format) for g in grads]
                self.latest[name] = {key: b for (key, _), b in zip(
                    self.named[name], buffers, strict=True)}
            for g, b in zip(grads, buffers, strict=True):
                if g is not None:
                    targets.append(b)
                    sources.append(g)
        if not self.sources.traced:  # only the steps are counted: those with a gradient
            self.sources.count_steps(with_grads)
        if targets:
            with torch.no_grad():
                torch._foreach_copy_(targets, sources)

    @staticmethod
    def _moved(grads: list[torch.Tensor | None], buffers: list[torch.Tensor | None]) -> bool:
        """The network's gradients are no longer of its buffers' dtype or device (the
        network was moved: all its parameters at once)."""
        g = next((g for g in grads if g is not None), None)
        b = next((b for b in buffers if b is not None), None)
        return g is not None and b is not None and (g.dtype != b.dtype or g.device != b.device)

    def _changed(self, name: str) -> bool:
        """Whether network `name`'s held gradients changed since its newest step."""
        held = self._held.get(name)
        return held is not None and any(g is not None and g._version != v
                                        for g, v in zip(*held, strict=True))

    def _unhold(self, name: str) -> None:
        self._by_reference.discard(name)
        self._held.pop(name, None)

    def gradients(self, name: str) -> dict[str, torch.Tensor | None] | None:
        """Network `name`'s gradients at its latest step; None before its first (and
        where the held ones changed since)."""
        if name in self._held:
            if self._changed(name):
                self._unhold(name)
                return None
            return dict(zip((key for key, _ in self.named[name]), self._held[name][0],
                            strict=True))
        return self.latest.get(name)

    def norms(self) -> dict[str, float]:
        return stepped_norms(self.gradients)

    def close(self) -> None:
        self._handle.remove()
        self.sources.close()


class LeftGradients:
    """The gradients each watched network was last stepped with, read where the library
    left them: for an update that steps one loss's gradients and changes none of them
    between its step and its next update's `zero_grad` (SB3's PPO, A2C and DQN). No hook
    runs at their optimisers' steps, which a `StepGradients` would run at every one;
    their steps are not counted (the rules that read step counts judge the
    actor-critics only)."""

    def __init__(self, networks: dict[str, nn.Module]) -> None:
        self.named = {name: list(net.named_parameters()) for name, net in networks.items()}
        # As StepGradients: a parameter two networks share is the later one's, and a
        # network left with none of its own is never stepped (DQN's greedy actor).
        owner = {id(p): name for name, params in self.named.items() for _, p in params}
        self.stepped = set(owner.values())

    def gradients(self, name: str) -> dict[str, torch.Tensor | None] | None:
        """Network `name`'s gradients as the library left them; None before its first
        step, and for a network never stepped as itself."""
        if name not in self.stepped:
            return None
        grads = {key: p.grad for key, p in self.named[name]}
        return grads if any(g is not None for g in grads.values()) else None

    def norms(self) -> dict[str, float]:
        return stepped_norms(self.gradients)

    def close(self) -> None:
        """Nothing to remove: no hooks."""


def stepped_norms(gradients: Callable[[str], dict[str, torch.Tensor | None] | None]
                  ) -> dict[str, float]:
    """critic_grad_norm and actor_grad_norm at their latest steps, in one transfer
    (the norm of the per-tensor norms, as `torch.nn.utils.get_total_norm` gives)."""
    names, norms = [], []
    for name in ("critic", "actor"):
        grads = [g for g in (gradients(name) or {}).values() if g is not None]
        if grads:
            names.append(f"{name}_grad_norm")
            norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))
    return dict(zip(names, torch.stack(norms).tolist(), strict=True)) if norms else {}


def versions(grads: list[torch.Tensor | None]) -> list[int]:
    """Each gradient's version counter (every in-place change raises it); -1 for None."""
    return [-1 if g is None else g._version for g in grads]


def ddpg_probe(actor: nn.Module, critic: nn.Module, q_value: QFunction,
               gamma: float) -> Callable[[Batch], Probe]:
    """A probe on `batch` for networks of rltrain's convention (see `Mirror`)."""
    def probe(batch: Batch) -> Probe:
        with torch.no_grad():
            next_q = q_value(batch.next_obs, actor(batch.next_obs))  # [B, 1]
            target = batch.rewards + gamma * (1.0 - batch.terminated) * next_q
        q = critic(batch.obs, batch.actions)  # [B, n_q]
        critic_layers, critic_loss = loss_layer_norms(critic, F.mse_loss(
            q, target.expand_as(q)))
        actor_loss = -q_value(batch.obs, actor(batch.obs)).mean()
        actor_layers, actor_value = loss_layer_norms(actor, actor_loss)
        return Probe(critic_loss, actor_value, float(q.detach().mean()), critic_layers,
                     actor_layers)
    return probe


def deterministic_act(actor: nn.Module, device: torch.device) -> Callable[[np.ndarray],
                                                                          np.ndarray]:
    """obs -> the actor's action as NumPy, for one observation or a batch."""
    def act(obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=device)
        with torch.no_grad():
            return actor(x.reshape(1, -1) if x.ndim == 1 else x).cpu().numpy().reshape(
                *np.shape(obs)[:-1], -1)
    return act
