"""C2ST with sbibm's semantics: the JAX MLP against scikit-learn, and the statistic itself."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.model_selection import KFold
from sklearn.neural_network import MLPClassifier

from testbed.errors import InputError
from testbed.metrics import MLPConfig, c2st, c2st_auc, c2st_scores
from testbed.metrics.c2st import kfold_test_rows, roc_auc, z_score
from testbed.metrics.mlp import glorot_init, train_many

N = 1000  # per class; all fast c2st tests share this shape (one compilation)


def gaussians(shift: float, n: int = N, d: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, d)).astype(np.float32)
    b = (rng.standard_normal((n, d)) + shift).astype(np.float32)
    return a, b


def sbibm_mlp(d: int, **kw) -> MLPClassifier:
    return MLPClassifier(
        activation="relu",
        hidden_layer_sizes=(10 * d, 10 * d),
        max_iter=10000,
        solver="adam",
        random_state=1,
        **kw,
    )


def test_folds_are_sklearns_kfold():
    for n, k, seed in [(20, 5, 1), (23, 5, 7), (101, 3, 0)]:
        ours = kfold_test_rows(n, k, seed)
        theirs = [t for _, t in KFold(k, shuffle=True, random_state=seed).split(np.zeros(n))]
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(np.sort(a), b)


def test_init_is_sklearns():
    """Same first weights as MLPClassifier(random_state=3): a tiny lr leaves them unchanged."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MLPClassifier((7, 5), learning_rate_init=1e-12, max_iter=1, random_state=3)
        clf.fit(x, y)
    ours = glorot_init(3, (7, 5), 3)
    theirs = [a for pair in zip(clf.coefs_, clf.intercepts_) for a in pair]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-9)


@pytest.mark.parametrize("hidden", [(8, 8), (6,), (5, 4, 3)])
def test_full_batch_training_matches_sklearn_step_by_step(hidden):
    """With one minibatch per epoch the shuffle is irrelevant: loss, L2, Adam and the stopping
    rule must then reproduce scikit-learn's weights (float32 rounding only) and epoch count
    (this also checks the hand-written gradient for one, two and three hidden layers)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((120, 2)).astype(np.float32)
    y = (x[:, 0] + 0.5 * rng.standard_normal(120) > 0).astype(int)
    cfg = MLPConfig(hidden_layers=hidden, max_iter=30, tol=0.0, n_iter_no_change=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MLPClassifier(hidden, max_iter=30, tol=0.0, random_state=5).fit(x, y)
    import jax

    ours = train_many(
        cfg, x, y[None].astype(np.float32), [np.arange(120)], init_seeds=[5], key=jax.random.key(0)
    )
    assert ours.n_iter[0] == clf.n_iter_ == 30
    np.testing.assert_allclose(ours.loss[0], clf.loss_, rtol=1e-4)
    for (w, b), cw, cb in zip(ours.params, clf.coefs_, clf.intercepts_):
        np.testing.assert_allclose(np.asarray(w[0]), cw, atol=2e-5)
        np.testing.assert_allclose(np.asarray(b[0]), cb, atol=2e-5)
    # the stopping rule: a huge tol makes every epoch after the first 'no improvement';
    # scikit-learn stops once the count exceeds n_iter_no_change: n_iter_no_change + 2 epochs
    cfg_stop = MLPConfig(hidden_layers=(8, 8), tol=10.0, n_iter_no_change=4)
    clf = MLPClassifier((8, 8), tol=10.0, n_iter_no_change=4, random_state=5).fit(x, y)
    ours = train_many(
        cfg_stop, x, y[None].astype(np.float32), [np.arange(120)], init_seeds=[5],
        key=jax.random.key(0),
    )  # fmt: skip
    assert ours.n_iter[0] == clf.n_iter_ == 6


@pytest.mark.parametrize("early_stopping", [False, True])
def test_training_does_not_depend_on_chunking(early_stopping):
    """Chunks of 1, 4 or all 13 models (padded, repacked as models stop, run in threads)
    train every model the same way: same epoch counts, weights equal up to float rounding."""
    import jax

    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 3)).astype(np.float32)
    y = (rng.random((13, 600)) < 0.5).astype(np.float32)
    y[:, :300] = x[:300, 0] > 0
    rows = [rng.choice(600, 500, replace=False) for _ in range(13)]
    cfg = MLPConfig(
        hidden_layers=(10, 10),
        max_iter=60,
        tol=3e-3,
        n_iter_no_change=3,
        early_stopping=early_stopping,
    )
    runs = [
        train_many(cfg, x, y, rows, init_seeds=range(13), key=jax.random.key(3), chunk_size=c)
        for c in (13, 4, 1)
    ]
    assert len(set(runs[0].n_iter.tolist())) > 1  # models stopped at different epochs
    for other in runs[1:]:
        np.testing.assert_array_equal(other.n_iter, runs[0].n_iter)
        for a, b in zip(
            jax.tree_util.tree_leaves(other.params), jax.tree_util.tree_leaves(runs[0].params)
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)
    # a raw uint32 key gives the same shuffles as the typed key with the same data
    raw = train_many(cfg, x, y, rows, init_seeds=range(13), key=jax.random.PRNGKey(3))
    np.testing.assert_array_equal(raw.n_iter, runs[0].n_iter)
    key = jax.random.key(3)
    with pytest.raises(InputError, match="chunk_size"):
        train_many(cfg, x, y, rows, init_seeds=range(13), key=key, chunk_size=0)
    with pytest.raises(InputError, match="train_rows"):
        train_many(cfg, x, y[:0], [], init_seeds=[], key=key)
    with pytest.raises(InputError, match=r"y: got shape \(12, 600\)"):
        train_many(cfg, x, y[:12], rows, init_seeds=range(13), key=key)
    with pytest.raises(InputError, match="x: got 2 per-model inputs"):
        train_many(cfg, np.stack([x, x]), y, rows, init_seeds=range(13), key=key)


def test_same_distribution_is_half():
    # Each of the 2N points is held out once: under H0 the mean accuracy has sd
    # sqrt(0.25 / 2N) = 0.011; 4 sd = 0.045 (overfitting only pushes it below 0.5).
    a, b = gaussians(0.0)
    assert abs(c2st(a, b) - 0.5) < 0.045


def test_separated_distributions_are_one():
    # shift 5 per dimension: the Bayes accuracy is Phi(5 sqrt(2) / 2) = 0.9998
    a, b = gaussians(5.0, seed=1)
    assert c2st(a, b) > 0.99
    assert c2st_auc(a, b) > 0.995


def test_agrees_with_sklearn_sbibm_settings():
    """Same data, folds and initial weights as sbibm's sklearn C2ST: accuracy within 0.01."""
    a, b = gaussians(0.4, seed=2)
    ours = c2st(a, b)
    theirs = c2st(a, b, classifier=sbibm_mlp(2))
    # Bayes accuracy for a shift 0.4 per dim: Phi(0.4 sqrt(2) / 2) = 0.61
    assert 0.57 < ours < 0.65
    assert abs(ours - theirs) < 0.01


