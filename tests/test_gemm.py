"""The fused updates' matrix-product kernels (agents/gemm.py): each computes the same
products as torch, the faster one is chosen once, and a checkpoint keeps the choice."""

from __future__ import annotations

import numpy as np
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
    # Every side at least THIN, so that oneDNN's products run where it is the kernel.
    x, weight, bias = (torch.randn(shape, generator=g) for shape in ((64, 40), (40, 48), (48,)))
    expected = x @ weight + bias
    torch.testing.assert_close(products.linear(x, weight, bias), expected)
    torch.testing.assert_close(products.linear(x, weight, bias, relu=True), expected.relu())
    torch.testing.assert_close(products.linear(x, weight, bias.reshape(1, -1)), expected)
    torch.testing.assert_close(products.mm(x.t(), x), x.t() @ x)
    into = torch.zeros(40, 48)
    products.mm_into(into, x.t(), expected)
    torch.testing.assert_close(into, x.t() @ expected)
    linear_grad = torch.zeros(48, 40)  # an nn.Linear's [out, in] gradient, as its .t() view
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


def fused_sac(kernel: str = "auto") -> FusedSACAgent:
    low, high = np.array([-1.0], np.float32), np.array([1.0], np.float32)
    return FusedSACAgent(3, low, high, CommonSettings(matmul_kernel=kernel), SACOptions(),
                         torch.device("cpu"))


@pytest.mark.parametrize("kernel", KERNELS)
def test_with_auto_a_checkpoint_gives_its_kernel_back(kernel):
    agent = fused_sac()
    state = {**agent.state_dict(), "gemm": kernel}
    agent.products = gemm.Products(next(k for k in gemm.GEMMS if k != kernel))
    assert agent.load_state_dict(state) and agent.products.kind == kernel
    assert agent.kernel_warning is None and agent.restore_warnings() == []
    assert agent.state_dict()["gemm"] == kernel


def test_a_fused_checkpoint_naming_no_kernel_multiplied_with_the_blas():
    agent = fused_sac()
    state = agent.state_dict()
    del state["gemm"]
    agent.load_state_dict(state)
    assert agent.products.kind == "blas"


def test_a_kernel_set_in_the_config_wins_over_the_checkpoints():
    agent = fused_sac("blas")
    agent.load_state_dict({**agent.state_dict(), "gemm": "onednn"})
    assert agent.products.kind == "blas"


def test_a_checkpoints_kernel_this_torch_lacks_is_said(monkeypatch):
    agent = fused_sac()
    state = {**agent.state_dict(), "gemm": "onednn"}
    monkeypatch.setattr(gemm, "_onednn_linear", None)
    agent.products = gemm.Products("blas")
    agent.load_state_dict(state)
    assert agent.products.kind == "blas"
    assert "lacks" in agent.kernel_warning and "not bit-identically" in agent.kernel_warning
    assert agent.restore_warnings() == [agent.kernel_warning]  # what the resume prints


def test_cuda_always_gets_torchs_products_and_onednn_there_is_refused():
    cuda = torch.device("cuda")
    assert gemm.kernel_for("auto", cuda, (256,)) == "blas"
    assert gemm.kernel_for("blas", cuda, (256,)) == "blas"
    with pytest.raises(ValueError, match="CPU only"):
        gemm.kernel_for("onednn", cuda, (256,))


def test_the_measurement_leaves_the_global_random_stream_alone():
    gemm.fastest.cache_clear()
    before = torch.get_rng_state()
    gemm.fastest(40)
    assert torch.equal(torch.get_rng_state(), before)


def test_a_checkpoint_naming_an_unknown_kernel_is_refused(trained_run):
    path = trained_run.checkpoint_dir / "checkpoint_step_200.pt"
    data = load_checkpoint(path)  # a fused DDPG run's: it names its kernel
    assert data["gemm"] in KERNELS
    data["gemm"] = "evil"
    with pytest.raises(CheckpointError, match="field 'gemm' is 'evil'"):
        check_fields(data, path)
