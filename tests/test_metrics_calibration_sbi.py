"""SBC, expected coverage and TARP against sbi 0.27's own functions on the same inputs.

theta ~ N(0, I_2), x | theta ~ N(theta, I_2), exact posterior N(x / 2, I / 2); the 'posterior'
N(x / 2, c^2 I / 2) is calibrated at c = 1 and under-dispersed at c = 0.5. Each quantity is
computed by testbed.metrics and by sbi (its internal `_run_sbc` / `_run_tarp`, which take
posterior draws instead of a trained posterior) on the same draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from testbed.metrics import check_sbc, expected_coverage, sbc_ranks, tarp
from testbed.metrics.calibration import hpd_fractions

torch = pytest.importorskip("torch")
sbi_sbc = pytest.importorskip("sbi.diagnostics.sbc")
sbi_tarp = pytest.importorskip("sbi.diagnostics.tarp")
from sbi.utils.metrics import l2  # noqa: E402

N, L, D = 500, 100, 2


def toy(c: float, seed: int, num_draws: int = L):
    """theta* [N, D], x [N, D], draws of q(. | x_i) [N, L, D] and the sd of q."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((N, D))
    x = theta + rng.standard_normal((N, D))
    sd = c * np.sqrt(0.5)
    draws = x[:, None] / 2 + sd * rng.standard_normal((N, num_draws, D))
    return theta, x, draws, sd


def as_sbi(theta, x, draws):
    """sbi's layout: thetas [N, D], xs [N, D], posterior samples [L, N, D] (float64)."""
    return torch.from_numpy(theta), torch.from_numpy(x), torch.from_numpy(draws.transpose(1, 0, 2))


def ks_pvalue_bounds(pvalue_sbi: float, delta: float) -> tuple[float, float]:
    """The p-values a KS statistic within `delta` of sbi's gives (exact distribution, N)."""
    d = stats.kstwo.isf(pvalue_sbi, N)
    return stats.kstwo.sf(d + delta, N), stats.kstwo.sf(max(d - delta, 0.0), N)


@pytest.mark.parametrize("c", [1.0, 0.6])
def test_sbc_ranks_and_ks_pvalues_as_sbi(c):
    theta, x, draws, _ = toy(c, seed=0)
    t, xs, post = as_sbi(theta, x, draws)
    ranks_sbi = sbi_sbc._run_sbc(t, xs, post, "marginals", show_progress_bar=False).numpy()
    ranks = sbc_ranks(theta, draws)
    np.testing.assert_array_equal(ranks, ranks_sbi)
    ours = check_sbc(ranks, L, c2st_ranks=False).ks_pvals
    theirs = sbi_sbc.check_uniformity_frequentist(torch.from_numpy(ranks_sbi), L).numpy()
    # ours tests the ranks jittered in their cell, sbi the integer ranks against U(0, L):
    # each point moves by at most 1 / (L + 1), and so does the KS statistic
    for p, p_sbi in zip(ours, theirs, strict=True):
        low, high = ks_pvalue_bounds(float(p_sbi), 1 / (L + 1))
        assert low * (1 - 1e-5) <= p <= high * (1 + 1e-5), (p, p_sbi, low, high)
    if c == 1.0:
        assert np.all(ours > 1e-3)
    else:  # the test above is not vacuous: both reject
        assert np.all(ours < 1e-3) and np.all(theirs < 1e-3)


def test_c2st_of_ranks_as_sbi_with_its_classifier_and_why_ours_is_an_mlp():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    uniform_ranks = rng.integers(0, L + 1, size=(N, 1))  # exactly calibrated ranks
    theta, x, draws, _ = toy(0.5, seed=1)
    bad_ranks = sbc_ranks(theta, draws)[:, :1]  # one dimension: a C2ST is seconds
    # 2N = 1000 held-out predictions: an accuracy's sd <= 0.016; two independent ones
    # differ by sd <= 0.023, so 4 sd = 0.09
    for ranks in (uniform_ranks, bad_ranks):
        theirs = sbi_sbc.check_uniformity_c2st(torch.tensor(ranks, dtype=torch.float32), L)
        ours = check_sbc(ranks, L, classifier="rf").c2st_ranks
        np.testing.assert_allclose(ours, theirs.numpy(), atol=0.09)
    # sbi's forest reads the integer lattice: calibrated ranks look far from uniform ...
    assert np.all(theirs.numpy() > 0.6)  # the miscalibrated ranks
    rf_on_uniform = check_sbc(uniform_ranks, L, classifier="rf").c2st_ranks
    assert np.all(rf_on_uniform > 0.75)
    # ... while the MLP (the default) sees them as uniform, and still flags bad ranks
    assert np.all(np.abs(check_sbc(uniform_ranks, L).c2st_ranks - 0.5) < 0.065)
    assert np.all(check_sbc(bad_ranks, L).c2st_ranks > 0.6)


