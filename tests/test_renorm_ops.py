"""Batch renormalisation's hand-written passes (agents/renorm_ops.py) against the module's
(networks/batch_renorm.py) with autograd: a training pass, its backward and its running
statistics, before and after the warm-up, alone and as an ensemble's members; a pass
with the running statistics and its input gradient. In double precision, to 1e-9."""

from __future__ import annotations

import pytest
import torch

from rltrain.agents import renorm_ops
from rltrain.networks.batch_renorm import D_MAX, R_MAX, BatchRenorm, Renorm

# Six features of batches of mean 2 and these spreads, and running statistics that put
# r past its clips in the first three features, d in the first two.
SPREADS = torch.tensor([1.0, 1.0, 0.1, 1.0, 2.0, 0.5])
RUNNING_MEANS = torch.tensor([30.0, -30.0, 1.0, 2.0, 3.0, -1.0])
RUNNING_VARS = torch.tensor([0.01, 20.0, 1.0, 4.0, 9.0, 0.5])
R_CLIPPED = torch.tensor([[True, True, True, False, False, False]])
D_CLIPPED = torch.tensor([[True, True, False, False, False, False]])


def random_layer(members: int | None, warm: bool) -> BatchRenorm:
    """A layer of 6 features with random parameters and the running statistics above,
    trained past its warm-up if `warm`."""
    layer = BatchRenorm(6, Renorm(momentum=0.1, eps=1e-3, warmup_steps=5), members)
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for tensor in (layer.weight, layer.bias):
            tensor.copy_(torch.randn(tensor.shape, generator=g))
        layer.running_mean.copy_(RUNNING_MEANS.expand_as(layer.running_mean))
        layer.running_var.copy_(RUNNING_VARS.expand_as(layer.running_var))
        layer.steps.fill_(5 if warm else 2)
    return layer


@pytest.mark.parametrize("members", [None, 2])
@pytest.mark.parametrize("warm", [False, True])
def test_a_training_pass_and_its_backward_are_autograds(members, warm, double_precision):
    reference, ours = random_layer(members, warm), random_layer(members, warm)
    g = torch.Generator().manual_seed(5)
    shape = (40, 6) if members is None else (members, 40, 6)
    x = torch.randn(shape, generator=g) * SPREADS + 2.0
    grad = torch.randn(shape, generator=g)
    grad[..., 20:, :] = 0.0  # rows whose output has no gradient (CrossQ's next rows)
    x_ref = x.clone().requires_grad_(True)
    out_ref = reference.train()(x_ref)
    (out_ref * grad).sum().backward()
    weight_grad, bias_grad = torch.zeros_like(ours.weight), torch.zeros_like(ours.bias)
    rows = [(x, grad, weight_grad, bias_grad, None)] if members is None else [
        (x[i], grad[i], weight_grad[i], bias_grad[i], i) for i in range(members)]
    for member_x, member_grad, member_weight_grad, member_bias_grad, member in rows:
        layer = renorm_ops.layer_of(ours, member)
        out, kept = renorm_ops.train_forward(layer, member_x)
        torch.testing.assert_close(out, out_ref[member] if member is not None else out_ref,
                                   rtol=1e-10, atol=1e-12)
        grad_x = renorm_ops.train_backward(layer, kept, member_grad,
                                           (member_weight_grad, member_bias_grad))
        expected = x_ref.grad if member is None else x_ref.grad[member]
        torch.testing.assert_close(grad_x, expected, rtol=1e-9, atol=1e-12)
        assert bool(grad_x[20:].abs().sum(dim=-1).gt(0).all())  # rows without their own
        if warm:
            assert torch.equal((kept.r == R_MAX) | (kept.r == 1 / R_MAX), R_CLIPPED)
            assert torch.equal(kept.d.abs() == D_MAX, D_CLIPPED)
        else:
            assert bool((kept.r == 1).all()) and bool((kept.d == 0).all())
    renorm_ops.count_training_pass([ours])
    torch.testing.assert_close(weight_grad, reference.weight.grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(bias_grad, reference.bias.grad, rtol=1e-9, atol=1e-12)
    for name in ("running_mean", "running_var", "steps"):
        torch.testing.assert_close(getattr(ours, name), getattr(reference, name), rtol=1e-12,
                                   atol=0.0, msg=name)


def test_a_pass_with_the_running_statistics_and_its_input_gradient_are_autograds(
        double_precision):
    reference, ours = random_layer(None, warm=True), random_layer(None, warm=True)
    x = torch.randn(30, 6, generator=torch.Generator().manual_seed(6)).requires_grad_(True)
    out_ref = reference.eval()(x)
    grad = torch.randn(30, 6, generator=torch.Generator().manual_seed(7))
    (out_ref * grad).sum().backward()
    out, scale = renorm_ops.eval_forward(renorm_ops.layer_of(ours), x.detach())
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad * scale, x.grad, rtol=1e-12, atol=1e-12)
    assert torch.equal(ours.running_mean, reference.running_mean) and int(ours.steps) == 5
