"""One-sample metrics against exact posteriors: exact values, type-I error and power, ddKS.

Rates use fixed seeds; a rejection rate from T independent trials at level alpha has standard
deviation sqrt(alpha (1 - alpha) / T), so type-I bounds are alpha +- 3.5 of those.
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from testbed.errors import InputError
from testbed.joint_kl import joint_kl_summary, mixture_log_likelihood
from testbed.metrics import (
    ddks_test,
    gaussian_kl,
    get,
    mahalanobis_chi2,
    mc_kl,
    names,
    pit_ks,
)
from testbed.metrics.ddks import statistic_exact, statistic_reference
from testbed.metrics.one_sample import ks_uniform

ALPHA = 0.05
CORR = np.array([[1.0, 0.6, 0.0], [0.6, 1.0, 0.3], [0.0, 0.3, 1.0]])
MEAN = np.array([1.0, -2.0, 0.5])


def type_one_bound(trials: int) -> float:
    return ALPHA + 3.5 * np.sqrt(ALPHA * (1 - ALPHA) / trials)


def draws(rng, n, kind="exact", size=0.0):
    """n draws of N(MEAN, CORR), exact or with an injected error."""
    z = rng.multivariate_normal(np.zeros(3), CORR, size=n)
    if kind == "shift":
        z[:, 0] += size
    elif kind == "inflate":
        z *= size
    elif kind == "flip":  # marginals unchanged, correlations of coordinate 0 reversed
        z[:, 0] = -z[:, 0]
    return MEAN + z


def pit(samples):
    return stats.norm.cdf(samples, MEAN, np.sqrt(np.diag(CORR)))


def test_metrics_are_registered():
    assert {"gaussian_kl", "mc_kl", "pit_ks", "mahalanobis_chi2", "ddks"} <= set(names())
    assert get("ddks").fn is ddks_test


def test_gaussian_kl_closed_form_against_monte_carlo():
    """KL(N_q || N_p) = E_q[log q - log p]: 200k draws, 5 standard errors."""
    cov_q = np.array([[2.0, -0.3, 0.1], [-0.3, 0.5, 0.0], [0.1, 0.0, 1.0]])
    mean_q = np.array([0.5, -1.0, 1.0])
    kl = gaussian_kl(mean_q, cov_q, MEAN, CORR)
    x = np.random.default_rng(0).multivariate_normal(mean_q, cov_q, size=200_000)
    d = stats.multivariate_normal(mean_q, cov_q).logpdf(x) - stats.multivariate_normal(
        MEAN, CORR
    ).logpdf(x)
    assert abs(kl - d.mean()) < 5 * d.std() / np.sqrt(d.size)
    assert gaussian_kl(MEAN, CORR, MEAN, CORR) == pytest.approx(0.0, abs=1e-12)
    # 1-D textbook: log(s_p/s_q) + (s_q^2 + (m_q - m_p)^2) / (2 s_p^2) - 1/2
    assert gaussian_kl([1.0], [[4.0]], [0.0], [[1.0]]) == pytest.approx(-np.log(2) + 2.5 - 0.5)
    with pytest.raises(InputError, match="mean_q / cov_q"):
        gaussian_kl([0.0, 1.0], np.eye(3), MEAN, CORR)


def test_mc_kl_is_zero_for_the_exact_density():
    lp = np.random.default_rng(0).normal(size=100)
    assert mc_kl(lp, lp) == {"estimate": 0.0, "stderr": 0.0}
    outside = lp.copy()
    outside[7] = -np.inf  # a draw of q where p has no mass: KL(q || p) is infinite
    assert mc_kl(lp, outside)["estimate"] == np.inf


def test_ks_uniform_matches_scipy():
    u = np.random.default_rng(1).random((50, 4)) ** 1.3
    stat, p = ks_uniform(u)
    for j in range(4):
        ref = stats.kstest(u[:, j], "uniform", method="exact")
        assert stat[j] == pytest.approx(ref.statistic) and p[j] == pytest.approx(ref.pvalue)


def test_one_sample_tests_keep_type_one_error():
    """300 exact samples of size 200: rejection rates of PIT/KS and Mahalanobis near alpha."""
    rng = np.random.default_rng(2)
    trials = 300
    rej = np.zeros(2)
    for _ in range(trials):
        s = draws(rng, 200)
        rej += [
            pit_ks(pit(s))["p_value"] < ALPHA,
            mahalanobis_chi2(s, MEAN, CORR)["p_value"] < ALPHA,
        ]
    rate = rej / trials
    # Bonferroni over 3 marginals makes PIT/KS conservative (rate <= alpha), never liberal.
    assert np.all(rate <= type_one_bound(trials)), rate
    assert rate[1] >= ALPHA - 3.5 * np.sqrt(ALPHA * (1 - ALPHA) / trials), rate


@pytest.mark.parametrize(
    "kind,size,detects,blind",
    [
        ("shift", 0.3, ("pit",), ()),
        ("inflate", 1.3, ("pit", "mahalanobis"), ()),
        ("flip", 0.0, ("mahalanobis",), ("pit",)),
    ],
)
def test_one_sample_tests_detect_injected_errors(kind, size, detects, blind):
    """n = 500: power > 0.9 over 40 trials for the tests that should see the error. A flipped
    correlation keeps every marginal, so PIT/KS stays at its null rate (it is blind to it)."""
    rng = np.random.default_rng(3)
    trials = 40
    power = {"pit": 0.0, "mahalanobis": 0.0}
    for _ in range(trials):
        s = draws(rng, 500, kind, size)
        power["pit"] += (pit_ks(pit(s))["p_value"] < ALPHA) / trials
        power["mahalanobis"] += (mahalanobis_chi2(s, MEAN, CORR)["p_value"] < ALPHA) / trials
    for test, p in power.items():
        if test in detects:
            assert p > 0.9, (test, p)
        if test in blind:
            assert p <= type_one_bound(trials), (test, p)


def loop_orthant_statistic(samples, masses_at):
    """The paper's loop form: every test point, every orthant, count by a boolean mask."""
    n, d = samples.shape
    best = 0.0
    for t in samples:
        for bits in itertools.product([0, 1], repeat=d):
            above = np.array(bits[::-1], bool)  # bit j of the code = dimension j
            inside = np.all((samples > t) == above, axis=1)
            best = max(best, abs(inside.mean() - masses_at(t, above)))
    return best


