"""What the matrix products of one DDPG update cost on their own: the yardstick of
benchmarks/throughput.py's update-only rate.

The floor times each product of an update (256x256 networks, batch 256, Pendulum's
shapes) alone, repeated with its operands hot in cache; the sequence runs the same
products one after another, each with its own operands, as they follow each other in
an update.
"""

from __future__ import annotations

import statistics
import time


def update_gemm_shapes(batch: int, obs: int, act: int, hidden: int,
                       critics: int = 2) -> list[tuple[int, int, int]]:
    """(m, k, n) of every matrix product in one DDPG update with an L=2 hidden MLP."""
    def forward(d_in: int, d_out: int) -> list[tuple[int, int, int]]:
        return [(batch, d_in, hidden), (batch, hidden, hidden), (batch, hidden, d_out)]

    def backward(d_in: int, d_out: int, input_grad: bool, weight_grad: bool):
        shapes = []
        for k_in, k_out, first in ((hidden, d_out, False), (hidden, hidden, False),
                                   (d_in, hidden, True)):
            if weight_grad:
                shapes.append((k_in, batch, k_out))
            if not first or input_grad:
                shapes.append((batch, k_out, k_in))
        return shapes

    critic_in = obs + act
    shapes = forward(obs, act) + critics * forward(critic_in, 1)  # TD target
    shapes += critics * (forward(critic_in, 1) + backward(critic_in, 1, False, True))
    shapes += forward(obs, act) + forward(critic_in, 1)  # actor loss through Q1
    shapes += backward(critic_in, 1, True, False) + backward(obs, act, False, True)
    return shapes


def median_seconds(call, repeats: int, warmup: int) -> float:
    """Median over 5 timings of `repeats` calls, per call, after `warmup` calls."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        times.append((time.perf_counter() - start) / repeats)
    return statistics.median(times)


def gemm_floor_updates_per_second(repeats: int = 200) -> float:
    import torch

    total = 0.0
    for m, k, n in update_gemm_shapes(256, 3, 1, 256):
        a, b = torch.randn(m, k), torch.randn(k, n)
        total += median_seconds(lambda a=a, b=b: torch.mm(a, b), repeats, warmup=20)
    return 1.0 / total


def gemm_sequence_updates_per_second(repeats: int = 50) -> float:
    """The same products one after another in the update's order, each with operands of
    its own (as in an update), nothing in between: what the products cost when they
    follow each other instead of repeating one shape with its operands hot in cache.
    Reported beside the floor, not instead of it (the target's yardstick is the floor)."""
    import torch

    operands = [(torch.randn(m, k), torch.randn(k, n))
                for m, k, n in update_gemm_shapes(256, 3, 1, 256)]

    def products() -> None:
        for a, b in operands:
            torch.mm(a, b)

    return 1.0 / median_seconds(products, repeats, warmup=5)
