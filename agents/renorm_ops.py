"""Batch renormalisation's forward and backward passes written by hand, and the
renormalised ReLU stacks of CrossQ's networks run on them (agents/crossq_fused.py).

A training pass of a layer (networks/batch_renorm.py, Ioffe 2017) on x [N, width]: mu
and sigma^2 the batch's mean and unbiased variance, sigma = sqrt(sigma^2 + eps),
n = (x - mu) / sigma and y = (n r + d) w + b, with r and d from the running statistics
and constant for the gradient (r = 1, d = 0 during the warm-up). Its backward, with
g = dL/dy and sums over the N rows:
  dL/db = sum g;  dL/dw = r sum(g n) + d sum g
  dL/dx = (w r / sigma) (g - sum(g) / N - n sum(g n) / (N - 1))
batch normalisation's backward through mu and sigma (N - 1: the unbiased variance),
scaled by r. Through mu and sigma every row's x gets a gradient, also a row whose own
output has none (CrossQ's next state-actions, whose Q is the target's: a constant).
In eval mode the layer is the affine map (x - running mean) / sqrt(running var + eps)
w + b, whose input gradient is g w / sqrt(running var + eps).

A layer enters as a `RenormLayer` of views of its module's tensors (a member's, of an
ensemble's, networks/critic.py); a training pass moves its running statistics in place,
and `count_training_pass` adds the pass to its module's `steps`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rltrain.agents import fused_ops
from rltrain.agents.fused_ops import Layer
from rltrain.agents.gemm import Products
from rltrain.networks.batch_renorm import D_MAX, R_MAX, BatchRenorm, Renorm


class RenormLayer(NamedTuple):
    """One batch renormalisation layer, or one member of an ensemble's: views of its
    module's tensors, each [1, width] but `steps`."""

    weight: torch.Tensor
    bias: torch.Tensor
    running_mean: torch.Tensor
    running_var: torch.Tensor
    steps: torch.Tensor  # the module's training passes (one count for all its members)
    settings: Renorm


def layer_of(module: BatchRenorm, member: int | None = None) -> RenormLayer:
    """`module` as the kernels take it; `member`: an ensemble's member."""
    tensors = [module.weight, module.bias, module.running_mean, module.running_var]
    if member is not None:
        tensors = [tensor[member] for tensor in tensors]
    return RenormLayer(*tensors, module.steps, module.settings)


def count_training_pass(modules: list[BatchRenorm]) -> None:
    """One more training pass in each module's `steps` (when their warm-up ends)."""
    for module in modules:
        module.steps += 1


class Normalised(NamedTuple):
    """What a training pass of a layer keeps for its backward."""

    centred: torch.Tensor  # x - mu [N, width]
    std: torch.Tensor      # sigma [1, width]
    r: torch.Tensor        # [1, width], 1 during the warm-up
    d: torch.Tensor        # [1, width], 0 during the warm-up


def train_forward(layer: RenormLayer, x: torch.Tensor,
                  track: bool = True) -> tuple[torch.Tensor, Normalised]:
    """A training pass on x [N, width]: the output, and what the backward needs. With
    `track` the layer's running statistics follow the batch's (a probe's pass leaves
    them); its `steps` are the caller's to count."""
    settings = layer.settings
    mean = x.mean(dim=0, keepdim=True)
    centred = x - mean
    # The unbiased variance, from the centred rows (torch.var_mean over the rows runs
    # many times slower on the CPU).
    var = centred.square().sum(dim=0, keepdim=True) / (x.shape[0] - 1)
    std = (var + settings.eps).sqrt()
    running_std = (layer.running_var + settings.eps).sqrt()
    # Decided on the device, as the module does: no host sync per pass.
    warm = layer.steps >= settings.warmup_steps
    r = torch.where(warm, (std / running_std).clamp_(1 / R_MAX, R_MAX), 1.0)
    d = torch.where(warm, ((mean - layer.running_mean) / running_std).clamp_(-D_MAX, D_MAX),
                    0.0)
    if track:
        layer.running_mean.lerp_(mean, settings.momentum)
        layer.running_var.lerp_(var, settings.momentum)
    # (n r + d) w + b with n = (x - mu) / sigma, in one pass over the rows
    out = torch.addcmul(torch.addcmul(layer.bias, d, layer.weight), centred,
                        r * layer.weight / std)
    return out, Normalised(centred, std, r, d)