@pytest.mark.slow
@pytest.mark.parametrize(
    "shift,d", [(0.0, 2), (0.3, 5), (1.0, 2), pytest.param(0.2, 10, marks=pytest.mark.heavy)]
)
def test_agrees_with_sklearn_more_cases(shift, d):
    """Mean over 8 seeds (folds, initial weights and shuffles) within 0.01 of scikit-learn's.

    Our minibatch shuffles are not scikit-learn's, so one seed's accuracies differ by
    training noise: at n = 2000 a set the paired difference had sd 0.011 (d = 5, shift 0.3,
    measured over 8 seeds), a coin flip against 0.01. Over 8 seeds its standard error is
    0.011 / sqrt(8) = 0.004, and 0.01 is 2.5 of them."""
    from threadpoolctl import threadpool_limits

    a, b = gaussians(shift, n=2000, d=d, seed=3)
    ours, theirs = [], []
    for seed in range(1, 9):
        clf = sbibm_mlp(d)
        clf.set_params(random_state=seed)
        with threadpool_limits(1):  # multi-threaded BLAS on busy cores slows sklearn 10-100x
            theirs.append(c2st(a, b, seed=seed, classifier=clf))
        ours.append(c2st(a, b, seed=seed))
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.01, (ours, theirs)


def test_z_scoring_uses_reference_stats_and_guards_zero_std():
    ref = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]], np.float32)
    zr, zs = z_score(ref, ref + 1)
    np.testing.assert_allclose(zr[:, 0], [-1, 0, 1])  # unbiased std = 2
    np.testing.assert_allclose(zr[:, 1], 0)  # zero std -> divided by 1
    np.testing.assert_allclose(zs[:, 1], 1)


