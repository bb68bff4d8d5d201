"""SBI benchmark tasks: shapes, seeds, bad input, likelihoods and reference posteriors.

Reference posteriors are checked against closed forms (Gaussian tasks) or against an
independent method on the same observation (importance resampling from the prior, MCMC),
with a classifier two-sample test whose tolerance follows from the sample size.
"""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier

import generative
from generative import sbi
from generative.sbi import bernoulli_glm as glm
from generative.sbi.samplers import importance_resample
from generative.sbi.slcp import distractor_mixture
from testbed.errors import InputError

ALL = sbi.task_names()
FAST_SIM = [n for n in ALL if n not in ("sir", "lotka_volterra")]


def c2st_knn(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    """Cross-validated accuracy of a k-NN classifier telling `a` from `b` (0.5 = same).

    Every point is predicted once out of fold, so under the null the accuracy is a mean of
    2n (nearly independent) Bernoulli(1/2) outcomes: sd = sqrt(1 / (4 * 2n)).
    """
    mean, sd = a.mean(0), a.std(0)
    data = np.concatenate([(a - mean) / sd, (b - mean) / sd])
    labels = np.r_[np.zeros(len(a)), np.ones(len(b))]
    perm = np.random.default_rng(seed).permutation(len(data))
    clf = KNeighborsClassifier(n_neighbors=25)
    return float(cross_val_score(clf, data[perm], labels[perm], cv=5).mean())


def c2st_bound(n: int) -> float:
    """0.5 + 4 sd of the null accuracy for n vs n samples (see `c2st_knn`)."""
    return 0.5 + 4 * math.sqrt(1 / (4 * 2 * n))


# ----------------------------------------------------------------------------- API, shapes
def test_names_and_public_api():
    assert ALL == [
        "gaussian_linear",
        "gaussian_linear_uniform",
        "slcp",
        "slcp_distractors",
        "bernoulli_glm",
        "bernoulli_glm_raw",
        "gaussian_mixture",
        "two_moons",
        "sir",
        "lotka_volterra",
    ]
    assert generative.sbi.get_task("two_moons") is sbi.get_task("two_moons")
    with pytest.raises(InputError, match="task: got 'two_moon'.*two_moons"):
        sbi.get_task("two_moon")


DIMS = {
    "gaussian_linear": (10, 10),
    "gaussian_linear_uniform": (10, 10),
    "slcp": (5, 8),
    "slcp_distractors": (5, 100),
    "bernoulli_glm": (10, 10),
    "bernoulli_glm_raw": (10, 100),
    "gaussian_mixture": (2, 2),
    "two_moons": (2, 2),
    "sir": (2, 10),
    "lotka_volterra": (4, 20),
}


@pytest.mark.parametrize("name", ALL)
def test_shapes_seeds_and_observations(name):
    task = sbi.get_task(name)
    dp, dx = DIMS[name]
    assert (task.dim_parameters, task.dim_data, task.name) == (dp, dx, name)
    theta = task.sample_prior(20, seed=3)
    assert theta.shape == (20, dp) and theta.dtype == np.float64
    np.testing.assert_array_equal(theta, task.sample_prior(20, seed=3))
    assert not np.array_equal(theta, task.sample_prior(20, seed=4))
    x = task.simulate(theta, seed=5)
    assert x.shape == (20, dx) and x.dtype == np.float64 and np.isfinite(x).all()
    np.testing.assert_array_equal(x, task.simulate(theta, seed=5))
    assert not np.array_equal(x, task.simulate(theta, seed=6))
    assert np.isfinite(task.log_prior(theta)).all()
    # Observations: fixed, reproducible, simulated from their true parameters.
    for k in (1, 10):
        theta_k, x_k = task.true_parameters(k), task.observation(k)
        assert theta_k.shape == (1, dp) and x_k.shape == (1, dx)
        assert np.isfinite(task.log_likelihood(theta_k, x_k)).all()
    assert not np.array_equal(task.observation(1), task.observation(2))
    np.testing.assert_array_equal(task.observation(3), task.observation(3))


@pytest.mark.parametrize("name", ALL)
def test_bad_input(name):
    task = sbi.get_task(name)
    dp, dx = DIMS[name]
    for k in (0, 11, 1.5):
        with pytest.raises(InputError, match="num_observation"):
            task.observation(k)
    with pytest.raises(InputError, match=rf"theta.*shape \[n, {dp}\]"):
        task.simulate(np.zeros((3, dp + 1)))
    with pytest.raises(InputError, match=rf"x_o.*shape \[{dx}\]"):
        task.log_likelihood(task.sample_prior(2), np.zeros(dx + 1))
    with pytest.raises(InputError, match="num_samples"):
        task.reference_posterior(task.observation(1), num_samples=0)
    with pytest.raises(InputError, match="seed"):
        task.sample_prior(3, seed=-1)
    with pytest.raises(InputError, match="theta: got 'a non-numeric str'"):
        task.simulate("abc")
    with pytest.raises(InputError, match="x_o: got 'a non-numeric list'"):
        task.reference_posterior(["a"] * dx, 5)
    if task.support.kind != "real":
        bad = task.sample_prior(2)
        bad[1, 0] = -50.0  # outside U(-a, a) boxes and the positive half-line
        with pytest.raises(InputError, match=r"theta\[1\].*support"):
            task.simulate(bad)


@pytest.mark.parametrize("name", ALL)
def test_unconstrained_transform(name):
    task = sbi.get_task(name)
    theta = task.sample_prior(50, seed=0)
    low, high = task.bounds
    assert low.shape == high.shape == (task.dim_parameters,)
    assert np.all((theta > low) & (theta < high))
    z = task.to_unconstrained(theta)
    assert np.isfinite(z).all()
    np.testing.assert_allclose(task.from_unconstrained(z), theta, rtol=1e-10, atol=1e-12)
    # log|Jacobian| against a numerical determinant of d theta / d z (diagonal maps).
    eps = 1e-6
    num = np.log(
        np.abs((task.from_unconstrained(z + eps) - task.from_unconstrained(z - eps)) / (2 * eps))
    )
    np.testing.assert_allclose(task.log_abs_det_jacobian(z), num.sum(1), atol=1e-5)


# ----------------------------------------------------------------------------- likelihoods
def test_two_moons_likelihood_is_the_density_of_the_simulator():
    """Integrates to 1 over x, and matches a histogram of simulations."""
    task = sbi.get_task("two_moons")
    theta = np.array([[0.3, -0.5]])
    centre = np.array([-abs(0.3 - 0.5), -0.5 - 0.3]) / math.sqrt(2) + [0.25, 0.0]
    h = 0.002
    g = np.arange(-0.15, 0.15, h) + h / 2  # the ring (radius 0.1, sd 0.01) lies inside
    pts = np.stack(np.meshgrid(centre[0] + g, centre[1] + g, indexing="ij"), -1).reshape(-1, 2)
    dens = np.exp(np.array([task.log_likelihood(theta, p)[0] for p in pts]))
    # Midpoint rule on a ring of width 0.01 with h = 0.002: error well below 1%.
    assert abs(dens.sum() * h * h - 1.0) < 0.01
    # P(x in a region) from the density vs. from 200k simulations (binomial sd < 0.0012).
    x = task.simulate(np.repeat(theta, 200_000, 0), seed=1)
    box = lambda v: (v[:, 0] < centre[0] + 0.05) & (v[:, 1] > centre[1] + 0.02)  # noqa: E731
    assert abs(dens[box(pts)].sum() * h * h - box(x).mean()) < 0.006


def test_slcp_likelihood_matches_scipy_and_layout():
    task = sbi.get_task("slcp")
    theta = task.sample_prior(5, seed=1)
    x_o = task.observation(2)[0]
    for t in theta:
        s1, s2, rho = t[2] ** 2, t[3] ** 2, np.tanh(t[4])
        cov = np.array([[s1**2, rho * s1 * s2], [rho * s1 * s2, s2**2]]) + 1e-6 * np.eye(2)
        ref = stats.multivariate_normal(t[:2], cov).logpdf(x_o.reshape(4, 2)).sum()
        np.testing.assert_allclose(task.log_likelihood(t, x_o)[0], ref, rtol=1e-9)
    # Interleaved layout [a1, b1, a2, b2, ...]: even columns scatter around theta_1.
    big = task.simulate(np.tile([2.0, -1.0, 0.5, 0.5, 0.0], (4000, 1)), seed=0)
    np.testing.assert_allclose(big[:, 0::2].mean(), 2.0, atol=0.01)  # sd 0.25/sqrt(16000)
    np.testing.assert_allclose(big[:, 1::2].mean(), -1.0, atol=0.01)


def test_slcp_distractors_share_slcp_part_and_posterior():
    slcp, dis = sbi.get_task("slcp"), sbi.get_task("slcp_distractors")
    locs, trils, perm = distractor_mixture()
    assert locs.shape == (20, 92) and trils.shape == (20, 92, 92)
    assert sorted(perm) == list(range(100))
    x_o = dis.observation(1)
    part = dis.slcp_part(x_o).reshape(1, 8)
    theta = slcp.sample_prior(6, seed=2)
    diff = dis.log_likelihood(theta, x_o) - slcp.log_likelihood(theta, part)
    np.testing.assert_allclose(diff, diff[0], rtol=1e-12)  # distractors are theta-free
    np.testing.assert_array_equal(
        dis.reference_posterior(x_o, 500, seed=1), slcp.reference_posterior(part, 500, seed=1)
    )


def test_glm_design_matrix_and_summary_is_x_transpose_y():
    x = glm.design_matrix()
    stim = np.random.RandomState(42).randn(100).astype(np.float32)
    assert x[0, 1] == stim[0] and x[5, 3] == stim[3] and x[0, 2] == 0.0 and (x[:, 0] == 1).all()
    raw, summ = sbi.get_task("bernoulli_glm_raw"), sbi.get_task("bernoulli_glm")
    theta = raw.sample_prior(30, seed=0)
    y = raw.simulate(theta, seed=7)
    assert set(np.unique(y)) <= {0.0, 1.0}
    np.testing.assert_allclose(summ.simulate(theta, seed=7), y @ x, rtol=1e-12)
    # spike count, then the spike-triggered sums of the lagged stimulus (a correlation)
    s = summ.simulate(theta, seed=7)
    np.testing.assert_allclose(s[:, 0], y.sum(1))
    np.testing.assert_allclose(s[:, 3], y[:, 2:] @ stim[:98].astype(float), rtol=1e-10)
    for k in (1, 4):  # ours exactly; the benchmark's to its float32 sums (~6 digits)
        np.testing.assert_allclose(
            summ.seeded_observation(k), raw.seeded_observation(k) @ x, rtol=1e-12
        )
        np.testing.assert_allclose(summ.observation(k), raw.observation(k) @ x, atol=1e-5)
    # Same statistics, same reference posterior (the raw task reduces y to X^T y).
    np.testing.assert_allclose(
        raw.reference_posterior(raw.seeded_observation(2), 200, seed=3),
        summ.reference_posterior(summ.seeded_observation(2), 200, seed=3),
        rtol=1e-8,
    )
    # Raw likelihood = Bernoulli log-pmf; summary likelihood differs by a theta-free constant.
    y_o = raw.seeded_observation(1)[0]
    p = 1 / (1 + np.exp(-(theta @ x.T)))
    ref = stats.bernoulli(p).logpmf(y_o).sum(1)
    np.testing.assert_allclose(raw.log_likelihood(theta, y_o), ref, rtol=1e-10)
    d = summ.log_likelihood(theta, summ.seeded_observation(1)) - ref
    np.testing.assert_allclose(d, 0.0, atol=1e-8)
    # Prior precision: offset 0.5; smoothness block F^T F.
    cov = np.cov(summ.sample_prior(200_000, seed=1).T)
    np.testing.assert_allclose(np.linalg.inv(glm.prior_precision()), cov, atol=0.05)


# ----------------------------------------------------------------------------- exact posteriors
def test_gaussian_linear_posterior_closed_form():
    """0.1 is a variance: posterior N(x_o / 2, 0.05 I). Mean error sd = sqrt(0.05 / n)."""
    task = sbi.get_task("gaussian_linear")
    x_o = task.observation(1)[0]
    n = 20_000
    s = task.reference_posterior(x_o, n, seed=0)
    assert np.abs(s.mean(0) - x_o / 2).max() < 5 * math.sqrt(0.05 / n)
    # variance: relative sd sqrt(2 / n) = 1%; covariances: sd 0.05 / sqrt(n)
    np.testing.assert_allclose(np.cov(s.T), 0.05 * np.eye(10), atol=5 * 0.05 * math.sqrt(2 / n))
    prior_draws = task.sample_prior(100_000, seed=1)
    np.testing.assert_allclose(prior_draws.var(0), 0.1, rtol=0.03)
    # the simulator's noise is a variance of 0.1 too (sd 0.316), not an sd of 0.1
    noise = task.simulate(np.zeros((100_000, 10)), seed=2)
    np.testing.assert_allclose(noise.var(0), 0.1, rtol=0.03)  # rel. sd sqrt(2 / n) = 0.45%


def test_gaussian_mixture_draws_one_component_per_simulation():
    """The benchmark's v1.1.0 fix: a component per row (not per batch), shared by both dims."""
    x = sbi.get_task("gaussian_mixture").simulate(np.zeros((20_000, 2)), seed=0)
    r = np.linalg.norm(x, axis=1)
    # P(|x| < 0.3) = 0.5 (1 - e^-4.5) + 0.5 (1 - e^-0.045) = 0.517 (binomial sd 0.0035);
    # a component per batch would give 0.989 or 0.044.
    assert abs(np.mean(r < 0.3) - 0.517) < 0.02
    # One component for both coordinates: a narrow x_1 with a wide x_2 happens only
    # within the wide component, 0.5 * 0.236 * 0.317 = 0.037 (per-coordinate: ~0.1).
    assert np.mean((np.abs(x[:, 0]) < 0.3) & (np.abs(x[:, 1]) > 1.0)) < 0.05


def test_gaussian_linear_uniform_posterior_truncated_normals():
    task = sbi.get_task("gaussian_linear_uniform")
    x_o = np.array([1.3, -0.9, 0.0, 0.5, -2.0, 0.99, -0.2, 0.7, 1.0, -1.1])  # any x_o
    n = 20_000
    s = task.reference_posterior(x_o, n, seed=0)
    assert s.min() >= -1 and s.max() <= 1
    sd = math.sqrt(0.1)
    ref = stats.truncnorm((-1 - x_o) / sd, (1 - x_o) / sd, loc=x_o, scale=sd)
    assert np.all(np.abs(s.mean(0) - ref.mean()) < 5 * ref.std() / math.sqrt(n))
    np.testing.assert_allclose(s.std(0), ref.std(), rtol=0.05)  # sd of sd ~ 1 / sqrt(2n)


def test_gaussian_mixture_posterior_near_the_box_edge():
    """Mixture of two truncated normals; the weights depend on the truncated masses."""
    task = sbi.get_task("gaussian_mixture")
    x_o = np.array([9.6, -10.3])
    n = 40_000
    s = task.reference_posterior(x_o, n, seed=0)
    w, means, second = [], [], []
    for sd in (1.0, 0.1):
        d = stats.truncnorm((-10 - x_o) / sd, (10 - x_o) / sd, loc=x_o, scale=sd)
        mass = stats.norm.cdf((10 - x_o) / sd) - stats.norm.cdf((-10 - x_o) / sd)
        w.append(0.5 * np.prod(mass))
        means.append(d.mean())
        second.append(d.var() + d.mean() ** 2)
    w = np.array(w) / np.sum(w)
    mean = w[0] * means[0] + w[1] * means[1]
    var = w[0] * second[0] + w[1] * second[1] - mean**2
    assert np.all(np.abs(s.mean(0) - mean) < 5 * np.sqrt(var / n))
    np.testing.assert_allclose(s.var(0), var, rtol=0.05)


def _rank_uniformity_pvalue(name: str, num_pairs: int = 300, num_draws: int = 99) -> float:
    """SBC: the rank of theta* among posterior draws given x ~ p(x | theta*) is uniform."""
    task = sbi.get_task(name)
    theta = task.sample_prior(num_pairs, seed=11)
    x = task.simulate(theta, seed=12)
    ranks = np.array(
        [
            (task.reference_posterior(x[i], num_draws, seed=100 + i) < theta[i]).sum(0)
            for i in range(num_pairs)
        ]
    )
    counts = np.stack([np.bincount(r * 10 // (num_draws + 1), minlength=10) for r in ranks.T])
    return min(stats.chisquare(c).pvalue for c in counts)


@pytest.mark.parametrize(
    "name", ["two_moons", "gaussian_mixture", "gaussian_linear_uniform", "gaussian_linear"]
)
def test_reference_posterior_rank_calibration(name):
    # Fixed seeds: the p-value is deterministic; under correct posteriors p ~ U(0, 1) per
    # dimension, so p > 1e-3 over <= 10 dims fails by chance with probability < 1%.
    assert _rank_uniformity_pvalue(name) > 1e-3


def test_rank_check_detects_a_wrong_posterior():
    """The SBC check above has power: a posterior shifted by 0.05 sd-ish is rejected."""
    task = sbi.get_task("gaussian_linear")
    theta = task.sample_prior(300, seed=11)
    x = task.simulate(theta, seed=12)
    draws = [task.reference_posterior(x[i], 99, seed=i)[:, 0] + 0.1 for i in range(300)]
    ranks = np.array([(d < t[0]).sum() for d, t in zip(draws, theta)])
    assert stats.chisquare(np.bincount(ranks * 10 // 100, minlength=10)).pvalue < 1e-3


# ----------------------------------------------------------------------------- independent methods
def reference_and_resampled(task, x_o, n: int):
    """n reference draws at x_o, n importance-resampled from 1e6 prior draws, and the ESS."""
    ref = task.reference_posterior(x_o, n, seed=0)
    prop = task.sample_prior(1_000_000, seed=1)
    ir, ess = importance_resample(
        lambda t: task.log_likelihood(t, x_o),
        prop,
        np.zeros(len(prop)),
        n,
        np.random.default_rng(2),
    )
    return ref, ir, ess


def test_two_moons_inversion_matches_importance_resampling():
    task = sbi.get_task("two_moons")
    n = 2000
    ref, ir, ess = reference_and_resampled(task, task.observation(1)[0], n)
    assert ess > 4000  # resampling with replacement from >= 2x n effective draws
    assert c2st_knn(ref, ir) < c2st_bound(n)
    # The test has power: the mirror-image crescent alone is told apart.
    assert c2st_knn(ref, ref * np.array([1, -1])) > 0.6


@pytest.mark.slow
def test_two_moons_draws_where_its_posterior_is_rare_and_refuses_where_it_is_none():
    """A simulated x near the edge of the data's support (found in the L-C2ST level
    experiment: about 1 accepted proposal in 10^6) gets its 1,000 exact draws after the
    first 2,000 batches; an x the simulator cannot produce is still refused in one line."""
    task = sbi.get_task("two_moons")
    theta = task.sample_prior(10_000, seed=10_007 * 7 + 1)
    x = task.simulate(theta, seed=10_007 * 7 + 2)[9200].astype(np.float32)
    draws = task.reference_posterior(x, 1000, seed=7_022 + 9200)
    assert draws.shape == (1000, 2) and np.all(np.abs(draws) <= 1)
    assert np.all(np.isfinite(task.log_likelihood(draws, x)))  # each draw can give x
    with pytest.raises(InputError, match="no numerically reachable mass"):
        task.reference_posterior(np.array([5.0, 5.0]), 10, seed=0)


def test_slcp_reference_matches_importance_resampling():
    task = sbi.get_task("slcp")
    # Importance resampling from the prior needs a posterior it can reach: at the
    # benchmark's observation 2 its ESS is ~300 of 1e6 (our seeded one: > 8,000). The
    # benchmark's observations are checked against its own reference draws
    # (tests/test_sbibm_parity.py, experiments/check_sbibm_references.py).
    n = 2000
    ref, ir, ess = reference_and_resampled(task, task.seeded_observation(2)[0], n)
    assert ess > 4 * n
    assert c2st_knn(ref, ir) < c2st_bound(n)
    # Sign symmetry of theta_3 and theta_4: each sign has probability 1/2 (sd 0.011).
    assert np.all(np.abs((ref[:, 2:4] > 0).mean(0) - 0.5) < 0.045)


def _mala_chains(log_density_and_grad, starts, precond, step, num_steps, rng):
    """Preconditioned MALA on many independent chains at once; returns the final states."""
    chol = np.linalg.cholesky(precond)
    z = starts.copy()
    f, g = log_density_and_grad(z)
    accepted = 0.0
    for _ in range(num_steps):
        mean_fwd = z + 0.5 * step**2 * g @ precond
        prop = mean_fwd + step * rng.standard_normal(z.shape) @ chol.T
        fp, gp = log_density_and_grad(prop)
        mean_bwd = prop + 0.5 * step**2 * gp @ precond
        inv = np.linalg.inv(precond) / step**2
        q_fwd = -0.5 * np.einsum("ni,ij,nj->n", prop - mean_fwd, inv, prop - mean_fwd)
        q_bwd = -0.5 * np.einsum("ni,ij,nj->n", z - mean_bwd, inv, z - mean_bwd)
        acc = np.log(rng.random(len(z))) < fp - f + q_bwd - q_fwd
        z[acc], f[acc], g[acc] = prop[acc], fp[acc], gp[acc]
        accepted += acc.mean()
    return z, accepted / num_steps


@pytest.mark.slow  # 80 s: a statistical check of a reference against MALA
def test_glm_reference_matches_mala():
    task = sbi.get_task("bernoulli_glm")
    x_o = task.observation(1)[0]
    x, b = glm.design_matrix(), glm.prior_precision()

    def log_density_and_grad(theta):
        psi = theta @ x.T
        p = 1 / (1 + np.exp(-psi))
        f = task.log_posterior_unnormalized(theta, x_o)
        return f, x_o - p @ x - theta @ b

    n = 1000
    ref = task.reference_posterior(x_o, n, seed=0)
    mode, neg_hess = task.laplace(x_o)
    starts = task.sample_prior(n, seed=3)  # overdispersed: prior draws, far from the mode
    # 1,000 steps: at the benchmark's observation 1 the acceptance is lower (0.65) than
    # at our seeded one (0.79), and 250 steps left the chains short of stationarity
    # (C2ST 0.552 at 250 steps, 0.538 at 1,000; bound 0.545).
    chains, acc_rate = _mala_chains(
        log_density_and_grad, starts, np.linalg.inv(neg_hess), 0.9, 1000, np.random.default_rng(4)
    )
    assert 0.3 < acc_rate < 0.95
    assert c2st_knn(ref, chains) < c2st_bound(n)


def _log_metropolis(task, x_o, z, scale, num_steps, rng):
    """Random-walk Metropolis on log theta, one chain a row of `z`; returns the final states."""
    logp = lambda z: task.log_posterior_unnormalized(np.exp(z), x_o) + z.sum(1)  # noqa: E731
    f = logp(z)
    for _ in range(num_steps):
        prop_z = z + scale * rng.standard_normal(z.shape)
        fp = logp(prop_z)
        acc = np.log(rng.random(len(z))) < fp - f
        z[acc], f[acc] = prop_z[acc], fp[acc]
    return z


@pytest.mark.slow  # 115 s: a statistical check of a reference against Metropolis
def test_sir_reference_matches_metropolis_from_importance_resampling():
    """Random-walk Metropolis chains (batched ODE solves) started from prior-IR draws."""
    task = sbi.get_task("sir")
    x_o = task.observation(1)[0]
    n = 1000
    ref = task.reference_posterior(x_o, n, seed=0)
    prop = task.sample_prior(20_000, seed=1)
    rng = np.random.default_rng(2)
    start, _ = importance_resample(
        lambda t: task.log_likelihood(t, x_o), prop, np.zeros(len(prop)), n, rng
    )
    z = np.log(start)
    scale = 1.5 * np.std(np.log(ref), axis=0)  # any fixed scale leaves the posterior invariant
    z = _log_metropolis(task, x_o, z, scale, 40, rng)
    assert c2st_knn(ref, np.exp(z)) < c2st_bound(n)


@pytest.mark.slow
def test_lotka_volterra_reference_matches_metropolis():
    task = sbi.get_task("lotka_volterra")
    x_o = task.observation(1)[0]
    n = 1000
    ref = task.reference_posterior(x_o, n, seed=0)
    rng = np.random.default_rng(2)
    # Chains start from an over-dispersed cloud around the posterior (3x its spread).
    zr = np.log(ref)
    z = zr.mean(0) + 3 * (zr[rng.permutation(n)] - zr.mean(0))
    z = _log_metropolis(task, x_o, z, 0.7 * np.std(zr, axis=0), 300, rng)
    assert c2st_knn(ref, np.exp(z)) < c2st_bound(n)


@pytest.mark.slow
@pytest.mark.parametrize("k", [6, 7])
def test_slcp_narrow_observations_match_importance_resampling(k):
    """Observations whose posterior needs 4e7 prior draws for a usable importance sample."""
    task = sbi.get_task("slcp")
    x_o = task.observation(k)[0]
    n = 1000
    ref = task.reference_posterior(x_o, n, seed=0)
    rng = np.random.default_rng(1)
    keep_theta, keep_logw = [], []
    for chunk in range(40):
        theta = task.sample_prior(1_000_000, seed=100 + chunk)
        lw = task.log_likelihood(theta, x_o)
        top = lw > lw.max() - 30
        keep_theta.append(theta[top])
        keep_logw.append(lw[top])
    theta, lw = np.concatenate(keep_theta), np.concatenate(keep_logw)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    ess = 1 / np.sum(w**2)
    assert ess > 1.5 * n  # observation 7: ESS 1,820 of 4e7 draws (resampled with replacement)
    ir = theta[rng.choice(len(w), n, p=w)]
    assert c2st_knn(ref, ir) < c2st_bound(n)


def test_reference_posterior_bad_observations():
    with pytest.raises(InputError, match="x_o"):
        sbi.get_task("two_moons").reference_posterior(np.array([5.0, 5.0]), 10)
    with pytest.raises(InputError, match="x_o.*integer counts"):
        sbi.get_task("sir").reference_posterior(np.full(10, 0.5), 10)
    with pytest.raises(InputError, match="x_o.*values in"):
        sbi.get_task("bernoulli_glm_raw").log_likelihood(np.zeros(10), np.full(100, 0.5))
    with pytest.raises(InputError, match="x_o.*finite"):
        sbi.get_task("slcp").reference_posterior(np.full(8, np.nan), 10)


@pytest.mark.slow
def test_slcp_spiky_reference_is_stationary_under_metropolis():
    """Observation 1 is too spiky for importance sampling (ESS ~ 40 from 4e7 prior draws).
    An exact Metropolis kernel leaves the true posterior invariant, so 300 random-walk
    steps from the reference draws must not move them to a distinguishable distribution."""
    task = sbi.get_task("slcp")
    x_o = task.observation(1)[0]
    n = 2000
    ref = task.reference_posterior(x_o, n, seed=0)
    start = task.reference_posterior(x_o, n, seed=1)
    rng = np.random.default_rng(2)
    z, f = start.copy(), task.log_posterior_unnormalized(start, x_o)
    # step: a fifth of each mode's spread (|theta_3|, |theta_4| fold the sign modes)
    scale = 0.2 * np.std(np.abs(ref), axis=0)
    rate = 0.0
    for _ in range(300):
        prop = z + scale * rng.standard_normal(z.shape)
        fp = task.log_posterior_unnormalized(prop, x_o)
        acc = np.log(rng.random(n)) < fp - f
        z[acc], f[acc] = prop[acc], fp[acc]
        rate += acc.mean() / 300
    assert rate > 0.1
    assert c2st_knn(ref, z) < c2st_bound(n)
