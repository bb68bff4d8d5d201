"""Preprocessing of real inputs: the reference's per-example standardisation, or per feature.

The Neural Testbed standardises every example across its own features:
x -> (x - mean(x)) / sqrt(var(x) + 1e-8) (population variance), after scaling image pixels
to [0, 1]. Per-feature standardisation (statistics of the training split) is the usual
alternative for tabular data and is offered as an option.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

EPSILON = 1e-8
Standardize = Literal["example", "feature"]


def to_float(x: np.ndarray, kind: str) -> np.ndarray:
    """float64 inputs; image pixels (uint8) are scaled to [0, 1] as convert_image_dtype does."""
    x = np.asarray(x)
    if kind == "image" and x.dtype == np.uint8:
        return x.astype(np.float64) / 255.0
    return x.astype(np.float64)


def standardize_examples(x: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """Each row minus its mean, divided by sqrt(its population variance + epsilon)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon)


def feature_statistics(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and population std of the training inputs."""
    x = np.asarray(x_train, np.float64)
    return x.mean(axis=0), x.std(axis=0)


def standardize_features(
    x: np.ndarray, mean: np.ndarray, std: np.ndarray, epsilon: float = EPSILON
) -> np.ndarray:
    """(x - mean) / sqrt(std^2 + epsilon): a constant feature maps to 0, not to NaN."""
    return (np.asarray(x, np.float64) - mean) / np.sqrt(np.square(std) + epsilon)


def preprocess(
    x_train: np.ndarray,
    x_test: np.ndarray,
    kind: str,
    standardize: Standardize = "example",
    stats_from: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """float32 (train, test) inputs after scaling and standardisation.

    Per-feature statistics come from `stats_from` (default: `x_train`), so a problem that
    trains on a prefix of the training split can still use the whole split's statistics.
    """
    train, test = to_float(x_train, kind), to_float(x_test, kind)
    if standardize == "example":
        train, test = standardize_examples(train), standardize_examples(test)
    else:
        ref = train if stats_from is None else to_float(stats_from, kind)
        mean, std = feature_statistics(ref)
        train, test = standardize_features(train, mean, std), standardize_features(test, mean, std)
    return train.astype(np.float32), test.astype(np.float32)
