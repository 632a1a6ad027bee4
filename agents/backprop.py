"""Forward and backward passes of the actor and critic MLPs written out by hand.

The update needs three things from its ReLU MLPs: outputs, gradients of a loss with
respect to the weights, and (for the actor loss) the gradient with respect to the
critic's input. For Linear/ReLU stacks these are a few matrix products each, so the
update computes them directly instead of through autograd: no graph, no saved-tensor
bookkeeping, ReLU applied in place, weight gradients written straight into the
optimiser's gradient buffer. On a 2-core CPU this cut about a fifth of an update of
256x256 networks (benchmarks/throughput.py); tests/test_backprop.py checks every
gradient against autograd.

A layer is a `(weight, bias)` pair in the `x @ weight + bias` layout, weight [in, out]
and bias [out] or [1, out]. An `nn.Linear` enters as `(linear.weight.t(), linear.bias)`,
a view, so nothing is copied. The twin critics, stored as one ensemble ([n, in, out]
weights), enter member by member: every product is then a plain 2-D GEMM, which on a
2-core AMD CPU ran 5-10x faster than a batched one for the thin shapes of the output layer
(an outer product, K=1; a matrix-vector product, N=1) and as fast for the square ones.
"""

from __future__ import annotations

import torch

Layer = tuple[torch.Tensor, torch.Tensor]  # (weight [in, out], bias [out] or [1, out])

_relu_backward = torch.ops.aten.threshold_backward.default


def forward(layers: list[Layer], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The stack's output (ReLU between layers, linear output) and every layer's input,
    which backward needs: [x, relu(h1), relu(h2), ...]."""
    inputs = [x]
    for weight, bias in layers[:-1]:
        x = torch.addmm(bias, x, weight).relu_()
        inputs.append(x)
    weight, bias = layers[-1]
    return torch.addmm(bias, x, weight), inputs


def backward(layers: list[Layer], inputs: list[torch.Tensor], grad_output: torch.Tensor,
             grads: list[Layer] | None = None) -> torch.Tensor | None:
    """Backpropagate `grad_output` (dLoss/dOutput, shaped like the output) through the
    stack. With `grads` (buffers shaped like `layers`), each layer's weight and bias
    gradients are written into them and nothing is returned; without, the return value
    is dLoss/dInput (the actor loss needs it from the critic, whose own weights get none).
    """
    grad = grad_output
    for index in range(len(layers) - 1, -1, -1):
        weight, _ = layers[index]
        layer_input = inputs[index]
        if grads is not None:
            weight_grad, bias_grad = grads[index]
            torch.mm(layer_input.t(), grad, out=weight_grad)
            torch.sum(grad, dim=0, keepdim=bias_grad.dim() == 2, out=bias_grad)
            if index == 0:
                return None
        # An outer product when the layer has one output (a critic's Q): a broadcast
        # multiply, several times faster than a GEMM with K=1.
        grad = grad * weight.t() if grad.shape[1] == 1 else torch.mm(grad, weight.t())
        if index > 0:  # through the ReLU that produced this layer's input
            grad = _relu_backward(grad, layer_input, 0)
    return grad


def as_layers(tensors: list[torch.Tensor], transposed: bool = False) -> list[Layer]:
    """(weight, bias) pairs from a list ordered weight, bias, weight, bias, ... (a
    network's parameters or their gradients). `transposed` for `nn.Linear`'s [out, in]
    weights: they enter as `.t()` views, so nothing is copied and gradients written into
    the views land in the [out, in] buffer."""
    weights, biases = tensors[0::2], tensors[1::2]
    return [(w.t() if transposed else w, b) for w, b in zip(weights, biases, strict=True)]


def ensemble_members(tensors: list[torch.Tensor]) -> list[list[Layer]]:
    """The members of an ensemble (weights [n, in, out], biases [n, 1, out], ordered as
    for `as_layers`), each as its own list of layers (views, no copies)."""
    layers = as_layers(tensors)
    return [[(w[i], b[i]) for w, b in layers] for i in range(layers[0][0].shape[0])]
