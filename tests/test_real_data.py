"""Real-data problems: datasets, preprocessing, dyadic batches, joint NLL, ids, TFDS path."""

import json
import math

import jax
import numpy as np
import pytest

import agents
import generative
import testbed
from generative.real_data import datasets, preprocessing, problems, tfds_loader
from generative.real_data.problems import RealDataProblem, RealDataSettings
from testbed.errors import InputError

tfds = pytest.importorskip("tensorflow_datasets")


def small(dataset, tau, seed=1, **kw):
    """A real-data problem with a cheaper estimator (N = 200 batches, M = 100 samples)."""
    kw = {"num_test_seeds": 200, "num_enn_samples": 100, **kw}
    return RealDataProblem(RealDataSettings(dataset=dataset, tau=tau, seed=seed, **kw))


def uniform_sampler(num_classes):
    return lambda x, key: jax.numpy.zeros((x.shape[0], num_classes), jax.numpy.float32)


# Datasets.


def test_tfds_table_is_the_reference_table():
    # (name, classes, input dim, n_train, n_test) from neural_testbed/real_data/datasets.py
    expected = [
        ("iris", 3, 4, 120, 30),
        ("wine_quality", 11, 11, 3918, 980),
        ("german_credit_numeric", 2, 24, 800, 200),
        ("cmaterdb", 10, 3072, 5000, 1000),
        ("mnist", 10, 784, 60000, 10000),
        ("emnist/digits", 10, 784, 240000, 40000),
        ("emnist/letters", 37, 784, 88800, 14800),
        ("fashion_mnist", 10, 784, 60000, 10000),
        ("mnist_corrupted/shot_noise", 10, 784, 60000, 10000),
        ("cifar10", 10, 3072, 50000, 10000),
    ]
    got = [
        (s.source_name, s.num_classes, s.input_dim, s.num_train, s.num_test)
        for s in datasets.TFDS_DATASETS
    ]
    assert got == expected
    assert all(s.name == "tfds/" + s.source_name for s in datasets.TFDS_DATASETS)


@pytest.mark.parametrize("spec", datasets.SKLEARN_DATASETS, ids=lambda s: s.name)
def test_offline_dataset_shapes_classes_and_split(spec):
    raw = datasets.load_raw(spec.name)
    assert raw.x_train.shape == (spec.num_train, spec.input_dim)
    assert raw.x_test.shape == (spec.num_test, spec.input_dim)
    assert raw.y_train.shape == (spec.num_train,) and raw.y_test.shape == (spec.num_test,)
    # every class is present in the training split and labels are 0..C-1
    assert set(np.unique(raw.y_train)) == set(range(spec.num_classes))
    assert raw.y_test.min() >= 0 and raw.y_test.max() < spec.num_classes
    # the split is a partition of the dataset and is the same on every call (fixed seed)
    train, test = datasets.offline_split(spec.num_train + spec.num_test)
    assert len(np.intersect1d(train, test)) == 0
    assert len(train) + len(test) == spec.num_train + spec.num_test
    again = datasets.load_sklearn.__wrapped__(spec.name)
    np.testing.assert_array_equal(again.x_test, raw.x_test)


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(InputError, match="dataset: got 'mnistt'.*allowed: one of: iris"):
        datasets.get_spec("mnistt")


# Preprocessing on a tiny array.


def test_per_example_standardisation_tiny_array():
    x = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    out = preprocessing.standardize_examples(x)
    # row 1: mean 2, population variance 2/3 -> (x - 2) / sqrt(2/3 + 1e-8)
    np.testing.assert_allclose(out[0], np.array([-1.0, 0.0, 1.0]) / math.sqrt(2 / 3 + 1e-8))
    np.testing.assert_array_equal(out[1], [0.0, 0.0, 0.0])  # constant row -> 0, not NaN


