"""Correlations across agents with bootstrap intervals over what each agent's score averages.

Each agent's two scores are means over units shared by all agents (bandit seeds, testbed
problems): a bootstrap replicate resamples the units of each score once, with replacement,
for every agent alike (the agents saw the same seeds and problems), recomputes every
agent's means and the correlation across agents. The interval is the replicates' central
95%. Pure numpy and scipy; used by the decisions and real-data reproductions.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from testbed.errors import InputError


class Correlation(NamedTuple):
    """A correlation across agents with its percentile bootstrap interval."""

    value: float
    low: float
    high: float


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two vectors (nan when either is constant)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson's r of average ranks) of two vectors."""
    return pearson(stats.rankdata(x), stats.rankdata(y))


METHODS = {"pearson": pearson, "spearman": spearman}


def means_of(values: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Each agent's mean over its units [A, U] (units `index` when given; nan ignored)."""
    values = np.asarray(values, float)
    chosen = values if index is None else values[:, index]
    with np.errstate(invalid="ignore"):
        return np.nanmean(chosen, axis=1)


def bootstrap_correlation(
    x_units: np.ndarray,
    y_units: np.ndarray,
    method: str = "spearman",
    *,
    num_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Correlation:
    """The correlation across agents of the means of x_units [A, U] and y_units [A, V], with
    a bootstrap interval resampling the U and the V units (shared by the agents)."""
    if method not in METHODS:
        raise InputError(f"method: got {method!r}; allowed: {', '.join(METHODS)}")
    x_units, y_units = np.atleast_2d(x_units), np.atleast_2d(y_units)
    if x_units.shape[0] != y_units.shape[0] or x_units.shape[0] < 3:
        raise InputError(
            f"agents: got {x_units.shape[0]} and {y_units.shape[0]} rows; allowed: the same "
            "agents on both sides, at least 3"
        )
    corr = METHODS[method]
    value = corr(means_of(x_units), means_of(y_units))
    rng = np.random.default_rng(seed)
    draws = np.empty(num_bootstrap)
    for b in range(num_bootstrap):
        ix = rng.integers(0, x_units.shape[1], x_units.shape[1])
        iy = rng.integers(0, y_units.shape[1], y_units.shape[1])
        draws[b] = corr(means_of(x_units, ix), means_of(y_units, iy))
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(draws, [tail, 1.0 - tail])
    return Correlation(value, float(low), float(high))


def bootstrap_difference(
    x_units: np.ndarray,
    y_units: np.ndarray,
    z_units: np.ndarray,
    method: str = "spearman",
    *,
    num_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Correlation:
    """corr(x, y) - corr(x, z) across agents, with a bootstrap interval that resamples x's
    units once per replicate and y's and z's units together (z and y are scored on the same
    units, e.g. tau = 10 and tau = 1 on the same problems): is y the better predictor?"""
    corr = METHODS[method]
    x_units, y_units, z_units = map(np.atleast_2d, (x_units, y_units, z_units))
    if y_units.shape != z_units.shape:
        raise InputError(f"units: got {y_units.shape} and {z_units.shape}; allowed: equal shapes")
    mx, my, mz = means_of(x_units), means_of(y_units), means_of(z_units)
    value = corr(mx, my) - corr(mx, mz)
    rng = np.random.default_rng(seed)
    draws = np.empty(num_bootstrap)
    for b in range(num_bootstrap):
        ix = rng.integers(0, x_units.shape[1], x_units.shape[1])
        iy = rng.integers(0, y_units.shape[1], y_units.shape[1])
        bx = means_of(x_units, ix)
        draws[b] = corr(bx, means_of(y_units, iy)) - corr(bx, means_of(z_units, iy))
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(draws, [tail, 1.0 - tail])
    return Correlation(value, float(low), float(high))
