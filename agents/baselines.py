"""Baseline agents that need no training: `uniform` and the `oracle` floor."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from agents.registry import register
from testbed.base import Data, PriorKnowledge
from testbed.errors import InputError


@dataclasses.dataclass(frozen=True)
class NoConfig:
    """No settings (a seed only, for uniform bookkeeping)."""

    seed: int = 0


@register("uniform", NoConfig)
def make_uniform(config: NoConfig):
    """Uniform class probabilities: the Neural Testbed's normaliser."""

    def agent(data: Data, prior: PriorKnowledge):
        num_classes = prior.num_classes

        def sampler(x, key):
            return jnp.zeros((x.shape[0], num_classes), jnp.float32)

        return sampler

    return agent


@register("oracle", NoConfig)
def make_oracle(config: NoConfig):
    """The true environment's predictive (tests and floors only: it reads the problem)."""

    def from_problem(problem):
        oracle = getattr(problem, "oracle_predictive", None)
        if oracle is None:
            raise InputError(
                f"agent oracle: problem {type(problem).__name__} offers no oracle predictive; "
                "allowed: problems with a known true predictive"
            )
        return oracle()

    return from_problem


make_oracle.uses_problem = True
