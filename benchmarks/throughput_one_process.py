"""The measurements of `throughput.py` made inside one process, where the machine's drift
cancels: the diagnostics on and off in alternating blocks of one run, and the update
alone against the same matrix products timed alone (the GEMM floor)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import agent_on_filled_buffer, run_worker, timed_updates  # noqa: E402
from gemm_floor import (  # noqa: E402
    gemm_floor_updates_per_second,
    gemm_sequence_updates_per_second,
)
from throughput_settings import BASE_CONFIGS, WARMUP, bench_config  # noqa: E402

FLOOR_BLOCKS = 5
# Env steps per block of the one-process diagnostics comparison: about 0.2 s, so that
# both halves of a pair see the same machine (with 200-step blocks, pairs ranged 0.7-1.3).
AB_BLOCK = 20

def diagnostics_ab_worker(steps: int) -> dict:
    """The diagnostics on and off in one process: the learning phase in blocks of
    AB_BLOCK env steps, alternately with `Flow1Diagnostics` and with `NoDiagnostics`
    (the order flipped every pair), so that both halves of a pair see the same machine.
    Per pair: the on/off throughput ratio, the on-block's share spent in the
    diagnostics' own (timed) calls, and what the on-block took beyond those calls and the
    off-block's time: the cost the in-run share cannot see (the actor hook's dispatch
    through nn.Module, caches). Medians leave out the rare blocks with a heatmap in them
    (one per 5000 steps), whose cost the in-run share includes."""
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.diagnosis.watch import NoDiagnostics
    from rltrain.utils.run.folders import create_run

    # No loss logging: it reads the diagnostics' timer, which the swaps below would skew.
    config = bench_config(BASE_CONFIGS["ddpg"], steps, 0, [f"log_freq={10 * (WARMUP + steps)}"])
    blocks: list[tuple[bool, float, float]] = []  # (on, seconds, diagnostics' own seconds)

    class SwappingTrainer(Trainer):
        flow1, off = None, None  # the diagnostics object, and the stand-in while off
        mark = (0.0, 0.0)

        def _step(self) -> None:
            super()._step()
            done = self.state.counters.env_steps - WARMUP
            if done < 0 or done % AB_BLOCK:
                return
            if self.flow1 is None:
                self.flow1, self.off = self.diagnostics, NoDiagnostics()
            else:
                seconds, own = self.mark
                blocks.append((self.diagnostics is self.flow1,
                               time.perf_counter() - seconds, self.flow1.seconds - own))
            index = done // AB_BLOCK
            on = (index // 2 % 2 == 0) == (index % 2 == 0)
            if on and self.diagnostics is not self.flow1:
                self.flow1.attach()
                self.diagnostics = self.flow1
            elif not on and self.diagnostics is self.flow1:
                self.flow1.close()
                self.diagnostics = self.off
            self.mark = (time.perf_counter(), self.flow1.seconds)

    trainer = SwappingTrainer(config, torch.device("cpu"), interactive=False)
    trainer.run(create_run(config))
    return ab_summary(blocks)


def ab_summary(blocks: list[tuple[bool, float, float]]) -> dict:
    """Per on/off pair of blocks (on, seconds, diagnostics' own seconds): the medians."""
    pairs = [sorted(blocks[i:i + 2], reverse=True) for i in range(0, len(blocks) - 1, 2)]
    return {"pairs": len(pairs),
            "on_off": statistics.median(off[1] / on[1] for on, off in pairs),
            "own_share": statistics.median(on[2] / on[1] for on, _ in pairs),
            "beyond_share": statistics.median((on[1] - on[2] - off[1]) / on[1]
                                              for on, off in pairs)}


def update_only_worker(updates: int) -> dict:
    from rltrain.utils.run.device import tune_process

    tune_process()  # as the Trainer does
    agent, buffer = agent_on_filled_buffer(rows=10_000)
    for _ in range(50):
        agent.update(buffer.sample(256))
    # Updates and the floor alternate in short blocks, so that both see the same load
    # on a shared machine; each block gives one ratio.
    rates, floors, sequences = [], [], []
    block = updates // FLOOR_BLOCKS
    for _ in range(FLOOR_BLOCKS):
        rates.append(block / timed_updates(agent, buffer, block))
        floors.append(gemm_floor_updates_per_second(repeats=50))
        sequences.append(gemm_sequence_updates_per_second(repeats=50))
    shares = sorted(rate / floor for rate, floor in zip(rates, floors, strict=True))
    return {"updates_per_second": statistics.median(rates),
            "gemm_floor": statistics.median(floors),
            "floor_share": statistics.median(shares),
            "floor_share_range": [shares[0], shares[-1]],
            "gemm_sequence": statistics.median(sequences),
            "sequence_share": statistics.median(
                rate / sequence for rate, sequence in zip(rates, sequences, strict=True))}


def print_one_process(script: Path, updates: int, ab_steps: int) -> None:
    """The diagnostics on/off in one process, and the update against the GEMM floor."""
    update = run_worker(script, ["update", str(updates), "0", BASE_CONFIGS["ddpg"]])
    ab = run_worker(script, ["diagnostics", str(ab_steps), "0", BASE_CONFIGS["ddpg"]])
    print(f"in one process, alternating {AB_BLOCK}-step blocks with and without them "
          f"({ab['pairs']} pairs, medians): on/off = {ab['on_off']:.1%}; their own calls "
          f"{ab['own_share']:.1%} of an on-block, the rest of the on-block "
          f"{ab['beyond_share']:+.1%} of it beyond the off-block's time\n")
    low, high = update["floor_share_range"]
    print(f"update-only: {update['updates_per_second']:.1f} updates/s; GEMM floor "
          f"{update['gemm_floor']:.1f} updates/s; {update['floor_share']:.0%} of the floor "
          f"(median of {FLOOR_BLOCKS} alternating blocks; range {low:.0%}-{high:.0%}); the "
          f"same products in sequence {update['gemm_sequence']:.1f} updates/s "
          f"({update['sequence_share']:.0%} of that)")
