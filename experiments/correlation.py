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
MIN_PAIRS = 3  # fewer pairs make no correlation to bootstrap


def means_of(values: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Each agent's mean over its units [A, U] (units `index` when given; nan ignored)."""
    values = np.asarray(values, float)
    chosen = values if index is None else values[:, index]
    with np.errstate(invalid="ignore"):
        return np.nanmean(chosen, axis=1)


def _rowwise(method: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`method`'s correlation of each row of x [B, A] with the same row of y (nan where a
    row is constant): every bootstrap replicate at once."""
    if method == "spearman":
        x, y = stats.rankdata(x, axis=1), stats.rankdata(y, axis=1)
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    norm = np.sqrt(np.sum(x * x, axis=1) * np.sum(y * y, axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(norm > 0, np.sum(x * y, axis=1) / norm, np.nan)
    return np.clip(r, -1.0, 1.0)  # rounding may step past +-1


def _interval(draws: np.ndarray, level: float) -> tuple[float, float]:
    """The central `level` of the replicates' values (NaN ones, where a side came out
    constant, left out)."""
    tail = (1.0 - level) / 2.0
    if not np.isfinite(draws).any():
        return math.nan, math.nan
    low, high = np.nanquantile(draws, [tail, 1.0 - tail])
    return float(low), float(high)


def _method(method: str):
    if method not in METHODS:
        raise InputError(f"method: got {method!r}; allowed: {', '.join(METHODS)}")
    return METHODS[method]


def _indices(rng, num_bootstrap: int, *sizes: int) -> list[np.ndarray]:
    """Per side, its units' indices drawn with replacement [B, size]: replicate by
    replicate, each side in turn."""
    draws = [[rng.integers(0, n, n) for n in sizes] for _ in range(num_bootstrap)]
    return [np.array([d[i] for d in draws]) for i in range(len(sizes))]


def _replicate_means(units: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Each replicate's agent means [B, A] of units [A, U] at indices [B, U]."""
    with np.errstate(invalid="ignore"):
        return np.nanmean(units[:, index], axis=2).T


def _replicated(
    method: str, x_units: np.ndarray, sides: list[np.ndarray], num_bootstrap: int, seed: int
) -> tuple[list[float], list[np.ndarray]]:
    """Per side [A, V] (all sides on the same V units), corr(x, side) across agents of the
    means, and its bootstrap replicates [B]: each replicate resamples x's units once and the
    sides' units once, the same draw for every side. `method` is checked by the caller."""
    corr = METHODS[method]
    mx = means_of(x_units)
    values = [corr(mx, means_of(side)) for side in sides]
    rng = np.random.default_rng(seed)
    ix, iy = _indices(rng, num_bootstrap, x_units.shape[1], sides[0].shape[1])
    bx = _replicate_means(x_units, ix)
    return values, [_rowwise(method, bx, _replicate_means(side, iy)) for side in sides]


def bootstrap_correlation(
    x_units: np.ndarray,
    y_units: np.ndarray,
    method: str = "spearman",
    *,
    minus: np.ndarray | None = None,
    num_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Correlation:
    """The correlation across agents of the means of x_units [A, U] and y_units [A, V], with
    a bootstrap interval resampling the U and the V units (shared by the agents).

    With `minus` (z_units [A, V], scored on y's units, e.g. tau = 1 beside tau = 10 on the
    same problems): corr(x, y) - corr(x, z), each replicate resampling x's units once and
    y's and z's together: is y the better predictor of x?"""
    if minus is None:
        values, draws = _checked(method, x_units, [y_units], num_bootstrap, seed)
        return Correlation(values[0], *_interval(draws[0], level))
    return bootstrap_comparison(
        x_units, y_units, minus, method, num_bootstrap=num_bootstrap, level=level, seed=seed
    )[2]


def bootstrap_comparison(
    x_units: np.ndarray,
    y_units: np.ndarray,
    z_units: np.ndarray,
    method: str = "spearman",
    *,
    num_bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[Correlation, Correlation, Correlation]:
    """(corr(x, y), corr(x, z), their difference), each with its interval, from one set of
    replicates: what `bootstrap_correlation` gives for y, for z and with `minus=z`."""
    values, draws = _checked(method, x_units, [y_units, z_units], num_bootstrap, seed)
    return (
        Correlation(values[0], *_interval(draws[0], level)),
        Correlation(values[1], *_interval(draws[1], level)),
        Correlation(values[0] - values[1], *_interval(draws[0] - draws[1], level)),
    )


def _checked(
    method: str, x_units: np.ndarray, sides: list[np.ndarray], num_bootstrap: int, seed: int
) -> tuple[list[float], list[np.ndarray]]:
    """`_replicated` after the inputs' checks: a known method, sides of one shape, the same
    agents (at least 3) on both."""
    _method(method)  # checked first
    x_units = np.atleast_2d(x_units)
    sides = [np.atleast_2d(side) for side in sides]
    if sides[-1].shape != sides[0].shape:
        raise InputError(
            f"units: got {sides[0].shape} and {sides[-1].shape}; allowed: equal shapes"
        )
    if x_units.shape[0] != sides[0].shape[0] or x_units.shape[0] < MIN_PAIRS:
        raise InputError(
            f"agents: got {x_units.shape[0]} and {sides[0].shape[0]} rows; allowed: the same "
            f"agents on both sides, at least {MIN_PAIRS}"
        )
    return _replicated(method, x_units, sides, num_bootstrap, seed)


def bootstrap_pairs(
    x: np.ndarray,
    y: np.ndarray,
    method: str = "pearson",
    num_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Correlation of paired values x and y (one pair a config) with a percentile
    bootstrap interval resampling the pairs; resamples where a side is constant
    (correlation undefined) are dropped and counted."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < MIN_PAIRS:
        raise InputError(f"configs: got {len(x)}; allowed: at least {MIN_PAIRS} to correlate")
    _method(method)  # checked
    (index,) = _indices(np.random.default_rng(seed), num_bootstrap, len(x))
    draws = _rowwise(method, x[index], y[index])
    low, high = _interval(draws, level)
    dropped = int(np.sum(~np.isfinite(draws)))
    estimate = float(_rowwise(method, x[None], y[None])[0])  # as the replicates are computed
    return {"estimate": estimate, "low": low, "high": high, "num_dropped": dropped}
