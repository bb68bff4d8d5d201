"""`classification_2d_2021`: the 2021 sweep's instances and estimators, against the
reference's algorithm of that time written out here from its documented key order (not
taken from its code), and against closed forms (oracle 0, uniform's formula, exact
enumeration of the cluster estimator's target on small cases)."""

from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest

import agents
import generative
from generative.classification_2021 import classification_2d_2021_grid
from testbed.base import FiniteSampler
from testbed.joint_kl import enumerate_joint_kl, partition_log_likelihoods


def test_sweep_is_the_2021_order():
    grid = classification_2d_2021_grid()
    assert len(grid) == 420 == len(generative.sweep_ids("classification_2d_2021"))
    # seed counts up over every problem; tau alternates innermost
    assert [g["seed"] for g in grid] == list(range(1, 421))
    assert [g["tau"] for g in grid[:4]] == [1, 100, 1, 100]
    assert grid[20]["temperature"] == 0.1 and grid[19]["temperature"] == 0.01
    assert grid[60]["num_train"] == 3 and grid[59]["num_train"] == 1
    s = generative.problem_settings("classification_2d_2021/419")
    assert (s["num_train"], s["temperature"], s["tau"], s["seed"]) == (1000, 0.5, 100, 420)


def reference_2021(seed, n, temperature, tau, num_batches, num_samples, sampler):
    """The reference's 2021 problem and KL estimate, batch by batch, as its code read."""
    d, c = 2, 2
    with jax.threefry_partitionable(False):
        rng = hk.PRNGSequence(seed)
        generator_key, estimator_key = next(rng), next(rng)
        inner = hk.PRNGSequence(generator_key)
        init_key, data_key = next(inner), next(inner)

        def net(x):
            h = jax.nn.relu(hk.Linear(50, b_init=hk.initializers.RandomNormal(d**-0.5))(x))
            h = jax.nn.relu(hk.Linear(50)(h))
            return hk.Linear(c)(h)

        transformed = hk.without_apply_rng(hk.transform(net))
        params = transformed.init(init_key, jnp.zeros([1, d]))
        logit_fn = lambda x: transformed.apply(params, x) / temperature  # noqa: E731
        data_rng = hk.PRNGSequence(data_key)
        x_train = jax.random.normal(next(data_rng), [n, d])
        probs = jax.nn.softmax(logit_fn(x_train))
        keys = jax.random.split(next(data_rng), n)
        y_train = jax.vmap(lambda k, p: jax.random.choice(k, c, p=p))(keys, probs)

        def test_data(key):
            x_key, y_key = jax.random.split(key)
            x = jax.random.normal(x_key, [tau, d])
            p = jax.nn.softmax(logit_fn(x))
            y = jax.vmap(lambda k, q: jax.random.choice(k, c, shape=(1,), p=q))(
                jax.random.split(y_key, tau), p
            )[:, 0]
            return x, y, jnp.sum(jnp.log(p[jnp.arange(tau), y]))

        batches = []
        for kl_key in jax.random.split(estimator_key, num_batches):
            if tau >= 10:
                data_k, enn_k, cluster_k = jax.random.split(kl_key, 3)
                a_key, b_key = jax.random.split(cluster_k)
                planes = jax.random.normal(a_key, [7, tau * c]), jax.random.normal(b_key, [7])
            else:
                data_k, enn_k = jax.random.split(kl_key)
                planes = None
            batches.append((*test_data(data_k), jax.random.split(enn_k, num_samples), planes))
    estimates = []  # the agent's own draws on the user's stream
    for x, y, true_ll, enn_keys, planes in batches:
        logits = jnp.stack([sampler(x, k) for k in enn_keys])  # [M, tau, C]
        if tau < 10:
            s = jnp.sum(jnp.log(jax.nn.softmax(logits))[:, jnp.arange(tau), y], axis=1)
            model_ll = jax.nn.logsumexp(s) - math.log(num_samples)
        else:
            probits = jnp.clip(jsp.ndtri(jax.nn.softmax(logits)), -5, 5)
            flat = probits.reshape(num_samples, tau * c)
            a, b = planes
            codes = (flat @ a.T + b > 0).astype(int)
            correct = jsp.ndtr(probits)[:, jnp.arange(tau), y]
            terms = []
            for code in np.unique(np.asarray(codes), axis=0):
                mask = np.all(np.asarray(codes) == code, axis=1)
                count = mask.sum()
                centre = (correct[mask].sum(0) + 1e-6) / (count + 1e-6)
                terms.append(math.log(count / num_samples) + float(jnp.log(centre).sum()))
            model_ll = float(jax.nn.logsumexp(jnp.array(terms)))
        estimates.append(float(true_ll) - float(model_ll))
    return (np.asarray(x_train), np.asarray(y_train)), np.array(estimates)


