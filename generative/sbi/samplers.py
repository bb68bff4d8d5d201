"""Sampling building blocks for reference posteriors: truncated normals, rejection, Laplace.

All functions are vectorized over a batch of candidates; the target log-densities they take
map an array [n, d] to [n] (-inf where the density is zero).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import special, stats

from testbed.errors import InputError
from testbed.seeding import Seed, make_rng

LogDensity = Callable[[np.ndarray], np.ndarray]


def truncated_normal_quantile(
    mean: np.ndarray, sd: np.ndarray, low: float, high: float, p: np.ndarray
) -> np.ndarray:
    """The p-quantile of N(mean, sd^2) truncated to [low, high], elementwise, computed in log
    space so that boxes far in a tail (many sd from the mean) stay accurate."""
    a = (low - mean) / sd
    b = (high - mean) / sd
    flip = a > 0  # both ends in the upper tail: mirror them into the lower tail
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    q = np.where(flip, 1.0 - p, p)
    with np.errstate(divide="ignore"):
        log_cdf = np.logaddexp(
            special.log_ndtr(lo) + np.log1p(-q), special.log_ndtr(hi) + np.log(q)
        )
    z = np.clip(special.ndtri_exp(np.minimum(log_cdf, 0.0)), lo, hi)
    return mean + sd * np.where(flip, -z, z)


def truncated_normal(
    mean: np.ndarray, sd: np.ndarray, low: float, high: float, rng: np.random.Generator
) -> np.ndarray:
    """Independent draws N(mean, sd^2) truncated to [low, high], elementwise, by inversion."""
    mean, sd = np.broadcast_arrays(np.asarray(mean, float), np.asarray(sd, float))
    return truncated_normal_quantile(mean, sd, low, high, rng.random(mean.shape))


def log_box_mass(mean: np.ndarray, sd: float, low: float, high: float) -> np.ndarray:
    """log P(low < N(mean, sd^2 I) < high) of an isotropic normal, summed over the last axis."""
    lo = (low - mean) / sd
    hi = (high - mean) / sd
    # log(Phi(hi) - Phi(lo)), stable on both tails.
    upper = np.where(lo > 0, special.log_ndtr(-lo), special.log_ndtr(hi))
    lower = np.where(lo > 0, special.log_ndtr(-hi), special.log_ndtr(lo))
    return (upper + np.log1p(-np.exp(np.minimum(lower - upper, -1e-300)))).sum(axis=-1)


def rejection_sample(
    log_target: LogDensity,
    propose: Callable[[int, np.random.Generator], np.ndarray],
    log_proposal: LogDensity,
    num_samples: int,
    rng: np.random.Generator,
    *,
    batch_size: int = 10_000,
    num_pilot: int = 50_000,
    multiplier: float = 1.2,
    max_proposals: int = 20_000_000,
    what: str = "reference posterior",
) -> np.ndarray:
    """Exact draws from the normalized `log_target` by rejection from a proposal.

    The bound M on target/proposal is `multiplier` times the largest ratio seen on a pilot
    batch (the benchmark's rule); if a later candidate exceeds M, M is raised and sampling
    restarts, so the accepted draws always come from a run whose bound held.
    """
    log_m = -np.inf
    pilot = propose(num_pilot, rng)
    ratio = log_target(pilot) - log_proposal(pilot)
    if np.isfinite(ratio).any():
        log_m = np.nanmax(np.where(np.isfinite(ratio), ratio, -np.inf)) + np.log(multiplier)
    if not np.isfinite(log_m):
        raise InputError(f"x_o: the {what} has no mass where the proposal puts its draws")
    accepted: list[np.ndarray] = []
    count = 0
    used = num_pilot
    while count < num_samples:
        if used > max_proposals:
            raise InputError(
                f"x_o: the {what} accepted {count} of {used} proposals; the observation is "
                "too far from what the simulator produces under the prior"
            )
        cand = propose(batch_size, rng)
        used += batch_size
        ratio = log_target(cand) - log_proposal(cand)
        ratio = np.where(np.isnan(ratio), -np.inf, ratio)
        top = ratio.max()
        if top > log_m:
            log_m = top + np.log(multiplier)
            accepted, count = [], 0
            continue
        keep = np.log(rng.random(batch_size)) < ratio - log_m
        accepted.append(cand[keep])
        count += int(keep.sum())
    return np.concatenate(accepted)[:num_samples]


def importance_resample(
    log_target: LogDensity,
    proposals: np.ndarray,
    log_proposal: np.ndarray,
    num_samples: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Sampling-importance-resampling (with replacement) and the effective sample size."""
    log_w = log_target(proposals) - log_proposal
    log_w = np.where(np.isnan(log_w), -np.inf, log_w)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    idx = rng.choice(len(w), size=num_samples, p=w)
    return proposals[idx], float(1.0 / np.sum(w**2))


def fd_stencil(dim: int, step: float) -> np.ndarray:
    """Offsets for a central finite-difference gradient and Hessian: [1 + 2d + 2d(d-1), d]."""
    eye = np.eye(dim) * step
    rows = [np.zeros(dim)]
    rows += [e for e in eye] + [-e for e in eye]
    for i in range(dim):
        for j in range(i + 1, dim):
            for si in (1, -1):
                for sj in (1, -1):
                    rows.append(si * eye[i] + sj * eye[j])
    return np.array(rows)


def fd_grad_hess(values: np.ndarray, dim: int, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and Hessian from log-density values on `fd_stencil` (batch: [K, rows])."""
    f0 = values[:, 0]
    fp = values[:, 1 : 1 + dim]
    fm = values[:, 1 + dim : 1 + 2 * dim]
    grad = (fp - fm) / (2 * step)
    hess = np.zeros((values.shape[0], dim, dim))
    diag = (fp - 2 * f0[:, None] + fm) / step**2
    hess[:, np.arange(dim), np.arange(dim)] = diag
    col = 1 + 2 * dim
    for i in range(dim):
        for j in range(i + 1, dim):
            fpp, fpm, fmp, fmm = (values[:, col + t] for t in range(4))
            hess[:, i, j] = hess[:, j, i] = (fpp - fpm - fmp + fmm) / (4 * step**2)
            col += 4
    return grad, hess


def newton_modes(
    log_density: LogDensity,
    starts: np.ndarray,
    *,
    step: float = 1e-3,
    num_iterations: int = 40,
    tol: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Damped Newton ascent from several starts at once, derivatives by finite differences.

    Each iteration evaluates `log_density` once on the stencils of all starts (one batch,
    which is what makes ODE-based likelihoods affordable). Returns (modes [K, d],
    log densities [K], negative Hessians [K, d, d]).
    """
    z = np.array(starts, dtype=np.float64)
    k, d = z.shape
    offsets = fd_stencil(d, step)
    damping = np.full(k, 1e-3)
    f = log_density(z)
    neg_hess = np.tile(np.eye(d), (k, 1, 1))
    for _ in range(num_iterations):
        vals = log_density((z[:, None, :] + offsets[None]).reshape(-1, d)).reshape(k, -1)
        grad, hess = fd_grad_hess(vals, d, step)
        neg_hess = -hess
        # Levenberg-Marquardt style step on the negative Hessian, made positive definite.
        w, v = np.linalg.eigh(neg_hess)
        w = np.maximum(np.abs(w), 1e-8)
        scale = w[:, None, :] + damping[:, None, None] * w.max(axis=1)[:, None, None]
        delta = np.einsum("kij,kj->ki", v / scale, np.einsum("kji,kj->ki", v, grad))
        delta = np.where(np.isfinite(delta), delta, 0.0)
        z_new = z + delta
        f_new = log_density(z_new)
        better = f_new > f
        z = np.where(better[:, None], z_new, z)
        f = np.where(better, f_new, f)
        damping = np.where(better, damping / 3, damping * 10)
        if np.all(np.abs(delta).max(axis=1) < tol) or np.all(damping > 1e6):
            break
    vals = log_density((z[:, None, :] + offsets[None]).reshape(-1, d)).reshape(k, -1)
    neg_hess = -fd_grad_hess(vals, d, step)[1]
    return z, f, neg_hess


class StudentT:
    """A multivariate Student-t proposal (heavier tails than a Laplace fit)."""

    def __init__(self, loc: np.ndarray, cov: np.ndarray, df: float = 5.0):
        self.dist = stats.multivariate_t(loc=loc, shape=cov, df=df)

    def sample(self, num_samples: int, seed: Seed) -> np.ndarray:
        return np.atleast_2d(self.dist.rvs(size=int(num_samples), random_state=make_rng(seed)))

    def log_prob(self, z: np.ndarray) -> np.ndarray:
        return np.atleast_1d(self.dist.logpdf(z))


def laplace_t_proposal(
    log_density: LogDensity, starts: np.ndarray, *, inflate: float = 1.5, df: float = 5.0
) -> StudentT:
    """A Student-t centred at the best of several Newton modes, with inflated Laplace scale."""
    modes, values, neg_hess = newton_modes(log_density, starts)
    best = int(np.argmax(values))
    w, v = np.linalg.eigh(neg_hess[best])
    w = np.maximum(w, 1e-10 * max(w.max(), 1e-10))
    cov = (v / w) @ v.T * inflate**2
    return StudentT(modes[best], (cov + cov.T) / 2, df=df)
