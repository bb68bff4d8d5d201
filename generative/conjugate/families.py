"""The conjugate families, all by name: prior, likelihood, exact update, evidence and
unconstraining transform. Defined here those whose likelihood has no unknown scale
(linear-Gaussian with known noise, discrete); those of Gaussian likelihoods with an unknown
scale in `generative.conjugate.unknown_scale`; the base they share and the protocol in
`generative.conjugate.family_base`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special as ssp
from scipy import stats

from generative.conjugate import densities as dens
from generative.conjugate import distributions as dist
from generative.conjugate.family_base import Family, LogTransformed, _arr, _GammaScalar, _Scalar
from generative.conjugate.unknown_scale import (
    NormalInverseGammaFamily,
    NormalInverseWishartFamily,
    NormalKnownMean,
)
from testbed.seeding import Seed, make_rng

__all__ = [
    "BayesLinReg",
    "BetaBinomial",
    "DirichletMultinomial",
    "Family",
    "GammaPoisson",
    "LinearGaussian",
    "LogTransformed",
    "MvnKnownCov",
    "NormalInverseGammaFamily",
    "NormalInverseWishartFamily",
    "NormalKnownMean",
    "NormalKnownVar",
]


# ---- linear-Gaussian families -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LinearGaussian(Family):
    """theta ~ N(prior_mean, prior_cov) and y_flat = A(x) theta + N(0, noise(x))."""

    prior_mean: np.ndarray
    prior_cov: np.ndarray

    @property
    def dim(self) -> int:
        return _arr(self.prior_mean).shape[0]

    @property
    def dim_u(self) -> int:
        return self.dim

    def prior(self):
        return dist.Gaussian(_arr(self.prior_mean), _arr(self.prior_cov))

    def log_prior(self, theta, xp=np):
        return dens.mvn(theta, xp.asarray(self.prior_mean), xp.asarray(self.prior_cov), xp=xp)

    def constrain(self, u, xp=jnp):
        return u

    def unconstrain(self, theta, xp=jnp):
        return theta

    def log_det_jacobian(self, u, xp=jnp):
        return xp.zeros(())

    def update(self, x, y):
        a, noise = self.linear_gaussian(_arr(x))
        y = _arr(y).reshape(-1)
        prec0 = np.linalg.inv(_arr(self.prior_cov))
        noise_inv_a = np.linalg.solve(noise, a)
        cov = np.linalg.inv(prec0 + a.T @ noise_inv_a)
        cov = 0.5 * (cov + cov.T)
        mean = cov @ (prec0 @ _arr(self.prior_mean) + noise_inv_a.T @ y)
        return dataclasses.replace(self, prior_mean=mean, prior_cov=cov)

    def log_evidence(self, x, y):
        """Gaussian evidence; A depends on n only (families with inputs override)."""
        y = _arr(y)
        a, noise = self.linear_gaussian(np.zeros((y.shape[-2], 1)))
        cov = a @ _arr(self.prior_cov) @ a.T + noise
        flat = y.reshape(y.shape[:-2] + (-1,))
        return dens.mvn(flat, a @ _arr(self.prior_mean), cov)


@dataclasses.dataclass(frozen=True)
class NormalKnownVar(LinearGaussian):
    """y_i ~ N(mu, noise_var), mu ~ N(prior_mean, prior_cov) (1 x 1)."""

    noise_var: float
    name = "normal_known_var"
    param_names = ("mu",)
    dim_y = 1

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(dens.normal(y[..., 0], theta[..., None, 0], self.noise_var, xp=xp), axis=-1)

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        theta = _arr(theta)
        noise = np.sqrt(self.noise_var) * rng.standard_normal((theta.shape[0], x.shape[0], 1))
        return theta[:, None, :] + noise

    def linear_gaussian(self, x):
        n = x.shape[-2]
        return np.ones((n, 1)), self.noise_var * np.eye(n)


@dataclasses.dataclass(frozen=True)
class MvnKnownCov(LinearGaussian):
    """y_i ~ N(mu, noise_cov) in R^p, mu ~ N(prior_mean, prior_cov)."""

    noise_cov: np.ndarray
    name = "mvn_known_cov"

    @property
    def param_names(self):
        return tuple(f"mu_{j}" for j in range(self.dim))

    @property
    def dim_y(self):
        return self.dim

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(dens.mvn(y, theta[..., None, :], xp.asarray(self.noise_cov), xp=xp), axis=-1)

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        theta = _arr(theta)
        chol = np.linalg.cholesky(_arr(self.noise_cov))
        z = rng.standard_normal((theta.shape[0], x.shape[0], self.dim))
        return theta[:, None, :] + z @ chol.T

    def linear_gaussian(self, x):
        n = x.shape[-2]
        return np.tile(np.eye(self.dim), (n, 1)), np.kron(np.eye(n), _arr(self.noise_cov))


@dataclasses.dataclass(frozen=True)
class BayesLinReg(LinearGaussian):
    """y_i ~ N(x_i . w, noise_var), w ~ N(prior_mean, prior_cov); inputs x_i ~ N(0, I)."""

    noise_var: float
    name = "blr"
    dim_y = 1

    @property
    def dim_x(self):
        return self.dim

    @property
    def param_names(self):
        return tuple(f"w_{j}" for j in range(self.dim))

    def sample_inputs(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        return rng.standard_normal((n, self.dim))

    def log_likelihood(self, theta, x, y, xp=np):
        mean = xp.sum(x * theta[..., None, :], axis=-1)
        return xp.sum(dens.normal(y[..., 0], mean, self.noise_var, xp=xp), axis=-1)

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        mean = _arr(theta) @ _arr(x).T
        return (mean + np.sqrt(self.noise_var) * rng.standard_normal(mean.shape))[..., None]

    def simulate_batched(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        mean = np.einsum("bd,bnd->bn", _arr(theta), _arr(x))
        return (mean + np.sqrt(self.noise_var) * rng.standard_normal(mean.shape))[..., None]

    def linear_gaussian(self, x):
        return _arr(x), self.noise_var * np.eye(x.shape[-2])

    def log_evidence(self, x, y):
        x, y = _arr(x), _arr(y)
        batch = y.shape[:-2]
        x = np.broadcast_to(x, batch + x.shape[-2:])
        mean = x @ _arr(self.prior_mean)
        cov = x @ _arr(self.prior_cov) @ np.swapaxes(x, -1, -2)
        cov = cov + self.noise_var * np.eye(x.shape[-2])
        return dens.mvn(y[..., 0], mean, cov)


# ---- discrete likelihoods ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BetaBinomial(_Scalar):
    """y_i ~ Bernoulli(p), p ~ Beta(a, b); k successes in n trials give Beta(a + k, b + n - k)."""

    a: float
    b: float
    name = "beta_binomial"
    param_names = ("p",)

    def prior(self):
        return dist.Beta(self.a, self.b)

    def log_prior(self, theta, xp=np):
        return dens.beta(theta[..., 0], self.a, self.b, xp=xp)

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(dens.bernoulli(y[..., 0], theta[..., None, 0], xp=xp), axis=-1)

    def constrain(self, u, xp=jnp):
        return jax.nn.sigmoid(u) if xp is jnp else ssp.expit(u)

    def unconstrain(self, theta, xp=jnp):
        return xp.log(theta) - xp.log1p(-theta)

    def log_det_jacobian(self, u, xp=jnp):
        return xp.sum(-xp.logaddexp(0.0, u) - xp.logaddexp(0.0, -u))

    def update(self, x, y):
        k, n = float(np.sum(y)), np.asarray(y).shape[0]
        return dataclasses.replace(self, a=self.a + k, b=self.b + n - k)

    def log_evidence(self, x, y):
        y = _arr(y)[..., 0]
        k, n = y.sum(axis=-1), y.shape[-1]
        return ssp.betaln(self.a + k, self.b + n - k) - ssp.betaln(self.a, self.b)

    def sum_statistic_log_pmfs(self, samples, tau: int):
        """log p(s) and log q(s) of s = sum of tau future trials (exact; this family = posterior).

        Both joint predictives depend on a sequence only through s (the binomial coefficient
        cancels), so KL over the 2^tau sequences equals KL over s = 0..tau.
        """
        s = np.arange(tau + 1.0)
        log_choose = ssp.gammaln(tau + 1.0) - ssp.gammaln(s + 1.0) - ssp.gammaln(tau - s + 1.0)
        log_p = log_choose + ssp.betaln(self.a + s, self.b + tau - s) - ssp.betaln(self.a, self.b)
        theta = _arr(samples)[:, :1]
        per = s * np.log(theta) + (tau - s) * np.log1p(-theta)
        log_q = log_choose + ssp.logsumexp(per, axis=0) - np.log(theta.shape[0])
        return log_p, log_q

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        p = _arr(theta)[:, None, :]
        return (rng.random((p.shape[0], x.shape[0], 1)) < p).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class GammaPoisson(_GammaScalar):
    """y_i ~ Poisson(lam), lam ~ Gamma(shape, rate)."""

    shape: float
    rate: float
    name = "gamma_poisson"
    param_names = ("rate",)

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(dens.poisson(y[..., 0], theta[..., None, 0], xp=xp), axis=-1)

    def update(self, x, y):
        y = _arr(y)
        return dataclasses.replace(self, shape=self.shape + y.sum(), rate=self.rate + y.shape[0])

    def log_evidence(self, x, y):
        y = _arr(y)[..., 0]
        s, n = y.sum(axis=-1), y.shape[-1]
        a_n, b_n = self.shape + s, self.rate + n
        return (
            self.shape * np.log(self.rate)
            - ssp.gammaln(self.shape)
            + ssp.gammaln(a_n)
            - a_n * np.log(b_n)
            - ssp.gammaln(y + 1.0).sum(axis=-1)
        )

    def sum_statistic_log_pmfs(self, samples, tau: int):
        """log p(s) and log q(s) of s = sum of tau future counts (this family = posterior).

        Given lam, s ~ Poisson(tau lam) and the sequence's 1 / prod y_t! cancels, so KL over
        sequences equals KL over s; p(s) is negative binomial. s runs to p's 1 - 1e-12 quantile.
        """
        prob = self.rate / (self.rate + tau)
        s = np.arange(stats.nbinom.ppf(1.0 - 1e-12, self.shape, prob) + 1.0)
        log_p = stats.nbinom.logpmf(s, self.shape, prob)
        lam = _arr(samples)[:, :1]
        per = stats.poisson.logpmf(s, tau * lam)
        return log_p, ssp.logsumexp(per, axis=0) - np.log(lam.shape[0])

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        lam = _arr(theta)[:, None, :]
        return rng.poisson(np.broadcast_to(lam, (lam.shape[0], x.shape[0], 1))).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class DirichletMultinomial(Family):
    """y_i one-hot Categorical(pi) over K classes, pi ~ Dirichlet(alpha)."""

    alpha: np.ndarray
    name = "dirichlet_multinomial"

    @property
    def dim(self):
        return _arr(self.alpha).shape[0]

    @property
    def dim_u(self):
        return self.dim - 1

    @property
    def dim_y(self):
        return self.dim

    @property
    def param_names(self):
        return tuple(f"pi_{k}" for k in range(self.dim))

    def prior(self):
        return dist.Dirichlet(_arr(self.alpha))

    def log_prior(self, theta, xp=np):
        return dens.dirichlet(theta, xp.asarray(self.alpha), xp=xp)

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(y * xp.log(theta[..., None, :]), axis=(-2, -1))

    def constrain(self, u, xp=jnp):
        """Additive log-ratio: pi = softmax([u, 0])."""
        z = xp.concatenate([u, xp.zeros(1)])
        return jax.nn.softmax(z) if xp is jnp else ssp.softmax(z)

    def unconstrain(self, theta, xp=jnp):
        return xp.log(theta[:-1]) - xp.log(theta[-1])

    def log_det_jacobian(self, u, xp=jnp):
        """|d pi_{1:K-1} / du| = prod_k pi_k over all K."""
        z = xp.concatenate([u, xp.zeros(1)])
        return xp.sum(jax.nn.log_softmax(z) if xp is jnp else ssp.log_softmax(z))

    def update(self, x, y):
        return dataclasses.replace(self, alpha=_arr(self.alpha) + _arr(y).sum(axis=0))

    def log_evidence(self, x, y):
        counts = _arr(y).sum(axis=-2)
        alpha = _arr(self.alpha)
        n = counts.sum(axis=-1)
        return (
            ssp.gammaln(alpha.sum())
            - ssp.gammaln(alpha.sum() + n)
            + np.sum(ssp.gammaln(alpha + counts) - ssp.gammaln(alpha), axis=-1)
        )

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        theta = _arr(theta)
        u = rng.random((theta.shape[0], x.shape[0], 1))
        labels = (u > np.cumsum(theta, axis=1)[:, None, :]).sum(axis=-1)
        labels = np.minimum(labels, self.dim - 1)
        return np.eye(self.dim)[labels]
