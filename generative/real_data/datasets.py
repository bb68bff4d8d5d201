"""The real datasets: the Neural Testbed's ten TFDS datasets and four offline ones.

A dataset is loaded as raw, flattened arrays (`RawDataset`); preprocessing happens later
(generative.real_data.preprocessing). The offline datasets ship with scikit-learn and
need no network; their train/test split is a fixed-seed permutation (the last fifth of
the permuted rows is the test set), so it is the same on every machine.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from generative.real_data.specs import (  # noqa: F401  (re-exported)
    SKLEARN_SPLIT_SEED,
    DatasetSpec,
    RawDataset,
    offline_split,
)
from testbed.errors import InputError, bad_value


def _tfds(name, kind, num_classes, input_dim, num_train, num_test) -> DatasetSpec:
    return DatasetSpec(
        f"tfds/{name}", "tfds", name, kind, num_classes, input_dim, num_train, num_test
    )


# The reference's table (neural_testbed/real_data/datasets.py), in its order. Structured
# datasets have only a TFDS `train` split: train = its first num_train rows, test = its
# last num_test rows. Image datasets: train = `train`, test = `test`.
TFDS_DATASETS = (
    _tfds("iris", "structured", 3, 4, 120, 30),
    _tfds("wine_quality", "structured", 11, 11, 3918, 980),
    _tfds("german_credit_numeric", "structured", 2, 24, 800, 200),
    _tfds("cmaterdb", "image", 10, 3072, 5000, 1000),
    _tfds("mnist", "image", 10, 784, 60000, 10000),
    _tfds("emnist/digits", "image", 10, 784, 240000, 40000),
    _tfds("emnist/letters", "image", 37, 784, 88800, 14800),
    _tfds("fashion_mnist", "image", 10, 784, 60000, 10000),
    _tfds("mnist_corrupted/shot_noise", "image", 10, 784, 60000, 10000),
    _tfds("cifar10", "image", 10, 3072, 50000, 10000),
)

# Offline datasets bundled with scikit-learn: n_test = n // 5, n_train = n - n_test.
SKLEARN_DATASETS = (
    DatasetSpec("iris", "sklearn", "iris", "structured", 3, 4, 120, 30),
    DatasetSpec("wine", "sklearn", "wine", "structured", 3, 13, 143, 35),
    DatasetSpec("breast_cancer", "sklearn", "breast_cancer", "structured", 2, 30, 456, 113),
    DatasetSpec("digits", "sklearn", "digits", "structured", 10, 64, 1438, 359),
)

DATASETS: dict[str, DatasetSpec] = {s.name: s for s in SKLEARN_DATASETS + TFDS_DATASETS}


# The permutation seed of the offline splits (part of the datasets' definition).
def get_spec(name: str) -> DatasetSpec:
    """The spec of dataset `name` (InputError listing the known names otherwise)."""
    if name not in DATASETS:
        raise bad_value("dataset", name, list(DATASETS))
    return DATASETS[name]


@lru_cache(maxsize=8)
def load_sklearn(name: str) -> RawDataset:
    """An offline scikit-learn dataset with its fixed train/test split."""
    import sklearn.datasets

    spec = get_spec(name)
    if spec.source != "sklearn":
        raise InputError(f"dataset: got {name!r}; allowed: an offline (scikit-learn) dataset")
    x, y = getattr(sklearn.datasets, f"load_{spec.source_name}")(return_X_y=True)
    train, test = offline_split(len(y))
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.int32)
    return RawDataset(x[train], y[train], x[test], y[test])


def load_raw(name: str, data_dir: str | None = None, download: bool = False) -> RawDataset:
    """The raw arrays of dataset `name`: a registered one (TFDS datasets are read from
    `data_dir`, and prepared first if `download` allows) or `file:<path>` (.npz or .csv)."""
    if name.startswith("file:"):
        from generative.real_data.files import load_file

        return load_file(name[len("file:") :])[0]
    spec = get_spec(name)
    if spec.source == "sklearn":
        return load_sklearn(name)
    from generative.real_data.tfds_loader import load_tfds

    return load_tfds(spec, data_dir=data_dir, download=download)