def test_ddks_vectorized_equals_loop_implementation():
    rng = np.random.default_rng(4)
    s = rng.standard_normal((40, 3)).astype(np.float32)
    ref = rng.standard_normal((70, 3)).astype(np.float32)

    def exact_mass(t, above):
        f = stats.norm.cdf(t)
        return np.prod(np.where(above, 1 - f, f))

    def ref_mass(t, above):
        return np.all((ref > t) == above, axis=1).mean()

    cdf = stats.norm.cdf(s).astype(np.float32)
    np.testing.assert_allclose(
        statistic_exact(s, cdf, block=16), loop_orthant_statistic(s, exact_mass), atol=1e-6
    )
    np.testing.assert_allclose(
        statistic_reference(s, ref, block=16), loop_orthant_statistic(s, ref_mass), atol=1e-6
    )


def _ddks(rng, samples, independent):
    n = samples.shape[0]
    if independent:
        null = rng.standard_normal((100, n, 2))
        return ddks_test(
            samples, null, cdf_values=stats.norm.cdf(samples), null_cdf_values=stats.norm.cdf(null)
        )
    null = rng.multivariate_normal(np.zeros(3), CORR, size=(100, n))
    return ddks_test(samples, null, reference=rng.multivariate_normal(np.zeros(3), CORR, size=n))


@pytest.mark.parametrize("independent", [True, False])
def test_ddks_type_one_error_and_power(independent):
    """60 exact samples of size 150: Monte-Carlo p-values reject near alpha; a 0.6 sd shift of
    one coordinate is rejected in > 90% of 20 trials (exact orthant masses or a reference)."""
    rng = np.random.default_rng(5)
    dim = 2 if independent else 3
    cov = np.eye(2) if independent else CORR
    trials = 60
    rejects = [
        _ddks(rng, rng.multivariate_normal(np.zeros(dim), cov, size=150), independent)["p_value"]
        < ALPHA
        for _ in range(trials)
    ]
    assert np.mean(rejects) <= type_one_bound(trials)
    shift = np.zeros(dim)
    shift[0] = 0.6
    power = np.mean(
        [
            _ddks(rng, shift + rng.multivariate_normal(np.zeros(dim), cov, size=150), independent)[
                "p_value"
            ]
            < ALPHA
            for _ in range(20)
        ]
    )
    assert power > 0.9, power


