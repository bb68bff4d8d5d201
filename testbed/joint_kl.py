"""Monte-Carlo joint KL between an environment and an agent over tau test inputs.

For test batch i (tau inputs and labels drawn from the environment) and M sampled
functions q_m, the estimate is d_i = log p(y_1:tau | x) - log (1/M) sum_m prod_t q_m(y_t|x_t),
averaged over N batches (The Neural Testbed's estimator: the same M keys for every
batch, +inf clipped to the largest finite d_i). tau = 1 gives the marginal KL.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from testbed.base import PRNGKey
from testbed.random_partition import partition_log_likelihood
from testbed.sampled_functions import apply_functions


def batch_log_likelihood(log_probs: jax.Array, y: jax.Array) -> jax.Array:
    """sum_t log q(y[i, t]) per batch i from log_probs [N * tau, C] and labels y [N, tau]."""
    picked = jnp.take_along_axis(log_probs, y.reshape(-1, 1), axis=1)[:, 0]
    return picked.reshape(y.shape).sum(axis=1)


def batch_log_probs(log_probs: jax.Array, y: jax.Array) -> jax.Array:
    """log_probs [N * tau, C] reshaped to [N, tau, C] (y [N, tau] gives the shape)."""
    return log_probs.reshape(y.shape + log_probs.shape[-1:])


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
    x = jnp.asarray(x)
    y = jnp.asarray(y, jnp.int32)
    num_batches, tau = y.shape
    x_flat = x.reshape((num_batches * tau,) + x.shape[2:])

    funcs = apply_functions(
        sampler,
        x_flat,
        keys,
        batch_log_likelihood,
        y,
        num_classes=num_classes,
        chunk_size=chunk_size,
    )
    return jax.nn.logsumexp(funcs.values + funcs.log_weights[:, None], axis=0)


def summarize_kl(env_loglik: jax.Array, agent_loglik: jax.Array) -> dict[str, float]:
    """Mean of d_i = env - agent with +inf clipped to the largest finite d_i.

    Returns kl_estimate, kl_estimate_std (std of the raw d_i, inf if any is inf) and
    pct_finite_kl. If no d_i is finite the estimate is +inf.
    """
    d = np.asarray(env_loglik, np.float64) - np.asarray(agent_loglik, np.float64)
    finite = np.isfinite(d)
    if finite.any():
        clipped = np.where(finite, d, d[finite].max())
        estimate = float(clipped.mean())
    else:
        estimate = float("inf")
    return {
        "kl_estimate": estimate,
        "kl_estimate_std": float(d.std()) if finite.all() else float("inf"),
        "pct_finite_kl": float(finite.mean()),
    }


def sample_keys(key: PRNGKey, num_samples: int) -> jax.Array:
    """The M sampler keys an estimator uses for every test batch."""
    return jax.random.split(key, num_samples)


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


@functools.partial(jax.jit, static_argnums=(4, 5))
def _partition_batches(log_probs, y, keys, log_weights, num_samples, num_hyperplanes):
    """partition_log_likelihood for each batch: log_probs [F, N, tau, C] -> [N]."""
    return jax.vmap(
        lambda lp, yb, k: partition_log_likelihood(
            lp, log_weights, yb, k, num_samples, num_hyperplanes=num_hyperplanes
        ),
        in_axes=(1, 0, 0),
    )(log_probs, y, keys)


def partition_log_likelihoods(
    sampler: Callable,
    x: jax.Array,
    y: jax.Array,
    keys: jax.Array,
    partition_key: PRNGKey,
    *,
    num_classes: int | None = None,
    num_hyperplanes: int = 7,
    batch_chunk: int = 100,
    chunk_size: int = 64,
) -> jax.Array:
    """Random-partition estimate of log p_agent(y_1:tau | x_1:tau) for each batch: [N].

    Same inputs as `joint_log_likelihoods`; each batch gets its own hyperplanes (from
    `partition_key`). Batches are processed in chunks to bound memory for large tau.
    """
    x = jnp.asarray(x)
    y = jnp.asarray(y, jnp.int32)
    num_batches, tau = y.shape
    batch_keys = jax.random.split(partition_key, num_batches)
    num_samples = keys.shape[0]
    out = []
    for start in range(0, num_batches, batch_chunk):
        xb, yb = x[start : start + batch_chunk], y[start : start + batch_chunk]
        n = yb.shape[0]
        x_flat = xb.reshape((n * tau,) + xb.shape[2:])
        funcs = apply_functions(
            sampler,
            x_flat,
            keys,
            batch_log_probs,
            yb,
            num_classes=num_classes,
            chunk_size=chunk_size,
        )
        out.append(
            _partition_batches(
                funcs.values,
                yb,
                batch_keys[start : start + n],
                funcs.log_weights,
                num_samples,
                num_hyperplanes,
            )
        )
    return jnp.concatenate(out)