@pytest.mark.parametrize("c", [1.0, 0.5])
def test_tarp_ecp_atc_and_ks_as_sbi(c):
    # L = 99 draws: no coverage value k / L lies on an edge j / 50 of the 50 bins (at L = 100
    # half of them do, and sbi's float32 and our float64 round them into different bins)
    theta, x, draws, _ = toy(c, seed=2, num_draws=99)
    t, _, post = as_sbi(theta, x, draws)
    references = np.random.default_rng(3).uniform(theta.min(0), theta.max(0), size=theta.shape)
    ecp_sbi, alpha_sbi = sbi_tarp._run_tarp(
        post, t, torch.from_numpy(references), l2, num_bins=None, z_score_theta=True
    )
    atc_sbi, ks_sbi = sbi_tarp.check_tarp(ecp_sbi, alpha_sbi)
    ours = tarp(theta, draws, references=references)
    # sbi bins over the coverage values' range; here it is [0, 1], as ours always is. sbi
    # computes in float32: equal to its precision
    np.testing.assert_allclose(ours.alpha, alpha_sbi.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours.ecp, ecp_sbi.numpy(), atol=1e-6)
    assert ours.atc == pytest.approx(atc_sbi, rel=1e-5, abs=1e-7)
    assert ours.ks_pvalue == pytest.approx(ks_sbi, rel=1e-4)
    if c == 0.5:  # not vacuous: a clearly non-zero area, ~ 1/50 of the old (unscaled) one
        assert abs(ours.atc) > 0.02


@pytest.mark.parametrize("c", [1.0, 0.5])
def test_expected_coverage_as_sbi_log_prob_ranks(c):
    theta, x, draws, sd = toy(c, seed=4)

    def log_q(t, x_):  # q(. | x) for an array of thetas, in numpy as ours (the same floats)
        return stats.norm.logpdf(np.asarray(t), np.asarray(x_) / 2, sd).sum(-1)

    def log_q_sbi(t, x_):  # sbi's reduce function: thetas [n, D], one x
        return torch.from_numpy(log_q(t.numpy(), x_.numpy()))

    t, xs, post = as_sbi(theta, x, draws)
    ranks_sbi = sbi_sbc._run_sbc(t, xs, post, log_q_sbi, show_progress_bar=False)[:, 0].numpy()
    ranks_sbi = ranks_sbi.astype(np.int64)  # whole numbers held in float32
    lt, ls = log_q(theta, x), log_q(draws, x[:, None])
    # theta* is in q's level-a HPD region iff fewer than a L draws are denser: L - rank < a L
    fractions = (L - ranks_sbi) / L
    np.testing.assert_array_equal(hpd_fractions(lt, ls), fractions)
    ours = expected_coverage(lt, ls)
    np.testing.assert_array_equal(ours.coverage, np.mean(fractions[:, None] < ours.levels, 0))
    # its KS p-value: sbi's KS of the log-prob ranks, within the jitter's 1 / (L + 1)
    p_sbi = sbi_sbc.check_uniformity_frequentist(torch.from_numpy(ranks_sbi[:, None]), L)
    if float(p_sbi[0]) == 0:  # below float32's range, where sbi holds it
        assert ours.ks_pvalue < np.finfo(np.float32).tiny
    else:
        low, high = ks_pvalue_bounds(float(p_sbi[0]), 1 / (L + 1))
        assert low * (1 - 1e-5) <= ours.ks_pvalue <= high * (1 + 1e-5)
    if c == 0.5:  # overconfident: the 50 % region covers ~16 %
        assert ours.coverage[ours.levels == 0.5][0] < 0.3
