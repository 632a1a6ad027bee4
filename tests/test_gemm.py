"""The fused updates' matrix-product kernels (agents/gemm.py): each computes the same
products as torch, the faster one is chosen once, and a checkpoint keeps the choice."""

from __future__ import annotations

import pytest
import torch

from rltrain.agents import gemm
from rltrain.agents.base import CommonSettings
from rltrain.agents.registry import SACOptions
from rltrain.agents.sac_fused import FusedSACAgent
from rltrain.utils.errors import CheckpointError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.io.checkpoint_fields import check_fields

KERNELS = gemm.available()


@pytest.mark.parametrize("kind", KERNELS)
def test_each_kernel_computes_torchs_products(kind):
    products = gemm.Products(kind)
    g = torch.Generator().manual_seed(0)
    x, weight, bias = (torch.randn(shape, generator=g) for shape in ((64, 24), (24, 40), (40,)))
    expected = x @ weight + bias
    torch.testing.assert_close(products.linear(x, weight, bias), expected)
    torch.testing.assert_close(products.linear(x, weight, bias, relu=True), expected.relu())
    torch.testing.assert_close(products.linear(x, weight, bias.reshape(1, -1)), expected)
    torch.testing.assert_close(products.mm(x.t(), x), x.t() @ x)
    into = torch.zeros(24, 40)
    products.mm_into(into, x.t(), expected)
    torch.testing.assert_close(into, x.t() @ expected)
    linear_grad = torch.zeros(40, 24)  # an nn.Linear's [out, in] gradient, as its .t() view
    products.mm_into(linear_grad.t(), x.t(), expected)
    torch.testing.assert_close(linear_grad.t(), x.t() @ expected)


def test_the_fastest_kernel_is_one_this_torch_runs():
    assert gemm.fastest(32) in KERNELS


def test_without_onednn_the_blas_is_used(monkeypatch):
    monkeypatch.setattr(gemm, "_onednn_linear", None)
    gemm.fastest.cache_clear()
    try:
        assert gemm.available() == ("blas",)
        assert gemm.fastest(48) == "blas"
    finally:
        gemm.fastest.cache_clear()


def test_an_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="one of blas, onednn"):
        gemm.Products("cublas")


def test_the_state_dict_keeps_the_kernel_and_a_checkpoint_naming_none_keeps_the_choice():
    import numpy as np

    low, high = np.array([-1.0], np.float32), np.array([1.0], np.float32)
    agent = FusedSACAgent(3, low, high, CommonSettings(), SACOptions(), torch.device("cpu"))
    chosen = agent.products.kind
    state = agent.state_dict()
    assert state["gemm"] == chosen
    agent.load_state_dict({**state, "gemm": "blas"})
    assert agent.products.kind == "blas"
    del state["gemm"]  # a checkpoint of the autograd backend
    agent.load_state_dict(state)
    assert agent.products.kind == "blas"


def test_a_checkpoint_naming_an_unknown_kernel_is_refused(trained_run):
    path = trained_run.checkpoint_dir / "checkpoint_step_200.pt"
    data = load_checkpoint(path)  # a fused DDPG run's: it names its kernel
    assert data["gemm"] in KERNELS
    data["gemm"] = "evil"
    with pytest.raises(CheckpointError, match="field 'gemm' is 'evil'"):
        check_fields(data, path)
