"""Confidence intervals and effect sizes, model-free and seeded.

Thin wrappers over TransformerLens 4.3's ``utilities.statistics`` (exact Clopper-Pearson for rates,
percentile bootstrap for means), returning plain floats so results serialize to JSON.
"""
from __future__ import annotations

import torch
from transformer_lens.utilities.statistics import bootstrap_ci, derive_generator

CONFIDENCE = 0.95
N_BOOTSTRAP = 1000


def rate_ci(successes, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(rate, low, high)``: a success rate with its exact Clopper-Pearson interval.

    The same interval as TransformerLens' ``success_rate_ci`` (a test checks they agree), computed
    from beta quantiles (scipy) rather than its pure-Python search, which costs seconds at n = 4000.
    """
    from scipy.stats import beta

    s = torch.as_tensor(successes).bool().flatten()
    n, k = s.numel(), int(s.sum())
    if n == 0:
        raise ValueError("rate_ci needs at least one trial")
    alpha = 1.0 - confidence
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return float(s.double().mean()), low, high


def mean_ci(values, *, seed: int = 0, label: str = "", confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean, low, high)``: a mean with its percentile bootstrap interval (seeded by ``seed``, ``label``)."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    if v.numel() == 1:
        return float(v[0]), float(v[0]), float(v[0])
    lo, hi = bootstrap_ci(v, confidence=confidence, n_resamples=N_BOOTSTRAP, generator=derive_generator(seed, label))
    return float(v.mean()), float(lo), float(hi)


def fraction_worse(before, after) -> float:
    """Fraction of examples whose metric went down: reported beside a mean, which can hide cancellation."""
    before, after = torch.as_tensor(before, dtype=torch.float64), torch.as_tensor(after, dtype=torch.float64)
    return float((after < before).double().mean())


def normalized_effect(intervened: float, baseline: float, clean: float, *, min_denominator: float = 1e-3):
    """(M_intervened - M_baseline) / (M_clean - M_baseline), or None where the denominator is near zero
    (reported, not divided by)."""
    denom = clean - baseline
    if abs(denom) < min_denominator:
        return None
    return (intervened - baseline) / denom
