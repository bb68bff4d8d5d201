"""`classification_2d_2021`: the Neural Testbed's sweep behind its 2021 agents figure.

420 problems in the reference's order of October 2021: num_train x temperature x 10 seeds
x tau in (1, 100), the seed counting up from 1 over all of them, so every problem has its
own environment (today's `classification_2d` pairs tau = 1 and tau = 10 on one seed).

Each instance is derived as the reference's code of that time derived it:
`hk.PRNGSequence(seed)` gives the generator's key and the KL estimator's key; the
generator's own sequence gives the MLP's init key and the data key, whose sequence gives
the training inputs' key and the training labels' key. The estimator splits its key into
N = 1000 batch keys; batch i splits its key into (data, sampler) keys, or (data, sampler,
hyperplane) keys for tau >= 10, and draws its own M = 1000 sampler keys. tau = 1 is
scored by Monte Carlo over the M functions; tau = 100 by the random-projection cluster
estimator (7 hyperplanes on probits clipped to +-5). All on JAX's original threefry stream.
"""

from __future__ import annotations

import jax

from generative.classification import (
    NUM_TRAIN_2D,
    TEMPERATURES,
    ClassificationProblem,
    environment_batches,
    register_classification,
)
from testbed.joint_kl import TestBatches
from testbed.reference_rng import key_sequence, reference_stream

TAUS_2021 = (1, 100)
CLUSTER_FROM_TAU = 10  # the 2021 code: tau >= 10 uses the cluster estimator


def classification_2d_2021_grid(num_seed: int = 10) -> list[dict]:
    """num_train x temperature x seeds x tau (innermost), one fresh seed per problem."""
    out = []
    for num_train in NUM_TRAIN_2D:
        for temperature in TEMPERATURES:
            for _ in range(num_seed):
                for tau in TAUS_2021:
                    seed = len(out) + 1
                    out.append(
                        dict(
                            input_dim=2,
                            num_train=num_train,
                            temperature=temperature,
                            tau=tau,
                            seed=seed,
                            max_tau_monte_carlo=CLUSTER_FROM_TAU - 1,
                        )
                    )
    return out


class Classification2021Problem(ClassificationProblem):
    """A `classification_2d_2021` problem: the 2021 keys and per-batch estimator keys."""

    key_scheme = "nt2021"

    def instance_keys(self):
        generator_key, estimator_key = key_sequence(self.settings.seed, 2)
        init_key, data_key = key_sequence(generator_key, 2)
        return init_key, tuple(key_sequence(data_key, 2)), estimator_key

    def estimator_batches(self) -> TestBatches:
        """N batches, each with its own M sampler keys (and hyperplane key for tau >= 10)."""
        s = self.settings
        cluster = s.tau > s.max_tau_monte_carlo
        with reference_stream():
            batch_keys = jax.random.split(self._estimator_key, s.num_test_seeds)
            parts = jax.vmap(lambda k: jax.random.split(k, 3 if cluster else 2))(batch_keys)
            data_keys, sampler_keys = parts[:, 0], parts[:, 1]
            keys = jax.vmap(lambda k: jax.random.split(k, s.num_enn_samples))(sampler_keys)
            x, y, env_ll = environment_batches(
                self._net, self._params, self._temperature, data_keys,
                s.tau, s.input_dim, s.test_design, s.kappa,
            )  # fmt: skip
        partition = parts[:, 2] if cluster else None
        return TestBatches(x, y, keys, env_ll, partition, s.num_classes)


register_classification(
    "classification_2d_2021",
    classification_2d_2021_grid(),
    Classification2021Problem,
    "the Neural Testbed's 2021 figure sweep: tau 1 / 100, own seed per problem",
)
