"""A conjugate family as a simulator task of the shared SBI interface.

x is a whole dataset of `num_obs` observations, flattened; the reference posterior is exact
for any x_o, so SBI agents run on conjugate problems unchanged and are scored exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from generative.sbi.task import Support
from testbed.errors import InputError, bad_value

NUM_OBSERVATIONS = 10

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


@dataclasses.dataclass(frozen=True)
class ConjugateTask:
    """sample_prior / simulate / log_likelihood / log_prior / observation(k) /
    true_parameters(k) / reference_posterior(x_o, num_samples, seed)."""

    name: str
    family: object
    inputs: np.ndarray  # [num_obs, dim_x]: the fixed design (zeros for input-free families)
    seed: int = 0

    @property
    def num_obs(self) -> int:
        return self.inputs.shape[0]

    @property
    def dim_parameters(self) -> int:
        return self.family.dim

    @property
    def dim_data(self) -> int:
        return self.num_obs * self.family.dim_y

    def _data(self, x) -> np.ndarray:
        x = np.asarray(x, np.float64)
        if x.shape[-1] != self.dim_data:
            raise InputError(
                f"x: got last dimension {x.shape[-1]}; allowed: {self.dim_data} "
                f"({self.num_obs} observations of dimension {self.family.dim_y}, flattened)"
            )
        return x.reshape(x.shape[:-1] + (self.num_obs, self.family.dim_y))

    def sample_prior(self, num_samples: int, seed: int = 0) -> np.ndarray:
        return self.family.prior().sample(np.random.default_rng(seed), int(num_samples))

    def simulate(self, theta, seed: int = 0) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, np.float64))
        y = self.family.simulate(np.random.default_rng(seed), theta, self.inputs)
        return y.reshape(theta.shape[0], self.dim_data)

    def log_prior(self, theta) -> np.ndarray:
        return self.family.log_prior(np.atleast_2d(np.asarray(theta, np.float64)))

    def log_likelihood(self, theta, x_o) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, np.float64))
        return self.family.log_likelihood(theta, self.inputs, self._data(x_o))

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self.family.param_names)

    labels = parameter_names  # the SBI tasks' name for them

    @property
    def support(self) -> Support:
        """The prior's support as SBI agents read it (exact or a superset: see SUPPORTS)."""
        if self.family.name not in SUPPORTS:
            raise bad_value("conjugate family", self.family.name, sorted(SUPPORTS))
        return SUPPORTS[self.family.name]

    def log_posterior_unnormalized(self, theta, x_o) -> np.ndarray:
        return self.log_prior(theta) + self.log_likelihood(theta, x_o)

    def to_unconstrained(self, theta) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, np.float64))
        return np.stack([self.family.unconstrain(t, xp=np) for t in theta])

    def from_unconstrained(self, z) -> np.ndarray:
        z = np.atleast_2d(np.asarray(z, np.float64))
        return np.stack([self.family.constrain(u, xp=np) for u in z])

    def log_abs_det_jacobian(self, z) -> np.ndarray:
        """log |d theta / d z| of `from_unconstrained`, per row."""
        z = np.atleast_2d(np.asarray(z, np.float64))
        return np.array([float(self.family.log_det_jacobian(u, xp=np)) for u in z])

    def _check_k(self, k: int) -> int:
        if not (isinstance(k, int | np.integer) and 1 <= k <= NUM_OBSERVATIONS):
            raise InputError(f"observation number: got {k!r}; allowed: 1..{NUM_OBSERVATIONS}")
        return int(k)

    def true_parameters(self, k: int) -> np.ndarray:
        rng = np.random.default_rng((self.seed, self._check_k(k)))
        return self.family.prior().sample(rng, 1)

    def observation(self, k: int) -> np.ndarray:
        theta = self.true_parameters(k)
        seed = int(np.random.default_rng((self.seed, k, 1)).integers(2**31))
        return self.simulate(theta, seed=seed)

    def reference_posterior(self, x_o, num_samples: int = 10_000, seed: int = 0) -> np.ndarray:
        y = self._data(np.asarray(x_o, np.float64).reshape(-1))
        post = self.family.posterior(self.inputs, y)
        return post.sample(np.random.default_rng(seed), int(num_samples))
