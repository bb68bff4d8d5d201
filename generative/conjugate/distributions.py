"""Exact distributions over a family's parameter vector theta (priors and posteriors alike).

Each offers what the evaluators need: `sample(num_samples, seed) -> [n, d]` (an int seed or
a Generator), `log_prob(theta [n, d])`,
exact per-coordinate CDFs `marginal_cdf(theta) -> [n, d]` (NaN where none is closed form),
`mean` and `var` [d], `in_support(theta) -> [n] bool` (an agent's draws may leave the
support, e.g. a kernel density around ABC draws: their exact density is 0, log_prob is only
meaningful inside), and flags: `gaussian` (then `cov` is exact) and `independent`
(coordinates independent, so orthant masses are products of marginal CDFs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from generative.conjugate import densities as dens
from testbed.seeding import Seed, make_rng


def vech_indices(p: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-major lower-triangle indices (diagonal included) of a p x p matrix."""
    return np.tril_indices(p)


def unvech(v: np.ndarray, p: int) -> np.ndarray:
    """[..., p(p+1)/2] -> symmetric [..., p, p]."""
    rows, cols = vech_indices(p)
    out = np.zeros(v.shape[:-1] + (p, p))
    out[..., rows, cols] = v
    out[..., cols, rows] = v
    return out


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """N(mean, cov) over theta [d]."""

    mean_: np.ndarray
    cov: np.ndarray
    gaussian = True

    @property
    def dim(self) -> int:
        return self.mean_.shape[0]

    @property
    def mean(self) -> np.ndarray:
        return self.mean_

    @property
    def var(self) -> np.ndarray:
        return np.diag(self.cov).copy()

    @property
    def independent(self) -> bool:
        return bool(np.allclose(self.cov, np.diag(np.diag(self.cov)), rtol=0, atol=1e-14))

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        chol = np.linalg.cholesky(self.cov)
        return self.mean_ + rng.standard_normal((n, self.dim)) @ chol.T

    def in_support(self, theta) -> np.ndarray:
        return np.ones(np.asarray(theta).shape[0], bool)

    def log_prob(self, theta) -> np.ndarray:
        return dens.mvn(np.asarray(theta, np.float64), self.mean_, self.cov)

    def marginal_cdf(self, theta) -> np.ndarray:
        return stats.norm.cdf(np.asarray(theta), self.mean_, np.sqrt(self.var))


class _Scalar:
    """A (non-Gaussian) distribution over a scalar theta [1]."""

    gaussian = False
    independent = True
    dim = 1


@dataclasses.dataclass(frozen=True)
class Gamma(_Scalar):
    """Gamma(shape, rate) over a positive scalar theta [1]."""

    shape: float
    rate: float

    @property
    def mean(self) -> np.ndarray:
        return np.array([self.shape / self.rate])

    @property
    def var(self) -> np.ndarray:
        return np.array([self.shape / self.rate**2])

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        return rng.gamma(self.shape, 1.0 / self.rate, size=(n, 1))

    def in_support(self, theta):
        return np.asarray(theta, np.float64)[:, 0] > 0.0

    def log_prob(self, theta):
        return dens.gamma(np.asarray(theta, np.float64)[:, 0], self.shape, self.rate)

    def marginal_cdf(self, theta):
        return stats.gamma.cdf(np.asarray(theta), self.shape, scale=1.0 / self.rate)


@dataclasses.dataclass(frozen=True)
class Beta(_Scalar):
    """Beta(a, b) over a probability theta [1]."""

    a: float
    b: float

    @property
    def mean(self):
        return np.array([self.a / (self.a + self.b)])

    @property
    def var(self):
        s = self.a + self.b
        return np.array([self.a * self.b / (s**2 * (s + 1.0))])

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        return rng.beta(self.a, self.b, size=(n, 1))

    def in_support(self, theta):
        t = np.asarray(theta, np.float64)[:, 0]
        return (t > 0.0) & (t < 1.0)

    def log_prob(self, theta):
        return dens.beta(np.asarray(theta, np.float64)[:, 0], self.a, self.b)

    def marginal_cdf(self, theta):
        return stats.beta.cdf(np.asarray(theta), self.a, self.b)


@dataclasses.dataclass(frozen=True)
class Dirichlet:
    """Dirichlet(alpha) over the probability vector theta [K] (density of its first K-1)."""

    alpha: np.ndarray
    gaussian = False
    independent = False

    @property
    def dim(self):
        return self.alpha.shape[0]

    @property
    def mean(self):
        return self.alpha / self.alpha.sum()

    @property
    def var(self):
        a0 = self.alpha.sum()
        m = self.mean
        return m * (1.0 - m) / (a0 + 1.0)

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        return rng.dirichlet(self.alpha, size=n)

    def in_support(self, theta):
        """Positive coordinates summing to 1 (to float rounding)."""
        t = np.asarray(theta, np.float64)
        return np.all(t > 0.0, axis=1) & (np.abs(t.sum(axis=1) - 1.0) < 1e-6)

    def log_prob(self, theta):
        return dens.dirichlet(np.asarray(theta, np.float64), self.alpha)

    def marginal_cdf(self, theta):
        return stats.beta.cdf(np.asarray(theta), self.alpha, self.alpha.sum() - self.alpha)


