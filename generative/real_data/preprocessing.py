"""Preprocessing of real inputs: the reference's per-example standardisation, or per feature.

The Neural Testbed standardises every example across its own features:
x -> (x - mean(x)) / sqrt(var(x) + 1e-8) (population variance), after scaling image pixels
to [0, 1]. Per-feature standardisation (statistics of the training split) is the usual
form for tabular data, whose features each have their own unit and scale: it is the
default for the user's data files that are not images (`standardize="auto"`, see
generative.real_data.problems.STANDARDIZE) and an option everywhere.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

EPSILON = 1e-8
CHUNK = 8192  # rows per preprocessing step
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


def feature_statistics(
    x_train: np.ndarray, kind: str = "structured", chunk: int = CHUNK
) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and population std of the training inputs (two passes, in chunks)."""
    n = len(x_train)
    total = sum(to_float(x_train[i : i + chunk], kind).sum(axis=0) for i in range(0, n, chunk))
    mean = total / n
    sq = sum(
        np.square(to_float(x_train[i : i + chunk], kind) - mean).sum(axis=0)
        for i in range(0, n, chunk)
    )
    return mean, np.sqrt(sq / n)


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
    chunk: int = CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """float32 (train, test) inputs after scaling and standardisation.

    Per-feature statistics come from `stats_from` (default: `x_train`), so a problem that
    trains on a prefix of the training split can still use the whole split's statistics.
    Rows are processed in chunks: peak memory stays near the float32 output.
    """
    if standardize == "example":
        fn = standardize_examples
    else:
        mean, std = feature_statistics(x_train if stats_from is None else stats_from, kind, chunk)
        fn = lambda x: standardize_features(x, mean, std)
    return _map_rows(fn, x_train, kind, chunk), _map_rows(fn, x_test, kind, chunk)


def _map_rows(fn, x: np.ndarray, kind: str, chunk: int) -> np.ndarray:
    out = np.empty(np.shape(x), np.float32)
    for i in range(0, len(x), chunk):
        out[i : i + chunk] = fn(to_float(x[i : i + chunk], kind))
    return out
