"""The `ModelSpec` of a conjugate family, handed to agents in `ModelKnowledge`.

Prior and likelihood as JAX log densities and a bijection to unconstrained space: exactly
the functions the exact reference uses (same code, JAX instead of NumPy), so an agent's
model cannot differ from the reference's prior. The types live in `testbed.model`, so
agents never import this package.
"""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np

from testbed.model import ModelSpec


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
        family=family,
    )
