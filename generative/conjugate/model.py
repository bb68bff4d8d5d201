"""`ModelSpec`: what a PPL user writes down, handed to agents through prior knowledge.

Prior and likelihood as JAX log densities and a bijection to unconstrained space: exactly
the functions the exact reference uses (same code, JAX instead of NumPy), so an agent's model
cannot differ from the reference's prior. Agents read it by duck typing
(`prior_knowledge.extra["model"]`), so agents never import this package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """log_prior(theta), log_likelihood(theta, x, y), constrain(u) -> theta,
    unconstrain(theta) -> u, log_det_jacobian(u) (of constrain); dims; a starting point."""

    name: str
    param_names: tuple[str, ...]
    dim_theta: int
    dim_unconstrained: int
    log_prior: Callable
    log_likelihood: Callable
    constrain: Callable
    unconstrain: Callable
    log_det_jacobian: Callable
    initial_theta: np.ndarray

    def log_density_unconstrained(self, u, x, y):
        """log p(theta(u)) + log p(y | theta(u), x) + log |d theta / d u|: the NUTS target."""
        theta = self.constrain(u)
        return self.log_prior(theta) + self.log_likelihood(theta, x, y) + self.log_det_jacobian(u)


def model_spec(family) -> ModelSpec:
    """The JAX model of a conjugate family (its prior mean as the starting point)."""
    return ModelSpec(
        name=family.name,
        param_names=tuple(family.param_names),
        dim_theta=family.dim,
        dim_unconstrained=family.dim_u,
        log_prior=partial(family.log_prior, xp=jnp),
        log_likelihood=partial(family.log_likelihood, xp=jnp),
        constrain=partial(family.constrain, xp=jnp),
        unconstrain=partial(family.unconstrain, xp=jnp),
        log_det_jacobian=partial(family.log_det_jacobian, xp=jnp),
        initial_theta=np.asarray(family.prior().mean, np.float32),
    )
