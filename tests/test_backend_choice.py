"""Which update an algorithm with several (agents/backends.py) gives a run: `fused` is
refused where it cannot run, `auto` falls back to autograd where torch lacks one of the
fused update's private ops and says so, and the CPU defaults train and save without
importing torch._dynamo (which torch.optim's constructor imports)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from test_sac import HIGH, LOW

from rltrain.agents import crossq, fused_ops, sac, tqc
from rltrain.agents.base import CommonSettings
from rltrain.agents.crossq_update import CrossQAgent
from rltrain.agents.registry import CrossQOptions, SACOptions, TQCOptions
from rltrain.agents.sac_update import SACAgent
from rltrain.agents.tqc_update import TQCAgent
from rltrain.networks.mlp import NetworkSpec

CPU = torch.device("cpu")
# algo -> (its build, its options, its autograd agent)
BUILDS = {"sac": (sac.build, SACOptions, SACAgent), "tqc": (tqc.build, TQCOptions, TQCAgent),
          "crossq": (crossq.build, CrossQOptions, CrossQAgent)}


@pytest.mark.parametrize("algo", BUILDS)
@pytest.mark.parametrize("net", [NetworkSpec((16,), layer_norm=True),
                                 NetworkSpec((16,), activation="tanh")])
def test_fused_with_a_custom_network_is_refused(algo, net):
    build, options, _ = BUILDS[algo]
    with pytest.raises(ValueError, match="stock ReLU networks only"):
        build(3, LOW, HIGH, CommonSettings(critic_net=net), options(), CPU, "fused")


@pytest.mark.parametrize("algo", BUILDS)
def test_auto_without_the_private_ops_trains_through_autograd_and_says_so(algo, monkeypatch):
    monkeypatch.setitem(fused_ops._OPS, "torch.ops.aten.threshold_backward", None)
    build, options, reference = BUILDS[algo]
    agent, warning = build(3, LOW, HIGH, CommonSettings(), options(), CPU, "auto")
    assert type(agent) is reference and "threshold_backward" in warning
    with pytest.raises(ValueError, match="threshold_backward"):
        build(3, LOW, HIGH, CommonSettings(), options(), CPU, "fused")


@pytest.mark.parametrize("config, agent", [
    ({}, "FusedDDPGAgent"),
    ({"algo": "sac"}, "FusedSACAgent"),
    ({"algo": "sac", "networks": {"critic": {"layer_norm": True}}}, "FlatSACAgent"),
    ({"algo": "tqc"}, "FusedTQCAgent"),
    ({"algo": "tqc", "networks": {"critic": {"layer_norm": True}}}, "FlatTQCAgent"),
    ({"algo": "crossq", "crossq": {"policy_delay": 1}}, "FusedCrossQAgent")])
def test_the_cpu_defaults_train_and_save_without_torch_dynamo(config, agent):
    code = (
        "import sys, numpy as np, torch\n"
        "from rltrain.scripts.training.agent_setup import build_agent\n"
        "from rltrain.utils.config.loader import config_from_dict\n"
        "from rltrain.utils.training.replay_buffer import Batch\n"
        f"config = config_from_dict({{'hidden_sizes': [8, 8], **{config!r}}})\n"
        "agent, _ = build_agent(config, 3, np.array([-2.0], np.float32),\n"
        "                       np.array([2.0], np.float32), torch.device('cpu'))\n"
        "b = Batch(torch.randn(4, 3), torch.rand(4, 1), torch.randn(4, 1), torch.randn(4, 3),\n"
        "          torch.zeros(4, 1))\n"
        "agent.update(b); agent.load_state_dict(agent.state_dict()); agent.update(b)\n"
        "print(type(agent).__name__, 'torch._dynamo' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == [agent, "False"]
