"""Adam for one network on flat buffers (agents/fused_ops.py): the same steps and state as
torch's fused Adam, torch's state_dict layout both ways, the config's learning rate on load, and no
torch._dynamo import."""

from __future__ import annotations

import pytest
import torch

from rltrain.agents.fused_ops import FlatAdam, flatten_parameters

from conftest import DEVICE


def make_net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return net.to(DEVICE)


def loss_of(net: torch.nn.Module, step: int) -> torch.Tensor:
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(step))
    x = x.to(DEVICE, next(net.parameters()).dtype)
    return net(x).square().mean()


def step_ours(opt: FlatAdam, net: torch.nn.Module, step: int) -> None:
    grads = torch.autograd.grad(loss_of(net, step), opt.params)
    for buffer, grad in zip(opt.grads, grads, strict=True):
        buffer.copy_(grad)
    opt.step(torch.zeros((), device=DEVICE), clip_norm=None)


def step_torch(opt: torch.optim.Adam, net: torch.nn.Module, step: int) -> None:
    opt.zero_grad()
    loss_of(net, step).backward()
    opt.step()


@pytest.mark.parametrize("betas", [None, (0.5, 0.999)])  # torch's default; CrossQ's
def test_steps_and_state_are_bit_identical_to_torch_fused_adam(betas):
    ours_net, torch_net = make_net(), make_net()
    given = {} if betas is None else {"betas": betas}
    ours = FlatAdam(ours_net, 1e-2, DEVICE, **given)
    reference = torch.optim.Adam(torch_net.parameters(), lr=1e-2, fused=True, **given)
    for step in range(5):
        step_ours(ours, ours_net, step)
        step_torch(reference, torch_net, step)
        for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
            assert torch.equal(a, b), step
    theirs = reference.state_dict()
    mine = ours.state_dict()
    assert mine["param_groups"][0].keys() == theirs["param_groups"][0].keys()
    assert mine["param_groups"][0]["betas"] == theirs["param_groups"][0]["betas"]
    for index, entry in theirs["state"].items():
        for name, value in entry.items():
            assert torch.equal(mine["state"][index][name], value), (index, name)
            assert mine["state"][index][name].dtype == value.dtype


def test_with_double_precision_the_default_it_steps_as_torchs_adam():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ours_net, torch_net = make_net(), make_net()
        ours = FlatAdam(ours_net, 1e-2, DEVICE)
        reference = torch.optim.Adam(torch_net.parameters(), lr=1e-2, fused=True)
        for step in range(3):
            step_ours(ours, ours_net, step)
            step_torch(reference, torch_net, step)
    finally:
        torch.set_default_dtype(previous)
    assert all(torch.equal(a, b) for a, b in zip(ours_net.parameters(), torch_net.parameters(),
                                                strict=True))
    assert ours.state_dict()["state"][0]["step"].dtype == torch.float32  # as torch keeps it


def test_state_loads_from_torch_adam_and_into_it():
    torch_net, ours_net = make_net(), make_net()
    reference = torch.optim.Adam(torch_net.parameters(), lr=1e-2, fused=True)
    for step in range(3):
        step_torch(reference, torch_net, step)
    ours_net.load_state_dict(torch_net.state_dict())
    ours = FlatAdam(ours_net, 1e-2, DEVICE)
    ours.load_state_dict(reference.state_dict())
    step_ours(ours, ours_net, 3)
    step_torch(reference, torch_net, 3)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        assert torch.equal(a, b)
    again_net = make_net()
    again = torch.optim.Adam(again_net.parameters(), lr=1e-2, fused=True)
    again.load_state_dict(ours.state_dict())  # and back into torch's optimiser
    step_torch(again, again_net, 4)
    # Each parameter got its own step count (a shared one would be counted up per parameter).
    assert [float(entry["step"]) for entry in again.state_dict()["state"].values()] == [5] * 4


