"""Kernels of the accelerated updates (agents/fused.py, agents/sac_fused.py,
agents/tqc_fused.py, agents/crossq_fused.py): a hand-written MLP forward and backward,
and Adam over one flat buffer per network.

This module and agents/gemm.py (which matrix-product kernel, `Products`) are the only
ones that use torch's private ops. They are looked up once; where the installed torch
lacks one of this module's, `missing_ops()` names it and the `auto` backend trains
through autograd instead (agents/backends.py).

Forward/backward: for Linear/ReLU stacks the update needs outputs, weight gradients
and (for the actor loss) the gradient with respect to the critic's input; each is a few
matrix products (by the kernel `products` names), computed directly: no graph, weight
gradients written straight into the optimiser's gradient buffer. A layer is a
`(weight, bias)` pair in the `x @ weight + bias` layout (weight [in, out]); an
`nn.Linear` enters as `(linear.weight.t(), linear.bias)`, a view. The twin critics
([n, in, out] ensemble weights) enter member by member, so every product is a plain 2-D
GEMM, which on CPUs is much faster than a batched one for the thin output-layer shapes.

Adam: each network's parameters, gradients and moments live in one flat buffer each, so
the gradient norm, clipping and the Adam step are one kernel each; the step is the
kernel `torch.optim.Adam(fused=True)` calls, on the same state, so results equal it
(tests/test_fused.py) and `state_dict()` has torch's layout. Constructing a
`torch.optim` optimiser imports torch._dynamo (tens of MiB and about a second), which a
training process that compiles nothing can do without.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rltrain.agents.gemm import Products

Layer = tuple[torch.Tensor, torch.Tensor]  # (weight [in, out], bias [out] or [1, out])

BETAS = (0.9, 0.999)
EPS = 1e-8
BLAS = Products("blas")


def _private(owner: Any, name: str) -> Any:
    try:
        return getattr(owner, name)
    except (AttributeError, RuntimeError):
        return None


_fused_adam = _private(torch, "_fused_adam_")
# Sets `found_inf` to 1.0 where a tensor holds NaN/inf: GradScaler's check, one kernel.
_check_finite = _private(torch, "_amp_foreach_non_finite_check_and_unscale_")
_threshold_backward = _private(torch.ops.aten, "threshold_backward")
_relu_backward = _private(_threshold_backward, "default") if _threshold_backward else None

_OPS = {"torch._fused_adam_": _fused_adam,
        "torch._amp_foreach_non_finite_check_and_unscale_": _check_finite,
        "torch.ops.aten.threshold_backward": _relu_backward}


def missing_ops() -> list[str]:
    """The private ops this torch lacks (empty: the fused backend can run)."""
    return [name for name, op in _OPS.items() if op is None]


def check_fusable(actor_net: Any, critic_net: Any) -> None:
    """A ValueError naming why a fused update cannot run these networks (`NetworkSpec`s)
    with this torch."""
    if not (actor_net.is_stock and critic_net.is_stock):
        raise ValueError("update_backend fused supports the stock ReLU networks only "
                         "(no layer_norm); use update_backend auto or autograd")
    if missing_ops():
        raise ValueError(f"update_backend fused needs {', '.join(missing_ops())}, which "
                         f"torch {torch.__version__} lacks; use update_backend auto or "
                         "autograd")


def forward(layers: list[Layer], x: torch.Tensor, products: Products = BLAS,
            relu_output: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The stack's output (ReLU between layers; a linear output, or through a ReLU too
    with `relu_output`: a hidden stack) and every layer's input, which backward needs:
    [x, relu(h1), relu(h2), ...]."""
    inputs = [x]
    for weight, bias in layers[:-1]:
        x = products.linear(x, weight, bias, relu=True)
        inputs.append(x)
    weight, bias = layers[-1]
    return products.linear(x, weight, bias, relu=relu_output), inputs


def backward(layers: list[Layer], inputs: list[torch.Tensor], grad_output: torch.Tensor,
             grads: list[Layer] | None = None, products: Products = BLAS
             ) -> torch.Tensor | None:
    """Backpropagate `grad_output` (dLoss/dOutput) through the stack. With `grads`
    (buffers shaped like `layers`) each layer's weight and bias gradients are written
    into them and nothing is returned; without, the result is dLoss/dInput."""
    grad = grad_output
    for index in range(len(layers) - 1, -1, -1):
        grad = linear_backward(layers[index], inputs[index], grad,
                               None if grads is None else grads[index], products,
                               input_grad=index > 0 or grads is None)
        if index > 0:  # through the ReLU that produced this layer's input
            grad = relu_backward(grad, inputs[index])
    return grad


