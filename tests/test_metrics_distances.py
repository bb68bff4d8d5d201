"""MMD, moments, median distance, NLTP and KSD against direct formulas."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from testbed.errors import InputError
from testbed.metrics import (
    ksd,
    median_distance,
    mmd,
    nltp,
    posterior_mean_error,
    posterior_variance_ratio,
)
from testbed.metrics.mmd import median_bandwidth, squared_distances


def direct_mmd(x, y, scale):
    """The unbiased MMD^2 written out with full kernel matrices (float64)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)

    def k(a, b):
        d2 = np.sum((a[:, None] - b[None]) ** 2, -1)
        return np.exp(-d2 / (2 * scale**2))

    n, m = len(x), len(y)
    kxx, kyy = k(x, x), k(y, y)
    return (
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2 * k(x, y).mean()
    )


def lower_median(d):
    d = np.sort(d)
    return d[(len(d) - 1) // 2]


@pytest.mark.parametrize("bandwidth", ["reference", "pooled"])
def test_mmd_matches_direct_formula(bandwidth):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 3)).astype(np.float32)
    y = (rng.standard_normal((257, 3)) * 1.3 + 0.2).astype(np.float32)
    pool = x if bandwidth == "reference" else np.concatenate([x, y])
    scale = lower_median(pdist(pool.astype(np.float64)))
    expected = direct_mmd(x, y, scale)
    got = mmd(x, y, bandwidth=bandwidth, block=64)  # 64 does not divide 300: padding used
    # float32 kernel sums of ~1e5 terms of size <= 1: relative error ~1e-6 of each mean
    assert got == pytest.approx(expected, abs=2e-6)
    assert expected > 0.01  # different distributions: clearly positive


@pytest.mark.parametrize("n, d, shift", [(2, 1, 0.0), (7, 3, 0.0), (1001, 10, 5.0), (2000, 2, 1e3)])
def test_median_bandwidth_is_the_lower_median_of_pdist(n, d, shift):
    # torch.median(pdist) semantics: the lower of the two middle distances, in float64
    x = np.random.default_rng(n).standard_normal((n, d)) + shift
    assert median_bandwidth(x) == pytest.approx(lower_median(pdist(x)), rel=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 8, 9, 10, 16, 17, 130])
