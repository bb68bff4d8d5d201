"""sbibm's other posterior scores: predictive median distance, moments, NLTP and KSD."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from testbed.config import check_positive
from testbed.errors import InputError
from testbed.metrics.inputs import as_samples, same_dim, to_numpy
from testbed.metrics.mmd import median_bandwidth
from testbed.metrics.registry import register


@register("median_distance", ("observation", "posterior_predictive"))
def median_distance(x_o, predictive_samples) -> float:
    """Median L2 distance of posterior-predictive simulations to x_o (sbibm's MEDDIST)."""
    xs = as_samples(predictive_samples, "predictive_samples", dtype=np.float64)
    x_o = to_numpy(x_o, np.float64).reshape(1, -1)
    if x_o.shape[1] != xs.shape[1]:
        raise InputError(f"x_o: got dim {x_o.shape[1]}; allowed: {xs.shape[1]} (as simulations)")
    if not np.all(np.isfinite(x_o)):
        raise InputError("x_o: got NaN or infinite values; allowed: finite")
    return float(np.median(np.linalg.norm(xs - x_o, axis=1)))


def _pair(reference, samples):
    ref = as_samples(reference, "reference", min_rows=2, dtype=np.float64)
    smp = as_samples(samples, "samples", min_rows=2, dtype=np.float64)
    same_dim(ref, smp, "reference", "samples")
    return ref, smp


@register("posterior_mean_error", ("reference_samples", "posterior_samples"))
def posterior_mean_error(reference, samples) -> float:
    """Mean over dimensions of (mean_q - mean_ref) / std_ref (signed, as sbibm)."""
    ref, smp = _pair(reference, samples)
    return float(np.mean((smp.mean(0) - ref.mean(0)) / ref.std(0, ddof=1)))


@register("posterior_variance_ratio", ("reference_samples", "posterior_samples"))
def posterior_variance_ratio(reference, samples) -> float:
    """Mean over dimensions of var_q / var_ref (1 = matched spread)."""
    ref, smp = _pair(reference, samples)
    return float(np.mean(smp.var(0, ddof=1) / ref.var(0, ddof=1)))


@register("outside_support_fraction", ("posterior_samples", "prior_log_prob"))
def outside_support_fraction(samples, log_density: Callable) -> float:
    """Fraction of the agent's posterior draws where the prior has no mass (log density -inf)."""
    return float(1.0 - np.isfinite(log_density(samples)).mean())


def _nltp_at_truth(evidence) -> dict[str, float]:
    """NLTP on a problem: the agent's log density at the true parameters."""
    return {"nltp": nltp(evidence["posterior_log_prob"](evidence["true_parameters"]))}


@register("nltp", ("posterior_log_prob", "true_parameters"), _nltp_at_truth, ("nltp",))
def nltp(log_prob_true_parameters) -> float:
    """Negative log-probability of the true parameters, -log q(theta* | x_o), averaged.

    A log-probability of -inf (theta* outside q's support) gives +inf; NaN or +inf is an error.
    """
    lp = to_numpy(log_prob_true_parameters, np.float64).reshape(-1)
    if lp.size == 0 or np.any(np.isnan(lp) | (lp == np.inf)):
        raise InputError(
            f"log_prob_true_parameters: got {lp.size} values with NaN or +inf; allowed: at "
            "least one value, each finite or -inf"
        )
    return float(-lp.mean())


@jax.jit
def _stein_gram(x, s, sigma2):
    """Stein kernel matrix H_ab for the Gaussian kernel exp(-|a - b|^2 / (2 sigma2))."""
    diff = x[:, None, :] - x[None, :, :]  # a - b
    d2 = jnp.sum(diff**2, -1)
    k = jnp.exp(-d2 / (2 * sigma2))
    d = x.shape[1]
    term1 = (s @ s.T) * k
    # s_a . grad_b k + s_b . grad_a k, with grad_a k = -(a - b) k / sigma2
    term2 = (jnp.einsum("ad,abd->ab", s, diff) - jnp.einsum("bd,abd->ab", s, diff)) * k / sigma2
    term3 = k * (d / sigma2 - d2 / sigma2**2)
    return term1 + term2 + term3


@register("ksd", ("posterior_samples", "target_score"))
def ksd(samples, score: Callable | None = None, *, scores=None, sigma2: float | None = None):
    """Kernel Stein discrepancy n * V_n with a Gaussian kernel (kgof's KernelSteinTest stat).

    score: grad log p (samples [n, d] -> [n, d]), or give `scores` at the samples directly.
    sigma2: kernel variance; default the squared median pairwise distance of the samples
    (sbibm passes that of the reference posterior).
    """
    x = as_samples(samples, "samples", min_rows=2, dtype=np.float32)
    if (score is None) == (scores is None):
        raise InputError("ksd: give exactly one of score (a function) or scores (an array)")
    s = to_numpy(score(x) if score is not None else scores, np.float32)
    if s.shape != x.shape or not np.all(np.isfinite(s)):
        raise InputError(f"scores: got shape {s.shape}; allowed: finite, shape {x.shape}")
    if sigma2 is None:
        sigma2 = median_bandwidth(x[:1000]) ** 2
    check_positive("sigma2", sigma2)
    h = _stein_gram(jnp.asarray(x), jnp.asarray(s), jnp.float32(sigma2))
    return float(x.shape[0] * jnp.mean(h))
