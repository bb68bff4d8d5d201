"""One-sample scores of samples q against an exact posterior p.

Exact Gaussian KL, Monte-Carlo KL(q || p) when q has a density, per-marginal PIT/KS with
exact CDFs (Bonferroni over marginals) and the Mahalanobis chi-square test for Gaussian p.
With an exact reference these replace two-sample tests: no reference-sample noise.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from testbed.errors import InputError
from testbed.metrics.inputs import as_samples, to_numpy
from testbed.metrics.registry import register


def _matrix(x, name: str) -> np.ndarray:
    """[n, d] float64 (a 1-D input is n scalars); NaN allowed (checked by the caller)."""
    x = to_numpy(x, np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise InputError(f"{name}: got shape {x.shape}; allowed: [num_samples, dim]")
    return x


def _finite(x: np.ndarray, name: str) -> np.ndarray:
    if not np.all(np.isfinite(x)):
        raise InputError(f"{name}: got NaN or infinite values; allowed: finite")
    return x


def _gaussian_params(mean, cov, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Finite mean [d] and the Cholesky factor of a positive-definite cov [d, d]."""
    m = _finite(np.atleast_1d(to_numpy(mean, np.float64)), names[0])
    c = _finite(np.atleast_2d(to_numpy(cov, np.float64)), names[1])
    d = m.shape[0]
    if m.ndim != 1 or c.shape != (d, d):
        raise InputError(
            f"{names[0]} / {names[1]}: got shapes {m.shape} and {c.shape}; allowed: [d], [d, d]"
        )
    try:
        return m, np.linalg.cholesky(c)
    except np.linalg.LinAlgError:
        raise InputError(f"{names[1]}: not positive definite; allowed: a covariance") from None


def _gaussian_kl(evidence) -> dict[str, float]:
    """KL of the agent's Gaussian posterior to the closed-form Gaussian posterior."""
    q, p = evidence["gaussian_posterior"], evidence["gaussian_exact_posterior"]
    return {"kl_gaussian": gaussian_kl(q.mean, q.cov, p.mean, p.cov)}


@register(
    "gaussian_kl",
    ("gaussian_posterior", "gaussian_exact_posterior"),
    _gaussian_kl,
    ("kl_gaussian",),
)
def gaussian_kl(mean_q, cov_q, mean_p, cov_p) -> float:
    """KL(N(mean_q, cov_q) || N(mean_p, cov_p)) in closed form (nats)."""
    mq, lq = _gaussian_params(mean_q, cov_q, ("mean_q", "cov_q"))
    mp, lp = _gaussian_params(mean_p, cov_p, ("mean_p", "cov_p"))
    d = mq.shape[0]
    if mp.shape != (d,):
        raise InputError(
            f"gaussian_kl: got shapes mean_q {mq.shape}, mean_p {mp.shape}; allowed: the same [d]"
        )
    a = np.linalg.solve(lp, lq)  # L_p^-1 L_q: trace term = ||a||_F^2
    b = np.linalg.solve(lp, mp - mq)
    logdet = 2.0 * (np.sum(np.log(np.diag(lp))) - np.sum(np.log(np.diag(lq))))
    return float(0.5 * (np.sum(a**2) + np.sum(b**2) - d + logdet))


def mc_kl_against(posterior, log_q: np.ndarray, samples: np.ndarray) -> dict[str, float]:
    """KL(q || p) by Monte Carlo at q's `samples`, p a closed-form posterior with no mass
    outside its support (a sample there makes the KL +inf)."""
    inside = posterior.in_support(samples)
    log_p = np.full(samples.shape[0], -np.inf)
    log_p[inside] = posterior.log_prob(samples[inside])
    return mc_kl(np.asarray(log_q, np.float64).reshape(-1), log_p)


def _mc_kl(evidence) -> dict[str, float]:
    """KL(q || p) on a problem with a closed-form posterior, q's density at its samples."""
    samples = np.asarray(evidence["posterior_samples"], np.float64)
    log_q = evidence["posterior_log_prob"](samples)
    result = mc_kl_against(evidence["exact_posterior"], log_q, samples)
    return {"kl_q_p": result["estimate"], "kl_q_p_stderr": result["stderr"]}


@register(
    "mc_kl",
    ("posterior_samples", "posterior_log_prob", "exact_posterior"),
    _mc_kl,
    ("kl_q_p", "kl_q_p_stderr"),
)
def mc_kl(log_q, log_p) -> dict[str, float]:
    """KL(q || p) by Monte Carlo: mean of log q - log p at samples from q, with its std error.

    log_p = -inf (a sample outside p's support) makes the KL +inf; NaN or +inf is an error.
    """
    lq, lp = to_numpy(log_q, np.float64), to_numpy(log_p, np.float64)
    if lq.ndim != 1 or lq.shape != lp.shape or lq.size < 2:
        raise InputError(
            f"log_q / log_p: got shapes {lq.shape} and {lp.shape}; allowed: the same "
            "[num_samples >= 2]"
        )
    _finite(lq, "log_q")
    if np.any(np.isnan(lp) | (lp == np.inf)):
        raise InputError("log_p: got NaN or +inf values; allowed: finite or -inf")
    if np.any(lp == -np.inf):
        return {"estimate": np.inf, "stderr": np.inf}
    diff = lq - lp
    return {"estimate": float(diff.mean()), "stderr": float(diff.std(ddof=1) / np.sqrt(diff.size))}


