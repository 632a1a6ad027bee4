"""SAC with rltrain's flat Adam (agents/fused_ops.py `FlatAdam`): the default on the CPU.

The gradients are autograd's, as in agents/sac_update.py; only the optimiser differs. Each
network's parameters, gradients and Adam moments live in one flat buffer, stepped by the
kernel `torch.optim.Adam(fused=True)` runs on the same state, so the two give the same
update (tests/test_sac.py checks it bit for bit). What it saves: `torch.optim` imports
torch._dynamo, tens of MiB that a training process that compiles nothing can do without,
and the gradient norm and clipping are one kernel over the flat buffer.
"""

from __future__ import annotations

import torch
from torch import nn

from rltrain.agents.fused_ops import FlatAdam, FlatAdamOptimisers
from rltrain.agents.sac_update import SACAgent


class FlatSACAgent(FlatAdamOptimisers, SACAgent):
    """`SACAgent` whose optimisers are `FlatAdam`s."""

    def _step(self, optimiser: FlatAdam, net: nn.Module, loss: torch.Tensor,
              clip: bool = True) -> torch.Tensor:
        # The parameters' .grad are views of the flat buffer: autograd adds into them.
        optimiser.grad.zero_()
        optimiser.attach_grads()
        loss.backward()
        # The norm as torch.nn.utils computes it (per parameter, then over them), so that
        # clipping scales exactly as in agents/sac_update.py.
        norm = torch.nn.utils.get_total_norm(optimiser.grads)
        return optimiser.step(loss, self.settings.grad_clip_norm if clip else None,
                              norm).detach()
