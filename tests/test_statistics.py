"""Interval coverage on synthetic data: a 95% interval must contain the true value ~95% of the time,
also near the bounds of the values and at small n, where the plain percentile bootstrap does not."""

from __future__ import annotations

import pytest
import torch

from assignadd.hypotheses.base import mean
from assignadd.interventions.statistics import mean_ci, rate_ci

REPS = 400


def coverage(draw, truth, **kwargs) -> float:
    gen = torch.Generator().manual_seed(0)
    hits = 0
    for i in range(REPS):
        _, lo, hi = mean_ci(draw(gen), seed=i, label="coverage", **kwargs)
        hits += lo <= truth <= hi
    return hits / REPS


def test_mean_interval_covers_near_a_bound_with_rare_events():
    # Bernoulli(0.995), n = 500: the percentile bootstrap covered ~0.907 here
    cov = coverage(lambda g: (torch.rand(500, generator=g) < 0.995).double(), 0.995, bounds=(0, 1))
    assert cov >= 0.93, cov


def test_mean_interval_covers_at_small_n():
    # normal, n = 5: the percentile bootstrap covered ~0.844
    cov = coverage(lambda g: torch.randn(5, generator=g, dtype=torch.float64), 0.0)
    assert cov >= 0.93, cov


def test_mean_interval_is_not_absurdly_wide():
    values = torch.ones(1000, dtype=torch.float64)
    values[:10] = 0
    _, lo, hi = mean_ci(values, bounds=(0, 1))
    assert 0.98 <= lo < 0.99 < hi <= 0.998


def test_one_value_has_no_interval():
    with pytest.raises(ValueError, match="at least 2"):
        mean_ci(torch.tensor([0.5]))
    m = mean(torch.tensor([0.5]), seed=0, label="x")
    assert m.value == 0.5 and m.low is None and m.high is None


def test_rate_interval_is_exact_clopper_pearson():
    v, lo, hi = rate_ci(torch.tensor([True] * 99 + [False]))
    assert v == 0.99 and 0.945 < lo < 0.946 and hi > 0.9997
