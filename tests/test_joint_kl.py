"""The Neural Testbed's KL estimators against closed forms and exact enumeration."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed
from generative.classification import ClassificationProblem
from testbed.base import FiniteSampler
from testbed.errors import InputError
from testbed.joint_kl import (
    enumerate_joint_kl,
    joint_log_likelihoods,
    sample_keys,
    summarize_kl,
)
from testbed.random_mlp import make_random_mlp
from testbed.random_partition import partition_log_likelihood


def small(problem_id, **changes):
    """A registered problem with fewer test batches / samples (for speed)."""
    p = generative.load(problem_id)
    return ClassificationProblem(dataclasses.replace(p.settings, **changes))


def mlp_functions(num, input_dim=2, temperature=0.5, seed=0):
    """K random generator-style MLPs as a FiniteSampler (a toy ensemble)."""
    net = make_random_mlp(input_dim, 2)
    params = jax.vmap(lambda k: net.init(k, jnp.zeros((1, input_dim))))(
        jax.random.split(jax.random.PRNGKey(seed), num)
    )
    return FiniteSampler(lambda x: jax.vmap(lambda p: net.apply(p, x))(params) / temperature, num)


@pytest.mark.parametrize(
    "problem_id",
    ["classification_2d/75", "classification_2d/285", "classification/100", "classification/280"],
)
def test_oracle_kl_is_zero(problem_id):
    q = testbed.evaluate(agents.load("oracle"), generative.load(problem_id))
    assert abs(q["kl_estimate"]) < 1e-5 and q["pct_finite_kl"] == 1.0


@pytest.mark.parametrize(
    "problem_id", ["classification_2d/40", "classification_2d/250", "classification/190"]
)
def test_uniform_kl_closed_form(problem_id):
    problem = small(problem_id, num_test_seeds=400, num_enn_samples=10)
    s = problem.settings
    q = problem.evaluate(
        agents.load("uniform")(problem.train_data, problem.prior_knowledge), ["joint_kl"]
    )
    # Per batch, d_i = log p(y_i | x_i) + tau log C exactly (the uniform agent has no noise).
    batches = problem.estimator_batches()
    x, env_ll = batches.x, batches.env_loglik
    exact_given_labels = float(np.mean(env_ll)) + s.tau * math.log(2)
    assert q["kl_estimate"] == pytest.approx(exact_given_labels, abs=1e-4)
    # Closed form over labels on the same inputs: sum_t [log C - H(p(.|x_t))].
    logp = jax.nn.log_softmax(problem.logit_fn(x.reshape(-1, s.input_dim)))
    neg_entropy = float(jnp.sum(jnp.exp(logp) * logp)) / s.num_test_seeds
    closed = neg_entropy + s.tau * math.log(2)
    stderr = q["kl_estimate_std"] / math.sqrt(s.num_test_seeds)
    assert abs(q["kl_estimate"] - closed) < 4 * stderr + 1e-6


def exact_kl_per_batch(env, members, log_w):
    """KL over all C^tau label sequences at each batch's inputs: env [N, tau, C],
    members [K, N, tau, C], log_w [K] -> [N]."""
    import itertools

    n, tau, c = env.shape
    out = np.zeros(n)
    for labels in itertools.product(range(c), repeat=tau):
        t = np.arange(tau)
        log_p = env[:, t, labels].sum(-1)
        log_q = np.logaddexp.reduce(members[:, :, t, labels].sum(-1) + log_w[:, None], axis=0)
        out += np.exp(log_p) * (log_p - log_q)
    return out


@pytest.mark.parametrize("finite", [True, False])
def test_small_tau_agrees_with_exact_enumeration(finite):
    tau, num_batches, num_keys = 3, 2000, 200
    problem = small("classification_2d/250", tau=tau, num_test_seeds=num_batches)
    ensemble = mlp_functions(4, temperature=0.5)
    sampler = ensemble if finite else (lambda x, k: ensemble(x, k))
    keys = sample_keys(jax.random.PRNGKey(3), num_keys)
    x, y, env_ll = problem.test_batches(jax.random.PRNGKey(7), num_batches, tau)
    agent_ll = joint_log_likelihoods(sampler, x, y, keys)
    est = summarize_kl(env_ll, agent_ll)
    # Exact KL at each batch's inputs for the same M keys (a mixture of the K members).
    counts = np.bincount(np.asarray(jax.vmap(ensemble.index)(keys)), minlength=4)
    log_w = np.log(counts / num_keys)
    members = np.asarray(jax.nn.log_softmax(ensemble.all_logits(x.reshape(-1, 2))))
    members = members.reshape(4, num_batches, tau, 2)
    env = np.asarray(jax.nn.log_softmax(problem.logit_fn(x.reshape(-1, 2)))).reshape(
        num_batches, tau, 2
    )
    # enumerate_joint_kl on a few batches checks the vectorized exact form used for all.
    per_batch = exact_kl_per_batch(env, members, log_w)
    for i in range(3):
        assert per_batch[i] == pytest.approx(enumerate_joint_kl(env[i], members[:, i], log_w))
    exact = float(per_batch.mean())
    tol = 4 * est["kl_estimate_std"] / math.sqrt(num_batches)  # 4 standard errors
    assert abs(est["kl_estimate"] - exact) < tol
    assert exact > 0.05  # the check is not vacuous


def test_finite_sampler_equals_generic_path():
    ensemble = mlp_functions(5)
    keys = sample_keys(jax.random.PRNGKey(1), 300)
    x = jax.random.normal(jax.random.PRNGKey(2), (50, 10, 2))
    y = jax.random.bernoulli(jax.random.PRNGKey(3), 0.5, (50, 10)).astype(int)
    a = joint_log_likelihoods(ensemble, x, y, keys)
    b = joint_log_likelihoods(lambda xx, k: ensemble(xx, k), x, y, keys)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_non_traceable_sampler_is_looped_and_agrees():
    ensemble = mlp_functions(3)
    keys = sample_keys(jax.random.PRNGKey(1), 20)
    x = jax.random.normal(jax.random.PRNGKey(2), (30, 4, 2))
    y = jax.random.bernoulli(jax.random.PRNGKey(3), 0.5, (30, 4)).astype(int)

    def numpy_sampler(xx, key):
        return np.asarray(ensemble(jnp.asarray(xx), key)).astype(np.float64).copy()

    numpy_sampler.traceable = False
    a = joint_log_likelihoods(numpy_sampler, x, y, keys)
    b = joint_log_likelihoods(ensemble, x, y, keys)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


PARTITION_GRID = [
    pytest.param(
        m,
        tau,
        c,
        rep,
        marks=() if (m, tau, c) in {(1000, 10, 2), (1000, 30, 10)} else pytest.mark.slow,
    )
    for m in (1000, 10000)
    for tau in (10, 30)
    for c in (2, 4, 10)
    for rep in (False, True)
]


@pytest.mark.parametrize("num_samples, tau, num_classes, repeated", PARTITION_GRID)
def test_random_partition_close_to_brute_force(num_samples, tau, num_classes, repeated):
    # The reference's parity check: random N(0,1) logits, relative error < 0.25 (0.30 with
    # every function repeated twice).
    logit_key, y_key, part_key = jax.random.split(jax.random.PRNGKey(999), 3)
    n = num_samples // 2 if repeated else num_samples
    logits = jax.random.normal(logit_key, (n, tau, num_classes))
    if repeated:
        logits = jnp.concatenate([logits, logits])
    log_probs = jax.nn.log_softmax(logits)
    y = jax.random.categorical(y_key, logits[0])
    log_w = jnp.full((num_samples,), -math.log(num_samples))
    brute = jax.nn.logsumexp(log_probs[:, jnp.arange(tau), y].sum(1) + log_w)
    est = partition_log_likelihood(log_probs, log_w, y, part_key, num_samples)
    rel = abs(float(est - brute)) / abs(float(brute))
    assert rel < (0.30 if repeated else 0.25)


def test_random_partition_exact_for_few_distinct_functions():
    # With K well-separated functions and cells that split them, clustering loses nothing.
    k, tau = 3, 20
    logits = jnp.stack([jnp.full((tau, 2), v) * jnp.array([1.0, -1.0]) for v in (-3.0, 0.0, 3.0)])
    log_probs = jax.nn.log_softmax(logits)
    y = jnp.zeros(tau, int)
    log_w = jnp.log(jnp.array([0.2, 0.3, 0.5]))
    brute = jax.nn.logsumexp(log_probs[:, jnp.arange(tau), y].sum(1) + log_w)
    est = partition_log_likelihood(
        log_probs, log_w, y, jax.random.PRNGKey(0), 1000, num_hyperplanes=12
    )
    assert float(est) == pytest.approx(float(brute), rel=1e-3)
    del k


def test_tau_above_ten_uses_random_partition():
    problem = small("classification_2d/285", tau=50, num_test_seeds=20, num_enn_samples=100)
    q = problem.evaluate(
        agents.load("uniform")(problem.train_data, problem.prior_knowledge), ["joint_kl"]
    )
    # uniform: every cell has the uniform probability, so the estimate is still exact
    # up to the 1e-6 smoothing: d_i = log p(y_i|x_i) + tau log 2.
    env_ll = problem.estimator_batches().env_loglik
    assert q["kl_estimate"] == pytest.approx(float(np.mean(env_ll)) + 50 * math.log(2), abs=1e-3)


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda x, k: jnp.full((x.shape[0], 2), jnp.nan), "NaN logits"),
        (lambda x, k: jnp.full((x.shape[0], 2), jnp.inf), "\\+inf logits"),
        (lambda x, k: jnp.zeros((x.shape[0], 3)), "shape"),
        (lambda x, k: jnp.zeros((x.shape[0],)), "shape"),
    ],
)
def test_bad_sampler_output_is_a_clear_error(bad, message):
    problem = small("classification_2d/3", num_test_seeds=10, num_enn_samples=4)
    with pytest.raises(InputError, match=message):
        problem.evaluate(bad)


@pytest.mark.parametrize("traceable", [True, False])
def test_finite_sampler_with_wrong_member_count_is_a_clear_error(traceable):
    problem = small("classification_2d/3", num_test_seeds=10, num_enn_samples=4)

    def all_logits(x):  # declares 5 functions, returns 3
        return jnp.zeros((3, x.shape[0], 2)) if traceable else np.zeros((3, x.shape[0], 2))

    all_logits.traceable = traceable
    with pytest.raises(InputError, match=r"all_logits.*got shape \[3, 10, 2\].*\[5, 10, 2\]"):
        problem.evaluate(FiniteSampler(all_logits, 5), ["joint_kl"])


def test_zero_probability_is_clipped_and_flagged():
    problem = small("classification_2d/252", num_test_seeds=200, num_enn_samples=4)

    def always_class_0(x, k):
        return jnp.stack([jnp.zeros(x.shape[0]), jnp.full(x.shape[0], -jnp.inf)], axis=1)

    q = problem.evaluate(always_class_0, ["joint_kl"])
    assert 0 < q["pct_finite_kl"] < 1 and math.isfinite(q["kl_estimate"])
    assert q["kl_estimate_std"] == math.inf


def test_summarize_kl_clips_inf_to_largest_finite():
    out = summarize_kl(np.array([0.0, 0.0, 0.0]), np.array([-1.0, -3.0, -np.inf]))
    assert out["kl_estimate"] == pytest.approx((1 + 3 + 3) / 3)
    assert out["pct_finite_kl"] == pytest.approx(2 / 3)
    assert summarize_kl(np.zeros(2), np.full(2, -np.inf))["kl_estimate"] == math.inf


@pytest.mark.parametrize("per_batch_keys", [False, True])
def test_bound_arrays_compile_once_and_equal_a_closure(per_batch_keys):
    """A sampler whose trained arrays are bound in a `Partial` is compiled once for every
    predictive of its structure (a sweep's problems), and gives a closure's numbers."""
    from jax.tree_util import Partial

    from testbed import sampled_functions

    net = make_random_mlp(2, 2)

    def sample(params, x, key):
        noise = 0.3 * jax.random.normal(key, (1, 2))
        return net.apply(params, x) + noise

    x = jax.random.normal(jax.random.PRNGKey(2), (40, 3, 2))
    y = jax.random.bernoulli(jax.random.PRNGKey(3), 0.5, (40, 3)).astype(int)
    keys = sample_keys(jax.random.PRNGKey(1), 20)
    if per_batch_keys:  # the 2021 estimator: each batch has its own keys
        keys = jax.vmap(lambda k: sample_keys(k, 20))(jax.random.split(keys[0], 40))
    mapped = sampled_functions._map_batches if per_batch_keys else sampled_functions._map_keys
    bound_new, closure_new = [], []  # programs each call compiled
    for seed in (10, 11, 12):  # three trained predictives of one structure
        params = net.init(jax.random.PRNGKey(seed), jnp.zeros((1, 2)))
        before = mapped._cache_size()
        bound = joint_log_likelihoods(Partial(sample, params), x, y, keys)
        bound_new.append(mapped._cache_size() - before)
        before = mapped._cache_size()
        closure = joint_log_likelihoods(lambda xx, k, p=params: sample(p, xx, k), x, y, keys)
        closure_new.append(mapped._cache_size() - before)
        np.testing.assert_allclose(bound, closure, rtol=1e-6, atol=1e-6)
    assert bound_new[1:] == [0, 0]  # the first predictive's program serves the others
    assert closure_new == [1, 1, 1]  # a closure's arrays are constants: one program each
    assert len(set(np.asarray(bound).round(4))) > 1  # not a constant


def test_a_partial_binding_a_setting_is_compiled_as_a_closure():
    """A Partial that binds a Python setting its function branches on still scores (its
    values are constants, as a closure's), with the numbers of the closure."""
    from jax.tree_util import Partial

    def sample(scale, mode, x, key):
        shift = jax.random.normal(key, (1, 2))
        return scale * x[:, :2] + (shift if mode == "shifted" else -shift)

    x = jax.random.normal(jax.random.PRNGKey(2), (30, 2, 2))
    y = jax.random.bernoulli(jax.random.PRNGKey(3), 0.5, (30, 2)).astype(int)
    keys = sample_keys(jax.random.PRNGKey(1), 16)
    for mode in ("shifted", "flipped"):
        bound = joint_log_likelihoods(Partial(sample, 0.5, mode), x, y, keys)
        closure = joint_log_likelihoods(lambda xx, k, m=mode: sample(0.5, m, xx, k), x, y, keys)
        np.testing.assert_allclose(bound, closure, rtol=1e-6, atol=1e-6)
    shifted = joint_log_likelihoods(Partial(sample, 0.5, "shifted"), x, y, keys)
    assert not np.allclose(bound, shifted)  # the setting is used