def test_roc_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.standard_normal(300) + y, 1)  # with ties
    assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_accepts_torch_and_sklearn_classifiers():
    import torch
    from sklearn.linear_model import LogisticRegression

    a, b = gaussians(3.0, n=200, seed=4)
    # logistic regression: Bayes-optimal here (equal covariances), accuracy Phi(3 sqrt 2/2)
    s = c2st_scores(torch.as_tensor(a), torch.as_tensor(b), classifier=LogisticRegression())
    assert s.shape == (5,) and 0.93 < s.mean() < 1.0


@pytest.mark.parametrize(
    "reference,samples,kwargs,field",
    [
        (np.zeros((20, 2)), np.zeros((20, 3)), {}, "samples"),
        (np.zeros((3, 2)), np.zeros((20, 2)), {}, "reference"),
        (np.zeros((20, 2)), np.full((20, 2), np.nan), {}, "samples"),
        (np.full((20, 2), np.inf), np.zeros((20, 2)), {}, "reference"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"n_folds": 1}, "n_folds"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"scoring": "f1"}, "scoring"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"classifier": "svm"}, "classifier"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"n_folds": 2.5}, "n_folds: got 2.5"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"seed": 1.5}, "seed: got 1.5"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"seed": -1}, "seed: got -1"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"seed": None}, "seed: got None"),
        (np.zeros((20, 2)), np.zeros((20, 2)), {"mlp_config": {}}, "mlp_config: got dict"),
        # sbibm's keyword: named, with ours, instead of a TypeError about c2st_scores
        (np.zeros((20, 2)), np.zeros((20, 2)), {"z_score": False}, "'z_score' is 'z_score_data'"),
    ],
)
def test_bad_input_names_the_argument(reference, samples, kwargs, field):
    with pytest.raises(InputError, match=field):
        c2st(reference, samples, **kwargs)


def test_c2st_pvalue_is_the_binomial_tail():
    """p = P(Bin(n, 1/2) >= n * accuracy), n = both sample sizes, summed directly."""
    from math import comb

    from testbed.metrics import c2st_pvalue

    for acc, n_ref, n_smp in ((0.5, 50, 50), (0.56, 100, 100), (0.8, 10, 10), (0.0, 3, 3)):
        n = n_ref + n_smp
        k = round(acc * n)
        direct = sum(comb(n, j) for j in range(k, n + 1)) / 2**n
        assert abs(c2st_pvalue(acc, n_ref, n_smp) - direct) < 1e-12
    for n_ref, n_smp in ((-10, 1000), (10.5, 10), (0, 10), (True, 10)):
        with pytest.raises(InputError, match="num_reference|num_samples"):
            c2st_pvalue(0.6, n_ref, n_smp)
    with pytest.raises(InputError, match="accuracy"):
        c2st_pvalue(1.2, 10, 10)


