"""Monte-Carlo joint KL between an environment and an agent over tau test inputs.

For test batch i (tau inputs and labels drawn from the environment) and M sampled
functions q_m, the estimate is d_i = log p(y_1:tau | x) - log (1/M) sum_m prod_t q_m(y_t|x_t),
averaged over N batches (The Neural Testbed's estimator: the same M keys for every
batch, +inf clipped to the largest finite d_i). tau = 1 gives the marginal KL.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from testbed.base import FiniteSampler, PRNGKey
from testbed.compilation_cache import with_library_cache
from testbed.metrics.registry import register
from testbed.random_partition import hyperplanes, partition_log_likelihood
from testbed.reference_rng import reference_stream
from testbed.sampled_functions import apply_functions, key_shape, reduce_per_batch


def batch_log_likelihood(log_probs: jax.Array, y: jax.Array) -> jax.Array:
    """sum_t log q(y[i, t]) per batch i from log_probs [N * tau, C] and labels y [N, tau]."""
    picked = jnp.take_along_axis(log_probs, y.reshape(-1, 1), axis=1)[:, 0]
    return picked.reshape(y.shape).sum(axis=1)


@with_library_cache
def joint_log_likelihoods(
    sampler: Callable,
    x: jax.Array,
    y: jax.Array,
    keys: jax.Array,
    *,
    num_classes: int | None = None,
    chunk_size: int = 64,
) -> jax.Array:
    """log (1/M) sum_m prod_t q_m(y[i, t] | x[i, t]) for each batch i: [N].

    x: [N, tau, d] test inputs, y: [N, tau] integer labels, keys: [M] sampler keys.
    """
    y = jnp.asarray(y, jnp.int32)
    if len(key_shape(keys)) == 2:  # batch i's own M keys
        return reduce_per_batch(sampler, x, y, keys, mixture_of_products, num_classes=num_classes)
    funcs = _on_batches(sampler, x, y, keys, batch_log_likelihood, num_classes, chunk_size)
    return mixture_log_likelihood(funcs.values, funcs.log_weights)


def mixture_of_products(log_probs: jax.Array, log_weights: jax.Array, y: jax.Array, aux=None):
    """log sum_f w_f prod_t q_f(y_t) of one batch: log_probs [F, tau, C], y [tau]."""
    picked = jnp.take_along_axis(log_probs, y[None, :, None], axis=2)[..., 0]
    return jax.nn.logsumexp(picked.sum(axis=1) + log_weights)


def _on_batches(sampler, x, y, keys, fn, num_classes, chunk_size):
    """`apply_functions` over the flattened test inputs x [N, tau, d] with labels y [N, tau]."""
    x = jnp.asarray(x)
    x_flat = x.reshape((y.shape[0] * y.shape[1],) + x.shape[2:])
    return apply_functions(
        sampler, x_flat, keys, fn, y, num_classes=num_classes, chunk_size=chunk_size
    )


def mixture_log_likelihood(loglik: Any, log_weights: Any | None = None) -> Any:
    """log sum_m w_m exp(loglik[m, i]) for each column i: the agent's joint log-likelihood
    of test batch i under its mixture of M functions (or posterior draws), loglik [M, N].

    Uniform weights 1/M when `log_weights` is None. JAX arrays stay in JAX (float32, inside
    jit); NumPy arrays are reduced in float64 with SciPy.
    """
    m = loglik.shape[0]
    if isinstance(loglik, jax.Array):
        w = jnp.full((m,), -jnp.log(m), loglik.dtype) if log_weights is None else log_weights
        return jax.nn.logsumexp(loglik + w[:, None], axis=0)
    w = np.full(m, -np.log(m)) if log_weights is None else np.asarray(log_weights)
    return scipy.special.logsumexp(np.asarray(loglik, np.float64) + w[:, None], axis=0)


def joint_kl_summary(env_loglik: Any, agent_loglik: Any) -> dict[str, float]:
    """The one summary of d_i = env_i - agent_i over N test batches, for every family.

    mean (raw), clipped_mean (every non-finite d_i replaced by the largest finite one, as
    the Neural Testbed does with the +inf of a zero-probability label; +inf if none is
    finite; `pct_finite` says how many were), std (ddof 0; inf unless all are finite),
    stderr (ddof 1 / sqrt N, a Monte-Carlo error over batches) and pct_finite.
    """
    d = np.asarray(env_loglik, np.float64) - np.asarray(agent_loglik, np.float64)
    finite = np.isfinite(d)
    clipped = float(np.where(finite, d, d[finite].max()).mean()) if finite.any() else np.inf
    with np.errstate(invalid="ignore"):  # inf - inf in the spread of non-finite d_i: NaN
        stderr = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    return {
        "mean": float(d.mean()),
        "clipped_mean": clipped,
        "std": float(d.std()) if finite.all() else float("inf"),
        "stderr": stderr,
        "pct_finite": float(finite.mean()),
    }


def summarize_kl(env_loglik: Any, agent_loglik: Any) -> dict[str, float]:
    """Joint KL over tau test inputs (Neural Testbed): mean of log p(y) - log q(y) per batch.

    A non-finite batch KL (+inf: a label the agent gives probability 0) is replaced by the
    largest finite one, and counted in pct_finite_kl. Returns kl_estimate, kl_estimate_std
    (std of the raw d_i, inf if any is inf) and pct_finite_kl. On a problem (`sampler`,
    `label_batches`) the agent's log-likelihoods are Monte Carlo over its sampled
    functions, or the random-partition estimate above the batches' Monte-Carlo limit.
    """
    s = joint_kl_summary(env_loglik, agent_loglik)
    return {
        "kl_estimate": s["clipped_mean"],
        "kl_estimate_std": s["std"],
        "pct_finite_kl": s["pct_finite"],
    }


def sample_keys(key: PRNGKey, num_samples: int) -> jax.Array:
    """The M sampler keys an estimator uses for every test batch."""
    return jax.random.split(key, num_samples)


def estimator_keys(key: PRNGKey, num_samples: int) -> tuple[jax.Array, jax.Array]:
    """(the test batches' key, the M sampler keys) from a problem's estimator key, split
    in the Neural Testbed's order."""
    batch_key, sampler_key = jax.random.split(key)
    return batch_key, sample_keys(sampler_key, num_samples)


def enumerate_joint_kl(
    env_log_probs: np.ndarray, agent_log_probs: np.ndarray, log_weights: np.ndarray | None = None
) -> float:
    """Exact KL(p(y_1:tau) || mixture) over all C^tau label sequences at fixed inputs.

    env_log_probs: [tau, C]; agent_log_probs: [F, tau, C] (one row per function);
    log_weights: [F] mixture log-weights (uniform if omitted). For tests and small tau.
    """
    env = np.asarray(env_log_probs, np.float64)
    agent = np.asarray(agent_log_probs, np.float64)
    tau, num_classes = env.shape
    if log_weights is None:
        log_weights = np.full(agent.shape[0], -np.log(agent.shape[0]))
    total = 0.0
    for labels in itertools.product(range(num_classes), repeat=tau):
        idx = np.arange(tau), np.asarray(labels)
        log_p = env[idx].sum()
        if not np.isfinite(log_p):
            continue
        s = agent[:, idx[0], idx[1]].sum(axis=1) + log_weights
        log_q = np.logaddexp.reduce(s)
        total += np.exp(log_p) * (log_p - log_q)
    return float(total)


@functools.cache
def _partition_reduce(num_samples: int) -> Callable:
    """The random-partition estimate of one batch as a `reduce_per_batch` reduction
    (aux: the batch's hyperplanes)."""

    def reduce(log_probs, log_weights, y, planes):
        return partition_log_likelihood(log_probs, log_weights, y, None, num_samples, planes=planes)

    return reduce


@with_library_cache
def partition_log_likelihoods(
    sampler: Callable,
    x: jax.Array,
    y: jax.Array,
    keys: jax.Array,
    partition_key: PRNGKey,
    *,
    num_classes: int | None = None,
    num_hyperplanes: int = 7,
) -> jax.Array:
    """Random-partition estimate of log p_agent(y_1:tau | x_1:tau) for each batch: [N].

    Same inputs as `joint_log_likelihoods` (keys [M] shared, or [N, M] per batch);
    `partition_key` is one key (split into one per batch) or [N] keys: batch i's
    hyperplanes are drawn from key i (`random_partition.hyperplanes`), on the
    reference's stream. Memory is per batch, for any tau.
    """
    y = jnp.asarray(y, jnp.int32)
    num_batches, tau = y.shape
    num_features = tau * (num_classes or _num_outputs(sampler, x, keys))
    with reference_stream():
        if len(key_shape(partition_key)) == 0:
            partition_key = jax.random.split(partition_key, num_batches)
        planes = jax.vmap(lambda k: hyperplanes(k, num_features, num_hyperplanes))(partition_key)
    reduce = _partition_reduce(key_shape(keys)[-1])
    return reduce_per_batch(sampler, x, y, keys, reduce, planes, num_classes=num_classes)


def _num_outputs(sampler: Callable, x: jax.Array, keys: jax.Array) -> int:
    """C, the sampler's outputs per input (asked once at one input when not given)."""
    x0 = jnp.asarray(x)[0, :1]
    if isinstance(sampler, FiniteSampler):
        return int(np.shape(sampler.all_logits(x0))[-1])
    key = keys.reshape((-1,) + keys.shape[len(key_shape(keys)) :])[0]
    return int(np.shape(sampler(x0, key))[-1])


@dataclasses.dataclass(frozen=True)
class TestBatches:
    """What the joint estimators read: test inputs x [N, tau, d], labels y [N, tau], the
    M sampler keys, the environment's log p(y | x) [N] (None: real data, no truth), a key
    for the random-partition estimator (None: Monte Carlo over functions) and the number
    of classes (checks the sampler's output)."""

    x: Any
    y: Any
    keys: jax.Array
    env_loglik: Any = None
    partition_key: jax.Array | None = None
    num_classes: int | None = None

    def agent_loglik(self, sampler: Callable) -> jax.Array:
        """The agent's joint log-likelihood of each batch [N]."""
        if self.partition_key is None:
            return joint_log_likelihoods(
                sampler, self.x, self.y, self.keys, num_classes=self.num_classes
            )
        return partition_log_likelihoods(
            sampler, self.x, self.y, self.keys, self.partition_key, num_classes=self.num_classes
        )


def _joint_kl(evidence) -> dict[str, float]:
    batches = evidence["label_batches"]
    return summarize_kl(batches.env_loglik, batches.agent_loglik(evidence["sampler"]))


def _joint_nll(evidence) -> dict[str, float]:
    batches = evidence["data_batches"]
    return joint_nll(batches.agent_loglik(evidence["sampler"]))


def joint_nll(agent_loglik: Any) -> dict[str, float]:
    """Joint NLL over tau test points of real data: -log q(y_1:tau | x) per batch, averaged.

    The joint KL's estimator with no true likelihood (the reference's real-data
    "kl_estimate"). Returns joint_nll, joint_nll_std and pct_finite_nll.
    """
    s = joint_kl_summary(np.zeros(np.shape(agent_loglik)), agent_loglik)
    return {
        "joint_nll": s["clipped_mean"],
        "joint_nll_std": s["std"],
        "pct_finite_nll": s["pct_finite"],
    }


@dataclasses.dataclass(frozen=True)
class LabelDistribution:
    """The true label log-probabilities [tau, C] at tau inputs x [tau, d], with the M
    sampler keys: the joint KL then sums over all C^tau label sequences (no test noise)."""

    x: Any
    log_probs: np.ndarray
    keys: jax.Array
    num_classes: int


def _log_probs(log_probs, aux):
    return log_probs


def _exact_joint_kl(evidence) -> dict[str, float]:
    d = evidence["label_distribution"]
    funcs = apply_functions(evidence["sampler"], d.x, d.keys, _log_probs, num_classes=d.num_classes)
    kl = enumerate_joint_kl(d.log_probs, np.asarray(funcs.values), np.asarray(funcs.log_weights))
    return {"kl_estimate": kl, "kl_estimate_std": 0.0, "pct_finite_kl": float(np.isfinite(kl))}


KL_ENTRIES = ("kl_estimate", "kl_estimate_std", "pct_finite_kl")
register("joint_kl", ("label_batches", "sampler"), _joint_kl, KL_ENTRIES)(summarize_kl)
register("exact_joint_kl", ("label_distribution", "sampler"), _exact_joint_kl, KL_ENTRIES)(
    enumerate_joint_kl
)
register(
    "joint_nll",
    ("data_batches", "sampler"),
    _joint_nll,
    ("joint_nll", "joint_nll_std", "pct_finite_nll"),
)(joint_nll)
