"""The two measures of "What's your bench" (Pagni 2024), computed as the benchmark computes
them, flaws included (patrick-pagni/whats_your_bench @ e9ccddf, distance.py and
_problem.py; adKS from the fork patrick-pagni/DDKS @ a808f44, ddks/methods/adks.py).

Both compare a PPL's *plug-in* posterior predictive p (the benchmark takes the posterior
mean with the known scale, or for its Student-t models a t with the posterior means of nu
and sigma) with the conjugate posterior predictive q:

- `wyb_kl(p_pdf, q_pdf, lower, upper)`: what it calls the KL divergence. It is a right
  Riemann sum of |p log(p / q)| (an absolute value inside the integral: not a KL) on an
  "adaptive" grid of 999 points from `lower` to `upper` whose steps are *small in the
  tails* and large at the centre; for d > 1 the grid is one diagonal path (the axes'
  points zipped), each term weighted by the product of the d axis steps, so the d = 5, 7,
  10 values (1e-7 .. 1e-15) say nothing about the distributions.
- `wyb_adks(pred, true, cdf, support_lim)`: adKS distance D and its analytic p-value.
  D = max over test points t (the PPL's `pred` draws, then the reference's `true` draws)
  and the 2^d orthants at t of |fraction of `pred` in the orthant - q's mass there|, the
  upper orthants clipped at `support_lim` (one scalar for every axis); the `true` draws
  only give test points. The p-value treats the N 2^d cells as independent binomials
  (occupancies from `true`) and multiplies them: with 100 draws it is about 1 everywhere
  (no power).

`wyb_support(loc, scale)` gives the benchmark's limits (loc +- 10 scale; for a covariance
its diagonal, a variance, is used as the scale) and `wyb_measures(p, q, loc, scale,
random_state)` runs the benchmark's whole procedure on two scipy frozen distributions
(100 draws of each with the same `random_state`, as it does). Pure numpy/scipy functions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import binom

from testbed.errors import InputError

GRID_SIZE = 1000  # config.PDF_GRID_SIZE (the grid has GRID_SIZE - 1 points)
KS_SAMPLE_SIZE = 100  # config.KS_SAMPLE_SIZE
SUPPORT_SCALE = 10  # config.SUPPORT_LIMIT_SCALE


def _half_grid(start: np.ndarray, end: np.ndarray, n: int, reverse: bool) -> np.ndarray:
    """[n, d] points from start to end whose steps shrink as exp(-5 t) (towards `end`;
    reversed: towards `start`), as the benchmark's `_generate_array`."""
    steps = np.cumsum(np.exp(-np.linspace(0.0, 5.0, n)))
    if reverse:
        steps = steps[::-1]
    unit = (steps - steps[0]) / (steps[-1] - steps[0])
    return unit[:, None] * (end - start)[None, :] + start[None, :]


def wyb_grid(lower, upper, grid_size: int = GRID_SIZE) -> np.ndarray:
    """The benchmark's "adaptive" grid [grid_size - 1, d] from `lower` to `upper` (scalars
    or [d] arrays): two halves meeting at the midpoint, dense at both ends (the tails)."""
    lower = np.atleast_1d(np.asarray(lower, np.float64))
    upper = np.atleast_1d(np.asarray(upper, np.float64))
    if lower.shape != upper.shape or lower.ndim != 1:
        raise InputError(
            f"lower, upper: got shapes {lower.shape}, {upper.shape}; allowed: equal [d]"
        )
    mid = (lower + upper) / 2
    half = grid_size // 2
    return np.concatenate(
        [_half_grid(lower, mid, half, True), _half_grid(mid, upper, half, False)[1:]]
    )


def wyb_kl(p_pdf: Callable, q_pdf: Callable, lower, upper, grid_size: int = GRID_SIZE) -> float:
    """The benchmark's "KL divergence" of the PPL's predictive p from the reference q.

    Inputs: `p_pdf`, `q_pdf`: densities of p (the PPL's plug-in predictive) and q (the
    conjugate predictive) taking a [k, d] array of points and returning k values (a scipy
    frozen distribution's `.pdf` works; a [k, 1] result is flattened); `lower`, `upper`:
    the integration limits, scalars or [d] arrays (`wyb_support`'s `lower`, `upper`).

    Returns sum_i |p log(p / q)|(x_{i+1}) * prod_j (x_{i+1, j} - x_{i, j}) over the
    `wyb_grid` path x: a right Riemann sum of |p log p/q| (not a KL: the absolute value is
    inside), along a single diagonal path when d > 1.
    """
    grid = wyb_grid(lower, upper, grid_size)
    p = np.asarray(p_pdf(grid), np.float64).reshape(len(grid))
    q = np.asarray(q_pdf(grid), np.float64).reshape(len(grid))
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.abs(p * np.log(p / q))
    steps = np.prod(np.diff(grid, axis=0), axis=1)
    return float(np.sum(steps * f[1:]))


