"""How far a k3 estimator is off in float32, for the KL-penalty notebook's two measurement cells.

With d = log(pi_ref / pi) rounded to float32, the literal ``exp(d) - 1 - d`` carries the rounding of ``exp(d)``
(a few times 1e-8 near 1, whatever d is), while k3 itself is about d^2 / 2: its error relative to k3 grows like
1 / d^2, and once that error outgrows k3 the literal form is negative in about half the draws.  The notebook
measures that form before the student writes theirs, and the student's own function after.

The yardstick is k3 of the same float32 d in float64, from its Taylor series (``k3_float64``), which is
not a way to write the exercise's answer: it holds only for small |d|.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

#: The largest |d| the float64 series serves: its terms to d^8 / 8! leave a remainder below 2 |d|^7 / 9! relative to
#: k3 ~ d^2 / 2, about 6e-20 at 0.01, far below float64's own rounding (1.1e-16).
SERIES_LIMIT = 0.01
SERIES_ORDER = 8


class RoundingError(NamedTuple):
    size: float        # |d|
    median: float      # median of |estimate - k3| / k3 over the draws
    max: float         # largest |estimate - k3| / k3
    negative: float    # share of the draws where the estimate is < 0 (k3 itself never is)


def k3_float64(d: torch.Tensor) -> torch.Tensor:
    """k3 = e^d - 1 - d in float64 from its Taylor series, d^2/2! + d^3/3! + ... + d^8/8!, for |d| <= 0.01.

    d: tensor of any shape and float dtype (the log-ratio, nats); returns float64, same shape, relative error at
    float64's rounding (a few 1e-16; the series' remainder is below 6e-20 there)."""
    d = d.double()
    if d.numel() and float(d.abs().max()) > SERIES_LIMIT:
        raise ValueError(f"k3_float64 sums the series for |d| <= {SERIES_LIMIT}; "
                         f"got |d| up to {float(d.abs().max()):.3g}")
    total = torch.zeros_like(d)
    for order in range(SERIES_ORDER, 1, -1):  # Horner's order: the smallest terms first
        total = (total + 1 / math.factorial(order)) * d if order > 2 else (total + 0.5) * d * d
    return total


def literal_k3(log_p: torch.Tensor, ref_log_p: torch.Tensor) -> torch.Tensor:
    """k3 written as its formula, exp(d) - 1 - d with d = ref_log_p - log_p: the form whose error is measured
    before the exercise (inputs and result: same shape and dtype)."""
    log_ratio = ref_log_p - log_p
    return torch.exp(log_ratio) - 1 - log_ratio


def k3_rounding_errors(estimator: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], sizes,
                       draws: int = 100_000, seed: int = 0) -> list[RoundingError]:
    """For each |d| in ``sizes`` (each at most 0.01 / 1.1): ``draws`` float32 values of d within 10 % of it, either
    sign, handed to ``estimator(log_p, ref_log_p)`` as log_p = 0 and ref_log_p = d (both float32, shape
    (draws,)); its estimates' error relative to k3 of the same float32 d in float64 (``k3_float64``)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for size in sizes:
        magnitude = size * (0.9 + 0.2 * torch.rand(draws, generator=gen, dtype=torch.float64))
        sign = torch.where(torch.rand(draws, generator=gen) < 0.5, -1.0, 1.0).double()
        d32 = (sign * magnitude).float()
        k3 = k3_float64(d32)
        estimate = estimator(torch.zeros_like(d32), d32.clone())
        if not isinstance(estimate, torch.Tensor) or estimate.shape != d32.shape:
            got = tuple(estimate.shape) if isinstance(estimate, torch.Tensor) else type(estimate).__name__
            raise ValueError(f"the estimator should return one k3 per token, shape ({draws},); got {got}")
        estimate = estimate.detach().double()
        relative = (estimate - k3).abs() / k3
        rows.append(RoundingError(float(size), relative.median().item(), relative.max().item(),
                                  (estimate < 0).double().mean().item()))
    return rows
