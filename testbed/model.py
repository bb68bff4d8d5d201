"""The contract of model-based problems (conjugate models): the model an agent may read.

`ModelSpec` is what a PPL user writes down: the prior and likelihood as JAX log densities
and a bijection to an unconstrained space. A problem with a known model hands it to its
agents in `ModelKnowledge`, so an agent like NUTS samples exactly the reference's target.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from testbed.base import PriorKnowledge


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
    # The model's family itself, for agents that write the model in their own language (the
    # PPL agents): a frozen dataclass whose `name` is the family and whose fields are its
    # prior hyperparameters and known likelihood constants (generative/conjugate/families.py).
    family: Any = dataclasses.field(default=None, compare=False)

    def log_density_unconstrained(self, u, x, y):
        """log p(theta(u)) + log p(y | theta(u), x) + log |d theta / d u|: the NUTS target."""
        theta = self.constrain(u)
        return self.log_prior(theta) + self.log_likelihood(theta, x, y) + self.log_det_jacobian(u)


@dataclasses.dataclass(frozen=True)
class ModelKnowledge(PriorKnowledge):
    """Prior knowledge of a problem whose model is known: the usual facts plus the model."""

    model: ModelSpec = dataclasses.field(kw_only=True)