def train_backward(layer: RenormLayer, kept: Normalised, grad: torch.Tensor,
                   grads: Layer | None = None, input_grad: bool = True
                   ) -> torch.Tensor | None:
    """`grad` (dL/dy [N, width]) back through a training pass: the weight and bias
    gradients written into `grads` where given, and dL/dx where `input_grad`."""
    grad_sum = grad.sum(dim=0, keepdim=True)
    grad_dot = (grad * kept.centred).sum(dim=0, keepdim=True) / kept.std  # sum(g n)
    if grads is not None:
        weight_grad, bias_grad = grads
        torch.addcmul(kept.d * grad_sum, kept.r, grad_dot, out=weight_grad)
        bias_grad.copy_(grad_sum)
    if not input_grad:
        return None
    rows = grad.shape[0]
    scale = layer.weight * kept.r / kept.std
    # scale (g - sum(g) / N - n sum(g n) / (N - 1)), n = centred / sigma
    grad_x = torch.addcmul(scale * grad_sum * (-1.0 / rows), grad, scale)
    return grad_x.addcmul_(kept.centred, scale * grad_dot / kept.std,
                           value=-1.0 / (rows - 1))


def eval_forward(layer: RenormLayer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer with its running statistics on x [N, width]: the output, and its
    scale w / sqrt(running var + eps), the input gradient's factor."""
    scale = layer.weight / (layer.running_var + layer.settings.eps).sqrt()
    return torch.addcmul(layer.bias, x - layer.running_mean, scale), scale


class RenormStack(NamedTuple):
    """A network as the kernels run it: a batch renormalisation before each linear
    layer, a ReLU after each linear layer that another layer follows. One renormalisation
    more than linear layers: a hidden stack that ends normalised (the actor's, before
    its heads)."""

    renorms: list[RenormLayer]
    linears: list[Layer]


class StackGrads(NamedTuple):
    """A `RenormStack`'s gradient buffers: (weight, bias) of each layer."""

    renorms: list[Layer]
    linears: list[Layer]


class Tape(NamedTuple):
    """What a pass of a `RenormStack` keeps for its backward."""

    training: bool
    inputs: list[torch.Tensor]   # each renormalisation's input: x, relu(h1), ...
    outputs: list[torch.Tensor]  # each renormalisation's output: its linear layer's input
    kept: list[Normalised] | list[torch.Tensor]  # training: `Normalised`; eval: the scale


def forward(stack: RenormStack, x: torch.Tensor, products: Products,
            training: bool, track: bool = True) -> tuple[torch.Tensor, Tape]:
    """The stack on x [N, in], its renormalisations in a training pass (`training`: the
    caller counts it; `track`: it moves their running statistics) or with their running
    statistics; the output and the `Tape`."""
    tape = Tape(training, [], [], [])
    for index, renorm in enumerate(stack.renorms):
        tape.inputs.append(x)
        x, kept = train_forward(renorm, x, track) if training else eval_forward(renorm, x)
        tape.kept.append(kept)
        tape.outputs.append(x)
        if index < len(stack.linears):
            weight, bias = stack.linears[index]
            x = products.linear(x, weight, bias, relu=index + 1 < len(stack.renorms))
    return x, tape


def backward(stack: RenormStack, tape: Tape, grad_output: torch.Tensor, products: Products,
             grads: StackGrads | None = None) -> torch.Tensor | None:
    """Backpropagate `grad_output` (dL/dOutput) through the pass `tape` recorded. With
    `grads` (a training pass's) every layer's gradients are written into them and
    nothing is returned; without, the result is dL/dInput."""
    grad = grad_output
    for index in range(len(stack.renorms) - 1, -1, -1):
        if index < len(stack.linears):
            grad = fused_ops.linear_backward(stack.linears[index], tape.outputs[index], grad,
                                             None if grads is None else grads.linears[index],
                                             products)
        if tape.training:
            grad = train_backward(stack.renorms[index], tape.kept[index], grad,
                                  None if grads is None else grads.renorms[index],
                                  input_grad=index > 0 or grads is None)
        else:
            assert grads is None, "a pass with the running statistics trains nothing"
            grad = grad * tape.kept[index]
        if index > 0:  # through the ReLU that produced this renormalisation's input
            grad = fused_ops.relu_backward(grad, tape.inputs[index])
    return grad
