"""`beta_bernoulli`: the conjugate agent for the coin problem (ignores inputs).

With a Beta(a, b) prior and h heads in n flips, each key draws theta ~ Beta(a + h,
b + n - h) (`predictive='posterior'`) or uses the posterior mean (`'mean'`). Its joint
KL over tau flips has a closed form (beta-binomial), which the tests check.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from agents.registry import register
from testbed.base import LABELS, Data, PriorKnowledge
from testbed.config import check_positive


@dataclasses.dataclass(frozen=True)
class BetaBernoulliConfig:
    """Beta(a, b) prior on the probability of class 1."""

    a: float = 1.0
    b: float = 1.0
    predictive: Literal["posterior", "mean"] = "posterior"
    seed: int = 0

    def __post_init__(self):
        check_positive("a", self.a)
        check_positive("b", self.b)


def posterior(config: BetaBernoulliConfig, data: Data) -> tuple[float, float]:
    heads = float(np.sum(np.asarray(data.y) == 1))
    return config.a + heads, config.b + len(np.asarray(data.y)) - heads


@register("beta_bernoulli", BetaBernoulliConfig, predicts=LABELS)
def make(config: BetaBernoulliConfig):
    """Conjugate Beta-Bernoulli agent (binary targets, inputs ignored)."""

    def agent(data: Data, prior: PriorKnowledge):
        a, b = posterior(config, data)

        def sampler(x, key):
            if config.predictive == "mean":
                theta = a / (a + b)
            else:
                theta = jax.random.beta(key, a, b)
            logits = jnp.stack([jnp.log1p(-theta), jnp.log(theta)]).astype(jnp.float32)
            return jnp.broadcast_to(logits, (x.shape[0], 2))

        return sampler

    return agent
