"""Log densities written once for NumPy (float64 exact references) and JAX (agents' models).

Each function takes `xp` (numpy or jax.numpy); the reference posterior and the model an agent
receives evaluate the very same formula, so their priors cannot drift apart (the PPL paper's
central flaw was a prior mismatch between its reference and its PPL models).
"""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import scipy.special as ssp

LOG_2PI = float(np.log(2.0 * np.pi))


def special(xp):
    """scipy.special for numpy, jax.scipy.special for jax.numpy."""
    return jsp if xp is jnp else ssp


def normal(x, mean, var, xp=np):
    return -0.5 * (LOG_2PI + xp.log(var) + (x - mean) ** 2 / var)


def gamma(x, shape, rate, xp=np):
    """Gamma(shape, rate) (rate = 1 / scipy's scale)."""
    sp = special(xp)
    return shape * xp.log(rate) - sp.gammaln(shape) + (shape - 1.0) * xp.log(x) - rate * x


def inv_gamma(x, shape, scale, xp=np):
    sp = special(xp)
    return shape * xp.log(scale) - sp.gammaln(shape) - (shape + 1.0) * xp.log(x) - scale / x


def beta(x, a, b, xp=np):
    sp = special(xp)
    return (a - 1.0) * xp.log(x) + (b - 1.0) * xp.log1p(-x) - sp.betaln(a, b)


def dirichlet(p, alpha, xp=np):
    """Density of the first K-1 coordinates of p [..., K] (Lebesgue on the simplex's chart)."""
    sp = special(xp)
    norm = sp.gammaln(xp.sum(alpha)) - xp.sum(sp.gammaln(alpha))
    return xp.sum((alpha - 1.0) * xp.log(p), axis=-1) + norm


def bernoulli(y, p, xp=np):
    return y * xp.log(p) + (1.0 - y) * xp.log1p(-p)


def poisson(k, rate, xp=np):
    return k * xp.log(rate) - rate - special(xp).gammaln(k + 1.0)


def mvn(x, mean, cov, xp=np):
    """N(mean, cov) at x [..., d]; cov may be batched [..., d, d]."""
    d = x.shape[-1]
    diff = x - mean
    if cov.ndim == 2:  # one covariance for all rows: invert once
        quad = xp.sum((diff @ xp.linalg.inv(cov)) * diff, axis=-1)
    else:
        quad = xp.sum(diff * xp.linalg.solve(cov, diff[..., None])[..., 0], axis=-1)
    _, logdet = xp.linalg.slogdet(cov)
    return -0.5 * (d * LOG_2PI + logdet + quad)


def inv_wishart(sigma, nu, psi, xp=np):
    """IW(nu, psi) at sigma [..., p, p]."""
    p = sigma.shape[-1]
    sp = special(xp)
    _, logdet_psi = xp.linalg.slogdet(psi)
    _, logdet_sigma = xp.linalg.slogdet(sigma)
    trace = xp.trace(xp.linalg.solve(sigma, xp.broadcast_to(psi, sigma.shape)), axis1=-2, axis2=-1)
    return (
        0.5 * nu * logdet_psi
        - 0.5 * nu * p * np.log(2.0)
        - sp.multigammaln(0.5 * nu, p)
        - 0.5 * (nu + p + 1.0) * logdet_sigma
        - 0.5 * trace
    )


def half_normal(x, scale, xp=np):
    """HalfNormal(scale) at x > 0 (twice N(0, scale^2)'s density)."""
    return 0.5 * np.log(2.0 / np.pi) - xp.log(scale) - 0.5 * (x / scale) ** 2


def student_t(x, df, loc, scale, xp=np):
    """Student's t with df degrees of freedom, location loc and scale (not sd) scale."""
    sp = special(xp)
    norm = sp.gammaln(0.5 * (df + 1.0)) - sp.gammaln(0.5 * df) - 0.5 * xp.log(df * np.pi)
    return norm - xp.log(scale) - 0.5 * (df + 1.0) * xp.log1p(((x - loc) / scale) ** 2 / df)
