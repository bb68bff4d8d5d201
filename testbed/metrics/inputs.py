"""Checked conversion of metric inputs (numpy arrays, torch tensors, lists) to numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from testbed.errors import InputError


def to_numpy(value: Any, dtype=np.float32) -> np.ndarray:
    """numpy array of `value`; torch tensors are detached and moved to the CPU first."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=dtype)


def as_samples(value: Any, name: str, *, min_rows: int = 1, dtype=np.float32) -> np.ndarray:
    """[n, d] finite samples (a 1-D input is n scalars); the error names the argument."""
    x = to_numpy(value, dtype)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise InputError(f"{name}: got shape {x.shape}; allowed: [num_samples, dim]")
    if x.shape[0] < min_rows:
        raise InputError(f"{name}: got {x.shape[0]} samples; allowed: at least {min_rows}")
    if not np.all(np.isfinite(x)):
        bad = int(np.sum(~np.all(np.isfinite(x), axis=1)))
        raise InputError(f"{name}: got {bad} rows with NaN or infinite values; allowed: finite")
    return x


def same_dim(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raises unless the two sample sets have the same number of columns."""
    if a.shape[1] != b.shape[1]:
        raise InputError(
            f"{name_b}: got dim {b.shape[1]}; allowed: dim {a.shape[1]} (that of {name_a})"
        )
