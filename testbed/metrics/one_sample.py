"""One-sample scores of samples q against an exact posterior p.

Exact Gaussian KL, Monte-Carlo KL(q || p) when q has a density, per-marginal PIT/KS with
exact CDFs (Bonferroni over marginals) and the Mahalanobis chi-square test for Gaussian p.
With an exact reference these replace two-sample tests: no reference-sample noise.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from testbed.errors import InputError
from testbed.metrics.registry import register


def _matrix(x, name: str) -> np.ndarray:
    x = np.asarray(x, np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise InputError(f"{name}: got shape {x.shape}; allowed: [num_samples, dim]")
    return x


@register("gaussian_kl", needs=("mean", "cov"))
def gaussian_kl(mean_q, cov_q, mean_p, cov_p) -> float:
    """KL(N(mean_q, cov_q) || N(mean_p, cov_p)) in closed form (nats)."""
    mq, mp = (
        np.atleast_1d(np.asarray(mean_q, np.float64)),
        np.atleast_1d(np.asarray(mean_p, np.float64)),
    )
    cq = np.atleast_2d(np.asarray(cov_q, np.float64))
    cp = np.atleast_2d(np.asarray(cov_p, np.float64))
    d = mq.shape[0]
    if mp.shape != (d,) or cq.shape != (d, d) or cp.shape != (d, d):
        raise InputError(
            f"gaussian_kl: got shapes mean_q {mq.shape}, cov_q {cq.shape}, mean_p {mp.shape}, "
            f"cov_p {cp.shape}; allowed: [d], [d, d], [d], [d, d]"
        )
    lp = np.linalg.cholesky(cp)
    lq = np.linalg.cholesky(cq)
    a = np.linalg.solve(lp, lq)  # L_p^-1 L_q: trace term = ||a||_F^2
    b = np.linalg.solve(lp, mp - mq)
    logdet = 2.0 * (np.sum(np.log(np.diag(lp))) - np.sum(np.log(np.diag(lq))))
    return float(0.5 * (np.sum(a**2) + np.sum(b**2) - d + logdet))


@register("mc_kl", needs=("samples", "log_prob"))
def mc_kl(log_q, log_p) -> dict[str, float]:
    """KL(q || p) by Monte Carlo: mean of log q - log p at samples from q, with its std error."""
    diff = np.asarray(log_q, np.float64) - np.asarray(log_p, np.float64)
    if diff.ndim != 1 or diff.size < 2:
        raise InputError(f"mc_kl: got {diff.shape} log densities; allowed: [num_samples >= 2]")
    return {"estimate": float(diff.mean()), "stderr": float(diff.std(ddof=1) / np.sqrt(diff.size))}


def ks_uniform(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """KS statistic and exact p-value of u [n, ...] against U(0, 1), along axis 0."""
    u = np.sort(np.clip(np.asarray(u, np.float64), 0.0, 1.0), axis=0)
    n = u.shape[0]
    i = np.arange(1, n + 1).reshape((n,) + (1,) * (u.ndim - 1))
    stat = np.maximum(np.max(i / n - u, axis=0), np.max(u - (i - 1) / n, axis=0))
    return stat, stats.kstwo.sf(stat, n)


@register("pit_ks", needs=("samples", "marginal_cdfs"))
def pit_ks(cdf_values) -> dict[str, float]:
    """Per-marginal KS of PIT values F_j(theta_j) against uniform; Bonferroni over marginals.

    cdf_values: [n, d] exact marginal CDFs at the samples (NaN columns are skipped).
    Returns p_value (Bonferroni-adjusted min), statistic (max KS) and num_marginals.
    """
    u = _matrix(cdf_values, "cdf_values")
    keep = ~np.any(np.isnan(u), axis=0)
    if not keep.any():
        raise InputError("cdf_values: got only NaN columns; allowed: at least one marginal CDF")
    stat, p = ks_uniform(u[:, keep])
    k = int(keep.sum())
    return {
        "p_value": float(min(1.0, k * p.min())),
        "statistic": float(stat.max()),
        "num_marginals": k,
    }


def mahalanobis_squared(samples, mean, cov) -> np.ndarray:
    """(theta - mean)^T cov^-1 (theta - mean) for each row: chi-square(d) under N(mean, cov)."""
    x = _matrix(samples, "samples") - np.atleast_1d(np.asarray(mean, np.float64))
    chol = np.linalg.cholesky(np.atleast_2d(np.asarray(cov, np.float64)))
    z = np.linalg.solve(chol, x.T)
    return np.sum(z**2, axis=0)


@register("mahalanobis_chi2", needs=("samples", "gaussian"))
def mahalanobis_chi2(samples, mean, cov) -> dict[str, float]:
    """KS test of squared Mahalanobis distances against chi-square(d) (Gaussian reference).

    Catches wrong scale and wrong correlation (a flipped correlation inflates the distances)
    that per-marginal tests miss. Returns p_value, statistic, and mean_ratio = mean(d^2) / d.
    """
    m2 = mahalanobis_squared(samples, mean, cov)
    d = np.atleast_1d(np.asarray(mean)).shape[0]
    stat, p = ks_uniform(stats.chi2.cdf(m2, d))
    return {"p_value": float(p), "statistic": float(stat), "mean_ratio": float(m2.mean() / d)}


@register("joint_predictive_kl", needs=("samples", "log_likelihood"))
def joint_predictive_kl(log_likelihood, agent_samples, futures, truth) -> dict[str, float]:
    """KL between a true and an agent's joint predictive of tau future observations, by MC.

    futures: [N, tau, ...] drawn from the true predictive; log_likelihood(theta [M, d],
    x [...]) -> [M] for one observation. truth: exact log p(future) [N], or reference posterior
    samples [R, d] (then log p is the same mixture estimate as the agent's, with R draws).
    The agent's predictive is the mixture (1/M) sum_m prod_t p(x_t | theta_m). Returns
    estimate and stderr (over the N futures).
    """
    futures = np.asarray(futures, np.float64)

    def mixture(theta) -> np.ndarray:
        theta = np.asarray(theta, np.float64)
        out = np.empty(futures.shape[0])
        for i, batch in enumerate(futures):  # loop over futures; vectorized over draws
            total = sum(np.asarray(log_likelihood(theta, x), np.float64) for x in batch)
            out[i] = logsumexp(total) - np.log(theta.shape[0])
        return out

    truth = np.asarray(truth, np.float64)
    log_p = truth if truth.ndim == 1 else mixture(truth)
    if log_p.shape != (futures.shape[0],):
        raise InputError(
            f"truth: got shape {truth.shape}; allowed: [{futures.shape[0]}] exact log densities "
            "or [R, dim] reference samples"
        )
    diff = log_p - mixture(agent_samples)
    return {"estimate": float(diff.mean()), "stderr": float(diff.std(ddof=1) / np.sqrt(diff.size))}