def test_ddks_rejects_bad_input():
    x = np.zeros((10, 2))
    null = np.zeros((5, 10, 2))
    with pytest.raises(InputError, match="null_samples"):
        ddks_test(x, np.zeros((5, 9, 2)), reference=x)
    with pytest.raises(InputError, match="exactly one"):
        ddks_test(x, null)
    with pytest.raises(InputError, match="samples: got non-finite"):
        ddks_test(np.full((10, 2), np.nan), null, reference=x)
    with pytest.raises(InputError, match="null_samples: got non-finite"):
        ddks_test(x, np.full((5, 10, 2), np.inf), reference=x)
    with pytest.raises(InputError, match="reference: got dim 3"):
        ddks_test(x, null, reference=np.zeros((10, 3)))
    with pytest.raises(InputError, match="cdf_values: got shape"):
        ddks_test(x, null, cdf_values=np.zeros((10, 3)), null_cdf_values=null)
    with pytest.raises(InputError, match="null_cdf_values: got shape"):
        ddks_test(x, null, cdf_values=x, null_cdf_values=np.zeros((5, 8, 2)))


def test_one_sample_metrics_reject_bad_input_and_accept_torch():
    import torch

    rng = np.random.default_rng(6)
    s = draws(rng, 50)
    with pytest.raises(InputError, match="cov_q: not positive definite"):
        gaussian_kl(MEAN, -CORR, MEAN, CORR)
    with pytest.raises(InputError, match="mean_p: got NaN"):
        gaussian_kl(MEAN, CORR, [np.nan, 0.0, 0.0], CORR)
    with pytest.raises(InputError, match="log_p"):
        mc_kl(np.zeros(5), np.zeros(4))
    with pytest.raises(InputError, match="log_q: got NaN"):
        mc_kl(np.array([np.nan, 0.0]), np.zeros(2))
    with pytest.raises(InputError, match="samples: got dim 3; allowed: 2"):
        mahalanobis_chi2(s, MEAN[:2], CORR[:2, :2])
    with pytest.raises(InputError, match="samples: got 1 rows with NaN"):
        mahalanobis_chi2(np.vstack([s[:4], np.full(3, np.nan)]), MEAN, CORR)
    with pytest.raises(InputError, match="cdf_values: got values outside"):
        pit_ks(np.full((20, 2), 1.5))
    u = pit(s)
    u[3, 1] = np.nan  # NaN inside a column is an error; a whole NaN column is skipped
    with pytest.raises(InputError, match="NaN inside a column"):
        pit_ks(u)
    u[:, 1] = np.nan
    assert pit_ks(u)["num_marginals"] == 2
    # torch tensors are accepted and give the numpy answer
    t = torch.as_tensor(s)
    assert mahalanobis_chi2(t, MEAN, CORR) == mahalanobis_chi2(s, MEAN, CORR)
    assert pit_ks(torch.as_tensor(pit(s))) == pit_ks(pit(s))
    lq = torch.as_tensor(rng.standard_normal(10))
    assert mc_kl(lq, lq)["estimate"] == 0.0


def test_joint_predictive_kl_for_a_simulator_task():
    """On a conjugate task, the testbed's one joint-KL estimator (mixture log-likelihood and
    summary) with reference samples as the truth agrees with the exact truth; the exact
    posterior scores ~0 and a biased one scores clearly more."""
    from generative.conjugate import get_task

    task = get_task("gamma_poisson/1")
    x_o = task.observation(1)[0]
    num, tau = 200, 3
    theta_star = task.reference_posterior(x_o, num_samples=num, seed=1)
    futures = np.stack([task.simulate(theta_star, seed=10 + t) for t in range(tau)], axis=1)
    post_family = task.family.update(task.inputs, x_o.reshape(task.num_obs, 1))
    y_f = futures.reshape(num, tau * task.num_obs, 1)
    exact_truth = post_family.log_evidence(np.zeros((tau * task.num_obs, 1)), y_f)

    def mixture(theta):
        loglik = np.stack(
            [sum(task.log_likelihood(theta, x) for x in batch) for batch in futures], axis=1
        )  # [M, N]
        return mixture_log_likelihood(loglik)

    def kl(agent, truth):
        s = joint_kl_summary(truth, mixture(agent))
        return s["mean"], s["stderr"]

    exact_agent = task.reference_posterior(x_o, num_samples=2000, seed=2)
    biased = exact_agent * 1.3
    good, good_se = kl(exact_agent, exact_truth)
    bad, bad_se = kl(biased, exact_truth)
    bad_mc, _ = kl(biased, mixture(task.reference_posterior(x_o, num_samples=5000, seed=3)))
    assert -4 * good_se < good < 0.02 + 4 * good_se
    assert bad > good + 4 * (bad_se + good_se)
    assert abs(bad_mc - bad) < 0.05