@dataclasses.dataclass(frozen=True)
class NormalInverseGamma:
    """theta = (mu, sigma^2): sigma^2 ~ IG(alpha, beta), mu | sigma^2 ~ N(mu0, sigma^2 / kappa)."""

    mu0: float
    kappa: float
    alpha: float
    beta: float
    gaussian = False
    independent = False
    dim = 2

    @property
    def mean(self):
        return np.array([self.mu0, self.beta / (self.alpha - 1.0)])

    @property
    def var(self):
        a, b = self.alpha, self.beta
        var_mu = b / (self.kappa * (a - 1.0))
        var_s2 = b**2 / ((a - 1.0) ** 2 * (a - 2.0)) if a > 2 else np.inf
        return np.array([var_mu, var_s2])

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        s2 = self.beta / rng.gamma(self.alpha, 1.0, size=n)
        mu = self.mu0 + np.sqrt(s2 / self.kappa) * rng.standard_normal(n)
        return np.stack([mu, s2], axis=1)

    def in_support(self, theta):
        return np.asarray(theta, np.float64)[:, 1] > 0.0

    def log_prob(self, theta):
        theta = np.asarray(theta, np.float64)
        mu, s2 = theta[:, 0], theta[:, 1]
        return dens.inv_gamma(s2, self.alpha, self.beta) + dens.normal(
            mu, self.mu0, s2 / self.kappa
        )

    def marginal_cdf(self, theta):
        theta = np.asarray(theta, np.float64)
        scale = np.sqrt(self.beta / (self.alpha * self.kappa))
        cdf_mu = stats.t.cdf(theta[:, 0], 2.0 * self.alpha, self.mu0, scale)
        cdf_s2 = stats.invgamma.cdf(theta[:, 1], self.alpha, scale=self.beta)
        return np.stack([cdf_mu, cdf_s2], axis=1)


@dataclasses.dataclass(frozen=True)
class NormalInverseWishart:
    """theta = (mu [p], vech(Sigma)): Sigma ~ IW(nu, psi), mu | Sigma ~ N(mu0, Sigma / kappa)."""

    mu0: np.ndarray
    kappa: float
    nu: float
    psi: np.ndarray
    gaussian = False
    independent = False

    @property
    def p(self) -> int:
        return self.mu0.shape[0]

    @property
    def dim(self) -> int:
        return self.p + self.p * (self.p + 1) // 2

    def split(self, theta) -> tuple[np.ndarray, np.ndarray]:
        theta = np.asarray(theta, np.float64)
        return theta[:, : self.p], unvech(theta[:, self.p :], self.p)

    @property
    def mean(self):
        rows, cols = vech_indices(self.p)
        mean_sigma = self.psi / (self.nu - self.p - 1.0)
        return np.concatenate([self.mu0, mean_sigma[rows, cols]])

    @property
    def var(self):
        p, nu, psi = self.p, self.nu, self.psi
        df = nu - p + 1.0
        var_mu = np.diag(psi) / (self.kappa * df) * df / (df - 2.0)
        d = np.diag(psi)
        var_sigma = ((nu - p + 1.0) * psi**2 + (nu - p - 1.0) * np.outer(d, d)) / (
            (nu - p) * (nu - p - 1.0) ** 2 * (nu - p - 3.0)
        )
        rows, cols = vech_indices(p)
        return np.concatenate([var_mu, var_sigma[rows, cols]])

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        p = self.p
        # Sigma^-1 ~ Wishart(nu, psi^-1): Bartlett factors, vectorized over n.
        chol = np.linalg.cholesky(np.linalg.inv(self.psi))
        a = np.zeros((n, p, p))
        rows, cols = np.tril_indices(p, -1)
        a[:, rows, cols] = rng.standard_normal((n, rows.size))
        diag = np.sqrt(rng.chisquare(self.nu - np.arange(p), size=(n, p)))
        a[:, np.arange(p), np.arange(p)] = diag
        la = chol @ a
        sigma = np.linalg.inv(la @ np.swapaxes(la, -1, -2))
        sigma = 0.5 * (sigma + np.swapaxes(sigma, -1, -2))
        mu = self.mu0 + np.einsum(
            "nij,nj->ni", np.linalg.cholesky(sigma / self.kappa), rng.standard_normal((n, p))
        )
        vr, vc = vech_indices(p)
        return np.concatenate([mu, sigma[:, vr, vc]], axis=1)

    def in_support(self, theta):
        """Sigma positive definite (its smallest eigenvalue above 0)."""
        _, sigma = self.split(theta)
        return np.linalg.eigvalsh(sigma)[:, 0] > 0.0

    def log_prob(self, theta):
        mu, sigma = self.split(theta)
        return dens.inv_wishart(sigma, self.nu, self.psi) + dens.mvn(
            mu, self.mu0, sigma / self.kappa
        )

    def marginal_cdf(self, theta):
        """Exact CDFs for mu_j (Student t) and Sigma_jj (inverse gamma); NaN off-diagonal."""
        mu, sigma = self.split(theta)
        p, df = self.p, self.nu - self.p + 1.0
        out = np.full((mu.shape[0], self.dim), np.nan)
        scale = np.sqrt(np.diag(self.psi) / (self.kappa * df))
        out[:, :p] = stats.t.cdf(mu, df, self.mu0, scale)
        rows, cols = vech_indices(p)
        for k, (i, j) in enumerate(zip(rows, cols)):
            if i == j:
                out[:, p + k] = stats.invgamma.cdf(
                    sigma[:, i, i], 0.5 * df, scale=0.5 * self.psi[i, i]
                )
        return out
