"""Conjugate families: every closed form checked against an independent reference.

Posterior densities against Bayes' rule (prior x likelihood / evidence), priors and likelihoods
against scipy, evidences against numerical integration (1-2 parameters) or Monte Carlo from
the prior (the generative model), joint predictives against Monte Carlo over the posterior,
samplers against the analytic moments and CDFs, transforms against autodiff Jacobians.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

import generative
from generative.conjugate import PROBLEMS, get_task
from generative.conjugate import families as F
from testbed.errors import InputError

CORR = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]])
FAMILIES = {
    "nkv": F.NormalKnownVar(np.array([3.0]), np.array([[2.0]]), 0.5),
    "mvn": F.MvnKnownCov(np.zeros(3), CORR, np.array([[1, -0.4, 0], [-0.4, 1, 0], [0, 0, 2.0]])),
    "blr": F.BayesLinReg(np.array([0.5, -1.0]), np.array([[1.0, 0.3], [0.3, 2.0]]), 0.25),
    "nkm": F.NormalKnownMean(3.0, 3.0, 5.0),
    "nig": F.NormalInverseGammaFamily(0.5, 2.0, 3.0, 2.0),
    "niw": F.NormalInverseWishartFamily(np.zeros(2), 1.5, 5.0, np.array([[1.0, 0.3], [0.3, 2.0]])),
    "beta": F.BetaBinomial(2.0, 3.0),
    "poisson": F.GammaPoisson(2.0, 1.5),
    "dirichlet": F.DirichletMultinomial(np.array([1.0, 2.0, 0.5, 1.5])),
}


def dataset(family, n, seed=0):
    rng = np.random.default_rng(seed)
    x = family.sample_inputs(n, rng)
    theta = family.prior().sample(1, rng)
    return x, family.simulate(theta, x, rng)[0]


@pytest.mark.parametrize("name", FAMILIES)
def test_posterior_density_is_bayes_rule(name):
    """log p(theta | y) = log p(theta) + log p(y | theta) - log p(y) at prior/posterior draws."""
    fam = FAMILIES[name]
    x, y = dataset(fam, 15)
    rng = np.random.default_rng(1)
    post = fam.posterior(x, y)
    theta = np.concatenate([post.sample(5, rng), fam.prior().sample(5, rng)])
    rhs = fam.log_prior(theta) + fam.log_likelihood(theta, x, y) - fam.log_evidence(x, y)
    np.testing.assert_allclose(post.log_prob(theta), rhs, rtol=1e-10, atol=1e-8)


def scipy_log_prior_and_lik(name, fam, theta, x, y):
    """The same prior and likelihood written with scipy.stats (independent code)."""
    t = theta
    if name == "nkv":
        return stats.norm.logpdf(t[0], 3.0, np.sqrt(2.0)), stats.norm.logpdf(
            y[:, 0], t[0], np.sqrt(0.5)
        ).sum()
    if name == "mvn":
        return (
            stats.multivariate_normal(np.zeros(3), CORR).logpdf(t),
            stats.multivariate_normal(t, fam.noise_cov).logpdf(y).sum(),
        )
    if name == "blr":
        return (
            stats.multivariate_normal(fam.prior_mean, fam.prior_cov).logpdf(t),
            stats.norm.logpdf(y[:, 0], x @ t, 0.5).sum(),
        )
    if name == "nkm":
        return stats.gamma.logpdf(t[0], 3.0, scale=1 / 5.0), stats.norm.logpdf(
            y[:, 0], 3.0, 1 / np.sqrt(t[0])
        ).sum()
    if name == "nig":
        lp = stats.invgamma.logpdf(t[1], 3.0, scale=2.0) + stats.norm.logpdf(
            t[0], 0.5, np.sqrt(t[1] / 2.0)
        )
        return lp, stats.norm.logpdf(y[:, 0], t[0], np.sqrt(t[1])).sum()
    if name == "niw":
        mu, s = t[:2], np.array([[t[2], t[3]], [t[3], t[4]]])
        lp = stats.invwishart(5.0, fam.psi).logpdf(s) + stats.multivariate_normal(
            np.zeros(2), s / 1.5
        ).logpdf(mu)
        return lp, stats.multivariate_normal(mu, s).logpdf(y).sum()
    if name == "beta":
        return stats.beta.logpdf(t[0], 2.0, 3.0), stats.bernoulli.logpmf(y[:, 0], t[0]).sum()
    if name == "poisson":
        return stats.gamma.logpdf(t[0], 2.0, scale=1 / 1.5), stats.poisson.logpmf(
            y[:, 0], t[0]
        ).sum()
    if name == "dirichlet":
        return stats.dirichlet.logpdf(t, fam.alpha), stats.multinomial.logpmf(y, 1, t).sum()
    raise AssertionError(name)


@pytest.mark.parametrize("name", FAMILIES)
def test_prior_and_likelihood_match_scipy(name):
    fam = FAMILIES[name]
    x, y = dataset(fam, 7, seed=3)
    theta = fam.prior().sample(3, np.random.default_rng(4))
    for t in theta:
        lp, ll = scipy_log_prior_and_lik(name, fam, t, x, y)
        np.testing.assert_allclose(fam.log_prior(t[None])[0], lp, rtol=1e-10)
        np.testing.assert_allclose(fam.log_likelihood(t[None], x, y)[0], ll, rtol=1e-10)


@pytest.mark.parametrize("name", ["nkv", "nkm", "beta", "poisson"])
def test_evidence_matches_quadrature_one_parameter(name):
    fam = FAMILIES[name]
    x, y = dataset(fam, 6, seed=5)
    log_z = fam.log_evidence(x, y)
    lo, hi = {"nkv": (-20, 30), "nkm": (0, 60), "beta": (0, 1), "poisson": (0, 60)}[name]

    def integrand(t):
        th = np.array([[t]])
        return np.exp(fam.log_prior(th)[0] + fam.log_likelihood(th, x, y)[0] - log_z)

    value, err = integrate.quad(integrand, lo, hi, limit=200, points=[float(np.mean(y))])
    assert abs(value - 1.0) < 1e-6 + err


def test_evidence_matches_quadrature_nig():
    fam = FAMILIES["nig"]
    x, y = dataset(fam, 6, seed=6)
    log_z = fam.log_evidence(x, y)

    def integrand(s2, mu):
        th = np.array([[mu, s2]])
        return np.exp(fam.log_prior(th)[0] + fam.log_likelihood(th, x, y)[0] - log_z)

    value, _ = integrate.dblquad(integrand, -15, 15, 1e-8, 80, epsabs=1e-9)
    assert abs(value - 1.0) < 1e-5


@pytest.mark.parametrize("name", ["mvn", "blr", "niw", "dirichlet", "nig"])
def test_evidence_matches_monte_carlo_from_the_prior(name):
    """p(y) = E_prior[p(y | theta)]: 400k prior draws, tolerance 5 standard errors (delta method:
    se(log mean w) = std(w) / (sqrt(N) mean(w)))."""
    fam = FAMILIES[name]
    x, y = dataset(fam, 3, seed=7)
    theta = fam.prior().sample(400_000, np.random.default_rng(8))
    logw = fam.log_likelihood(theta, x, y)
    est = logsumexp(logw) - np.log(logw.size)
    w = np.exp(logw - logw.max())
    se = w.std() / (np.sqrt(w.size) * w.mean())
    assert abs(est - fam.log_evidence(x, y)) < 5 * se + 1e-9


@pytest.mark.parametrize("name", FAMILIES)
def test_joint_predictive_matches_monte_carlo_over_posterior(name):
    """log p(y_1:tau | data) = log E_post[prod_t p(y_t | theta)], 200k posterior draws, 5 se."""
    fam = FAMILIES[name]
    x, y = dataset(fam, 10, seed=9)
    rng = np.random.default_rng(10)
    post = fam.posterior(x, y)
    tau = 3
    x_f = fam.sample_inputs(2 * tau, rng).reshape(2, tau, -1)
    y_f = fam.simulate_batched(post.sample(2, rng), x_f, rng)
    exact = fam.log_joint_predictive(x, y, x_f, y_f)
    theta = post.sample(200_000, rng)
    for b in range(2):
        logw = fam.log_likelihood(theta, x_f[b], y_f[b])
        w = np.exp(logw - logw.max())
        se = w.std() / (np.sqrt(w.size) * w.mean())
        assert abs(logsumexp(logw) - np.log(w.size) - exact[b]) < 5 * se + 1e-9


def test_discrete_joint_predictives_sum_to_one():
    """Beta-binomial over all 2^4 sequences; Dirichlet over all 4^3; Poisson over a wide grid."""
    import itertools

    beta = FAMILIES["beta"]
    x, y = dataset(beta, 10)
    seqs = np.array(list(itertools.product([0.0, 1.0], repeat=4)))[..., None]
    lp = beta.log_joint_predictive(x, y, np.zeros((16, 4, 1)), seqs)
    assert abs(np.exp(lp).sum() - 1.0) < 1e-12
    dirichlet = FAMILIES["dirichlet"]
    x, y = dataset(dirichlet, 10)
    labels = np.array(list(itertools.product(range(4), repeat=3)))
    lp = dirichlet.log_joint_predictive(x, y, np.zeros((64, 3, 1)), np.eye(4)[labels])
    assert abs(np.exp(lp).sum() - 1.0) < 1e-12
    poisson = FAMILIES["poisson"]
    x, y = dataset(poisson, 10)
    grid = np.array(list(itertools.product(range(60), repeat=2)), float)[..., None]
    lp = poisson.log_joint_predictive(x, y, np.zeros((grid.shape[0], 2, 1)), grid)
    assert abs(np.exp(lp).sum() - 1.0) < 1e-9


@pytest.mark.parametrize("name", FAMILIES)
def test_samplers_match_analytic_moments_and_cdfs(name):
    """20k draws: means and variances within 5 se of the analytic ones; PIT of each marginal
    uniform (KS). The variance check uses squared deviations from the exact mean (unbiased
    for var), its se estimated from their spread: sd((theta - mean)^2) / sqrt(n)."""
    fam = FAMILIES[name]
    x, y = dataset(fam, 10, seed=11)
    post = fam.posterior(x, y)
    theta = post.sample(20_000, np.random.default_rng(12))
    se = np.sqrt(post.var / theta.shape[0])
    assert np.all(np.abs(theta.mean(0) - post.mean) < 5 * se)
    dev2 = (theta - post.mean) ** 2
    se_var = dev2.std(0) / np.sqrt(theta.shape[0])
    assert np.all(np.abs(dev2.mean(0) - post.var) < 5 * se_var), (dev2.mean(0), post.var)
    u = post.marginal_cdf(theta)
    for j in np.nonzero(~np.isnan(u[0]))[0]:
        assert stats.kstest(u[:, j], "uniform").pvalue > 1e-3


@pytest.mark.parametrize("name", FAMILIES)
def test_in_support_flags_draws_outside_the_parameter_space(name):
    """Posterior draws are inside; their negatives leave every non-Gaussian support (negative
    rate, probability, weights or variance; -Sigma is negative definite)."""
    fam = FAMILIES[name]
    x, y = dataset(fam, 10, seed=14)
    post = fam.posterior(x, y)
    theta = post.sample(50, np.random.default_rng(15))
    assert post.in_support(theta).all()
    assert post.in_support(-theta).all() == bool(post.gaussian)


def test_gaussian_posterior_matches_textbook_formulas():
    """Known variance: 1/v_n = 1/v_0 + n/s2 and mu_n = v_n (mu_0/v_0 + n ybar/s2)."""
    fam = FAMILIES["nkv"]
    x, y = dataset(fam, 12)
    post = fam.posterior(x, y)
    var_n = 1.0 / (1 / 2.0 + 12 / 0.5)
    np.testing.assert_allclose(post.cov[0, 0], var_n, rtol=1e-12)
    np.testing.assert_allclose(post.mean[0], var_n * (3.0 / 2.0 + y.sum() / 0.5), rtol=1e-12)


@pytest.mark.parametrize("name", FAMILIES)
def test_transforms_invert_and_log_det_matches_autodiff(name):
    fam = FAMILIES[name]
    theta = fam.prior().sample(3, np.random.default_rng(13))
    k = fam.dim_u  # the density is over the first dim_u coordinates (Dirichlet: K-1)
    constrained = jax.jacfwd(lambda v: fam.constrain(v, xp=jnp)[:k])
    for t in theta:
        u = np.asarray(fam.unconstrain(t, xp=np))
        np.testing.assert_allclose(fam.constrain(u, xp=np), t, rtol=1e-9, atol=1e-12)
        jac = constrained(jnp.asarray(u, jnp.float32))
        expected = np.linalg.slogdet(np.asarray(jac, np.float64))[1]
        np.testing.assert_allclose(float(fam.log_det_jacobian(u, xp=np)), expected, atol=2e-4)


def test_problem_set_covers_the_papers_21_problems_with_matched_priors():
    ids = generative.sweep_ids("conjugate_wyb")
    assert ids == [f"conjugate/wyb/{i}" for i in range(1, 22)]
    kinds = [generative.problem_settings(i)["model"] for i in ids]
    assert kinds == ["normal_known_var"] * 6 + ["normal_known_mean"] * 9 + ["mvn_known_cov"] * 6
    assert [generative.problem_settings(i)["dim_theta"] for i in ids[15:]] == [2, 2, 2, 5, 7, 10]
    prob = generative.load("conjugate/wyb/17")
    np.testing.assert_array_equal(prob.family.prior_mean, [10.0, 8.0])
    # The model the agent gets evaluates the reference's own prior and likelihood.
    spec = prob.prior_knowledge.model
    theta = prob.posterior.sample(4, np.random.default_rng(0))
    ref = prob.family.log_prior(theta)
    np.testing.assert_allclose(
        np.asarray(spec.log_prior(jnp.asarray(theta, jnp.float32))), ref, rtol=1e-5
    )
    ll = np.asarray(spec.log_likelihood(jnp.asarray(theta[0], jnp.float32), prob.x, prob.y))
    np.testing.assert_allclose(
        ll, prob.family.log_likelihood(theta[:1], prob.x, prob.y)[0], rtol=1e-5
    )
    assert len(generative.sweep_ids("conjugate")) == len(PROBLEMS)


def test_bad_problem_id_names_the_allowed_ids():
    with pytest.raises(InputError, match="conjugate/wyb/1"):
        generative.load("conjugate/wyb/99")


def test_simulator_task_interface():
    task = get_task("conjugate/niw/2")
    theta = task.sample_prior(4, seed=0)
    x = task.simulate(theta, seed=1)
    assert theta.shape == (4, 5) and x.shape == (4, task.dim_data)
    np.testing.assert_array_equal(task.simulate(theta, seed=1), x)
    x_o = task.observation(3)
    np.testing.assert_array_equal(x_o, task.observation(3))
    # Reference posterior = exact posterior at x_o: its mean matches the analytic one.
    ref = task.reference_posterior(x_o, num_samples=20_000, seed=0)
    post = task.family.posterior(task.inputs, x_o.reshape(task.num_obs, -1))
    assert np.all(np.abs(ref.mean(0) - post.mean) < 5 * np.sqrt(post.var / 20_000))
    lp = task.log_posterior_unnormalized(ref[:3], x_o)
    np.testing.assert_allclose(
        lp - post.log_prob(ref[:3]), np.full(3, lp[0] - post.log_prob(ref[:1])[0])
    )
    with pytest.raises(InputError, match="num_observation: got 11; allowed: an integer in 1..10"):
        task.observation(11)
    with pytest.raises(InputError, match="x_o: got 'array of shape \\(7,\\)'"):
        task.log_likelihood(theta, np.zeros(7))


def test_log_prior_outside_the_support_is_minus_inf_quietly():
    """ABC draws outside a positive or unit support: numpy warned 'invalid value in log'
    at every sweep job; the prior's log density there is -inf, silently."""
    import warnings

    import generative

    for name, outside in (("beta_binomial/1", [[1.5], [-0.2]]), ("gamma_poisson/1", [[-1.0]])):
        task = generative.conjugate.get_task(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lp = task.log_prior(np.array(outside))
        assert np.all(lp == -np.inf), (name, lp)
        assert np.isfinite(task.log_prior(task.sample_prior(5, seed=0))).all()
