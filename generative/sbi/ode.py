"""A batched adaptive Runge-Kutta 5(4) solver (Dormand-Prince, FSAL) in numpy.

Every row of the batch is its own initial value problem with its own step size; all rows
advance together, one vectorized stage computation per iteration, and finished rows leave
the batch. Steps are shortened to land exactly on the requested output times. The error
control is the one of DifferentialEquations.jl's Tsit5 defaults (RMS norm of
err / (abstol + reltol * max(|y|, |y_new|)), PI-free step factor 0.9 err^-1/5 in [0.2, 10]);
the benchmark uses Tsit5 with reltol = abstol = 1e-8, another 5(4) pair, so both agree to
about the tolerance. A row whose solution stops being finite, whose step size collapses or
that needs more than `max_steps` steps fails and gets NaN outputs, as failed solves do in
the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Dormand-Prince 5(4) tableau.
C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
]
B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
# Difference between the 5th- and embedded 4th-order weights (7 stages, last = FSAL stage).
E = np.array([71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40])

Rhs = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (y [n, m], params [n, p]) -> [n, m]


def _rms(v: np.ndarray) -> np.ndarray:
    return np.sqrt(np.mean(v**2, axis=1))


def _initial_step(rhs, y0, f0, params, rtol, atol):
    """Hairer-Wanner starting step size, per row."""
    scale = atol + rtol * np.abs(y0)
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300))
    f1 = rhs(y0 + h0[:, None] * f0, params)
    d2 = _rms((f1 - f0) / scale) / h0
    big = np.maximum(d1, d2)
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.where(big <= 1e-15, np.maximum(1e-6, h0 * 1e-3), (0.01 / big) ** (1 / 5))
    h = np.minimum(100 * h0, h1)
    return np.where(np.isfinite(h) & (h > 0), h, 1e-6)


def solve(
    rhs: Rhs,
    y0: np.ndarray,
    params: np.ndarray,
    times: np.ndarray,
    *,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
) -> np.ndarray:
    """Solves y' = rhs(y, params) from times[0] for each row; returns y at `times`, [n, T, m].

    Rows that fail (non-finite values, step size underflow, more than `max_steps` steps)
    are all-NaN.
    """
    y0 = np.asarray(y0, dtype=np.float64)
    params = np.asarray(params, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    n, m = y0.shape
    out = np.full((n, len(times), m), np.nan)
    out[:, 0] = y0
    failed = np.zeros(n, dtype=bool)
    if len(times) == 1 or n == 0:
        return out
    idx = np.arange(n)
    t = np.full(n, times[0])
    y = y0.copy()
    p = params
    k1 = rhs(y, p)
    h = _initial_step(rhs, y, k1, p, rtol, atol)
    nxt = np.ones(n, dtype=np.int64)  # index of the next output time
    span = times[-1] - times[0]
    for _ in range(max_steps):
        if idx.size == 0:
            break
        target = times[nxt]
        h_eff = np.minimum(h, target - t)
        ks = [k1]
        for s in range(1, 6):
            inc = sum(a * k for a, k in zip(A[s], ks) if a != 0.0)
            ks.append(rhs(y + h_eff[:, None] * inc, p))
        y_new = y + h_eff[:, None] * sum(b * k for b, k in zip(B, ks) if b != 0.0)
        k7 = rhs(y_new, p)
        ks.append(k7)
        err = h_eff[:, None] * sum(e * k for e, k in zip(E, ks) if e != 0.0)
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
        with np.errstate(invalid="ignore", over="ignore"):
            err_norm = _rms(err / scale)
        finite = np.isfinite(err_norm) & np.all(np.isfinite(y_new), axis=1)
        accept = finite & (err_norm <= 1.0)
        with np.errstate(divide="ignore"):
            factor = np.where(err_norm > 0, 0.9 * err_norm ** (-1 / 5), 10.0)
        factor = np.clip(np.where(finite, factor, 0.2), 0.2, 10.0)
        factor = np.where(accept, factor, np.minimum(factor, 1.0))
        # Advance accepted rows; land exactly on the output time when the step was cut to it.
        t = np.where(accept, np.where(h_eff == target - t, target, t + h_eff), t)
        y = np.where(accept[:, None], y_new, y)
        k1 = np.where(accept[:, None], k7, k1)
        h = h_eff * factor
        hit = accept & (t == target)
        if hit.any():
            out[idx[hit], nxt[hit]] = y[hit]
            nxt = nxt + hit
        dead = h < 1e-14 * max(span, 1.0)
        failed[idx[dead]] = True
        keep = ~dead & (nxt < len(times))
        if not keep.all():
            idx, t, y, p, k1, h, nxt = (v[keep] for v in (idx, t, y, p, k1, h, nxt))
    failed[idx] = True  # still running after max_steps
    out[failed] = np.nan
    return out