def test_hand_written_gradient_matches_autodiff_on_a_short_batch():
    """The trainer's gradient (feature-major, by hand) equals autodiff of scikit-learn's
    loss, mean log-loss + 0.5 alpha sum(W^2) / count, with the padded rows masked out."""
    import jax
    import jax.numpy as jnp

    from testbed.metrics.mlp import _loss_and_grad, _to_trainer_layout, logits

    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 3)).astype(np.float32)
    y = (rng.random(9) < 0.5).astype(np.float32)
    wb = (np.arange(9) < 7).astype(np.float32)  # the last two rows are padding
    arrays = [a + 0.1 for a in glorot_init(3, (6, 4), 0)]  # biases away from zero
    params = tuple(zip(arrays[::2], arrays[1::2]))
    alpha = 0.3

    def reference(p):
        z = logits(p, x[:7])
        nll = -(y[:7] * jax.nn.log_sigmoid(z) + (1 - y[:7]) * jax.nn.log_sigmoid(-z))
        return jnp.mean(nll) + 0.5 * alpha * sum(jnp.sum(w**2) for w, _ in p) / 7

    want_loss, want = jax.value_and_grad(reference)(params)
    layout = _to_trainer_layout(arrays)
    loss, got = _loss_and_grad(tuple(zip(layout[::2], layout[1::2])), x.T, y, wb, alpha)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    for (gw, gb), (ww, wbias) in zip(got, want):
        np.testing.assert_allclose(np.asarray(gw).T, ww, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(gb, wbias, rtol=1e-5, atol=1e-7)


def test_default_chunk_size_balances_cores_on_cpu_and_batches_wide_on_accelerators(
    monkeypatch,
):
    import testbed.metrics.mlp as mlp

    monkeypatch.setattr(mlp, "thread_budget", lambda: 2)  # two cores
    assert [mlp.default_chunk_size(m) for m in (1, 5, 8, 16, 101)] == [1, 1, 2, 4, 8]
    monkeypatch.setattr(mlp.jax, "default_backend", lambda: "gpu")
    assert [mlp.default_chunk_size(m) for m in (1, 5, 101, 500)] == [1, 5, 101, 128]


def test_bucket_sizes():
    """Sizes up to 16 are kept; above, m * 2^k with m < 16: at most 12.5 % padding."""
    from testbed.metrics.mlp import bucket

    assert [bucket(n) for n in (1, 2, 15, 16, 17, 80, 81, 20_000)] == [
        1, 2, 15, 16, 18, 80, 88, 20_480,
    ]  # fmt: skip
    sizes = [bucket(n) for n in range(1, 5000)]
    assert all(n <= b <= 1.125 * n for n, b in zip(range(1, 5000), sizes))
    assert sizes == sorted(sizes) and len(set(sizes)) < 150  # few programs for 5,000 sizes


@pytest.mark.parametrize("early_stopping", [False, True])
def test_padding_to_a_bucket_changes_nothing(monkeypatch, early_stopping):
    """The same models trained with no padding and with heavy padding (rows of x, each
    model's rows and its minibatches, validation rows, predictions): same epoch counts,
    same weights up to float rounding, same predictions."""
    import jax

    import testbed.metrics.mlp as mlp

    rng = np.random.default_rng(1)
    x = rng.standard_normal((301, 2)).astype(np.float32)
    y = (rng.random((5, 301)) < 0.5).astype(np.float32)
    y[:, :150] = x[:150, 0] > 0
    rows = [rng.choice(301, 241 - i, replace=False) for i in range(5)]  # uneven models
    cfg = MLPConfig(
        hidden_layers=(8, 8), batch_size=32, max_iter=40, tol=3e-3, n_iter_no_change=3,
        early_stopping=early_stopping,
    )  # fmt: skip
    shapes, program = [], mlp.EPOCHS.program

    def recorded(args, static):  # the padded shapes the compiled epoch sees
        hp, x_chunk, data, state = args
        shapes.append((x_chunk.shape[-2], data.y.shape[-1], data.rows.shape[-1]))
        return program(args, static)

    monkeypatch.setattr(mlp.EPOCHS, "program", recorded)
    runs = []
    for size in (lambda n: n, lambda n: 2 * n + 3):  # none; more than any bucket
        monkeypatch.setattr(mlp, "bucket", size)
        trained = train_many(cfg, x, y, rows, init_seeds=range(5), key=7)
        runs.append((trained, trained.prob_class1(x)))
    assert len(set(runs[0][0].n_iter.tolist())) > 1
    assert shapes[0][:2] == (301, 301) and shapes[-1][:2] == (605, 605)
    assert shapes[-1][2] > shapes[0][2]  # minibatches padded too
    (first, prob), *others = runs
    for trained, other_prob in others:
        np.testing.assert_array_equal(trained.n_iter, first.n_iter)
        for a, b in zip(
            jax.tree_util.tree_leaves(trained.params), jax.tree_util.tree_leaves(first.params)
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
        assert other_prob.shape == (5, 301)
        np.testing.assert_allclose(other_prob, prob, rtol=1e-6, atol=1e-7)
    # an integer key is jax.random.PRNGKey(key): the same shuffles
    typed = train_many(cfg, x, y, rows, init_seeds=range(5), key=jax.random.PRNGKey(7))
    np.testing.assert_array_equal(typed.n_iter, first.n_iter)


def test_c2st_accuracy_is_the_same_on_and_off_a_bucket_edge(monkeypatch):
    """A C2ST whose pooled size lands on a bucket edge (no padding) and the same C2ST
    padded to the next bucket: the same accuracy and AUC for the seed."""
    import testbed.metrics.mlp as mlp

    a, b = gaussians(0.5, n=320, d=2, seed=3)  # 640 = 10 * 2^6: an edge, no padding
    assert mlp.bucket(640) == 640
    cfg = MLPConfig(hidden_layers=(8, 8), max_iter=50)
    edge = c2st_scores(a, b, mlp_config=cfg), c2st_scores(a, b, mlp_config=cfg, scoring="roc_auc")
    bucket = mlp.bucket
    monkeypatch.setattr(mlp, "bucket", lambda n: bucket(n + 1))  # the next bucket up
    padded = c2st_scores(a, b, mlp_config=cfg), c2st_scores(a, b, mlp_config=cfg, scoring="roc_auc")
    for want, got in zip(edge, padded):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