def test_parameters_become_views_of_one_flat_buffer():
    net = make_net()
    before = [p.detach().clone() for p in net.parameters()]
    flat = flatten_parameters(net)
    assert flat.shape == (sum(p.numel() for p in before),)
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before, strict=True))
    with torch.no_grad():
        flat.add_(1.0)  # one kernel on the buffer moves every parameter
    assert all(torch.equal(p, b + 1.0) for p, b in zip(net.parameters(), before, strict=True))
    opt = FlatAdam(net, 1e-2, DEVICE)
    step_ours(opt, net, 0)
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in net.parameters()]), opt.param)
    assert not torch.equal(opt.param, flat)  # the optimiser flattened them again, and stepped


def test_a_step_makes_the_buffers_views_the_parameters_grad_again():
    # A fused update writes its gradients into the flat buffer, not into `.grad`.
    net = make_net()
    opt = FlatAdam(net, 1e-2, DEVICE)
    for p in net.parameters():
        p.grad = None  # as a user's zero_grad(set_to_none=True) leaves them
    opt.grad.fill_(0.5)
    opt.step(torch.tensor(1.0, device=DEVICE), None)
    assert all(p.grad is g for p, g in zip(net.parameters(), opt.grads, strict=True))
    assert all(bool((p.grad == 0.5).all()) for p in net.parameters())


def test_a_state_with_unequal_step_counts_is_refused():
    net = make_net()
    ours = FlatAdam(net, 1e-2, DEVICE)
    step_ours(ours, net, 0)
    state = ours.state_dict()
    state["state"][1]["step"] = torch.tensor(7.0)
    with pytest.raises(ValueError, match="step counts"):
        FlatAdam(make_net(), 1e-2, DEVICE).load_state_dict(state)


def test_the_configured_learning_rate_wins_over_the_saved_one():
    saved_net = make_net()
    saved = FlatAdam(saved_net, 1e-1, DEVICE)
    step_ours(saved, saved_net, 0)
    net, twin = make_net(1), make_net(1)
    ours = FlatAdam(net, 1e-4, DEVICE)
    ours.load_state_dict(saved.state_dict())
    assert ours.state_dict()["param_groups"][0]["lr"] == 1e-4
    reference = FlatAdam(twin, 1e-4, DEVICE)
    reference.load_state_dict(saved.state_dict())
    reference.lr = 1e-1
    step_ours(ours, net, 1)
    step_ours(reference, twin, 1)

    def largest_move(stepped: torch.nn.Module) -> float:
        return max(float((a - b).abs().max().detach()) for a, b in
                   zip(stepped.parameters(), make_net(1).parameters(), strict=True))

    # Adam moves each weight by about lr per step: 1e-4 here, not the saved 1e-1.
    assert largest_move(net) < 2e-4 < largest_move(twin)


def test_before_its_first_step_its_state_is_empty_as_torchs():
    net = make_net()
    ours, theirs = FlatAdam(net, 1e-2, DEVICE), torch.optim.Adam(make_net().parameters())
    assert ours.state_dict()["state"] == theirs.state_dict()["state"] == {}
    step_ours(ours, net, 0)
    assert len(ours.state_dict()["state"]) == 4


def test_a_state_saved_before_the_first_step_loads_as_fresh():
    net = make_net()
    ours = FlatAdam(net, 1e-2, DEVICE)
    step_ours(ours, net, 0)
    ours.load_state_dict(torch.optim.Adam(make_net().parameters()).state_dict())  # empty
    assert all(float(entry["step"]) == 0 and not entry["exp_avg"].any()
               for entry in ours.state_dict()["state"].values())


def test_a_state_of_another_shape_is_refused():
    net = make_net()
    ours = FlatAdam(net, 1e-2, DEVICE)
    other = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2)).to(DEVICE)
    wrong = FlatAdam(other, 1e-2, DEVICE)
    step_ours(wrong, other, 0)
    with pytest.raises(ValueError, match="shape"):
        ours.load_state_dict(wrong.state_dict())