def test_per_feature_standardisation_tiny_array():
    train = np.array([[0.0, 5.0], [2.0, 5.0]])
    test = np.array([[4.0, 7.0]])
    a, b = preprocessing.preprocess(train, test, "structured", "feature")
    # feature 0: mean 1, std 1; feature 1: constant 5 (std 0 -> divided by sqrt(1e-8))
    np.testing.assert_allclose(a[:, 0], [-1.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(a[:, 1], [0.0, 0.0])
    np.testing.assert_allclose(b[0], [3.0, 2.0 / math.sqrt(1e-8)], rtol=1e-6)


def test_image_pixels_scaled_before_standardising():
    x = np.array([[0, 255, 51]], np.uint8)
    np.testing.assert_allclose(preprocessing.to_float(x, "image"), [[0.0, 1.0, 0.2]])
    # per-example standardisation is scale-free up to the epsilon
    a, _ = preprocessing.preprocess(x, x, "image", "example")
    np.testing.assert_allclose(a, preprocessing.standardize_examples(x / 255.0), rtol=1e-6)


def test_chunked_preprocessing_equals_one_pass():
    raw = datasets.load_raw("digits")
    for mode in ("example", "feature"):
        a = preprocessing.preprocess(raw.x_train, raw.x_test, "structured", mode, chunk=7)
        b = preprocessing.preprocess(raw.x_train, raw.x_test, "structured", mode, chunk=10**6)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)
    mean, std = preprocessing.feature_statistics(raw.x_train, chunk=5)
    np.testing.assert_allclose(mean, raw.x_train.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, raw.x_train.std(axis=0), rtol=1e-10, atol=1e-12)


def test_feature_option_end_to_end_standardises_training_features():
    p = small("wine", 1, standardize="feature")
    x = np.asarray(p.train_data.x, np.float64)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=0), 1.0, atol=1e-5)
    q = small("wine", 1)  # default: every example standardised across its own features
    xq = np.asarray(q.train_data.x, np.float64)
    np.testing.assert_allclose(xq.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(xq.std(axis=1), 1.0, atol=1e-5)


# Joint NLL.


@pytest.mark.parametrize("dataset, tau", [("iris", 1), ("iris", 10), ("digits", 10)])
def test_uniform_joint_nll_is_tau_log_c(dataset, tau):
    p = small(dataset, tau)
    c = p.spec.num_classes
    q = p.evaluate(uniform_sampler(c))
    # every batch has log-lik -tau log C exactly; float32 rounding only
    assert q["joint_nll"] == pytest.approx(tau * math.log(c), rel=1e-6)
    assert q["joint_nll_std"] < 1e-5 and q["pct_finite_nll"] == 1.0
    assert q["test_marginal_nll"] == pytest.approx(math.log(c), rel=1e-6)
    assert q["test_ece"] == pytest.approx(abs(q["test_acc"] - 1 / c), abs=1e-6)


def test_uniform_through_registry_full_estimator():
    # the default problem (N = 1000, M = 1000) via the public API
    q = testbed.evaluate(agents.load("uniform"), generative.load("real/iris/10/1"))
    assert q["joint_nll"] == pytest.approx(10 * math.log(3), rel=1e-6)
    assert q["train_seconds"] >= 0 and q["evaluation_seconds"] > 0


def test_mixture_joint_nll_matches_closed_form():
    """Two x-independent functions a, b: NLL_i = -log(w prod_t a[y_t] + (1-w) prod_t b[y_t])."""
    p = small("iris", 10, seed=3)
    a = np.array([0.7, 0.2, 0.1])
    b = np.array([0.1, 0.3, 0.6])
    logits = jax.numpy.log(jax.numpy.asarray(np.stack([a, b]), jax.numpy.float32))

    def sampler(x, key):
        pick = jax.random.bernoulli(key).astype(jax.numpy.int32)
        return jax.numpy.broadcast_to(logits[pick], (x.shape[0], 3))

    batches = p.estimator_batches()
    y, keys = batches.y, batches.keys
    w = 1.0 - np.mean(np.asarray(jax.vmap(jax.random.bernoulli)(keys)))  # share of function a
    log_a = np.log(a)[y].sum(axis=1)
    log_b = np.log(b)[y].sum(axis=1)
    exact = -np.logaddexp(np.log(w) + log_a, np.log1p(-w) + log_b)
    q = p.evaluate(sampler)
    assert q["joint_nll"] == pytest.approx(exact.mean(), rel=1e-5)
    assert q["joint_nll_std"] == pytest.approx(exact.std(), rel=1e-4)
    assert "kl_estimate" not in q  # real data has no true likelihood: no KL
    # the joint NLL of a mixture is below the sum of its marginals' NLLs on the same labels
    marginal = w * a + (1 - w) * b
    assert q["joint_nll"] < -np.log(marginal)[y].sum(axis=1).mean()


def test_oracle_is_rejected_on_real_data():
    with pytest.raises(InputError, match="no oracle predictive"):
        testbed.evaluate(agents.load("oracle"), small("iris", 1))


def test_zero_probability_is_clipped_and_flagged():
    # puts all mass on class 0: batches containing another label have NLL +inf
    p = small("iris", 1)
    sampler = lambda x, key: jax.numpy.tile(
        jax.numpy.array([0.0, -jax.numpy.inf, -jax.numpy.inf]), (x.shape[0], 1)
    )  # noqa: E501
    q = p.evaluate(sampler)
    y = p.estimator_batches().y
    assert q["pct_finite_nll"] == pytest.approx(np.mean(y[:, 0] == 0))
    assert q["joint_nll"] == pytest.approx(0.0, abs=1e-6)  # finite ones are 0, inf -> max 0


# Dyadic batches.


def test_dyadic_batch_structure():
    p = small("iris", 10, num_test_seeds=1000)
    idx = p.test_indices(jax.random.PRNGKey(0), 1000, 10)
    assert idx.shape == (1000, 10)
    assert idx.min() >= 0 and idx.max() < len(p.y_test)
    distinct = np.array([len(set(row)) for row in idx])
    assert distinct.max() <= 2  # kappa = 2 anchors
    # P(one distinct) = P(same anchor) + P(different anchors, all picks equal)
    #   = 1/30 + (29/30) * 2 * 2^-10 ~ 0.0352; sd of the share over 1000 batches ~ 0.0058,
    # so [0.01, 0.065] is a > 4 sd band.
    assert 0.01 < np.mean(distinct == 1) < 0.065
    # all 30 test rows serve as anchors (P(one missing) <= 30 (29/30)^2000 ~ 1e-28)
    assert set(np.unique(idx)) == set(range(30))
    x, y = p.test_batches(jax.random.PRNGKey(0), 1000, 10)
    np.testing.assert_array_equal(x, p.x_test[idx])
    np.testing.assert_array_equal(y, p.y_test[idx])


def test_problem_is_reproducible_and_seed_only_moves_the_estimator():
    a, b, c = small("iris", 10, seed=1), small("iris", 10, seed=1), small("iris", 10, seed=2)
    np.testing.assert_array_equal(a.estimator_batches().y, b.estimator_batches().y)
    assert not np.array_equal(a.estimator_batches().y, c.estimator_batches().y)
    np.testing.assert_array_equal(a.train_data.x, c.train_data.x)


# Ids and sweeps.


def test_ids_settings_and_sweeps():
    s = generative.problem_settings("real/tfds/emnist/letters/10/3/1000")
    assert (s["dataset"], s["tau"], s["seed"], s["num_train"]) == (
        "tfds/emnist/letters",
        10,
        3,
        1000,
    )
    assert (s["input_dim"], s["num_classes"], s["source"]) == (784, 37, "tfds")
    s = generative.problem_settings("real/iris/1/2")
    assert (s["num_train"], s["source"], s["standardize"], s["kappa"]) == (
        120,
        "sklearn",
        "example",
        2,
    )
    assert len(generative.sweep_ids("real")) == 100  # 2 tau x 10 datasets x 5 seeds
    assert len(generative.sweep_ids("real_offline")) == 40
    ids = generative.sweep_ids("real")
    assert ids[0] == "real/tfds/iris/1/1" and ids[-1] == "real/tfds/cifar10/10/5"
    assert problems.train_sizes(120) == [1, 10, 100, 120]
    assert problems.train_sizes(100) == [1, 10, 100]
    assert problems.train_sizes(240000) == [1, 10, 100, 1000, 10000, 100000, 240000]
    variant = generative.sweep_ids("real_offline_variant_data")
    assert (
        len(variant)
        == len(set(variant))
        == 2 * 5 * sum(len(problems.train_sizes(d.num_train)) for d in datasets.SKLEARN_DATASETS)
    )
    for pid in variant[:: len(variant) // 7]:
        assert generative.problem_settings(pid)["num_train"] == int(pid.rsplit("/", 1)[1])


def test_real_sweep_runs_and_ranks_on_the_leaderboard(tmp_path):
    """A real-data sweep goes through the leaderboard like the synthetic ones: jobs, the
    results store, one joint-NLL ranking table per tau normalised by uniform (full N = M =
    1000), apart from the synthetic problems' joint-KL tables."""
    from leaderboard import build
    from leaderboard.execution.executors import InlineExecutor
    from leaderboard.execution.jobs import sweep_jobs
    from leaderboard.execution.runner import run_sweep
    from leaderboard.store import ResultsStore

    path = tmp_path / "results.db"
    jobs = sweep_jobs(["uniform", "average_class_probs"], "real_offline_test", seeds=[0])
    with ResultsStore(path) as store:
        summary = run_sweep(jobs, store, InlineExecutor())
    assert (summary.ok, summary.failed) == (4, 0)
    board = build(path, sweep="real_offline_test")
    assert board.families() == ["real"] and set(board.tables_of("real")) == {1, 10}
    for tau, table in board.tables_of("real").items():
        rows = table.set_index("agent")
        assert rows.loc["uniform", "mean_nll"] == pytest.approx(tau * math.log(3), rel=1e-6)
        assert rows.loc["uniform", "normalized_nll"] == pytest.approx(1.0)
        # iris's training classes are nearly balanced: class frequencies ~ uniform
        assert rows.loc["average_class_probs", "normalized_nll"] == pytest.approx(1.0, abs=0.05)


# TFDS path, without network: TFDS's mock data source (no TensorFlow needed).


def test_tfds_mock_structured_and_image(tmp_path):
    with tfds.testing.mock_data(num_examples=150):  # the mock stands in for preparing
        raw = datasets.load_raw("tfds/iris", data_dir=str(tmp_path), download=True)
    # structured: train = first 120 rows of `train`, test = its last 30 rows
    assert raw.x_train.shape == (120, 4) and raw.x_test.shape == (30, 4)
    assert raw.y_train.max() < 3
    with tfds.testing.mock_data(num_examples=40):
        p = RealDataProblem(
            RealDataSettings(
                "tfds/mnist", tau=10, seed=1, num_train=25, num_test_seeds=50, num_enn_samples=20
            ),
            data_dir=str(tmp_path),
            download=True,
        )
    assert p.train_data.x.shape == (25, 784) and p.x_test.shape == (40, 784)
    assert p.train_data.x.dtype == np.float32
    np.testing.assert_allclose(p.train_data.x.mean(axis=1), 0.0, atol=1e-5)
    q = p.evaluate(uniform_sampler(10))
    assert q["joint_nll"] == pytest.approx(10 * math.log(10), rel=1e-6)
    # the arrays were cached: a second load needs no TFDS (no mock active here)
    cached = tfds_loader.cache_path(datasets.get_spec("tfds/mnist"), tmp_path)
    assert cached.exists()
    again = datasets.load_raw("tfds/mnist", data_dir=str(tmp_path))
    assert again.x_train.shape == (40, 784) and again.x_train.dtype == np.uint8


def test_tfds_not_prepared_says_how_to_prepare(tmp_path):
    with pytest.raises(InputError) as e:
        datasets.load_raw("tfds/mnist", data_dir=str(tmp_path), download=False)
    msg = str(e.value)
    assert f"not prepared in {tmp_path} (the data_dir given)" in msg
    assert f"tfds build mnist --data_dir={tmp_path} --file_format=array_record" in msg
    assert "-e '.[tf]'" in msg and "TESTBED_TFDS_DOWNLOAD=1" in msg
    assert "\n" not in msg


def test_tfds_is_offline_by_default_and_says_where_it_looked(tmp_path, monkeypatch):
    """From an id, a dataset that is not prepared is an error naming $TFDS_DATA_DIR (or
    ~/tensorflow_datasets): no download is tried unless TESTBED_TFDS_DOWNLOAD=1."""
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TESTBED_TFDS_DOWNLOAD", raising=False)
    tried = []
    monkeypatch.setattr(tfds, "builder", lambda *a, **k: tried.append(a))
    with pytest.raises(InputError) as e:
        generative.load("real/tfds/mnist/1/1")
    msg = str(e.value)
    assert f"not prepared in {tmp_path} ($TFDS_DATA_DIR)" in msg and not tried
    monkeypatch.delenv("TFDS_DATA_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))  # the default folder, ~/tensorflow_datasets
    with pytest.raises(InputError, match="TFDS_DATA_DIR is not set"):
        generative.load("real/tfds/mnist/1/1")
    monkeypatch.setenv("TESTBED_TFDS_DOWNLOAD", "maybe")
    with pytest.raises(InputError, match="TESTBED_TFDS_DOWNLOAD: got 'maybe'; allowed: 0"):
        generative.load("real/tfds/mnist/1/1")


@pytest.mark.parametrize(
    "failure, says",
    [
        (ModuleNotFoundError("No module named 'x'"), "needs TensorFlow and packages"),
        (ConnectionError("Failed to resolve host\nmore"), "ConnectionError: Failed to resolve"),
    ],
)
def test_tfds_download_opt_in_failure_is_plain(tmp_path, monkeypatch, failure, says):
    """With TESTBED_TFDS_DOWNLOAD=1 a failed preparation says what to do in one line; a
    missing module is never blamed as such (the fix is the install command)."""

    class Builder:
        def download_and_prepare(self):
            raise failure

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TESTBED_TFDS_DOWNLOAD", "1")
    monkeypatch.setattr(tfds, "builder", lambda *a, **k: Builder())
    with pytest.raises(InputError) as e:
        generative.load("real/tfds/mnist/1/1")
    msg = str(e.value)
    assert says in msg and "ModuleNotFoundError" not in msg and "\n" not in msg
    assert f"tfds build mnist --data_dir={tmp_path}" in msg
    assert "set TESTBED_TFDS_DOWNLOAD=1" not in msg  # it is set: not offered again


def test_broken_tfds_folder_is_named_in_the_error(tmp_path):
    version = tmp_path / "mnist" / "3.0.1"
    version.mkdir(parents=True)
    (version / "dataset_info.json").write_text("{broken")
    with pytest.raises(InputError, match=f"{tmp_path / 'mnist'} exists but holds no readable"):
        datasets.load_raw("tfds/mnist", data_dir=str(tmp_path), download=False)


def test_corrupted_cache_is_a_clear_error(tmp_path):
    spec = datasets.get_spec("tfds/mnist")
    path = tfds_loader.cache_path(spec, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz file")
    with pytest.raises(InputError, match="unreadable.*Delete the file"):
        datasets.load_raw("tfds/mnist", data_dir=str(tmp_path))
    zeros = np.zeros((3, 5), np.uint8)  # wrong input dim for mnist
    np.savez(path, x_train=zeros, y_train=np.zeros(3), x_test=zeros, y_test=np.zeros(3))
    with pytest.raises(InputError, match=r"shapes \(3, 5\).*expected \[n, 784\]"):
        datasets.load_raw("tfds/mnist", data_dir=str(tmp_path))


def test_num_train_larger_than_prepared_data(tmp_path):
    with tfds.testing.mock_data(num_examples=10), pytest.raises(InputError, match="at most 10"):
        RealDataProblem(
            RealDataSettings("tfds/mnist", 1, 1, num_train=11),
            data_dir=str(tmp_path),
            download=True,
        )


def test_prepared_state_from_the_files_alone(tmp_path):
    spec = datasets.get_spec("tfds/emnist/letters")
    assert tfds_loader.prepared_state(spec, tmp_path) == "missing"
    version = tmp_path / "emnist" / "letters" / "3.1.0"
    version.mkdir(parents=True)
    (version / "dataset_info.json").write_text("{}")
    (version / "emnist-train.tfrecord-00000-of-00001").write_bytes(b"")
    assert tfds_loader.prepared_state(spec, tmp_path) == "other_format"
    (version / "emnist-train.array_record-00000-of-00001").write_bytes(b"")
    assert tfds_loader.prepared_state(spec, tmp_path) == "prepared"
    mnist = datasets.get_spec("tfds/mnist")
    path = tfds_loader.cache_path(mnist, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert tfds_loader.prepared_state(mnist, tmp_path) == "cached"


# Your own data: arrays.


def test_from_arrays_is_the_same_problem_as_its_dataset():
    """A registered dataset's arrays given to from_arrays make the same problem: training
    inputs, test batches, what the agent is told, the joint NLL."""
    raw = datasets.load_raw("iris")
    mine = RealDataProblem.from_arrays(
        *raw, tau=10, seed=1, num_test_seeds=200, num_enn_samples=100
    )
    ref = small("iris", 10)
    np.testing.assert_array_equal(mine.train_data.x, ref.train_data.x)
    np.testing.assert_array_equal(mine.x_test, ref.x_test)
    a, b = mine.estimator_batches(), ref.estimator_batches()
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    assert mine.prior_knowledge == ref.prior_knowledge
    assert mine.spec.name == "arrays:arrays" and mine.spec.num_classes == 3
    q = mine.evaluate(uniform_sampler(3))
    assert q["joint_nll"] == pytest.approx(10 * math.log(3), rel=1e-6)


def test_from_arrays_options():
    raw = datasets.load_raw("wine")
    p = RealDataProblem.from_arrays(
        raw.x_train.tolist(),  # lists are fine
        raw.y_train,
        raw.x_test,
        raw.y_test,
        tau=1,
        num_train=50,
        standardize="feature",
        num_classes=5,
        name="wine5",
        num_test_seeds=50,
        num_enn_samples=10,
    )
    assert p.train_data.x.shape == (50, 13) and p.spec.name == "arrays:wine5"
    # per-feature statistics of the whole training split, as for registered datasets
    ref = small("wine", 1, standardize="feature", num_train=50)
    np.testing.assert_allclose(p.train_data.x, ref.train_data.x)
    assert p.prior_knowledge.num_classes == 5
    q = p.evaluate(uniform_sampler(5))
    assert q["joint_nll"] == pytest.approx(math.log(5), rel=1e-6)
    # images [n, h, w] are flattened; bool inputs become numbers
    x = np.random.default_rng(0).integers(0, 255, (12, 2, 3)).astype(np.uint8)
    y = np.arange(12) % 2
    p = RealDataProblem.from_arrays(x[:8], y[:8], x[8:] > 100, y[8:], tau=2)
    assert p.train_data.x.shape == (8, 6) and p.x_test.shape == (4, 6)
    assert p.spec.kind == "structured"  # mixed dtypes: no pixel scaling on either side
    # uint8 train and test are pixels, scaled to [0, 1] as the TFDS images are
    p = RealDataProblem.from_arrays(x[:8], y[:8], x[8:], y[8:], tau=2, standardize="feature")
    assert p.spec.kind == "image"
    want = preprocessing.preprocess(x[:8].reshape(8, 6), x[8:].reshape(4, 6), "image", "feature")
    np.testing.assert_allclose(p.train_data.x, want[0], rtol=1e-6)
    with pytest.raises(InputError, match="from_arrays option: got 'nope'; allowed: .*kappa"):
        RealDataProblem.from_arrays(x[:8], y[:8], x[8:], y[8:], tau=2, nope=1)
    with pytest.raises(InputError, match="num_train: got 9; allowed: at most 8"):
        RealDataProblem.from_arrays(x[:8], y[:8], x[8:], y[8:], tau=2, num_train=9)
    with pytest.raises(InputError, match="standardize: got 'row'"):
        RealDataProblem.from_arrays(x[:8], y[:8], x[8:], y[8:], tau=2, standardize="row")


X = np.arange(12.0).reshape(6, 2)
Y = np.array([0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize(
    "args, kw, match",
    [
        ((X[:, 0], Y, X, Y), {}, r"x_train: got shape \(6,\); allowed: \[n, d\]"),
        ((X, Y, X[:, :1], Y), {}, "x_test: got 1 features; allowed: 2 \\(the features of x_train"),
        ((X, Y, X[:0], Y[:0]), {}, "x_test: got 0 rows; allowed: at least 1"),
        ((X, Y * 1.0, X, Y), {}, "y_train: got dtype float64; allowed: integer class labels"),
        ((X, Y - 1, X, Y), {}, "y_train: got label -1; allowed: integers 0..C-1"),
        ((X, Y[:5], X, Y), {}, "y_train: got 5 labels for 6 rows of x_train"),
        ((X, Y, X, Y), {"num_classes": 2}, "y_train: got label 2; allowed: integers 0..1"),
        ((X, Y, X, Y), {"num_classes": 1}, "num_classes: got 1; allowed: an integer >= 2"),
        ((X, 0 * Y, X, 0 * Y), {}, "labels: got only class 0; allowed: at least two classes"),
        ((np.where(X > 10, np.nan, X), Y, X, Y), {}, r"x_train: got a NaN .* \(row 5\)"),
        ((X.astype(str), Y, X, Y), {}, "x_train: got dtype <U32; allowed: numbers"),
        ((X, Y[:, None, None], X, Y), {}, r"y_train: got shape \(6, 1, 1\); allowed: \[n\]"),
    ],
)
def test_from_arrays_refuses_bad_arrays(args, kw, match):
    with pytest.raises(InputError, match=match):
        RealDataProblem.from_arrays(*args, tau=1, **kw)


# Your own data: files and `real/file:<path>/...` ids.


def write_csv(path, rows, header=None):
    lines = ([",".join(header)] if header else []) + [",".join(map(str, r)) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_file_id_grammar_and_settings_need_no_file(tmp_path):
    parse = problems.parse_rest
    assert parse("file:/a/b.c/data.npz/10/0") == {
        "dataset": "file:/a/b.c/data.npz",
        "tau": 10,
        "seed": 0,
    }
    # a folder named like a data file, a num_train, a relative path
    assert parse("file:/x.csv/y.CSV/1/2/30") == {
        "dataset": "file:/x.csv/y.CSV",
        "tau": 1,
        "seed": 2,
        "num_train": 30,
    }
    assert parse("file:data.npz/1/1")["dataset"] == "file:data.npz"
    # the settings come from the id alone: a leaderboard reads them without the file
    s = generative.problem_settings(f"real/file:{tmp_path}/none.npz/10/3")
    assert (s["source"], s["path"], s["tau"], s["seed"], s["num_train"]) == (
        "file",
        f"{tmp_path}/none.npz",
        10,
        3,
        None,
    )
    assert problems.problem_id(s["dataset"], 10, 3) == f"real/file:{tmp_path}/none.npz/10/3"


def test_npz_file_is_the_same_problem_as_its_arrays(tmp_path):
    raw = datasets.load_raw("iris")
    path = tmp_path / "iris data" / "iris.npz"  # a folder with a space
    path.parent.mkdir()
    np.savez(path, **raw._asdict(), notes=np.zeros(3))  # other arrays are ignored
    opts = {"num_test_seeds": 200, "num_enn_samples": 100}
    p = generative.load(f"real/file:{path}/10/1", **opts)
    # a file's inputs are standardised per feature (the default, `auto`, for files)
    ref = RealDataProblem.from_arrays(*raw, tau=10, seed=1, standardize="feature", **opts)
    np.testing.assert_array_equal(p.train_data.x, ref.train_data.x)
    np.testing.assert_array_equal(p.estimator_batches().y, ref.estimator_batches().y)
    assert p.prior_knowledge == ref.prior_knowledge
    assert p.spec.source == "file" and p.spec.name == f"file:{path}"
    assert generative.load(f"real/file:{path}/1/1/7").train_data.x.shape == (7, 4)
    np.savez(path, **raw._asdict(), num_classes=np.int64(4))  # a declared class count
    assert generative.load(f"real/file:{path}/1/1").prior_knowledge.num_classes == 4


def test_csv_files_label_column_and_split(tmp_path):
    raw = datasets.load_raw("wine")
    x = np.concatenate([raw.x_train, raw.x_test])
    y = np.concatenate([raw.y_train, raw.y_test])
    # no header: the last column is the label; the test set is the seeded fifth
    plain = write_csv(tmp_path / "plain.csv", np.column_stack([x, y]).tolist())
    got = datasets.load_raw(f"file:{plain}")
    train, test = datasets.offline_split(len(y))
    np.testing.assert_allclose(got.x_train, x[train])
    np.testing.assert_array_equal(got.y_test, y[test])
    assert got.y_train.dtype == np.int32  # 0.0, 1.0, 2.0 read as integers
    # a header: the column named `label` (anywhere), a `split` column of train/test
    names = ["label", "split"] + [f"f{j}" for j in range(x.shape[1])]
    kinds = np.where(np.arange(len(y)) < len(raw.y_train), "train", "test")
    rows = [[int(a), b, *c] for a, b, c in zip(y, kinds, x)]
    named = write_csv(tmp_path / "named.csv", rows, header=names)
    p = generative.load(f"real/file:{named}/1/1", num_test_seeds=50, num_enn_samples=10)
    opts = {"num_test_seeds": 50, "num_enn_samples": 10, "standardize": "feature"}
    ref = RealDataProblem.from_arrays(*raw, tau=1, seed=1, **opts)
    np.testing.assert_allclose(p.train_data.x, ref.train_data.x, rtol=1e-6)
    np.testing.assert_array_equal(p.y_test, ref.y_test)
    assert p.prior_knowledge == ref.prior_knowledge
    # Excel's "CSV UTF-8" starts with a byte-order mark, which hid the `label` header (the
    # last column became the label); a header named 'Label' / 'Split' is the same column
    text = named.read_text().replace("label,split", "Label,Split", 1)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    got = generative.load(f"real/file:{bom}/1/1", num_test_seeds=50, num_enn_samples=10)
    np.testing.assert_allclose(got.train_data.x, ref.train_data.x, rtol=1e-6)
    np.testing.assert_array_equal(got.y_test, ref.y_test)


def test_file_data_is_standardised_per_feature_unless_it_is_images(tmp_path):
    """A CSV's inputs were standardised per example (the reference's form, for images),
    which mixes features of different units: mlp on a 10-feature CSV scored a joint NLL
    of 6.01 per example vs 2.89 per feature. Files now default to `auto`: per feature,
    but per example for uint8 image pixels; the registered datasets keep the reference's."""
    rng = np.random.default_rng(0)
    scales = np.array([0.01, 1.0, 100.0, 1000.0])
    x = rng.normal(size=(40, 4)) * scales + np.array([0.0, 5.0, -50.0, 1e4])
    y = (x[:, 0] > 0).astype(int)
    path = write_csv(tmp_path / "tabular.csv", np.column_stack([x, y]).tolist())
    pid = f"real/file:{path}/1/1"
    assert generative.problem_settings(pid)["standardize"] == "auto"
    p = generative.load(pid, num_test_seeds=5, num_enn_samples=2)
    assert p.standardize == "feature"
    np.testing.assert_allclose(p.train_data.x.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(p.train_data.x.std(axis=0), 1.0, atol=1e-3)
    q = generative.load(pid, num_test_seeds=5, num_enn_samples=2, standardize="example")
    assert q.standardize == "example"
    np.testing.assert_allclose(q.train_data.x.mean(axis=1), 0.0, atol=1e-5)
    pixels = tmp_path / "pixels.npz"  # uint8 images: the reference's per example
    img = rng.integers(0, 256, size=(20, 16), dtype=np.uint8)
    np.savez(pixels, x_train=img[:15], y_train=y[:15], x_test=img[15:], y_test=y[15:20])
    assert generative.load(f"real/file:{pixels}/1/1").standardize == "example"
    features = tmp_path / "features.npz"  # not images: per feature
    np.savez(features, x_train=x[:30], y_train=y[:30], x_test=x[30:], y_test=y[30:])
    assert generative.load(f"real/file:{features}/1/1").standardize == "feature"
    assert generative.problem_settings("real/iris/1/1")["standardize"] == "example"
    assert small("wine", 1).standardize == "example"


GOOD_ROWS = [[0.1, 0.2, 0], [0.3, 0.1, 1], [0.5, 0.5, 1], [0.2, 0.9, 0], [0.4, 0.4, 1]]


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("none.npz", None, "no such file; allowed: an existing .npz or .csv"),
        ("bad.npz", b"not a zip", "unreadable .*allowed: an .npz with arrays x_train"),
        ("keys.npz", {"x_train": X, "y_train": Y}, "no array 'x_test' \\(found: x_train, "),
        ("float.npz", {"x_train": X, "y_train": Y * 1.0, "x_test": X, "y_test": Y}, "dtype"),
        ("bad.csv", [*GOOD_ROWS, [0.1, "abc", 0]], "line 6, column 'column 2': got 'abc'"),
        ("empty.csv", [], "empty; allowed: a comma-separated .csv"),
        ("ragged.csv", [*GOOD_ROWS, [0.1, 1]], "line 6 has 2 cells, not 3"),
        ("label.csv", [*GOOD_ROWS, [0.1, 0.2, 1.5]], "line 6, column 'column 3': label '1.5'"),
        ("nan.csv", [*GOOD_ROWS, [0.1, "nan", 1]], "line 6, column 'column 2': got 'nan'"),
        ("few.csv", GOOD_ROWS[:4], "4 data rows; allowed: at least 5"),
        ("split.csv", [["a", "label", "split"], [0.1, 0, "train"], [0.2, 1, "dev"]], "got 'dev'"),
        ("onesplit.csv", [["a", "label", "split"], [0.1, 0, "train"]], "no row has split 'test'"),
    ],
)
def test_bad_data_files_are_one_line_errors_naming_the_path(tmp_path, name, content, match):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        np.savez(path, **content)
    elif content is not None:
        write_csv(path, content)
    with pytest.raises(InputError, match=match) as e:
        generative.load(f"real/file:{path}/1/1")
    assert f"data file {path}: " in str(e.value) and "\n" not in str(e.value)


def test_relative_file_path_is_read_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_csv(tmp_path / "d.csv", GOOD_ROWS * 2)
    assert generative.load("real/file:d.csv/1/1").train_data.x.shape == (8, 2)
    with pytest.raises(InputError, match=f"data file e.csv \\(= {tmp_path}/e.csv\\)"):
        generative.load("real/file:e.csv/1/1")


# Checking a sweep's data before it starts.


def test_require_data_names_everything_missing_in_one_line(tmp_path, monkeypatch):
    from leaderboard.execution.jobs import expand

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TESTBED_TFDS_DOWNLOAD", raising=False)
    good = write_csv(tmp_path / "good.csv", GOOD_ROWS * 2)
    fine = [f"real/file:{good}/1/1", f"real/file:{good}/10/1/8", "real/iris/1/1", "coin/1"]
    generative.require_data(fine)
    assert len(expand(["uniform"], fine)) == 4
    ids = [
        *fine,
        "real/tfds/mnist/1/1",
        "real/tfds/mnist/10/1",
        "real/tfds/emnist/letters/1/1",
        f"real/file:{tmp_path}/gone.npz/1/1",
        f"real/file:{good}/1/1/9",
    ]
    with pytest.raises(InputError) as e:
        expand(["uniform"], ids)  # no job is made
    msg = str(e.value)
    assert msg.startswith("no job started: TFDS datasets not prepared in ")
    assert f"{tmp_path} ($TFDS_DATA_DIR): tfds/mnist, tfds/emnist/letters;" in msg
    cmd = f"tfds build mnist emnist/letters --data_dir={tmp_path} --file_format=array_record"
    assert cmd in msg and "TESTBED_TFDS_DOWNLOAD=1" in msg
    assert f"data file {tmp_path}/gone.npz: no such file" in msg
    assert "num_train: got 9 for " in msg and "at most 8" in msg
    assert "\n" not in msg
    # a prepared folder (array_record) or the loader's cache counts as present
    version = tmp_path / "mnist" / "3.0.1"
    version.mkdir(parents=True)
    (version / "dataset_info.json").write_text("{}")
    (version / "mnist-test.array_record-00000-of-00001").write_bytes(b"")
    with pytest.raises(InputError) as e:
        generative.require_data(["real/tfds/mnist/1/1", "real/tfds/emnist/letters/1/1"])
    assert ": tfds/emnist/letters;" in str(e.value) and "mnist," not in str(e.value)
    # a folder prepared in another format (or half written) is named too
    version = tmp_path / "emnist" / "letters" / "3.1.0"
    version.mkdir(parents=True)
    (version / "dataset_info.json").write_text("{}")
    with pytest.raises(InputError, match="letters holds no array_record files.*convert_format"):
        generative.require_data(["real/tfds/mnist/1/1", "real/tfds/emnist/letters/1/1"])


def test_cli_run_and_sweep_on_a_file_id(tmp_path, capsys):
    """`testbed run` and `testbed sweep` (a worker process) take a file id; a missing file
    or dataset is one line, exit status 2, and no results file."""
    import json

    from experiments.cli import main
    from leaderboard.execution.results import load as load_results

    path = tmp_path / "data.npz"
    np.savez(path, **datasets.load_raw("iris")._asdict())
    pid = f"real/file:{path}/10/1"
    assert main(["run", "--agent", "uniform", "--problem", pid, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["quality"]["joint_nll"] == pytest.approx(10 * math.log(3), rel=1e-6)
    assert out["settings"]["path"] == str(path)
    results = tmp_path / "results.db"
    argv = ["sweep", "--agent", "uniform", "--problem", pid, "--results", str(results)]
    assert main([*argv, "--executor", "local", "--workers", "1", "--quiet"]) == 0
    rows = load_results(results)
    assert list(rows["problem_id"]) == [pid] and list(rows["status"]) == ["ok"]
    assert rows["joint_nll"].iloc[0] == pytest.approx(10 * math.log(3), rel=1e-6)
    capsys.readouterr()
    gone = f"real/file:{tmp_path}/gone.csv/1/1"
    assert main(["run", "--agent", "uniform", "--problem", gone]) == 2
    err = capsys.readouterr().err
    assert f"data file {tmp_path}/gone.csv: no such file" in err and err.count("\n") == 1
    other = tmp_path / "other.db"
    argv = ["sweep", "--agent", "uniform", "--problem", f"{pid},{gone}", "--results", str(other)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: no job started: data file") and "gone.csv" in err
    assert not other.exists()


# An mlp beats uniform on iris (needs the Neural Testbed agents).


def test_mlp_beats_uniform_on_iris():
    if "mlp" not in agents.names():
        pytest.skip("the mlp agent is not registered yet")
    p = small("iris", 10)
    mlp = testbed.evaluate(agents.load("mlp"), p)
    assert mlp["test_acc"] > 0.8  # iris is nearly separable; uniform's accuracy is ~1/3
    assert mlp["joint_nll"] < 0.5 * 10 * math.log(3)  # uniform: 10 log 3 exactly


# The synthetic-vs-real experiment.


def test_bootstrap_correlation_closed_cases():
    from experiments.real_vs_synthetic import bootstrap_correlation

    x = np.arange(6.0)
    r = bootstrap_correlation(x, 2 * x + 1, "pearson", num_bootstrap=200)
    # every non-degenerate resample of exactly linear pairs has r = 1
    assert r["estimate"] == pytest.approx(1.0) and r["low"] == pytest.approx(1.0)
    r = bootstrap_correlation(x, -(x**3), "spearman", num_bootstrap=200)
    assert r["estimate"] == pytest.approx(-1.0) and r["high"] == pytest.approx(-1.0)
    with pytest.raises(InputError, match="at least 3"):
        bootstrap_correlation(x[:2], x[:2])


def test_real_vs_synthetic_runs_on_a_toy_sweep(tmp_path):
    from experiments import real_vs_synthetic as rvs

    out = tmp_path / "rows.csv"
    result = rvs.main(
        [
            "--agent", "average_class_probs", "--grid", "pseudo_count=0,10,1000",
            "--set", "form=log",
            "--synthetic", "coin/1", "--real", "real/iris/1/1",
            "--num-test-seeds", "50", "--num-enn-samples", "5", "--bootstrap", "100",
            "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert set(result) == {"configs", "tau=1", "all"}
    assert [c["pseudo_count"] for c in result["configs"]] == [0.0, 10.0, 1000.0]
    # the real NLL of class frequencies with pseudo-count p is -mean log((n_y + p) / (n + 3 p))
    problem = rvs.load_problem("real/iris/1/1", {"num_test_seeds": 50, "num_enn_samples": 5})
    y = problem.estimator_batches().y
    counts = np.bincount(problem.train_data.y, minlength=3)
    for p, nll in zip([0, 10, 1000], result["tau=1"]["real"]):
        freqs = (counts + p) / (counts.sum() + 3 * p)
        assert nll == pytest.approx(-np.log(freqs[y[:, 0]]).mean(), rel=1e-5)
    r = result["all"]["pearson"]
    assert -1 <= r["low"] <= r["estimate"] <= r["high"] <= 1
    assert len(out.read_text().strip().splitlines()) == 1 + 3 * 2  # header + configs x problems


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--synthetic", "coin/1,,coin/2"], "--synthetic: got 'coin/1,,coin/2', which has an "
                                            "empty item; allowed: a comma-separated list of "
                                            "problem ids, or a sweep name"),
        (["--real", "real/iris/1/1,"], "--real: got 'real/iris/1/1,', which has an empty item"),
        (["--real", "coin/1,coin/1"], "--real: got 'coin/1,coin/1', which names coin/1 twice"),
        (["--grid", "pseudo_count=0,,10"], "--grid: got 'pseudo_count=0,,10', which has an empty"),
        (["--grid", "pseudo_count=1,1"], "--grid: got 'pseudo_count=1,1', which gives 1 twice"),
        # refused before any job ran, the option named (were: after the synthetic jobs)
        (["--real", "coin/1,real/iris/1/99x"], "--real: got 'real/iris/1/99x'; allowed: "),
        (["--synthetic", "classification_test,coin/1"], "--synthetic: got 'classification_test'"),
        (["--grid", "pseudo_count=1,2"], "--grid: its product has 2 config(s); allowed: at "),
        (["--max-configs", "-1"], "--max-configs: got -1; allowed: 3 to 100000"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),  # one line, not usage
    ],
)  # fmt: skip
def test_real_vs_synthetic_refuses_an_empty_or_repeated_item(monkeypatch, capsys, argv, said):
    """Empty items were dropped, repeated ones run twice (`--grid` values: a config twice)."""
    import runpy
    import sys

    from experiments import real_vs_synthetic as rvs

    monkeypatch.setattr(sys, "argv", ["real_vs_synthetic", "--agent", "average_class_probs", *argv])
    monkeypatch.setattr(testbed, "evaluate", lambda *_: pytest.fail("a job ran"))
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(rvs.__file__, run_name="__main__")
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"real_vs_synthetic: error: {said}"), err


def test_a_changed_data_file_is_not_scored_with_its_old_results(tmp_path, monkeypatch, capsys):
    """Results of `real/file:<path>/...` are of the file as it was: with other contents at
    the same path, a sweep into the same results refuses (it reused the old scores and
    said '1 already stored'); the stored row stays, and the file as it was runs on."""
    from experiments.cli import main
    from leaderboard.store import ResultsStore

    rng = np.random.default_rng(0)

    def save(num_classes, num_features):
        np.savez(
            tmp_path / "data.npz",
            x_train=rng.normal(size=(40, num_features)),
            y_train=np.arange(40) % num_classes,
            x_test=rng.normal(size=(10, num_features)),
            y_test=np.arange(10) % num_classes,
        )

    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "-q", "--agent", "uniform", "--problem", "real/file:data.npz/1/0"]
    argv += ["--results", "r.db"]
    save(2, 3)
    first = (tmp_path / "data.npz").read_bytes()
    assert main(argv) == 0
    with ResultsStore(tmp_path / "r.db") as store:
        (row,) = store.rows()
    assert len(json.loads(row["versions"])["data_sha256"]) == 64
    save(4, 7)  # other data at the same path
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "real/file:data.npz/1/0: its file changed since its results were stored" in err
    (tmp_path / "data.npz").write_bytes(first)  # the file as it was: nothing to run
    assert main(argv) == 0
    assert "1 already stored" in capsys.readouterr().out
