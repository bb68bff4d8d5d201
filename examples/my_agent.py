"""An agent of your own: bootstrapped nearest-centroid classifiers, one per sampled function.

An agent is a config dataclass and a factory registered with `agents.register`: the
factory builds `agent(train_data, prior_knowledge) -> predictive`. A classification
agent's predictive maps (x [n, d], key) to logits [n, C]; one key must give one coherent
function for every row of x, which is what makes joint predictions meaningful. With K
functions known in advance, `testbed.FiniteSampler` lets the evaluators use all K at once.

Run: python examples/my_agent.py
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

import agents
import generative
import testbed
from testbed.config import check_at_least, check_positive


@dataclasses.dataclass(frozen=True)
class CentroidConfig:
    """K bootstrap resamples of the data; logits = -|x - centroid|^2 / temperature."""

    num_bootstraps: int = 20
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):  # bad values get a one-line error naming the field
        check_at_least("num_bootstraps", self.num_bootstraps, 1)
        check_positive("temperature", self.temperature)


@agents.register("centroid", CentroidConfig)
def make_centroid(config: CentroidConfig):
    """Nearest class centroid of a bootstrap resample; one resample per key."""

    def agent(data: testbed.Data, prior: testbed.PriorKnowledge) -> testbed.FiniteSampler:
        x, y = np.asarray(data.x, np.float32), np.asarray(data.y)
        rng = np.random.default_rng(config.seed)
        centroids = np.zeros((config.num_bootstraps, prior.num_classes, prior.input_dim))
        for k in range(config.num_bootstraps):
            rows = rng.integers(0, len(y), len(y)) if len(y) else np.zeros(0, int)
            for c in range(prior.num_classes):
                members = x[rows][y[rows] == c]
                if len(members):  # a class the resample misses stays at the origin
                    centroids[k, c] = members.mean(axis=0)
        centroids = jnp.asarray(centroids, jnp.float32)

        def all_logits(x):  # [K, n, C]: every function at once (JAX: the evaluators jit it)
            diff = jnp.asarray(x)[None, :, None, :] - centroids[:, None, :, :]
            return -jnp.sum(diff**2, axis=-1) / config.temperature

        return testbed.FiniteSampler(all_logits, config.num_bootstraps)

    return agent


if __name__ == "__main__":
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=100)
    for name in ("uniform", "centroid"):
        quality = testbed.evaluate(agents.load(name), problem)
        print(f"{name:9s} KL {quality['kl_estimate']:.3f}  test accuracy {quality['test_acc']:.2f}")
