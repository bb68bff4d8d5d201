"""MCMC chains thinned to their effective sample size, for the tests that assume
independent draws (PIT/KS, Mahalanobis, ddKS, C2ST against an exact posterior).

Pooled NUTS draws are autocorrelated: read as independent, a correct sampler is rejected
8-16% of the time at alpha 0.05 (docs/reproductions/ppl-level-power.md). The tests read
every k-th draw of each chain instead, k from the smallest effective sample size (ESS) of
the quantities they test: each coordinate (bulk and tail ESS, Vehtari et al. 2021) and any
scalar series given, such as the exact posterior's log density along the chains (NUTS
moves slowly across its level sets, so a Mahalanobis distance mixes slower than any
coordinate). The ESS is numpyro's (Geyer's initial monotone sequence) on split chains,
rank-normalised for the bulk and of the 5% and 95% quantile indicators for the tail.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

SPACING = 2  # draws kept this many ESS-spacings apart (see `thinning_step`)


def split_chains(x: np.ndarray) -> np.ndarray:
    """[chains, draws, ...] as twice the chains of half the draws (an odd last draw
    dropped): the split the ESS and R-hat of Vehtari et al. (2021) use."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, half : 2 * half]], axis=0)


def _ess(x: np.ndarray) -> np.ndarray:
    """numpyro's ESS of x [chains, draws, k] per column; a constant column counts as
    independent draws (its indicator never moves)."""
    from numpyro.diagnostics import effective_sample_size

    out = np.full(x.shape[2], float(x.shape[0] * x.shape[1]))
    moving = np.ptp(x.reshape(-1, x.shape[2]), axis=0) > 0
    if moving.any():
        out[moving] = np.atleast_1d(effective_sample_size(x[:, :, moving]))
    return out


def bulk_tail_ess(chains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bulk and tail ESS [k] of each column of chains [chains, draws, k]."""
    x = split_chains(np.asarray(chains, np.float64))
    flat = x.reshape(-1, x.shape[2])
    ranks = stats.rankdata(flat, axis=0)
    z = stats.norm.ppf((ranks - 3 / 8) / (flat.shape[0] + 1 / 4)).reshape(x.shape)
    low, high = np.quantile(flat, [0.05, 0.95], axis=0)
    tail = np.minimum(_ess((x <= low).astype(float)), _ess((x >= high).astype(float)))
    return _ess(z), tail


def smallest_ess(chains: np.ndarray, series: np.ndarray | None = None) -> float:
    """The smallest bulk or tail ESS over the coordinates of chains [chains, draws, dim]
    and over the scalar series [chains, draws] (e.g. a log density along the chains)."""
    columns = np.asarray(chains, np.float64)
    if series is not None:
        columns = np.concatenate([columns, np.asarray(series, np.float64)[..., None]], axis=2)
    bulk, tail = bulk_tail_ess(columns)
    values = np.concatenate([bulk, tail])
    values = values[np.isfinite(values)]
    return float(values.min()) if values.size else float(columns.shape[0] * columns.shape[1])


def thinning_step(num_draws: int, ess: float) -> int:
    """Every how many draws of a chain the tests read: ceil(SPACING * tau - 1) for the
    integrated autocorrelation time tau = num_draws / ESS, at least 1 (an ESS of the number
    of draws or more: independent or anticorrelated draws, which make the tests
    conservative). An autoregressive chain of that tau is correlated about e^-4 at that lag
    (e^-3 at worst); one ESS-spacing, the usual advice, leaves about e^-2, which still
    rejected a correct NUTS 10% of the time at alpha 0.05."""
    if not ess > 0:
        raise ValueError(f"ess: got {ess}; allowed: a positive number")
    return max(1, math.ceil(SPACING * num_draws / ess - 1))


def thin_to_ess(chains: np.ndarray, series: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(every k-th draw of each chain, pooled chain after chain [m, dim]; k): chains
    [chains, draws, dim] thinned by `thinning_step` of their `smallest_ess` (with `series`)."""
    chains = np.asarray(chains, np.float64)
    step = thinning_step(chains.shape[0] * chains.shape[1], smallest_ess(chains, series))
    return chains[:, ::step].reshape(-1, chains.shape[2]), step