def linear_backward(layer: Layer, layer_input: torch.Tensor, grad: torch.Tensor,
                    grads: Layer | None = None, products: Products = BLAS,
                    input_grad: bool = True) -> torch.Tensor | None:
    """`grad` (dLoss/dOutput) through one layer: its weight and bias gradients written
    into `grads` where given, and dLoss/dInput where `input_grad`."""
    weight, _ = layer
    if grads is not None:
        weight_grad, bias_grad = grads
        products.mm_into(weight_grad, layer_input.t(), grad)
        torch.sum(grad, dim=0, keepdim=bias_grad.dim() == 2, out=bias_grad)
    if not input_grad:
        return None
    # An outer product when the layer has one output (a critic's Q): a broadcast
    # multiply, several times faster than a GEMM with K=1.
    return grad * weight.t() if grad.shape[1] == 1 else products.mm(grad, weight.t())


def first_critic_q(critic: nn.Module, layers: list[Layer], obs: torch.Tensor,
                   action: torch.Tensor, products: Products = BLAS) -> torch.Tensor:
    """The first critic's Q [B, 1] as a fused agent's diagnostics read it: its `layers`
    through `products`, the mean of its outputs (one, or a quantile critic's quantiles).
    With gradients on, the module's own differentiable pass (`critic.q1`)."""
    if torch.is_grad_enabled():
        return critic.q1(obs, action)
    outputs = forward(layers, critic.inputs(obs, action), products)[0]
    return outputs.mean(dim=-1, keepdim=True)


