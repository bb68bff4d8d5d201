"""A conjugate family as a simulator task: a `Task` of the SBI tasks' shared base class.

x is a whole dataset of `num_obs` observations, flattened; the reference posterior is exact
for any x_o, so SBI agents run on conjugate problems unchanged and are scored exactly.
"""

from __future__ import annotations

import numpy as np

from generative.sbi.task import Seed, Task, as_rows, fresh_or_seeded
from testbed.errors import bad_value
from testbed.simulation import Support

# The prior's support per family in the SBI tasks' terms (one kind for all parameters).
# Exact: beta (p in [0, 1]), gamma (a precision or a Poisson rate > 0), Gaussian means and
# weights (real). Not exact, the closest honest superset instead (it never excludes prior
# mass; `outside_support_fraction` reports draws outside the true support):
# - nig (mu, sigma2): 'real', since mu is real (sigma2 > 0 is not stated);
# - niw (mu, vech(Sigma)): 'real' (Sigma must be positive definite: no box can say so);
# - dirichlet_multinomial (pi on the simplex): 'box' [0, 1] (the sum-to-one is not stated).
SUPPORTS = {
    "normal_known_var": Support("real"),
    "mvn_known_cov": Support("real"),
    "blr": Support("real"),
    "normal_known_mean": Support("positive", 0.0),
    "gamma_poisson": Support("positive", 0.0),
    "beta_binomial": Support("box", 0.0, 1.0),
    "nig": Support("real"),
    "niw": Support("real"),
    "dirichlet_multinomial": Support("box", 0.0, 1.0),
}


class ConjugateTask(Task):
    """A conjugate family with a fixed design of `num_obs` observations as an SBI `Task`.

    x is the whole dataset, flattened; `reference_posterior` is exact for any x_o. The
    observations k = 1..10 come from prior draws seeded by (seed, k); transforms are the
    family's own bijections. `simulate` runs at any theta (the stated support may be a
    superset: see SUPPORTS), leaving invalid data to the agent.
    """

    def __init__(self, name: str, family, inputs: np.ndarray, seed: int = 0):
        self.name = name
        self.family = family
        self.inputs = inputs  # [num_obs, dim_x]: the fixed design (zeros for input-free families)
        self.seed = seed
        self.dim_parameters = family.dim
        self.dim_data = self.num_obs * family.dim_y
        self.parameter_names = tuple(family.param_names)
        if family.name not in SUPPORTS:
            raise bad_value("conjugate family", family.name, sorted(SUPPORTS))
        self.support = SUPPORTS[family.name]  # exact or a superset (see SUPPORTS)

    @property
    def num_obs(self) -> int:
        return self.inputs.shape[0]

    def _data(self, x) -> np.ndarray:
        """Flat data [..., dim_data] as [..., num_obs, dim_y]."""
        x = np.asarray(x, np.float64)
        return x.reshape(x.shape[:-1] + (self.num_obs, self.family.dim_y))

    def _sample_prior(self, num: int, rng: np.random.Generator) -> np.ndarray:
        return self.family.prior().sample(num, rng)

    def _log_prior(self, theta: np.ndarray) -> np.ndarray:
        """-inf outside the support, quietly (the log of a negative rate is NaN there)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            lp = np.asarray(self.family.log_prior(theta), float)
        return np.where(np.isnan(lp), -np.inf, lp)

    def _simulate(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        y = self.family.simulate(theta, self.inputs, rng)
        return y.reshape(theta.shape[0], self.dim_data)

    def _log_likelihood(self, theta: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        return self.family.log_likelihood(theta, self.inputs, self._data(x_o))

    def _reference_posterior(self, x_o, num_samples: int, rng: np.random.Generator):
        return self.family.posterior(self.inputs, self._data(x_o)).sample(num_samples, rng)

    def simulate(self, theta, seed: Seed | None = None) -> np.ndarray:
        """One dataset per row of `theta`, [n, dim_data] (no support check: see above);
        `seed` as the base class's (None: fresh noise)."""
        return self._simulate(as_rows(theta, self.dim_parameters, "theta"), fresh_or_seeded(seed))

    def _observation_pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        theta = self.family.prior().sample(1, np.random.default_rng((self.seed, k)))
        seed = int(np.random.default_rng((self.seed, k, 1)).integers(2**31))
        return theta, self.simulate(theta, seed=seed)

    def to_unconstrained(self, theta) -> np.ndarray:
        theta = as_rows(theta, self.dim_parameters, "theta")
        return np.stack([self.family.unconstrain(t, xp=np) for t in theta])

    def from_unconstrained(self, z) -> np.ndarray:
        z = as_rows(z, self.family.dim_u, "z")
        return np.stack([self.family.constrain(u, xp=np) for u in z])

    def log_abs_det_jacobian(self, z) -> np.ndarray:
        """log |d theta / d z| of `from_unconstrained`, per row."""
        z = as_rows(z, self.family.dim_u, "z")
        return np.array([float(self.family.log_det_jacobian(u, xp=np)) for u in z])
