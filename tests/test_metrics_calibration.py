"""SBC, expected coverage and TARP on a Gaussian conjugate toy with exact posteriors.

theta ~ N(0, I_2), x | theta ~ N(theta, I_2): the posterior is N(x / 2, I / 2). A 'posterior'
N(x / 2, c^2 I / 2) is correct for c = 1, over-dispersed for c = 2, under-dispersed for 0.5.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from testbed.errors import InputError
from testbed.metrics import check_sbc, expected_coverage, sbc_ranks, tarp

N, L, D = 500, 100, 2


def toy(c: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((N, D))
    x = theta + rng.standard_normal((N, D))
    mean, sd = x / 2, c * np.sqrt(0.5)
    draws = mean[:, None] + sd * rng.standard_normal((N, L, D))
    log_q = lambda t: stats.norm.logpdf(t, mean[:, None] if t.ndim == 3 else mean, sd).sum(-1)  # noqa: E731
    return theta, draws, log_q(theta), log_q(draws)


def test_sbc_accepts_correct_and_rejects_wrong_dispersion():
    theta, draws, _, _ = toy(1.0)
    ranks = sbc_ranks(theta, draws)
    assert ranks.shape == (N, D) and ranks.min() >= 0 and ranks.max() <= L
    good = check_sbc(ranks, L, c2st_ranks=False)
    # fixed seed; under H0 each p-value is uniform: > 0.001 fails with prob 0.2 %
    assert np.all(good.ks_pvals > 1e-3)
    for c in (2.0, 0.5):
        theta, draws, _, _ = toy(c, seed=1)
        bad = check_sbc(sbc_ranks(theta, draws), L, c2st_ranks=False)
        # rank / L ~ Phi(Z / c): c = 2 puts 82 % of the ranks in the middle half (KS D ~ 0.3),
        # c = 0.5 puts 44 % in the outer 12 %; at N = 500 both give p-values far below 1e-6
        assert np.all(bad.ks_pvals < 1e-6)


def test_sbc_c2st_of_ranks():
    theta, draws, _, _ = toy(1.0)
    good = check_sbc(sbc_ranks(theta, draws), L).c2st_ranks
    theta, draws, _, _ = toy(0.5, seed=1)
    bad = check_sbc(sbc_ranks(theta, draws), L).c2st_ranks
    # 2N = 1000 held-out predictions: sd of the accuracy under H0 = 0.016; 4 sd = 0.065.
    assert np.all(np.abs(good - 0.5) < 0.065)
    # c = 0.5: 44 % of the ranks sit in the outer 12 % of [0, L]: accuracy ~0.65-0.7
    assert np.all(bad > 0.6)


def test_expected_coverage_detects_over_and_under_dispersion():
    # DKW: sup |coverage - level| <= sqrt(log(2 / 1e-3) / (2 N)) = 0.087 with prob 0.999,
    # plus 1 / L for the finite draws.
    bound = np.sqrt(np.log(2 / 1e-3) / (2 * N)) + 1 / L
    _, _, lt, ls = toy(1.0)
    good = expected_coverage(lt, ls)
    assert good.max_deviation < bound and good.ks_pvalue > 1e-3
    half = good.levels == 0.5
    # c = 2: theta* is in q's level-a region iff |theta* - x/2|^2 / (1/2) < 4 chi2_2.ppf(a)
    _, _, lt, ls = toy(2.0, seed=1)
    over = expected_coverage(lt, ls)
    expected_over = stats.chi2.cdf(4 * stats.chi2.ppf(0.5, 2), 2)  # = 0.94
    assert over.coverage[half][0] == pytest.approx(expected_over, abs=bound)
    _, _, lt, ls = toy(0.5, seed=2)
    under = expected_coverage(lt, ls)
    expected_under = stats.chi2.cdf(stats.chi2.ppf(0.5, 2) / 4, 2)  # = 0.16
    assert under.coverage[half][0] == pytest.approx(expected_under, abs=bound)
    assert over.ks_pvalue < 1e-6 and under.ks_pvalue < 1e-6


def test_tarp_calibrated_vs_not():
    theta, draws, _, _ = toy(1.0)
    good = tarp(theta, draws)
    assert good.alpha[0] == 0 and good.alpha[-1] == 1 and good.ecp[-1] == pytest.approx(1)
    # ECP is an empirical CDF of N = 500 uniforms on 51 bins: DKW as above, over 26 points
    bound = np.sqrt(np.log(2 / 1e-3) / (2 * N))
    assert np.max(np.abs(good.ecp - good.alpha)) < bound
    theta, draws, _, _ = toy(0.5, seed=1)
    under = tarp(theta, draws)
    assert np.max(np.abs(under.ecp - under.alpha)) > 2 * bound
    assert abs(under.atc) > 5 * abs(good.atc) and abs(under.atc) > 1.0 / 50  # 50 bins


def test_bad_shapes():
    theta, draws, lt, ls = toy(1.0)
    with pytest.raises(InputError, match="posterior_samples"):
        sbc_ranks(theta, draws[:10])
    with pytest.raises(InputError, match="ranks"):
        check_sbc(np.full((10, 2), L + 1), L)
    with pytest.raises(InputError, match="log_prob_samples"):
        expected_coverage(lt, ls[:5])
