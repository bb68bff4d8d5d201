"""`gp_posterior`: the exact GP posterior of the regression environments' prior.

The Bayes-optimal agent of the GP regression problems: it knows the prior (the NNGP kernel
of the benchmark ReLU network, plus the environment's 1e-5 ridge) and the noise sd, and
conditions on the training data. A key draws one function jointly over all rows of x
from the posterior. Computed in float64 with NumPy (float32 is not enough at noise sd
0.01), so it is not JAX-traceable: evaluators loop over keys, and the posterior at one x
is computed once for all keys.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import scipy.linalg

from agents.registry import register
from testbed.base import REAL_VALUES, Data, PriorKnowledge
from testbed.config import check_at_least, check_positive
from testbed.errors import InputError
from testbed.nngp import nngp_kernel


@dataclasses.dataclass(frozen=True)
class GPPosteriorConfig:
    """The prior's ridge (the environment's: K + ridge I) and the kernel's hidden layers."""

    kernel_ridge: float = 1e-5
    num_hidden: int = 2
    seed: int = 0

    def __post_init__(self):
        check_positive("kernel_ridge", self.kernel_ridge)
        check_at_least("num_hidden", self.num_hidden, 1)


class GPPosteriorSampler:
    """f(x) ~ p(f | data) under GP(0, K + ridge) with Gaussian noise: one key, one function."""

    traceable = False

    def __init__(self, x: np.ndarray, y: np.ndarray, noise_std: float, config: GPPosteriorConfig):
        self.x = np.asarray(x, np.float64)
        self.ridge, self.num_hidden = config.kernel_ridge, config.num_hidden
        gram = self._kernel(self.x, self.x) + (self.ridge + noise_std**2) * np.eye(len(self.x))
        self.chol = scipy.linalg.cholesky(gram, lower=True)
        self.alpha = scipy.linalg.cho_solve((self.chol, True), np.asarray(y, np.float64).ravel())
        self._at: tuple[bytes, np.ndarray, np.ndarray] | None = None

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return nngp_kernel(a, b, self.num_hidden, xp=np)

    def moments(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean [m] and a square root F [m, m] of the covariance (F F^T = cov)."""
        x = np.asarray(x, np.float64)
        if self._at is not None and self._at[0] == x.tobytes():
            return self._at[1], self._at[2]
        same = np.all(x[:, None, :] == x[None, :, :], axis=-1)  # a repeated input: one f
        prior = self._kernel(x, x) + self.ridge * same
        if len(self.x):
            cross = self._kernel(self.x, x)
            mean = cross.T @ self.alpha
            v = scipy.linalg.solve_triangular(self.chol, cross, lower=True)
            cov = prior - v.T @ v
        else:
            mean, cov = np.zeros(len(x)), prior
        w, u = np.linalg.eigh(0.5 * (cov + cov.T))
        root = u * np.sqrt(np.clip(w, 0.0, None))
        self._at = (x.tobytes(), mean, root)
        return mean, root

    def __call__(self, x, key) -> np.ndarray:
        mean, root = self.moments(x)
        z = np.asarray(jax.random.normal(key, (len(mean),)), np.float64)
        return (mean + root @ z)[:, None].astype(np.float32)


@register("gp_posterior", GPPosteriorConfig, predicts=REAL_VALUES)
def make_gp_posterior(config: GPPosteriorConfig):
    """Exact GP posterior under the regression environments' prior (Bayes-optimal)."""

    def agent(data: Data, prior: PriorKnowledge):
        if prior.num_classes != 1 or prior.noise_std is None:
            raise InputError(
                "agent gp_posterior: got a problem with "
                f"num_classes={prior.num_classes}, noise_std={prior.noise_std}; allowed: "
                "regression problems (num_classes = 1 and a noise_std: regression/<i>)"
            )
        return GPPosteriorSampler(data.x, data.y, float(prior.noise_std), config)

    return agent