def relu_backward(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """`grad` (dLoss/d relu's output) through the ReLU that gave `output`."""
    return _relu_backward(grad, output, 0)


def as_layers(tensors: list[torch.Tensor], transposed: bool = False) -> list[Layer]:
    """(weight, bias) pairs from a list ordered weight, bias, weight, bias, ...
    `transposed` for `nn.Linear`'s [out, in] weights: they enter as `.t()` views."""
    weights, biases = tensors[0::2], tensors[1::2]
    return [(w.t() if transposed else w, b) for w, b in zip(weights, biases, strict=True)]


def ensemble_members(tensors: list[torch.Tensor]) -> list[list[Layer]]:
    """Each member of an ensemble (weights [n, in, out], biases [n, 1, out]) as its own
    list of layers (views, no copies)."""
    layers = as_layers(tensors)
    return [[(w[i], b[i]) for w, b in layers] for i in range(layers[0][0].shape[0])]


def flatten_parameters(net: nn.Module) -> torch.Tensor:
    """Move `net`'s parameters into one flat tensor, each parameter becoming a view of its
    slice (values unchanged), and return it. In-place changes (optimiser steps,
    `load_state_dict`) keep the views; call it once the network is on its device."""
    params = list(net.parameters())
    with torch.no_grad():
        flat = torch.cat([p.reshape(-1) for p in params])
        for p, view in zip(params, flat.split([p.numel() for p in params]), strict=True):
            p.data = view.view_as(p)
    return flat


class FlatAdam:
    """Adam (Kingma & Ba, 2015) for one network, on flat parameter, gradient and moment
    buffers whose views are the parameters and their `.grad`; `betas` as torch's Adam
    takes them."""

    def __init__(self, net: nn.Module, lr: float, device: torch.device,
                 betas: tuple[float, float] = BETAS) -> None:
        assert device.type in ("cpu", "cuda"), f"unsupported device {device}"
        self.lr, self.betas = lr, betas
        self.params = list(net.parameters())
        self.param = flatten_parameters(net)
        self.grad = torch.zeros_like(self.param)
        self.grads = self._views(self.grad)
        self.attach_grads()
        self.exp_avg = torch.zeros_like(self.param)
        self.exp_avg_sq = torch.zeros_like(self.param)
        # One step count for all parameters (they always step together), a float32
        # tensor as torch's fused Adam keeps it, whatever the parameters' dtype (as are
        # the NaN check's flag and scale); state_dict() gives each its own copy.
        self.step_count = torch.zeros((), device=device, dtype=torch.float32)
        self._found_inf = torch.zeros((), device=device, dtype=torch.float32)
        self._one = torch.ones((), device=device, dtype=torch.float32)

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        sizes = [p.numel() for p in self.params]
        return [v.view_as(p) for v, p in zip(flat.split(sizes), self.params, strict=True)]

    def scratch_grads(self) -> list[torch.Tensor]:
        """Zero gradients shaped like the parameters, views of a flat buffer of their own
        (a probe's: `grads` keep what the last update left)."""
        return self._views(torch.zeros_like(self.grad))

    def attach_grads(self) -> None:
        """Make the buffer's views the parameters' `.grad` again (a user may have
        replaced them)."""
        for p, g in zip(self.params, self.grads, strict=True):
            if p.grad is not g:
                p.grad = g

    def step(self, loss: torch.Tensor, clip_norm: float | None,
             norm: torch.Tensor | None = None) -> torch.Tensor:
        """Clip the gradient if configured and take an Adam step; return the norm before
        clipping (`norm`: the caller's, else the flat buffer's). A NaN/inf loss or
        gradient leaves parameters, moments and the step count untouched: the kernel
        skips where `found_inf` is 1, decided on the device. The parameters' `.grad` are
        the buffer's views afterwards (`attach_grads`), whoever wrote the buffer."""
        self.attach_grads()
        if norm is None:
            norm = torch.linalg.vector_norm(self.grad)
        if clip_norm is not None:
            # Same rule as clip_grad_norm_: scale by clip / (norm + 1e-6) when above clip.
            self.grad.mul_(torch.clamp(clip_norm / (norm + 1e-6), max=1.0))
        found_inf = self._found_inf.zero_()
        _check_finite([loss.detach(), norm], found_inf, self._one)
        self.step_count.add_(1)
        _fused_adam([self.param], [self.grad], [self.exp_avg], [self.exp_avg_sq], [],
                    [self.step_count], amsgrad=False, lr=self.lr, beta1=self.betas[0],
                    beta2=self.betas[1], weight_decay=0.0, eps=EPS, maximize=False,
                    grad_scale=None, found_inf=found_inf)
        self.step_count.sub_(found_inf)
        return norm

    def state_dict(self) -> dict[str, Any]:
        """The moments and step counts in `torch.optim.Adam.state_dict()`'s layout: none
        before the first step, as torch's (a delayed actor's, a fixed temperature's)."""
        state = {} if not self.step_count else {
            index: {"step": self.step_count.clone(), "exp_avg": exp_avg,
                    "exp_avg_sq": exp_avg_sq}
            for index, (exp_avg, exp_avg_sq) in enumerate(
                zip(self._views(self.exp_avg), self._views(self.exp_avg_sq), strict=True))}
        group = {"lr": self.lr, "betas": self.betas, "eps": EPS, "weight_decay": 0.0,
                 "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                 "differentiable": False, "fused": True, "decoupled_weight_decay": False,
                 "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    @torch.no_grad()
    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Copy saved moments and step counts in (torch's layout; a state saved before the
        first step is empty). The saved learning rate and betas are ignored: the config's
        and the algorithm's apply."""
        state = saved["state"]
        if not state:  # saved before the first step
            for tensor in (self.step_count, self.exp_avg, self.exp_avg_sq):
                tensor.zero_()
            return
        steps = {float(state[index]["step"]) for index in range(len(self.params))}
        if len(steps) != 1:
            raise ValueError(f"optimiser state has different step counts per parameter "
                             f"({sorted(steps)}); rltrain steps all parameters together")
        views = zip(self._views(self.exp_avg), self._views(self.exp_avg_sq), strict=True)
        for index, (exp_avg, exp_avg_sq) in enumerate(views):
            entry = state[index]
            if entry["exp_avg"].shape != exp_avg.shape:
                raise ValueError(f"optimiser state {index} has shape "
                                 f"{tuple(entry['exp_avg'].shape)}, its parameter "
                                 f"{tuple(exp_avg.shape)}")
            exp_avg.copy_(entry["exp_avg"])
            exp_avg_sq.copy_(entry["exp_avg_sq"])
        self.step_count.fill_(steps.pop())


class FlatAdamOptimisers:
    """For an agent (put before its base class): its optimisers are `FlatAdam`s, with
    `adam_betas(net)` (Adam's usual betas unless the agent says otherwise), and a
    restored one keeps its own learning rate, the config's."""

    device: torch.device

    def adam_betas(self, net: nn.Module) -> tuple[float, float]:
        return BETAS

    def _make_optimiser(self, net: nn.Module, lr: float) -> FlatAdam:
        return FlatAdam(net, lr, self.device, self.adam_betas(net))

    def _load_optimiser(self, optimiser: FlatAdam, saved: dict[str, Any], lr: float) -> None:
        optimiser.load_state_dict(saved)
