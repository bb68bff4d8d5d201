"""Random-partition ("hyperplane on probits") joint log-likelihood for large tau.

With tau large, the M-sample mixture of products is dominated by a few samples and is
noisy. The Neural Testbed clusters the sampled functions by random hyperplanes on their
probits u = clip(Phi^-1(q), -5, 5) over the tau x C predictions of a batch (7 hyperplanes,
<= 128 cells), replaces each cell by its mean correct-class probability and sums over
cells: log sum_k (n_k / M) prod_t c_{k,t}, c_{k,t} = (sum_{m in k} q_m(y_t) + 1e-6) / (n_k + 1e-6).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp


def hyperplanes(
    key: jax.Array, num_features: int, num_hyperplanes: int = 7
) -> tuple[jax.Array, jax.Array]:
    """The random hyperplanes of one batch, drawn as the reference draws them:
    a [h, features] and b [h], both N(0, 1), from (a_key, b_key) = split(key)."""
    a_key, b_key = jax.random.split(key)
    a = jax.random.normal(a_key, (num_hyperplanes, num_features))
    b = jax.random.normal(b_key, (num_hyperplanes,))
    return a, b


def partition_log_likelihood(
    log_probs: jax.Array,
    log_weights: jax.Array,
    y: jax.Array,
    key: jax.Array | None,
    num_samples: int,
    *,
    num_hyperplanes: int = 7,
    probit_clip: float = 5.0,
    only_correct_class: bool = False,
    planes: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Clustered log-likelihood of labels y [tau] under a weighted mixture of functions.

    log_probs: [F, tau, C] per-function log-probabilities at the batch's inputs;
    log_weights: [F] mixture log-weights (log(1/M) each for M sampled keys, or log of
    member frequencies for a finite sampler); num_samples: M, the number of sampled keys
    (cell counts n_k are weights * M). The hyperplanes are `planes` (a, b) when given,
    else drawn from `key` (`hyperplanes`).
    """
    num_funcs, tau, _ = log_probs.shape
    probs = jnp.exp(log_probs)
    probits = jnp.clip(jsp.ndtri(probs), -probit_clip, probit_clip)
    correct = jnp.take_along_axis(probits, y[None, :, None], axis=2)[..., 0]  # [F, tau]
    features = correct if only_correct_class else probits.reshape(num_funcs, -1)
    if planes is None:
        planes = hyperplanes(key, features.shape[1], num_hyperplanes)
    a, b = planes
    bits = (features @ a.T + b > 0).astype(jnp.int32)
    cell = bits @ (2 ** jnp.arange(a.shape[0]))  # [F] in 0..2^h - 1
    one_hot = jax.nn.one_hot(cell, 2 ** a.shape[0])  # [F, K]
    weights = jnp.exp(log_weights)
    counts = weights * num_samples
    cell_counts = one_hot.T @ counts  # [K]
    cell_sums = one_hot.T @ (counts[:, None] * jsp.ndtr(correct))  # [K, tau]
    centres = (cell_sums + 1e-6) / (cell_counts[:, None] + 1e-6)
    cell_weights = one_hot.T @ weights
    log_terms = jnp.sum(jnp.log(centres), axis=1) + jnp.log(cell_weights)
    return jsp.logsumexp(jnp.where(cell_weights > 0, log_terms, -jnp.inf))
