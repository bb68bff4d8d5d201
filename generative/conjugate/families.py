"""Conjugate families: prior, likelihood, exact update, evidence and unconstraining transform.

A family is a frozen dataclass of prior hyperparameters (plus known likelihood constants).
Conjugacy makes the posterior the same family with updated hyperparameters (`update`), so
the exact posterior is `update(x, y).prior()` and the exact joint posterior predictive of
future data is `update(x, y).log_evidence(x_future, y_future)`. Shapes: theta [..., d];
a dataset is x [..., n, dx] (zeros for families without inputs) and y [..., n, dy];
log densities broadcast theta's batch dims against the dataset's.
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
from testbed.seeding import Seed, make_rng

LOG_2PI = dens.LOG_2PI


def _arr(x) -> np.ndarray:
    return np.asarray(x, np.float64)


class Family:
    """Shared helpers; subclasses set name, dim, dim_u, dim_y, dim_x, param_names."""

    dim_x = 1

    def posterior(self, x, y):
        return self.update(x, y).prior()

    def sample_inputs(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        return np.zeros((int(num_samples), self.dim_x))

    def log_joint_predictive(self, x_train, y_train, x_future, y_future) -> np.ndarray:
        """Exact log p(y_future | x_future, train) for batched futures [..., tau, dy]."""
        return self.update(x_train, y_train).log_evidence(x_future, y_future)

    def linear_gaussian(self, x):
        """(A, noise_cov) with y_flat = A theta + noise, for linear-Gaussian families; else None."""
        return None

    def simulate_batched(self, theta, x, seed: Seed = 0):
        """One dataset per theta row, with its own inputs x [N, n, dx]: y [N, n, dy]."""
        rng = make_rng(seed)
        return self.simulate(theta, x[0], rng)


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


# ---- scalar families ---------------------------------------------------------------------------


class _Scalar(Family):
    """A scalar parameter and scalar observations."""

    dim = 1
    dim_u = 1
    dim_y = 1


class LogTransformed:
    """Positive parameters, unconstrained through log: theta = exp(u)."""

    def constrain(self, u, xp=jnp):
        return xp.exp(u)

    def unconstrain(self, theta, xp=jnp):
        return xp.log(theta)

    def log_det_jacobian(self, u, xp=jnp):
        return xp.sum(u)


class _GammaScalar(LogTransformed, _Scalar):
    """A positive scalar with a Gamma(shape, rate) prior, unconstrained through log."""

    def prior(self):
        return dist.Gamma(self.shape, self.rate)

    def log_prior(self, theta, xp=np):
        return dens.gamma(theta[..., 0], self.shape, self.rate, xp=xp)


# ---- Gaussian likelihoods with unknown scale ------------------------------------------------


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
