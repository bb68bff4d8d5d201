"""GP regression problems: NNGP kernel, sweep ids, the sample-based Gaussian KL against
closed forms, the oracle and the exact GP posterior, agents' regression heads."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed
from agents.gp_posterior import GPPosteriorConfig, GPPosteriorSampler
from testbed.errors import InputError
from testbed.nngp import nngp_kernel, relu_covariance


def test_relu_covariance_is_the_gaussian_expectation():
    rng = np.random.default_rng(0)
    cov = np.array([[1.3, 0.7], [0.7, 0.9]])
    u, v = rng.multivariate_normal(np.zeros(2), cov, size=400_000).T
    prod = np.maximum(u, 0) * np.maximum(v, 0)
    exact = float(relu_covariance(np.array(0.7), np.array(1.3), np.array(0.9), xp=np))
    assert abs(prod.mean() - exact) < 4 * prod.std() / math.sqrt(len(prod))
    # diagonal: E[relu(u)^2] = k / 2
    assert float(relu_covariance(np.array(2.0), np.array(2.0), np.array(2.0), xp=np)) == 1.0


@pytest.mark.parametrize("width", [500, pytest.param(1000, marks=pytest.mark.slow)])
def test_nngp_kernel_is_the_wide_network_limit(width):
    """The empirical kernel of wide random ReLU networks (W_std 1, first b_std 1/sqrt(d))
    converges to the closed form. Width 500 in the default run, a quarter of width 1000's
    cost: its largest error was 0.21-0.58 of the bound over seeds 1-3 (2026-11-28)."""
    rng = np.random.default_rng(1)
    d, nets = 3, 300
    x = rng.normal(size=(4, d))
    outs = []
    for _ in range(nets):
        h = x @ rng.normal(size=(d, width)) / math.sqrt(d) + rng.normal(size=width) / math.sqrt(d)
        h = np.maximum(h, 0) @ rng.normal(size=(width, width)) / math.sqrt(width)
        h = np.maximum(h, 0) @ rng.normal(size=(width, 1)) / math.sqrt(width)
        outs.append(h[:, 0])
    outs = np.array(outs)  # [nets, 4]
    empirical = outs.T @ outs / nets
    exact = nngp_kernel(x, x, xp=np)
    se = np.sqrt((exact**2 + np.outer(np.diag(exact), np.diag(exact))) / nets)
    assert np.all(np.abs(empirical - exact) < 4 * se + 0.01)
    np.testing.assert_allclose(np.diag(exact), (np.sum(x**2, 1) / d + 1 / d) / 4, rtol=1e-12)
    np.testing.assert_allclose(nngp_kernel(jnp.asarray(x), jnp.asarray(x)), exact, rtol=1e-5)


def test_regression_sweep_ids_and_settings():
    ids = generative.sweep_ids("regression")
    assert len(ids) == 270 and ids[0] == "regression/0" and ids[-1] == "regression/269"
    for i in (0, 37, 95, 150, 269):
        s = generative.problem_settings(f"regression/{i}")
        d = [1, 10, 100][i // 90]
        assert s["input_dim"] == d
        assert s["num_train"] == d * [1, 10, 100][(i % 90) // 30]
        assert s["noise_std"] == [0.01, 0.1, 1.0][(i % 30) // 10]
        assert s["seed"] == i + 1 and s["tau"] == 1 and s["num_enn_samples"] == 100
    assert generative.sweep_ids("regression_test") == ["regression_test/0"]
    s = generative.problem_settings("regression_test/0")
    assert (s["input_dim"], s["num_train"], s["noise_std"], s["seed"]) == (10, 10, 0.1, 11)


@pytest.fixture(scope="module")
def problem():
    return generative.load("regression/133", num_test_seeds=300)  # d = 10, n = 100, noise 0.1


def test_oracle_scores_zero(problem):
    q = testbed.evaluate(agents.load("oracle"), problem)
    assert abs(q["kl_estimate"]) < 1e-5 and q["pct_finite_kl"] == 1.0


def test_sample_kl_matches_closed_forms_on_gaussians(problem):
    """A deterministic shift c gives d_i = (c^2 - 2 c e_i) / (2 s^2) per batch exactly (e_i:
    the batch's noise); a Gaussian spread b with many samples gives, in expectation,
    KL(N(f, s^2) || N(f + c, s^2 + b^2))."""
    s2 = problem.settings.noise_std**2
    oracle = problem.oracle_predictive()
    batches = problem.estimator_batches()
    noise = batches.y[:, 0] - np.asarray(problem.f_cache)[_cache_index(problem, batches.x)]
    c = 0.05
    shifted = problem.evaluate(lambda x, key: oracle(x, key) + c)
    exact = float(np.mean((c**2 - 2 * c * noise) / (2 * s2)))
    assert shifted["kl_estimate"] == pytest.approx(exact, rel=1e-4, abs=1e-6)

    b = 0.2
    many = generative.load("regression/133", num_test_seeds=300, num_enn_samples=4000)

    def spread(x, key):
        return oracle(x, key) + c + b * jax.random.normal(key, ())

    q = many.evaluate(spread)
    v = s2 + b**2
    closed = 0.5 * math.log(v / s2) + (s2 + c**2) / (2 * v) - 0.5
    stderr = q["kl_estimate_std"] / math.sqrt(len(batches.y))
    assert abs(q["kl_estimate"] - closed) < 4 * stderr + 0.01  # + finite-M log-mean-exp bias


def _cache_index(problem, x):
    d2 = ((x[:, 0, None, :] - problem.x_cache[None]) ** 2).sum(-1)
    return d2.argmin(1)


def test_gp_posterior_is_the_exact_posterior_of_the_environment(problem):
    """The environment's function at the cache, whitened by the exact posterior, is N(0, I)."""
    s = problem.settings
    sampler = GPPosteriorSampler(
        problem.train_data.x, problem.train_data.y, s.noise_std, GPPosteriorConfig()
    )
    x = problem.x_cache[:400]
    mean, root = sampler.moments(x)
    u, sv, _ = np.linalg.svd(root, full_matrices=False)
    keep = sv > 1e-3 * sv.max()
    r = (u[:, keep].T @ (problem.f_cache[:400] - mean)) / sv[keep]
    k = int(keep.sum())
    assert k > 20
    assert abs(np.mean(r**2) - 1) < 4 * math.sqrt(2 / k)
    # one key is one coherent function: the same key gives the same draw
    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(sampler(x, key), sampler(x, key))


@pytest.mark.slow
def test_gp_posterior_beats_trained_agents_on_average():
    """Measured: gp_posterior below mlp, ensemble (K = 10), dropout and bbb summed over the
    three problems (about a minute)."""
    ids = ["regression/40", "regression/133", "regression/163"]  # d 1 and 10, n/d 10 and 100
    names = ["mlp", "ensemble", "dropout", "bbb"]
    totals = dict.fromkeys(["gp_posterior", *names], 0.0)
    for pid in ids:
        p = generative.load(pid, num_test_seeds=300)
        for name in totals:
            config = {"num_ensemble": 10} if name == "ensemble" else {}
            totals[name] += testbed.evaluate(agents.load(name, **config), p)["kl_estimate"]
    best_trained = min(totals[n] for n in names)
    assert totals["gp_posterior"] < best_trained, totals


SMALL = {
    "mlp": {"num_batches": 50},
    "ensemble+": {"num_batches": 300, "num_ensemble": 4},
    "hypermodel": {"num_batches": 50},
    "epinet": {"num_batches": 50},
    "deep_kernel": {"num_batches": 50},
    "sgmcmc": {"num_batches": 300, "burn_in_time": 100, "model_saving_frequency": 100},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_regression_heads_output_real_values(problem, name):
    """Every network agent trains on real targets (squared error) and samples [n, 1]."""
    sampler = agents.load(name, **SMALL[name])(problem.train_data, problem.prior_knowledge)
    out = np.asarray(sampler(problem.x_cache[:5], jax.random.PRNGKey(0)))
    assert out.shape == (5, 1) and np.all(np.isfinite(out))
    # it learned something: its mean is better than the zero function on the training targets
    keys = jax.random.split(jax.random.PRNGKey(1), 20)  # 20 functions in one vmapped call
    fit = np.asarray(jax.jit(jax.vmap(lambda k: sampler(problem.train_data.x, k)))(keys))
    fit = fit[..., 0].mean(axis=0)
    y = problem.train_data.y[:, 0]
    assert np.mean((fit - y) ** 2) < np.mean(y**2)


@pytest.mark.parametrize("name", ["knn", "random_forest", "average_class_probs", "prior"])
def test_classifiers_refuse_regression(problem, name):
    with pytest.raises(InputError, match=f"agent {name}"):
        agents.load(name)(problem.train_data, problem.prior_knowledge)


def test_gp_posterior_refuses_classification():
    p = generative.load("classification_2d/3", num_test_seeds=10, num_enn_samples=4)
    with pytest.raises(InputError, match="agent gp_posterior.*allowed: regression"):
        agents.load("gp_posterior")(p.train_data, p.prior_knowledge)


def test_non_finite_regression_output_is_a_clear_error(problem):
    with pytest.raises(InputError, match="NaN values"):
        problem.evaluate(lambda x, key: jnp.full((x.shape[0], 1), jnp.nan))
    with pytest.raises(InputError, match="real values of shape"):
        problem.evaluate(lambda x, key: jnp.zeros((x.shape[0], 2)))


def test_regression_has_its_own_ranking_table(tmp_path):
    """A sweep over classification and regression problems gives separate tables, each
    normalised by uniform (on regression: f = 0), as the reference."""
    from leaderboard import build
    from leaderboard.execution.executors import InlineExecutor
    from leaderboard.execution.jobs import expand
    from leaderboard.execution.runner import run_sweep
    from leaderboard.ranking.board import tables
    from leaderboard.store import ResultsStore

    problems = ["regression_test/0", "classification_2d_test/0"]
    jobs = expand(["oracle", "uniform"], problems, overrides={})
    with ResultsStore(tmp_path / "r.db") as s:
        assert run_sweep(jobs, s, InlineExecutor()).ok == 4
    board = build(tmp_path / "r.db")
    reg = board.tables_of("regression_test")[1]
    assert list(reg["agent"]) == ["oracle", "uniform"] and reg.attrs["normalizer"] == "uniform"
    assert abs(reg["mean_kl"].iloc[0]) < 1e-5 and reg["num_problems"].tolist() == [1, 1]
    assert reg["normalized_kl"].iloc[1] == 1.0
    kl = board.tables_of("classification_2d_test")[1]
    assert kl.attrs["normalizer"] == "uniform" and len(kl) == 2
    titles = [t for t, _ in tables(board)]
    assert "regression KL (GP environments), tau=1 (normalised by uniform)" in titles
    assert any(t.startswith("marginal KL, tau=1 (normalised by uniform)") for t in titles)


def test_estimator_is_the_references_for_a_deterministic_agent(problem):
    """The reference's GaussianSampleKL written out (per batch key: x_key, y_key = split;
    tau cache indices; noise; M keys from the batch key): for a deterministic agent the keys
    do not matter, so its value equals ours exactly."""
    s = problem.settings
    cache, f = jnp.asarray(problem.x_cache), jnp.asarray(problem.f_cache)
    shifted = lambda x, key: problem.oracle_predictive()(x, key) + 0.03  # noqa: E731

    def one(key):
        x_key, y_key = jax.random.split(key)
        idx = jax.random.randint(x_key, [s.tau], 0, cache.shape[0])
        noise = jax.random.normal(y_key, [s.tau, 1]) * s.noise_std
        y = f[idx][:, None] + noise
        outs = jax.vmap(lambda k: shifted(cache[idx], k))(jax.random.split(key, 7))
        ll = -0.5 * (jnp.log(2 * jnp.pi * s.noise_std**2) + ((outs - y) ** 2) / s.noise_std**2)
        true = -0.5 * (jnp.log(2 * jnp.pi * s.noise_std**2) + noise**2 / s.noise_std**2)
        return jnp.sum(true) - (jax.nn.logsumexp(ll.sum((1, 2))) - jnp.log(7))

    with jax.threefry_partitionable(False):
        keys = jax.random.split(problem._estimator_key, int(s.num_test_seeds / s.tau) + 1)
        reference = float(jnp.mean(jax.vmap(one)(keys)))
    assert problem.evaluate(shifted)["kl_estimate"] == pytest.approx(reference, rel=1e-5)


def test_an_environment_is_drawn_once_per_process(monkeypatch):
    """A sweep builds a problem once for each agent: the function draw (seconds on 10,000
    inputs) is kept, and every build gets the same problem with arrays of its own."""
    from generative import gp_regression

    calls = []
    real = gp_regression.draw_function
    monkeypatch.setattr(gp_regression, "draw_function", lambda *a: (calls.append(1), real(*a))[1])
    monkeypatch.setattr(gp_regression, "_FUNCTIONS", gp_regression.collections.OrderedDict())
    first = generative.load("regression/95", num_test_seeds=10)  # d = 10, n = 10
    again = generative.load("regression/95", num_test_seeds=20)  # other options, same function
    other = generative.load("regression/96", num_test_seeds=10)
    assert len(calls) == 2  # 95 once, 96 once
    assert np.array_equal(first.f_cache, again.f_cache) and np.array_equal(
        first.train_data.y, again.train_data.y
    )
    assert not np.array_equal(first.f_cache, other.f_cache)
    first.f_cache[0] += 1.0  # a problem's own copy: the next build is unchanged
    assert not np.array_equal(first.f_cache, generative.load("regression/95").f_cache)
    monkeypatch.setattr(gp_regression, "_FUNCTIONS", gp_regression.collections.OrderedDict())
    fresh = generative.load("regression/95", num_test_seeds=10)  # drawn anew: the same
    assert np.array_equal(fresh.f_cache, again.f_cache) and len(calls) == 3
    monkeypatch.setattr(gp_regression, "MAX_FUNCTIONS", 1)
    generative.load("regression/96")
    assert list(gp_regression._FUNCTIONS) == [(97, 10, 10, 1000, 1e-5)]  # the oldest left