def ks_uniform(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """KS statistic and exact p-value of u [n, ...] against U(0, 1), along axis 0."""
    u = np.sort(np.clip(np.asarray(u, np.float64), 0.0, 1.0), axis=0)
    n = u.shape[0]
    i = np.arange(1, n + 1).reshape((n,) + (1,) * (u.ndim - 1))
    stat = np.maximum(np.max(i / n - u, axis=0), np.max(u - (i - 1) / n, axis=0))
    return stat, stats.kstwo.sf(stat, n)


def _pit_ks(evidence) -> dict[str, float]:
    """PIT/KS on a problem: the exact marginal CDFs at the agent's samples."""
    samples = np.asarray(evidence["posterior_samples"], np.float64)
    result = pit_ks(evidence["exact_posterior"].marginal_cdf(samples))
    return {"pit_ks_pvalue": result["p_value"], "pit_ks_statistic": result["statistic"]}


@register(
    "pit_ks",
    ("posterior_samples", "exact_posterior"),
    _pit_ks,
    ("pit_ks_pvalue", "pit_ks_statistic"),
)
def pit_ks(cdf_values) -> dict[str, float]:
    """Per-marginal KS of PIT values F_j(theta_j) against uniform; Bonferroni over marginals.

    cdf_values: [n, d] exact marginal CDFs at the samples, in [0, 1]; a column that is all
    NaN (no closed-form CDF for that coordinate) is skipped. Returns p_value
    (Bonferroni-adjusted min), statistic (max KS) and num_marginals.
    """
    u = _matrix(cdf_values, "cdf_values")
    keep = ~np.all(np.isnan(u), axis=0)
    if not keep.any():
        raise InputError("cdf_values: got only NaN columns; allowed: at least one marginal CDF")
    if not np.all((u[:, keep] >= 0.0) & (u[:, keep] <= 1.0)):  # False for NaN as well
        raise InputError(
            "cdf_values: got values outside [0, 1] or NaN inside a column; allowed: CDF values "
            "in [0, 1] (a whole NaN column marks a coordinate without a CDF)"
        )
    stat, p = ks_uniform(u[:, keep])
    k = int(keep.sum())
    return {
        "p_value": float(min(1.0, k * p.min())),
        "statistic": float(stat.max()),
        "num_marginals": k,
    }


def mahalanobis_squared(samples, mean, cov) -> np.ndarray:
    """(theta - mean)^T cov^-1 (theta - mean) for each row: chi-square(d) under N(mean, cov)."""
    x = as_samples(samples, "samples", dtype=np.float64)
    m, chol = _gaussian_params(mean, cov, ("mean", "cov"))
    if x.shape[1] != m.shape[0]:
        raise InputError(f"samples: got dim {x.shape[1]}; allowed: {m.shape[0]} (that of mean)")
    z = np.linalg.solve(chol, (x - m).T)
    return np.sum(z**2, axis=0)


def _mahalanobis(evidence) -> dict[str, float]:
    """Mahalanobis chi-square on a problem with a Gaussian closed-form posterior."""
    p = evidence["gaussian_exact_posterior"]
    samples = np.asarray(evidence["posterior_samples"], np.float64)
    result = mahalanobis_chi2(samples, p.mean, p.cov)
    return {"mahalanobis_pvalue": result["p_value"], "mahalanobis_mean_ratio": result["mean_ratio"]}


@register(
    "mahalanobis_chi2",
    ("posterior_samples", "gaussian_exact_posterior"),
    _mahalanobis,
    ("mahalanobis_pvalue", "mahalanobis_mean_ratio"),
)
def mahalanobis_chi2(samples, mean, cov) -> dict[str, float]:
    """KS test of squared Mahalanobis distances against chi-square(d) (Gaussian reference).

    Catches wrong scale and wrong correlation (a flipped correlation inflates the distances)
    that per-marginal tests miss. Returns p_value, statistic, and mean_ratio = mean(d^2) / d.
    """
    m2 = mahalanobis_squared(samples, mean, cov)
    d = np.atleast_1d(to_numpy(mean)).shape[0]
    stat, p = ks_uniform(stats.chi2.cdf(m2, d))
    return {"p_value": float(p), "statistic": float(stat), "mean_ratio": float(m2.mean() / d)}


TESTS_AGAINST_EXACT = {
    "pit_ks": "the PIT/KS test",
    "mahalanobis": "the Mahalanobis chi-square test",
    "ddks": "the ddKS test",
    "c2st": "the classifier two-sample test",
}


def rejection_notes(quality, alpha: float = 0.05) -> list[str]:
    """A line for each exact test that rejected at level `alpha` (`<test>_reject` true):
    what it means and how often a correct sampler does it, so one run's rejection is read
    as what it is."""
    lines = []
    for test, name in TESTS_AGAINST_EXACT.items():
        if not quality.get(f"{test}_reject"):
            continue
        p, n = quality.get(f"{test}_pvalue"), quality.get("tests_num_draws")
        read = f" {n:.0f} draws it read" if n else " draws"
        step = quality.get("tests_thinning") or 1
        if step > 1:
            read += f" (the chains thinned {step:.0f}-fold to their effective sample size)"
        lines.append(
            f"{test}_reject 1: {name} says the{read} do not come from the exact "
            f"posterior (p = {p:.2g} < alpha = {alpha:g}); a correct sampler gets this in "
            f"{alpha:.0%} of runs, so rerun with other seeds before calling it a fault"
        )
    return lines
