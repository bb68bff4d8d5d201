"""Test-input designs for joint evaluation: i.i.d. Gaussian and dyadic (polyadic) batches.

A dyadic batch draws kappa anchor points, then tau points from the anchors with
replacement (exact repeats; labels at repeated inputs are drawn independently). Repeats
are what make a joint predictive differ from the product of its marginals.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gaussian_inputs(key: jax.Array, num_batches: int, tau: int, input_dim: int) -> jax.Array:
    """[N, tau, d] i.i.d. N(0, I) test inputs."""
    return jax.random.normal(key, (num_batches, tau, input_dim))


def polyadic_indices(key: jax.Array, num_batches: int, tau: int, kappa: int, num_points: int):
    """[N, tau] indices into a pool of `num_points`: kappa anchors, tau picks from them.

    Batch i uses key i of split(key, N), as the reference's local sampler: kappa anchors
    uniform over the pool (with replacement), then tau picks uniform over the anchors.
    """

    def one_batch(k):
        anchor_key, pick_key = jax.random.split(k)
        anchors = jax.random.randint(anchor_key, (kappa,), 0, num_points)
        return anchors[jax.random.randint(pick_key, (tau,), 0, kappa)]

    return jax.vmap(one_batch)(jax.random.split(key, num_batches))


def polyadic_gaussian_inputs(
    key: jax.Array, num_batches: int, tau: int, input_dim: int, kappa: int = 2
) -> jax.Array:
    """[N, tau, d]: kappa N(0, I) anchors per batch, tau draws from them with replacement."""
    anchor_key, pick_key = jax.random.split(key)
    anchors = jax.random.normal(anchor_key, (num_batches, kappa, input_dim))
    picks = jax.random.randint(pick_key, (num_batches, tau), 0, kappa)
    return jnp.take_along_axis(anchors, picks[..., None], axis=1)
