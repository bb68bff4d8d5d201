"""Neural Testbed environments: sweep grids, id maps, pairing, generator, test designs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed
from testbed.accuracy import accuracy, expected_calibration_error
from testbed.random_mlp import make_random_mlp


def test_sweep_sizes():
    sizes = {
        n: len(generative.sweep_ids(n))
        for n in [
            "classification_2d",
            "classification",
            "classification_2d_test",
            "classification_test",
        ]
    }
    assert sizes == {
        "classification_2d": 420,
        "classification": 360,
        "classification_2d_test": 7,
        "classification_test": 4,
    }


def test_classification_2d_id_map():
    for i in range(420):
        s = generative.problem_settings(f"classification_2d/{i}")
        j = i % 210
        assert (s["tau"], s["num_train"], s["temperature"], s["seed"], s["input_dim"]) == (
            1 if i < 210 else 10,
            [1, 3, 10, 30, 100, 300, 1000][j // 30],
            [0.01, 0.1, 0.5][(j % 30) // 10],
            j + 1,
            2,
        )
        assert s["test_design"] == "gaussian"
    s = generative.problem_settings("classification_2d/75")  # the reference tutorial's problem
    assert (s["num_train"], s["temperature"], s["tau"], s["seed"]) == (10, 0.1, 1, 76)


def test_classification_id_map():
    for i in range(360):
        s = generative.problem_settings(f"classification/{i}")
        j = i % 180
        d = [2, 10, 100][j // 60]
        assert (s["tau"], s["input_dim"], s["num_train"], s["temperature"], s["seed"]) == (
            1 if i < 180 else 10,
            d,
            [1, 10, 100, 1000][(j % 60) // 15] * d,
            [0.01, 0.1, 0.5][(j % 15) // 5],
            j + 1,
        )
        assert s["test_design"] == "dyadic"


def test_test_sweeps_match_reference_filters():
    s2 = [generative.problem_settings(i) for i in generative.sweep_ids("classification_2d_test")]
    assert [s["num_train"] for s in s2] == [1, 3, 10, 30, 100, 300, 1000]
    assert [s["seed"] for s in s2] == [1, 4, 7, 10, 13, 16, 19]
    assert {(s["temperature"], s["tau"]) for s in s2} == {(0.01, 1)}
    s = [generative.problem_settings(i) for i in generative.sweep_ids("classification_test")]
    assert [x["num_train"] for x in s] == [2, 20, 200, 2000]
    assert [x["seed"] for x in s] == [1, 4, 7, 10]
    assert {(x["input_dim"], x["temperature"], x["tau"], x["test_design"]) for x in s} == {
        (2, 0.01, 1, "dyadic")
    }


@pytest.mark.parametrize(
    "marginal, joint",
    [
        ("classification_2d/75", "classification_2d/285"),
        ("classification/70", "classification/250"),
    ],
)
def test_marginal_and_joint_problems_are_paired(marginal, joint):
    a, b = generative.load(marginal), generative.load(joint)
    assert (a.settings.tau, b.settings.tau) == (1, 10)
    np.testing.assert_array_equal(a.train_data.x, b.train_data.x)
    np.testing.assert_array_equal(a.train_data.y, b.train_data.y)
    x = jax.random.normal(jax.random.PRNGKey(0), (5, a.settings.input_dim))
    np.testing.assert_array_equal(a.logit_fn(x), b.logit_fn(x))
    np.testing.assert_array_equal(a._estimator_key, b._estimator_key)


def test_same_id_same_problem_and_different_seeds_differ():
    a, b = generative.load("classification_2d/31"), generative.load("classification_2d/31")
    np.testing.assert_array_equal(a.train_data.x, b.train_data.x)
    c = generative.load("classification_2d/32")
    assert not np.array_equal(a.train_data.x, c.train_data.x)


def test_generator_initialisation():
    d = 10
    net = make_random_mlp(d, 2)
    params = jax.vmap(lambda k: net.init(k, jnp.zeros((1, d))))(
        jax.random.split(jax.random.PRNGKey(0), 200)
    )
    w0 = np.asarray(params["linear_0"]["w"])
    w1 = np.asarray(params["linear_1"]["w"])
    # fan-in truncated normal at 2 sd, no variance correction: |w| <= 2 / sqrt(fan_in),
    # sd = 0.8796 / sqrt(fan_in) (the sd of N(0,1) truncated to [-2, 2]).
    assert np.abs(w0).max() <= 2 / math.sqrt(d) + 1e-6
    assert np.abs(w1).max() <= 2 / math.sqrt(50) + 1e-6
    assert w1.std() * math.sqrt(50) == pytest.approx(0.8796, rel=0.02)
    b0 = np.asarray(params["linear_0"]["b"])
    assert b0.std() * math.sqrt(d) == pytest.approx(1.0, rel=0.05)
    assert not np.any(params["linear_1"]["b"]) and not np.any(params["logits"]["b"])


def test_dyadic_batches_repeat_two_anchors():
    p = generative.load("classification/200")  # d = 2, tau = 10, dyadic
    x, y, _ = p.test_batches(jax.random.PRNGKey(0), 50, 10)
    distinct = [len(np.unique(np.asarray(xb), axis=0)) for xb in x]
    assert max(distinct) <= 2 and np.mean(np.array(distinct) == 2) > 0.9
    g = generative.load("classification_2d/250")
    xg, _, _ = g.test_batches(jax.random.PRNGKey(0), 50, 10)
    assert all(len(np.unique(np.asarray(xb), axis=0)) == 10 for xb in xg)


def test_labels_follow_the_environment():
    p = generative.load("classification_2d/205")  # T = 0.5, n = 1000: noisy labels
    x, y = p.train_data
    probs = np.asarray(jax.nn.softmax(p.logit_fn(x)))[:, 1]
    # mean label vs mean probability: within 4 binomial standard errors
    se = math.sqrt(np.sum(probs * (1 - probs))) / len(y)
    assert abs(y.mean() - probs.mean()) < 4 * se


def test_accuracy_and_ece_against_direct_formula():
    probs = np.array([[0.9, 0.1], [0.65, 0.35], [0.2, 0.8], [0.45, 0.55], [0.95, 0.05]])
    y = np.array([0, 1, 1, 0, 0])
    assert accuracy(probs, y) == pytest.approx(3 / 5)
    # bins (width 0.1) of confidence: 0.9->bin 9, 0.65->6, 0.8->8, 0.55->5, 0.95->9
    expected = (abs(2 - 1.85) + abs(0 - 0.65) + abs(1 - 0.8) + abs(0 - 0.55)) / 5
    assert expected_calibration_error(probs, y) == pytest.approx(expected)


def test_evaluate_reports_all_metrics():
    q = testbed.evaluate(agents.load("uniform"), generative.load("classification_test/1"))
    for key in [
        "kl_estimate",
        "kl_estimate_std",
        "pct_finite_kl",
        "test_acc",
        "test_ece",
        "train_acc",
        "train_ece",
        "train_seconds",
        "evaluation_seconds",
    ]:
        assert key in q and math.isfinite(q[key])


def test_baselines_average_class_probs_and_prior():
    p = generative.load("classification_2d/150")  # n = 300
    y = p.train_data.y
    freqs = np.bincount(y, minlength=2) / len(y)
    # the reference's baseline: the frequencies are the logits
    sampler = agents.load("average_class_probs")(p.train_data, p.prior_knowledge)
    probs = np.asarray(jax.nn.softmax(sampler(jnp.zeros((3, 2)), jax.random.PRNGKey(0))))
    np.testing.assert_allclose(probs[0], np.exp(freqs) / np.exp(freqs).sum(), rtol=1e-5)
    # the log form: the (pseudo-counted) frequencies themselves
    for pseudo in (0.0, 1.0):
        agent = agents.load("average_class_probs", form="log", pseudo_count=pseudo)
        sampler = agent(p.train_data, p.prior_knowledge)
        probs = np.asarray(jax.nn.softmax(sampler(jnp.zeros((3, 2)), jax.random.PRNGKey(0))))
        want = (np.bincount(y, minlength=2) + pseudo) / (len(y) + 2 * pseudo)
        np.testing.assert_allclose(probs[0], want, rtol=1e-5)
    prior = agents.load("prior")(p.train_data, p.prior_knowledge)
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 2))
    k1, k2 = jax.random.split(jax.random.PRNGKey(2))
    np.testing.assert_array_equal(prior(x, k1), prior(x, k1))
    assert not np.allclose(prior(x, k1), prior(x, k2))
