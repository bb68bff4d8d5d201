"""What every conjugate family shares: the `Family` base and the scalar bases (a scalar
parameter; a positive one through log, with a Gamma prior). The families themselves, all
by name: `generative.conjugate.families`.

A family is a frozen dataclass of prior hyperparameters (plus known likelihood constants).
Conjugacy makes the posterior the same family with updated hyperparameters (`update`), so
the exact posterior is `update(x, y).prior()` and the exact joint posterior predictive of
future data is `update(x, y).log_evidence(x_future, y_future)`. Shapes: theta [..., d];
a dataset is x [..., n, dx] (zeros for families without inputs) and y [..., n, dy];
log densities broadcast theta's batch dims against the dataset's.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

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
