"""L-C2ST and L-C2ST-NF on a Gaussian toy whose exact posterior is the 'estimator'.

theta ~ N(0, I_2), x | theta ~ N(theta, I_2): p(theta | x) = N(x / 2, I / 2). The exact
posterior is a 'flow' with inverse transform z = (theta - x / 2) / sqrt(1/2). Wrong
estimators: the posterior with its spread doubled, or its mean shifted.
"""

from __future__ import annotations

import numpy as np
import pytest

from testbed.errors import InputError
from testbed.metrics import LC2ST, LC2ST_NF, plot_pp
from testbed.metrics.lc2st import p_value_from

SD = np.sqrt(0.5)


def calibration(n: int, seed: int, scale: float = 1.0, shift: float = 0.0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((n, 2))
    x = theta + rng.standard_normal((n, 2))
    post = x / 2 + shift + scale * SD * rng.standard_normal((n, 2))
    x_o = rng.standard_normal(2) * np.sqrt(2)  # a draw of the prior predictive
    theta_o = x_o / 2 + shift + scale * SD * rng.standard_normal((2000, 2))
    return theta, x, post, theta_o, x_o


def inverse(theta, x, scale: float = 1.0):
    return (np.asarray(theta) - np.asarray(x) / 2) / (scale * SD)


N_CAL, H = 500, 20  # the fast tests share these shapes (one compilation)


@pytest.fixture(scope="module")
def good():
    """L-C2ST of the exact posterior (trained once for the module)."""
    return LC2ST(*calibration(N_CAL, 0)[:3], num_trials_null=H).train()


def test_p_value_definitions():
    null = np.array([0.1, 0.2, 0.3, 0.3])
    assert p_value_from(0.3, null, "sbi") == 0.0  # strict: mean(null > T)
    assert p_value_from(0.3, null, "exact") == pytest.approx(3 / 5)  # (1 + #(null >= T)) / 5
    assert p_value_from(0.05, null, "sbi") == 1.0


def test_correct_posterior_not_rejected_wrong_one_rejected(good):
    _, _, _, theta_o, x_o = calibration(N_CAL, 0)
    # a fixed seed; under H0 the p-value is (about) uniform, so this holds with prob ~0.95
    p = good.p_value(theta_o, x_o)
    assert p >= 0.05 and not good.reject_test(theta_o, x_o)
    assert good.p_value(theta_o, x_o, method="exact") >= p
    stats = good.get_statistics_under_null_hypothesis(theta_o, x_o)
    assert stats.scores.shape == (H,) and stats.probabilities.shape == (H, 2000)

    theta, x, post, theta_o, x_o = calibration(N_CAL, 1, shift=1.0)
    bad = LC2ST(theta, x, post, num_trials_null=H).train()
    # mean shifted by 1.4 posterior sd: the classifier separates the classes at any x_o
    assert bad.p_value(theta_o, x_o) == 0.0 and bad.reject_test(theta_o, x_o)


def test_nf_null_is_reusable_and_detects_wrong_flow():
    theta, x, post, _, x_o = calibration(N_CAL, 2)
    good = LC2ST_NF(theta, x, post, inverse, num_trials_null=H, num_eval=2000).train()
    assert good.p_value(x_o) >= 0.05
    null = good.get_statistics_under_null_hypothesis(x_o).scores
    # a different (wrong) estimator on the same xs reuses the trained null classifiers
    theta, x, _, _, _ = calibration(N_CAL, 2)
    # spread tripled: with N_CAL = 500 and H = 20, a doubled spread is rejected only about
    # half the time at this x_o (p = 0.05 to 0.25 over three noise seeds); tripled, p = 0
    wrong_post = x / 2 + 3.0 * SD * np.random.default_rng(3).standard_normal((N_CAL, 2))
    bad = LC2ST_NF(
        theta,
        x,
        wrong_post,
        lambda t, xx: inverse(t, xx, 3.0),
        num_trials_null=H,
        num_eval=2000,
        trained_clfs_null=good.trained_clfs_null,
    ).train()
    np.testing.assert_allclose(bad.get_statistics_under_null_hypothesis(x_o).scores, null)
    assert bad.reject_test(x_o)


def test_pp_plot_data_and_plot(good):
    _, _, _, theta_o, x_o = calibration(N_CAL, 0)
    pp = good.pp_plot_data(theta_o, x_o, num_levels=50)
    assert pp.levels.shape == pp.observed.shape == pp.null_low.shape == (50,)
    assert np.all(pp.null_low <= pp.null_high)
    assert np.all(np.diff(pp.observed) >= 0) and pp.observed[-1] == 1.0
    import matplotlib

    matplotlib.use("Agg")
    ax = plot_pp(pp)
    assert len(ax.lines) == 2


def test_bad_input():
    theta, x, post, theta_o, x_o = calibration(50, 0)
    with pytest.raises(InputError, match="posterior_samples"):
        LC2ST(theta, x, post[:10])
    with pytest.raises(InputError, match="num_trials_null"):
        LC2ST(theta, x, post, num_trials_null=0)
    bad = post.copy()
    bad[3, 0] = np.nan
    with pytest.raises(InputError, match="posterior_samples"):
        LC2ST(theta, x, bad)
    test = LC2ST(theta, x, post)
    with pytest.raises(InputError, match="train_on_observed_data"):
        test.p_value(theta_o, x_o)


def test_reused_null_classifiers_must_match(good):
    theta, x, post, _, _ = calibration(N_CAL, 4)
    null = good.trained_clfs_null  # 20 classifiers on d_theta + d_x = 4 inputs
    with pytest.raises(InputError, match="trained_clfs_null: got 20 classifiers"):
        LC2ST_NF(theta, x, post, inverse, num_trials_null=H // 2, trained_clfs_null=null)
    with pytest.raises(InputError, match="allowed: 20 .* on 3 inputs"):
        LC2ST_NF(theta, x[:, :1], post, inverse, num_trials_null=H, trained_clfs_null=null)
    with pytest.raises(InputError, match="prior_samples: got shape"):
        LC2ST(theta[None], x, post)


def rejections(runs: int, seed0: int, shift: float, n: int = N_CAL, trials: int = 30) -> int:
    """How many of `runs` independent L-C2ST tests reject at alpha = 0.05."""
    count = 0
    for i in range(runs):
        theta, x, post, theta_o, x_o = calibration(n, seed0 + i, shift=shift)
        test = LC2ST(theta, x, post, num_trials_null=trials, seed=seed0 + i).train()
        count += test.reject_test(theta_o, x_o, alpha=0.05)
    return count


def null_p_values(nf: bool, runs: int, seed0: int, trials: int = 30) -> np.ndarray:
    """[runs, 2] sbi and exact p-values of L-C2ST (or L-C2ST-NF) of the exact posterior."""
    out = []
    for i in range(runs):
        theta, x, post, theta_o, x_o = calibration(N_CAL, seed0 + i)
        if nf:
            test = LC2ST_NF(theta, x, post, inverse, num_trials_null=trials, num_eval=2000,
                            seed=seed0 + i).train()  # fmt: skip
            stat = test.get_statistic_on_observed_data(x_o)
            null = test.get_statistics_under_null_hypothesis(x_o).scores
        else:
            test = LC2ST(theta, x, post, num_trials_null=trials, seed=seed0 + i).train()
            stat = test.get_statistic_on_observed_data(theta_o, x_o)
            null = test.get_statistics_under_null_hypothesis(theta_o, x_o).scores
        out.append([p_value_from(stat, null, "sbi"), p_value_from(stat, null, "exact")])
    return np.asarray(out)


@pytest.mark.slow
@pytest.mark.parametrize("nf", [False, True], ids=["lc2st", "lc2st_nf"])
def test_type_one_error_over_repetitions(nf):
    """Exact posterior, R = 100 independent runs (fixed seeds), H = 30 null trials.

    The exact p-value (1 + #{T_h >= T}) / (1 + H) < alpha rejects when T tops all H nulls:
    level 1/31 <= alpha for exchangeable trials; the requirement is a rejection rate at or
    below alpha = 0.05 within binomial error: at most the 99.5 % quantile of Bin(R, alpha).
    sbi's p-value mean(T_h > T) < alpha also rejects when one null is above: level 2/31 =
    0.065, bounded the same way. (Over 300 / 200 runs from seed 1000 we measured 0.047 / 0.045
    for the exact p-value, 0.093 / 0.095 for sbi's; these 100 runs with today's trainer:
    2 / 5 exact, 4 / 7 sbi, for L-C2ST / L-C2ST-NF.)"""
    from scipy import stats

    runs, trials = 100, 30
    p = null_p_values(nf, runs, 1000, trials)
    rejected = np.sum(p < 0.05, axis=0)
    assert rejected[1] <= stats.binom.ppf(0.995, runs, 0.05), rejected
    assert rejected[0] <= stats.binom.ppf(0.995, runs, 2 / (trials + 1)), rejected


@pytest.mark.slow
def test_power_against_shifted_posterior():
    """Mean shifted by 0.7 posterior sd (0.5), N_cal = 500, H = 30, R = 40 runs.

    Measured power: 22 / 40 with the hand-written-gradient trainer (23 / 40 before it, 25 / 40
    before device-side shuffles). The claim tested is power >= 0.4, far from alpha: at least
    the 0.5 % quantile of Bin(40, 0.4) rejections (8); a test without power (rate 0.05)
    gives about 2."""
    from scipy import stats

    runs = 40
    assert rejections(runs, 200, shift=0.5) >= stats.binom.ppf(0.005, runs, 0.4)