def mlp_sampler(seed: int, rate: float = 0.3):
    """A dropout-like sampler: a fixed random MLP, one mask of its hidden units per key."""
    net = hk.without_apply_rng(hk.transform(lambda x: hk.nets.MLP([16, 2])(x)))
    params = net.init(jax.random.PRNGKey(seed), jnp.zeros([1, 2]))

    def sampler(x, key):
        w1, b1 = params["mlp/~/linear_0"]["w"], params["mlp/~/linear_0"]["b"]
        mask = jax.random.bernoulli(key, 1 - rate, (16,)) / (1 - rate)
        h = jax.nn.relu(x @ w1 + b1) * mask
        return 3.0 * (h @ params["mlp/~/linear_1"]["w"] + params["mlp/~/linear_1"]["b"])

    return sampler


@pytest.mark.parametrize("index, tau", [(40, 1), (41, 100), (2, 1), (3, 100)])
def test_instance_and_estimate_are_the_2021_references(index, tau):
    problem = generative.load(
        f"classification_2d_2021/{index}", num_test_seeds=6, num_enn_samples=40
    )
    s = problem.settings
    assert s.tau == tau
    sampler = mlp_sampler(index)
    (x, y), estimates = reference_2021(s.seed, s.num_train, s.temperature, tau, 6, 40, sampler)
    np.testing.assert_array_equal(problem.train_data.x, x)
    np.testing.assert_array_equal(problem.train_data.y, y)
    q = problem.evaluate(sampler, ["joint_kl"])
    assert q["pct_finite_kl"] == 1.0
    assert q["kl_estimate"] == pytest.approx(float(estimates.mean()), rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("index", [10, 11])
def test_oracle_zero_and_uniform_formula(index):
    problem = generative.load(
        f"classification_2d_2021/{index}", num_test_seeds=200, num_enn_samples=10
    )
    tau = problem.settings.tau
    batches = problem.estimator_batches()
    oracle = problem.evaluate(problem.oracle_predictive(), ["joint_kl"])
    # the cluster estimator clips probits at +-5: a near-certain label's probability
    # becomes Phi(5) (a loss of at most 3e-7 a point); Monte Carlo is exact
    assert oracle["kl_estimate"] == pytest.approx(0.0, abs=1e-4 if tau > 1 else 1e-6)
    uniform = agents.load("uniform")(problem.train_data, problem.prior_knowledge)
    q = problem.evaluate(uniform, ["joint_kl"])
    want = float(np.mean(batches.env_loglik)) + tau * math.log(2)
    assert q["kl_estimate"] == pytest.approx(want, abs=1e-3)


def test_finite_sampler_weights_members_per_batch():
    """K functions: each batch weighs them by how often its own keys pick them, which is
    what M separate calls give."""
    problem = generative.load("classification_2d_2021/7", num_test_seeds=8, num_enn_samples=30)
    logits = jax.random.normal(jax.random.PRNGKey(0), (3, 2)) * 2.0
    finite = FiniteSampler(lambda x: jnp.broadcast_to(logits[:, None], (3, x.shape[0], 2)), 3)
    plain = lambda x, key: finite(x, key)  # noqa: E731  the same functions, one key a call
    a = problem.evaluate(finite, ["joint_kl"])["kl_estimate"]
    b = problem.evaluate(plain, ["joint_kl"])["kl_estimate"]
    assert a == pytest.approx(b, rel=1e-5)


def test_cluster_estimator_against_exact_enumeration():
    """tau = 8 (2^8 label sequences, enumerable) at fixed inputs: two agents with the same
    marginals but different joints (a mixture of two confident functions; the product of
    its marginals) get cluster estimates within noise of their exact joint KLs."""
    tau, num_batches, num_samples = 8, 400, 200
    x = jax.random.normal(jax.random.PRNGKey(3), (tau, 2))
    env = jax.nn.log_softmax(jnp.stack([x[:, 0], -x[:, 0]], axis=1) * 2.0)
    sure = jnp.log(jnp.array([[0.9, 0.1], [0.1, 0.9]]))
    mixture = jnp.broadcast_to(sure[:, None, :], (2, tau, 2))  # [2 functions, tau, C]
    product = jnp.full((1, tau, 2), math.log(0.5))  # the mixture's marginals
    y = jax.vmap(lambda k: jax.random.categorical(k, env))(
        jax.random.split(jax.random.PRNGKey(4), num_batches)
    )
    env_ll = env[jnp.arange(tau)[None, :], y].sum(1)
    keys = jax.random.split(jax.random.PRNGKey(5), num_batches * num_samples)
    keys = keys.reshape(num_batches, num_samples, 2)
    xs = jnp.broadcast_to(x, (num_batches, tau, 2))
    planes = jax.random.split(jax.random.PRNGKey(6), num_batches)
    for funcs in (mixture, product):
        k = funcs.shape[0]
        sampler = FiniteSampler(lambda xx, f=funcs, k=k: jnp.broadcast_to(f, (k, tau, 2)), k)
        d = env_ll - partition_log_likelihoods(sampler, xs, y, keys, planes)
        exact = enumerate_joint_kl(np.asarray(env), np.asarray(funcs))
        stderr = float(jnp.std(d)) / math.sqrt(num_batches)
        assert abs(float(jnp.mean(d)) - exact) < 4 * stderr + 0.02
    assert enumerate_joint_kl(np.asarray(env), np.asarray(mixture)) > 1.5 * enumerate_joint_kl(
        np.asarray(env), np.asarray(product)
    )
