"""GP regression environments and the Neural Testbed's `regression` sweep.

An environment is one function f drawn from the GP whose kernel is the NNGP of a ReLU MLP
with two hidden layers (testbed.nngp), jointly on the training inputs and a cache of 1000
test inputs (x ~ N(0, I_d)); targets are y = f(x) + N(0, noise_std^2). A test batch is tau
indices into the cache; the score is the sample-based Gaussian KL (testbed.regression_kl).
Keys follow the reference, on its random stream (testbed.reference_rng): the sequence of
the seed gives the inputs' key (train, then cache), the environment's key (its own
sequence: the function, then the training noise) and the estimator's key (split into the
N batches' keys). The function's Gaussian draw is the reference's (float32
`multivariate_normal` of K + 1e-5 I), with a float64 factor only where float32 fails.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from generative.registry import register_table
from testbed.base import Data, PriorKnowledge
from testbed.config import check_positive, check_sizes
from testbed.evaluation import Evidence, EvidenceScoring
from testbed.joint_kl import sample_keys
from testbed.nngp import nngp_kernel
from testbed.ranking import RankedBy
from testbed.reference_rng import key_sequence, reference_stream
from testbed.regression_kl import RegressionBatches, gaussian_log_likelihood
from testbed.sizes import check_memory


@dataclasses.dataclass(frozen=True)
class RegressionSettings:
    """Everything that defines a GP regression problem (joined onto leaderboard rows)."""

    input_dim: int
    num_train: int
    noise_std: float
    seed: int
    tau: int = 1
    num_test_seeds: int = 1000
    num_enn_samples: int = 100
    num_test_cache: int = 1000
    kernel_ridge: float = 1e-5

    def __post_init__(self):
        check_sizes(self, input_dim=1, num_train=0)
        check_positive("noise_std", self.noise_std)
        check_sizes(self, tau=1, num_test_seeds=1, num_enn_samples=1, num_test_cache=1)
        check_positive("kernel_ridge", self.kernel_ridge)
        sizes = {
            "num_test_seeds": self.num_test_seeds,
            "num_enn_samples": self.num_enn_samples,
            "num_test_cache": self.num_test_cache,
        }
        check_memory(
            self.estimator_bytes, sizes, "the environment and its KL estimator", type(self)
        )

    def estimator_bytes(
        self, num_test_seeds: int, num_enn_samples: int, num_test_cache: int
    ) -> int:
        """Bytes held at once: the environment's kernel over the training and cache points
        with its factor (float64), and the estimator's N / tau + 1 batches of tau points
        (float32) with the M sampler keys handed to each batch."""
        points = self.num_train + num_test_cache
        batches = num_test_seeds // self.tau + 1
        return (
            8 * 3 * points**2
            + 4 * batches * self.tau * (self.input_dim + 4)
            + 8 * batches * num_enn_samples
        )

    @property
    def num_batches(self) -> int:
        """The reference's N: int(num_test_seeds / tau) + 1 test batches."""
        return int(self.num_test_seeds / self.tau) + 1


def draw_function(key: jax.Array, x: np.ndarray, ridge: float) -> np.ndarray:
    """f [n] ~ GP(0, K(x, x) + ridge I) as the reference draws it (float32
    `jax.random.multivariate_normal`: L z, z = normal(key, [n])); if the float32 Cholesky
    fails (non-finite), the same z with the float64 factor."""
    kernel = nngp_kernel(jnp.asarray(x), jnp.asarray(x)) + ridge * jnp.eye(len(x))
    f = np.asarray(jax.random.multivariate_normal(key, jnp.zeros(len(x)), kernel), np.float64)
    if np.all(np.isfinite(f)):
        return f
    k64 = np.asarray(kernel, np.float64)
    z = np.asarray(jax.random.normal(key, (len(x),)), np.float64)
    return np.linalg.cholesky(0.5 * (k64 + k64.T)) @ z


# Each process keeps the environments' functions it drew (at most 88 KB each, for 10,000
# training inputs): a sweep builds each problem once for every agent, and a draw on
# 11,000 inputs (the NNGP kernel and its Cholesky factor) takes 10 to 30 s on one core.
_FUNCTIONS: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()
MAX_FUNCTIONS = 512


def environment_function(settings: RegressionSettings, key: jax.Array, x: np.ndarray):
    """`draw_function(key, x, ridge)` for the environment of `settings` (its seed fixes
    `key` and, with its sizes, `x`), drawn once per process; read-only."""
    s = settings
    cached = (s.seed, s.input_dim, s.num_train, s.num_test_cache, s.kernel_ridge)
    f = _FUNCTIONS.get(cached)
    if f is None:
        f = draw_function(key, x, s.kernel_ridge)
        f.setflags(write=False)
        _FUNCTIONS[cached] = f
        if len(_FUNCTIONS) > MAX_FUNCTIONS:
            _FUNCTIONS.popitem(last=False)
    _FUNCTIONS.move_to_end(cached)
    return f


@functools.partial(jax.jit, static_argnums=(2, 3))
def _test_batches(key, f_cache, num_batches, tau, noise_std):
    """Cache indices [N, tau], targets [N, tau] and the true log-likelihood [N]."""

    def one_batch(k):
        x_key, y_key = jax.random.split(k)
        idx = jax.random.randint(x_key, (tau,), 0, f_cache.shape[0])
        noise = jax.random.normal(y_key, (tau, 1))[:, 0] * noise_std
        return idx, f_cache[idx] + noise, gaussian_log_likelihood(noise, noise_std)

    return jax.vmap(one_batch)(jax.random.split(key, num_batches))


