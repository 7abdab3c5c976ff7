"""How far the literal k3 is off in float32, for the KL-penalty notebook's measurement cell.

With d = log(pi_ref / pi) rounded to float32, ``exp(d) - 1 - d`` carries the rounding of ``exp(d)`` (a few
times 1e-8 near 1, whatever d is), while k3 itself is about d^2 / 2: its error relative to k3 grows like
1 / d^2, and once that error outgrows k3 the literal form is negative in about half the draws.
``expm1(d) - d`` never forms ``exp(d)`` and stays within about 1.2e-7 / |d| of k3.
"""
from __future__ import annotations

from typing import NamedTuple

import torch


class RoundingError(NamedTuple):
    size: float        # |d|
    median: float      # median of |literal - k3| / k3
    max: float         # largest |literal - k3| / k3
    expm1_max: float   # largest |expm1(d) - d - k3| / k3
    negative: float    # share of the draws where exp(d) - 1 - d < 0 (k3 itself never is)


def k3_rounding_errors(sizes, draws: int = 100_000, seed: int = 0) -> list[RoundingError]:
    """For each |d| in ``sizes``: ``draws`` float32 values of d within 10 % of it, either sign; the error of
    each float32 form relative to k3 computed in float64 from the same (float32) d."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for size in sizes:
        magnitude = size * (0.9 + 0.2 * torch.rand(draws, generator=gen, dtype=torch.float64))
        sign = torch.where(torch.rand(draws, generator=gen) < 0.5, -1.0, 1.0).double()
        d32 = (sign * magnitude).float()
        d64 = d32.double()
        k3 = torch.expm1(d64) - d64
        literal = (torch.exp(d32) - 1 - d32).double()
        stable = (torch.expm1(d32) - d32).double()
        relative = (literal - k3).abs() / k3
        rows.append(RoundingError(float(size), relative.median().item(), relative.max().item(),
                                  ((stable - k3).abs() / k3).max().item(), (literal < 0).double().mean().item()))
    return rows