def _orthant_fractions(sample: np.ndarray, points: np.ndarray) -> np.ndarray:
    """[m, 2^d] float32 fraction of `sample` in each orthant at each of the m points. Column
    i: axis j 'below' (x_j < t_j) when bit j of i is set, else 'at or above' (x_j >= t_j),
    as adKS's `get_orthants` (a test point drawn from `sample` counts in column 0)."""
    n, d = sample.shape
    below = sample[None, :, :] < points[:, None, :]
    codes = np.sum(below * (1 << np.arange(d)), axis=-1)
    counts = np.zeros((len(points), 2**d))
    np.add.at(counts, (np.arange(len(points))[:, None], codes), 1.0)
    return (counts.astype(np.float32) / np.float32(n)).astype(np.float32)


def _orthant_masses(points: np.ndarray, cdf: Callable, support_lim: float) -> np.ndarray:
    """[m, 2^d] float32 mass of the reference in each orthant at each point, by
    inclusion-exclusion of its joint CDF at the 2^d corners (t_j or support_lim on each
    axis), as adKS's `get_orthant_density`: 'above' means t_j < x_j <= support_lim."""
    m, d = points.shape
    at_lim = ((np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1).astype(bool)
    corners = np.where(at_lim[None], support_lim, points[:, None, :])  # [m, 2^d, d]
    g = np.asarray(cdf(corners.reshape(-1, d)), np.float64).reshape(m, 2**d)
    for j in range(d):  # Moebius inversion over subsets of the axes at the limit
        has = at_lim[:, j]
        g[:, has] = g[:, has] - g[:, np.flatnonzero(has) ^ (1 << j)]
    full = 2**d - 1
    return g[:, full ^ np.arange(2**d)].astype(np.float32)  # column i: 'above' = not bit


def _statistic(pred: np.ndarray, true: np.ndarray, cdf: Callable, support_lim: float) -> float:
    d1 = np.abs(_orthant_fractions(pred, pred) - _orthant_masses(pred, cdf, support_lim)).max()
    d2 = np.abs(_orthant_masses(true, cdf, support_lim) - _orthant_fractions(pred, true)).max()
    return float(max(d1, d2))


def _p_exceed(delta: float, m1: int, m2: int, lam: np.ndarray) -> np.ndarray:
    """P(|N1/m1 - N2/m2| > delta) for N_k ~ Binomial(m_k, lam), each lam, as adKS's
    `p_gtdelta` (a sum over its grid of delta* = 0, 1/m, ... up to delta + 1/m)."""
    m = max(m1, m2)
    r1, r2 = np.arange(0.0, m1 + 0.5) / m1, np.arange(0.0, m2 + 0.5) / m2
    gap = np.abs(r1[None, :] - r2[:, None])  # [m2 + 1, m1 + 1]
    stars = np.arange(0.0, delta + 1 / m, 1 / m)
    within = np.any(np.abs(gap[None] - stars[:, None, None]) < 1e-6, axis=0)

    def pmf(k, n):
        with np.errstate(all="ignore"):
            out = binom(n, k)[None] * lam[:, None] ** k[None] * (1.0 - lam[:, None]) ** (n - k)
        return np.where(np.isfinite(out), out, 0.0)

    p1, p2 = pmf(m1 * r1, m1), pmf(m2 * r2, m2)  # [L, m1 + 1], [L, m2 + 1]
    return 1.0 - np.einsum("la,ba,lb->l", p1, within, p2)


def wyb_adks(pred, true, cdf: Callable, support_lim: float) -> tuple[float, float]:
    """adKS of the benchmark: (distance D, analytic p-value).

    Inputs: `pred` [m1, d]: draws of the PPL's predictive p; `true` [m2, d]: draws of the
    reference q (the benchmark: 100 each, from the same random_state); `cdf`: q's joint CDF
    taking a [k, d] array of points and returning k values; `support_lim`: one scalar, the
    upper limit of every axis (`wyb_support`'s `ks_lim`). Draws are cast to float32 (adKS
    holds them in torch float32 tensors).

    D = max(D1, D2), D1 = max over t in pred and the 2^d orthants at t of |fraction of pred
    in the orthant - q's mass (clipped at support_lim)|, D2 the same at t in true. The
    p-value: D rounded to 1/(m1 m2); for every test point of pred + true and orthant, the
    binomial probability that two occupancies (m1 and m2 draws, rate = the fraction of
    `true` there) differ by more than D; p = 1 - prod(1 - p_cell), the cells taken as
    independent: conservative to uselessness (about 1.0 for any plausible p).
    """
    pred = np.asarray(pred, np.float32)
    true = np.asarray(true, np.float32)
    pred, true = (x.reshape(-1, 1) if x.ndim == 1 else x for x in (pred, true))
    if pred.ndim != 2 or pred.shape[1] != true.shape[1]:
        raise InputError(f"pred, true: got shapes {pred.shape}, {true.shape}; allowed: [m, d]")
    pred64, true64 = pred.astype(np.float64), true.astype(np.float64)
    distance = _statistic(pred64, true64, cdf, float(support_lim))
    m1, m2 = len(pred), len(true)
    rounded = np.round(m1 * m2 * distance) / (m1 * m2)
    lam = _orthant_fractions(true64, np.concatenate([pred64, true64]))
    values, counts = np.unique(lam.astype(np.float64), return_counts=True)
    exceed = _p_exceed(rounded, m1, m2, values)
    return distance, float(1.0 - np.prod((1.0 - exceed) ** counts))


def wyb_support(loc, scale) -> dict:
    """The benchmark's limits from the reference predictive's location and scale: for a
    scalar loc, scale (a standard deviation, or the t's scale) `ks_lim` = loc + 10 scale
    and [lower, upper] = loc -+ 10 scale; for a vector loc and a covariance matrix as scale,
    its diagonal (variances) is the scale and `ks_lim` the largest of loc + 10 diag."""
    loc = np.asarray(loc, np.float64)
    scale = np.asarray(scale, np.float64)
    width = SUPPORT_SCALE * (np.diagonal(scale) if scale.ndim == 2 else scale)
    return {
        "ks_lim": float(np.max(loc + width)),
        "lower": np.atleast_1d(loc - width),
        "upper": np.atleast_1d(loc + width),
    }


def _joint_cdf(dist) -> Callable:
    """A [k, d] -> [k] joint CDF of a scipy frozen distribution; for a multivariate normal
    with a diagonal covariance, the product of its marginal normal CDFs (equal to the
    numerical integral scipy would do, to its 1e-5 tolerance, and exact and fast)."""
    from scipy import stats

    cov = getattr(dist, "cov", None)
    if cov is not None and np.ndim(cov) == 2:
        cov = np.asarray(cov)
        if np.allclose(cov, np.diag(np.diag(cov))):
            mean, sd = np.asarray(dist.mean), np.sqrt(np.diag(cov))
            return lambda x: np.prod(stats.norm.cdf((x - mean) / sd), axis=1)
        return lambda x: np.asarray(dist.cdf(x)).reshape(len(x))
    return lambda x: np.asarray(dist.cdf(x[:, 0]))


def wyb_measures(p, q, loc, scale, random_state: int) -> dict[str, float]:
    """The benchmark's measures of the PPL's predictive `p` against the reference `q`
    (scipy frozen distributions: `norm`, `t` or `multivariate_normal`), with the reference's
    `loc`, `scale` (`wyb_support`) and the problem's `random_state` (100 draws of p and of q,
    each with this same state, as the benchmark): {wyb_kl, wyb_ks_distance, wyb_ks_pvalue}."""
    limits = wyb_support(loc, scale)
    pred = np.asarray(p.rvs(KS_SAMPLE_SIZE, random_state=random_state), np.float64)
    true = np.asarray(q.rvs(KS_SAMPLE_SIZE, random_state=random_state), np.float64)
    distance, p_value = wyb_adks(pred, true, _joint_cdf(q), limits["ks_lim"])
    kl = wyb_kl(p.pdf, q.pdf, limits["lower"], limits["upper"])
    return {"wyb_kl": kl, "wyb_ks_distance": distance, "wyb_ks_pvalue": p_value}
