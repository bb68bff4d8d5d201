"""The conjugate families of Gaussian likelihoods with an unknown scale: a known mean
(Gamma precision), Normal-inverse-gamma and Normal-inverse-Wishart priors."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import scipy.special as ssp

from generative.conjugate import densities as dens
from generative.conjugate import distributions as dist
from generative.conjugate.family_base import LOG_2PI, Family, _arr, _GammaScalar
from testbed.seeding import Seed, make_rng


@dataclasses.dataclass(frozen=True)
class NormalKnownMean(_GammaScalar):
    """y_i ~ N(mean, 1 / lam), precision lam ~ Gamma(shape, rate)."""

    mean: float
    shape: float
    rate: float
    name = "normal_known_mean"
    param_names = ("precision",)

    def log_likelihood(self, theta, x, y, xp=np):
        var = 1.0 / theta[..., None, 0]
        return xp.sum(dens.normal(y[..., 0], self.mean, var, xp=xp), axis=-1)

    def update(self, x, y):
        y = _arr(y)[:, 0]
        return dataclasses.replace(
            self,
            shape=self.shape + 0.5 * y.size,
            rate=self.rate + 0.5 * np.sum((y - self.mean) ** 2),
        )

    def log_evidence(self, x, y):
        y = _arr(y)[..., 0]
        n = y.shape[-1]
        shape_n = self.shape + 0.5 * n
        rate_n = self.rate + 0.5 * np.sum((y - self.mean) ** 2, axis=-1)
        return (
            self.shape * np.log(self.rate)
            - ssp.gammaln(self.shape)
            + ssp.gammaln(shape_n)
            - shape_n * np.log(rate_n)
            - 0.5 * n * LOG_2PI
        )

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        sd = 1.0 / np.sqrt(_arr(theta))
        return self.mean + sd[:, None, :] * rng.standard_normal((sd.shape[0], x.shape[0], 1))


@dataclasses.dataclass(frozen=True)
class NormalInverseGammaFamily(Family):
    """y_i ~ N(mu, s2); s2 ~ IG(alpha, beta), mu | s2 ~ N(mu0, s2 / kappa). theta = (mu, s2)."""

    mu0: float
    kappa: float
    alpha: float
    beta: float
    name = "nig"
    param_names = ("mu", "sigma2")
    dim = 2
    dim_u = 2
    dim_y = 1

    def prior(self):
        return dist.NormalInverseGamma(self.mu0, self.kappa, self.alpha, self.beta)

    def log_prior(self, theta, xp=np):
        mu, s2 = theta[..., 0], theta[..., 1]
        return dens.inv_gamma(s2, self.alpha, self.beta, xp=xp) + dens.normal(
            mu, self.mu0, s2 / self.kappa, xp=xp
        )

    def log_likelihood(self, theta, x, y, xp=np):
        return xp.sum(
            dens.normal(y[..., 0], theta[..., None, 0], theta[..., None, 1], xp=xp), axis=-1
        )

    def constrain(self, u, xp=jnp):
        return xp.stack([u[0], xp.exp(u[1])])

    def unconstrain(self, theta, xp=jnp):
        return xp.stack([theta[0], xp.log(theta[1])])

    def log_det_jacobian(self, u, xp=jnp):
        return u[1]

    def update(self, x, y):
        y = _arr(y)[:, 0]
        n, ybar = y.size, y.mean()
        kappa_n = self.kappa + n
        return dataclasses.replace(
            self,
            mu0=(self.kappa * self.mu0 + n * ybar) / kappa_n,
            kappa=kappa_n,
            alpha=self.alpha + 0.5 * n,
            beta=self.beta
            + 0.5 * np.sum((y - ybar) ** 2)
            + self.kappa * n * (ybar - self.mu0) ** 2 / (2.0 * kappa_n),
        )

    def log_evidence(self, x, y):
        y = _arr(y)[..., 0]
        n = y.shape[-1]
        ybar = y.mean(axis=-1)
        kappa_n = self.kappa + n
        alpha_n = self.alpha + 0.5 * n
        beta_n = (
            self.beta
            + 0.5 * np.sum((y - ybar[..., None]) ** 2, axis=-1)
            + self.kappa * n * (ybar - self.mu0) ** 2 / (2.0 * kappa_n)
        )
        return (
            ssp.gammaln(alpha_n)
            - ssp.gammaln(self.alpha)
            + self.alpha * np.log(self.beta)
            - alpha_n * np.log(beta_n)
            + 0.5 * np.log(self.kappa / kappa_n)
            - 0.5 * n * LOG_2PI
        )

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        theta = _arr(theta)
        z = rng.standard_normal((theta.shape[0], x.shape[0], 1))
        return theta[:, None, 0:1] + np.sqrt(theta[:, None, 1:2]) * z


def _chol_from_u(l_flat, p: int, xp):
    """Lower-triangular L from row-major lower-triangle entries, diagonal through exp."""
    rows, cols = np.tril_indices(p)
    if xp is jnp:
        low = jnp.zeros((p, p)).at[rows, cols].set(l_flat)
    else:
        low = np.zeros((p, p))
        low[rows, cols] = l_flat
    diag = xp.diagonal(low)
    return low - xp.diag(diag) + xp.diag(xp.exp(diag))


@dataclasses.dataclass(frozen=True)
class NormalInverseWishartFamily(Family):
    """y_i ~ N(mu, Sigma) in R^p; Sigma ~ IW(nu, psi), mu | Sigma ~ N(mu0, Sigma / kappa).

    theta = (mu, vech(Sigma)) (row-major lower triangle). Unconstrained: mu and the
    Cholesky factor of Sigma with log diagonal.
    """

    mu0: np.ndarray
    kappa: float
    nu: float
    psi: np.ndarray
    name = "niw"

    @property
    def p(self) -> int:
        return _arr(self.mu0).shape[0]

    @property
    def dim(self) -> int:
        return self.p + self.p * (self.p + 1) // 2

    @property
    def dim_u(self) -> int:
        return self.dim

    @property
    def dim_y(self) -> int:
        return self.p

    @property
    def param_names(self):
        rows, cols = np.tril_indices(self.p)
        return tuple(f"mu_{j}" for j in range(self.p)) + tuple(
            f"sigma_{i}{j}" for i, j in zip(rows, cols)
        )

    def prior(self):
        return dist.NormalInverseWishart(_arr(self.mu0), self.kappa, self.nu, _arr(self.psi))

    def _split(self, theta, xp):
        p = self.p
        rows, cols = np.tril_indices(p)
        v = theta[..., p:]
        sym = xp.zeros(theta.shape[:-1] + (p, p))
        if xp is jnp:
            sym = sym.at[..., rows, cols].set(v).at[..., cols, rows].set(v)
        else:
            sym[..., rows, cols] = v
            sym[..., cols, rows] = v
        return theta[..., :p], sym

    def log_prior(self, theta, xp=np):
        mu, sigma = self._split(theta, xp)
        return dens.inv_wishart(sigma, self.nu, xp.asarray(self.psi), xp=xp) + dens.mvn(
            mu, xp.asarray(self.mu0), sigma / self.kappa, xp=xp
        )

    def log_likelihood(self, theta, x, y, xp=np):
        mu, sigma = self._split(theta, xp)
        prec = xp.linalg.inv(sigma)
        _, logdet = xp.linalg.slogdet(sigma)
        diff = y - mu[..., None, :]
        quad = xp.einsum("...ni,...ij,...nj->...n", diff, prec, diff)
        n = y.shape[-2]
        return -0.5 * (n * (self.p * LOG_2PI + logdet) + xp.sum(quad, axis=-1))

    def constrain(self, u, xp=jnp):
        low = _chol_from_u(u[self.p :], self.p, xp)
        sigma = low @ low.T
        rows, cols = np.tril_indices(self.p)
        return xp.concatenate([u[: self.p], sigma[rows, cols]])

    def unconstrain(self, theta, xp=jnp):
        _, sigma = self._split(theta, xp)
        low = xp.linalg.cholesky(sigma)
        low = low - xp.diag(xp.diagonal(low)) + xp.diag(xp.log(xp.diagonal(low)))
        rows, cols = np.tril_indices(self.p)
        return xp.concatenate([theta[: self.p], low[rows, cols]])

    def log_det_jacobian(self, u, xp=jnp):
        """Sigma = L L^T with L_ii = exp(u_ii): log|J| = p log 2 + sum_i (p - i + 1) u_ii."""
        p = self.p
        rows, cols = np.tril_indices(p)
        diag_pos = np.nonzero(rows == cols)[0]
        weights = p + 1.0 - np.arange(p)  # (p - i + 2) for 1-indexed i
        return p * np.log(2.0) + xp.sum(weights * u[p:][diag_pos])

    def update(self, x, y):
        y = _arr(y)
        n, ybar = y.shape[0], y.mean(axis=0)
        scatter = (y - ybar).T @ (y - ybar)
        kappa_n = self.kappa + n
        dev = ybar - _arr(self.mu0)
        return dataclasses.replace(
            self,
            mu0=(self.kappa * _arr(self.mu0) + n * ybar) / kappa_n,
            kappa=kappa_n,
            nu=self.nu + n,
            psi=_arr(self.psi) + scatter + (self.kappa * n / kappa_n) * np.outer(dev, dev),
        )

    def log_evidence(self, x, y):
        y = _arr(y)
        n, p = y.shape[-2], self.p
        ybar = y.mean(axis=-2)
        centred = y - ybar[..., None, :]
        scatter = np.swapaxes(centred, -1, -2) @ centred
        kappa_n = self.kappa + n
        dev = ybar - _arr(self.mu0)
        psi_n = (
            _arr(self.psi)
            + scatter
            + (self.kappa * n / kappa_n) * (dev[..., :, None] * dev[..., None, :])
        )
        nu_n = self.nu + n
        return (
            -0.5 * n * p * np.log(np.pi)
            + ssp.multigammaln(0.5 * nu_n, p)
            - ssp.multigammaln(0.5 * self.nu, p)
            + 0.5 * self.nu * np.linalg.slogdet(_arr(self.psi))[1]
            - 0.5 * nu_n * np.linalg.slogdet(psi_n)[1]
            + 0.5 * p * np.log(self.kappa / kappa_n)
        )

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        mu, sigma = self._split(_arr(theta), np)
        chol = np.linalg.cholesky(sigma)
        z = rng.standard_normal((mu.shape[0], x.shape[0], self.p))
        return mu[:, None, :] + np.einsum("bij,bnj->bni", chol, z)