class GPRegressionProblem(EvidenceScoring):
    """A seeded NNGP regression problem scored by the sample-based Gaussian KL."""

    offers = frozenset({"sampler", "regression_batches"})
    metrics = ("regression_kl",)

    def __init__(self, settings: RegressionSettings):
        self.settings = s = settings
        with reference_stream():
            inputs_key, env_key, self._estimator_key = key_sequence(s.seed, 3)
            train_key, cache_key = jax.random.split(inputs_key)
            x_train = jax.random.normal(train_key, (s.num_train, s.input_dim))
            self.x_cache = np.asarray(jax.random.normal(cache_key, (s.num_test_cache, s.input_dim)))
            function_key, noise_key = key_sequence(env_key, 2)
            x_all = np.concatenate([np.asarray(x_train), self.x_cache])
            f = environment_function(s, function_key, x_all)
            noise = np.asarray(jax.random.normal(noise_key, (s.num_train, 1)), np.float64)
        self.f_train = f[: s.num_train].astype(np.float32)
        self.f_cache = f[s.num_train :].astype(np.float32)
        y = self.f_train[:, None] + (noise * s.noise_std).astype(np.float32)
        self.train_data = Data(x=np.asarray(x_train), y=y)

    @cached_property
    def prior_knowledge(self) -> PriorKnowledge:
        s = self.settings
        return PriorKnowledge.of_settings(s, num_classes=1, noise_std=s.noise_std, layers=1)

    def oracle_predictive(self):
        """The environment's function where the problem tests (the cache): KL 0."""
        cache, values = jnp.asarray(self.x_cache), jnp.asarray(self.f_cache)

        def sampler(x, key):
            d2 = jnp.sum(jnp.square(x[:, None, :] - cache[None]), axis=-1)
            return values[jnp.argmin(d2, axis=1)][:, None]

        return sampler

    def estimator_batches(self) -> RegressionBatches:
        """N test batches (tau cache points each), their targets and true log-likelihoods,
        and the M sampler keys shared by all batches."""
        s = self.settings
        with reference_stream():
            idx, y, env_ll = _test_batches(
                self._estimator_key,
                jnp.asarray(self.f_cache),
                s.num_batches,
                s.tau,
                jnp.float32(s.noise_std),
            )
            keys = sample_keys(jax.random.fold_in(self._estimator_key, 1), s.num_enn_samples)
        x = self.x_cache[np.asarray(idx)]
        return RegressionBatches(x, np.asarray(y), keys, np.asarray(env_ll), s.noise_std)

    def evidence(self, sampler) -> Evidence:
        return Evidence(
            {
                "sampler": lambda _: sampler,
                "regression_batches": lambda _: self.estimator_batches(),
            }
        )


# The reference's `regression` sweep: d x n/d x noise x 10 seeds, the seed counting up
# through the whole grid (1..270); tau = 1, M = 100.
INPUT_DIMS = (1, 10, 100)
DATA_RATIOS = (1, 10, 100)
NOISE_STDS = (0.01, 0.1, 1.0)


def regression_grid(num_seed: int = 10) -> list[dict]:
    """input_dim x data ratio x noise_std x seeds; seed = position in the grid + 1."""
    cells = itertools.product(INPUT_DIMS, DATA_RATIOS, NOISE_STDS, range(num_seed))
    return [
        dict(input_dim=d, num_train=r * d, noise_std=s, seed=j + 1)
        for j, (d, r, s, _) in enumerate(cells)
    ]


SWEEP_SETTINGS = {
    "regression": regression_grid(),
    # the reference's test sweep: the one-seed grid filtered to noise 0.1, d = 10, n = 10
    "regression_test": [
        s
        for s in regression_grid(1)
        if s["noise_std"] == 0.1 and s["input_dim"] == 10 and s["num_train"] == 10
    ],
}


# Ranked by the Neural Testbed's rules on the KL of the true predictive N(f(x), noise^2)
# to the agent's mixture, normalised by uniform (on regression: the function f = 0).
REGRESSION_KL = RankedBy(
    score="kl_estimate",
    name="regression KL (GP environments)",
    accuracy=False,
    shipped="neural_testbed",
    normalizer="uniform",
    note=(
        "GP regression (the environment is a function drawn from the NNGP of a ReLU "
        "network): the KL of the true predictive N(f(x), noise^2) to the agent's mixture "
        "of its sampled functions, each blurred by the known noise, over 1,001 test inputs "
        "(lower is better; oracle 0, gp_posterior is the Bayes-optimal agent). Normalised by "
        "uniform, which on regression is the function f = 0, as the reference."
    ),
)


for _name, _table in SWEEP_SETTINGS.items():
    register_table(
        _name,
        _table,
        RegressionSettings,
        GPRegressionProblem,
        "Neural Testbed GP regression, NNGP of a 2-hidden-layer ReLU MLP",
        options=("num_test_seeds", "num_enn_samples"),
        prediction="real_values",
        ranked_by=REGRESSION_KL,
    )