@pytest.mark.parametrize("n", [2, 3, 512, 513, 1100])
def test_median_bandwidth_equals_the_straightforward_float32_computation_bit_for_bit(n, d):
    """The fast selection (squared distances in numpy's summation order, +inf below the
    diagonal) gives exactly the float32 value of sqrt(sum((a - b)^2)) + lower median, as
    before it was fast: the same bandwidth, so the same MMD."""
    rng = np.random.default_rng(n * 1000 + d)
    x = (rng.standard_normal((n, d)) * rng.uniform(0.1, 10, d)).astype(np.float32)
    i, j = np.triu_indices(n, 1)
    d2 = np.sum((x[i] - x[j]) ** 2, axis=-1)  # float32, numpy's own summation
    assert d2.dtype == np.float32
    want = float(np.sqrt(np.sort(d2)[(d2.size - 1) // 2]))
    assert median_bandwidth(x) == want
    # the bracketed selection (the default from 2^21 pairs) gives the same element
    assert median_bandwidth(x, block=100, pilot=1000, direct_below=0) == want
    out = np.empty((n, n), np.float32)
    assert np.array_equal(squared_distances(x, x, out), np.sum((x[:, None] - x[None]) ** 2, -1))


@pytest.mark.parametrize("bracket", ["below", "above", "empty"])
def test_median_bandwidth_when_the_bracket_misses_the_median(bracket, monkeypatch):
    """A bracket from the pilot pairs that misses (about 1e-9 by chance) falls back to
    keeping every pair: still the exact lower median, bit for bit."""
    mmd_module = importlib.import_module("testbed.metrics.mmd")  # `metrics.mmd` is the function
    rng = np.random.default_rng(5)
    x = rng.standard_normal((700, 3)).astype(np.float32)
    i, j = np.triu_indices(len(x), 1)
    d2 = np.sort(np.sum((x[i] - x[j]) ** 2, axis=-1))
    want = float(np.sqrt(d2[(d2.size - 1) // 2]))
    lo, hi = {"below": (d2[0], d2[10]), "above": (d2[-10], d2[-1]), "empty": (1e9, 1e9)}[bracket]
    monkeypatch.setattr(mmd_module, "_median_bracket", lambda x, pilot: (lo, hi))
    assert median_bandwidth(x, block=64, direct_below=0) == want


@pytest.mark.parametrize("d", [2, 10])
def test_median_bandwidth_of_10k_rows_needs_no_quadratic_buffer(d):
    """10,000 rows (sbibm's sample size) take the bracket path: the same element as keeping
    every pair, with blocks and their reused temporaries as the largest allocations
    instead of the 200 MB of pairs (at d = 10 the temporaries were 164 MB a block)."""
    import tracemalloc

    x = np.random.default_rng(3).standard_normal((10_000, d)).astype(np.float32)
    tracemalloc.start()
    got = median_bandwidth(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 80e6, f"peak {peak / 1e6:.0f} MB"
    assert got == median_bandwidth(x, direct_below=2**62)  # every pair kept
    # |x - y|^2 ~ 2 chi2_d: the median distance is sqrt(2 * chi2_d's median)
    from scipy.stats import chi2

    assert got == pytest.approx(np.sqrt(2 * chi2.median(d)), rel=0.02)


def test_mmd_unbiased_near_zero_for_same_distribution():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((400, 2)), rng.standard_normal((400, 2))
    # unbiased: mean 0; sd of the estimate ~ sqrt(2 / (n (n - 1))) * O(1) ~ 0.004 here
    assert abs(mmd(x, y)) < 0.01
    assert mmd(x, y + 1.0) > 0.1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scale": 0.0}, "scale: got 0.0"),  # these three gave MMD 0, "identical"
        ({"scale": -1.0}, "scale: got -1.0"),
        ({"scale": float("inf")}, "scale: got inf"),
        ({"scale": float("nan")}, "scale: got nan"),
        ({"block": 0}, "block: got 0"),  # was a ZeroDivisionError
        ({"block": 2.5}, "block: got 2.5"),
    ],
)
def test_mmd_refuses_a_bad_scale_or_block(kwargs, message):
    rng = np.random.default_rng(4)
    with pytest.raises(InputError, match=message):
        mmd(rng.standard_normal((30, 2)), rng.standard_normal((30, 2)) + 5, **kwargs)


def test_mmd_given_scale_and_bad_input():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((50, 2)), rng.standard_normal((60, 2))
    assert mmd(x, y, scale=0.7) == pytest.approx(direct_mmd(x, y, 0.7), abs=2e-6)
    with pytest.raises(InputError, match="samples"):
        mmd(x, rng.standard_normal((60, 3)))
    with pytest.raises(InputError, match="bandwidth"):
        mmd(x, y, bandwidth="median")
    with pytest.raises(InputError, match="reference"):
        mmd(np.full((5, 2), np.nan), y)


def test_moments_and_median_distance():
    ref = np.array([[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]])  # mean 2, std 2, var 4
    smp = np.array([[3.0, 1.0], [5.0, 1.0], [7.0, 1.0]])  # means 5, 1; var 4, 0
    assert posterior_mean_error(ref, smp) == pytest.approx(((5 - 2) / 2 + (1 - 2) / 2) / 2)
    assert posterior_variance_ratio(ref, smp) == pytest.approx((1.0 + 0.0) / 2)
    xs = np.array([[3.0, 4.0], [0.0, 1.0], [6.0, 8.0], [0.0, 0.0]])  # distances 5, 1, 10, 0
    assert median_distance(np.zeros(2), xs) == pytest.approx(3.0)  # numpy median: (1 + 5) / 2
    assert nltp(np.array([-1.0, -3.0])) == pytest.approx(2.0)
    with pytest.raises(InputError, match="x_o"):
        median_distance(np.zeros(3), xs)
    with pytest.raises(InputError, match="x_o: got NaN"):
        median_distance(np.array([0.0, np.nan]), xs)
    # -log q(theta*) is +inf when theta* is outside q's support; NaN is an error
    assert nltp(np.array([-np.inf])) == np.inf
    with pytest.raises(InputError, match="log_prob_true_parameters"):
        nltp(np.array([np.nan]))


def test_ksd_matches_double_sum_and_detects_wrong_model():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((60, 2))
    score = lambda t: -t  # noqa: E731  (standard normal)
    s2 = 1.3
    # direct: h(a, b) = k s_a.s_b + s_a.grad_b k + s_b.grad_a k + tr grad_a grad_b k
    h = 0.0
    for a in range(60):
        for b in range(60):
            diff = x[a] - x[b]
            k = np.exp(-diff @ diff / (2 * s2))
            sa, sb = score(x[a]), score(x[b])
            h += k * (sa @ sb + sa @ diff / s2 - sb @ diff / s2 + 2 / s2 - diff @ diff / s2**2)
    assert ksd(x, score, sigma2=s2) == pytest.approx(60 * h / 60**2, rel=1e-4)
    y = rng.standard_normal((300, 2))
    good = ksd(y, score)
    bad = ksd(y, scores=-(y - 1.0))  # N(1, I)'s score at N(0, I) samples
    assert bad > 20 * max(good, 1e-3)
