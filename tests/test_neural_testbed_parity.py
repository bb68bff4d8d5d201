"""Same id, same problem as the Neural Testbed: keys, environment, data and uniform KL.

The reference's algorithm is written out here from its documented key order (not taken
from its code): `hk.PRNGSequence(seed)` gives, in order, the generator MLP's init key,
the data sampler's key (whose own sequence gives the training data's key) and the KL
estimator's key, all on JAX's original threefry stream. Labels are one
`jax.random.choice(p=probs)` per point; a test batch is `x_key, y_key = split(key_i)`
for key_i in split(kl_key, N) with (kl_key, enn_key) = split(estimator key).
"""

from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed

# (id, d, n, temperature, tau, seed, dyadic) from the reference's sweep formulas.
CASES = [
    ("classification_2d/75", 2, 10, 0.1, 1, 76, False),
    ("classification_2d/285", 2, 10, 0.1, 10, 76, False),
    ("classification_2d/3", 2, 1, 0.01, 1, 4, False),
    ("classification/17", 2, 20, 0.01, 1, 18, True),
    ("classification/200", 2, 20, 0.1, 10, 21, True),
]


def reference_problem(d, n, temperature, tau, seed, dyadic, num_batches):
    """The reference's environment, training data and per-batch log p(y | x) (tau labels)."""
    with jax.threefry_partitionable(False):
        rng = hk.PRNGSequence(seed)
        mlp_key, sampler_key, estimator_key = next(rng), next(rng), next(rng)

        def net(x):
            h = jax.nn.relu(hk.Linear(50, b_init=hk.initializers.RandomNormal(d**-0.5))(x))
            h = jax.nn.relu(hk.Linear(50)(h))
            return hk.Linear(2)(h)

        transformed = hk.without_apply_rng(hk.transform(net))
        params = transformed.init(mlp_key, jnp.zeros([1, d]))
        logit_fn = jax.jit(lambda x: transformed.apply(params, x) / temperature)

        def draw(key, num, inputs):
            x_key, y_key = jax.random.split(key)
            x = inputs(x_key, num)
            probs = jax.nn.softmax(logit_fn(x))
            y_keys = jax.random.split(y_key, num)
            y = jax.vmap(lambda p, k: jax.random.choice(k, 2, shape=(1,), p=p))(probs, y_keys)
            return x, y[:, 0], jnp.sum(jnp.log(probs[jnp.arange(num), y[:, 0]]))

        gaussian = lambda k, num: jax.random.normal(k, [num, d])  # noqa: E731

        def polyadic(k, num):
            anchor_key, pick_key = jax.random.split(k)
            anchors = jax.random.normal(anchor_key, [2, d])
            return anchors[jax.random.randint(pick_key, [num], 0, 2)]

        train_x, train_y, _ = draw(next(hk.PRNGSequence(sampler_key)), n, gaussian)
        kl_key, _ = jax.random.split(estimator_key)
        test = polyadic if dyadic else gaussian
        batch = jax.jit(lambda k: draw(k, tau, test))
        x, y, env_ll = jax.lax.map(batch, jax.random.split(kl_key, num_batches))
    return logit_fn, (train_x, train_y), (x, y, env_ll)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_problem_is_the_references_instance(case):
    problem_id, d, n, temperature, tau, seed, dyadic = case
    problem = generative.load(problem_id, num_test_seeds=200, num_enn_samples=10)
    s = problem.settings
    assert (s.input_dim, s.num_train, s.temperature, s.tau, s.seed) == (
        d,
        n,
        temperature,
        tau,
        seed,
    )
    logit_fn, (train_x, train_y), (x, y, env_ll) = reference_problem(
        d, n, temperature, tau, seed, dyadic, 200
    )
    # the same environment (logits on the same inputs) and the same training data
    np.testing.assert_array_equal(problem.train_data.x, np.asarray(train_x))
    np.testing.assert_array_equal(problem.train_data.y, np.asarray(train_y))
    np.testing.assert_allclose(problem.logit_fn(train_x), logit_fn(train_x), rtol=1e-6)
    # the same test batches and environment log-likelihoods
    batches = problem.estimator_batches()
    np.testing.assert_array_equal(np.asarray(batches.x), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(batches.y), np.asarray(y))
    np.testing.assert_allclose(batches.env_loglik, env_ll, rtol=1e-5, atol=1e-5)  # float32 sums
    # uniform's KL is exactly mean(log p(y | x)) + tau log 2 on those batches
    uniform = agents.load("uniform")(problem.train_data, problem.prior_knowledge)
    q = problem.evaluate(uniform, ["joint_kl"])
    assert q["kl_estimate"] == pytest.approx(float(np.mean(env_ll)) + tau * math.log(2), abs=1e-5)
    # average_class_probs: the reference feeds the class frequencies in as logits
    logits = jnp.array([jnp.mean(train_y == c) for c in range(2)])
    log_q = jax.nn.log_softmax(logits)[np.asarray(y)].sum(axis=1)
    average = agents.load("average_class_probs")(problem.train_data, problem.prior_knowledge)
    q = problem.evaluate(average, ["joint_kl"])
    assert q["pct_finite_kl"] == 1.0
    assert q["kl_estimate"] == pytest.approx(float(np.mean(env_ll - log_q)), abs=1e-5)


def test_tutorial_numbers_of_classification_2d_75():
    """The reference's tutorial: uniform on classification_2d/75 gives KL 0.134 (std 0.458)
    and test accuracy 0.503; its own algorithm gives 0.134045 on this JAX."""
    q = testbed.evaluate(agents.load("uniform"), generative.load("classification_2d/75"))
    assert q["kl_estimate"] == pytest.approx(0.134045, abs=1e-4)
    assert q["kl_estimate_std"] == pytest.approx(0.458, abs=1e-3)
    assert q["test_acc"] == pytest.approx(0.503, abs=1e-3)


@pytest.mark.parametrize("user_setting", [True, False])
def test_users_jax_setting_is_left_as_it_was(user_setting):
    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", user_setting)
    try:
        problem = generative.load("classification_2d/75", num_test_seeds=50, num_enn_samples=4)
        batches = problem.estimator_batches()
        assert jax.config.jax_threefry_partitionable is user_setting
        # and the problem does not depend on it
        _, (train_x, _), (x, _, _) = reference_problem(2, 10, 0.1, 1, 76, False, 50)
        np.testing.assert_array_equal(problem.train_data.x, np.asarray(train_x))
        np.testing.assert_array_equal(np.asarray(batches.x), np.asarray(x))
    finally:
        jax.config.update("jax_threefry_partitionable", before)
