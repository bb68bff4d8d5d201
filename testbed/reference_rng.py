"""The Neural Testbed's random streams, so that an id is the reference's problem bit for bit.

The reference derives every key of a problem from `hk.PRNGSequence(seed)` (each `next()`
is `split(key, 2)`: the first half is kept, the second handed out) on JAX's original,
non-partitionable threefry stream. Newer JAX defaults to the partitionable stream, which
gives other numbers for the same key; `reference_stream()` switches to the original one
for a block only (the user's global setting is left as it was).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax
import jax.numpy as jnp


@contextlib.contextmanager
def reference_stream() -> Iterator[None]:
    """Random draws inside use JAX's original threefry stream (`threefry_partitionable`
    off), as the reference's problems were drawn; jitted code is cached per stream."""
    with jax.threefry_partitionable(False):
        yield


def key_sequence(seed: int | jax.Array, num: int) -> list[jax.Array]:
    """The first `num` keys of `hk.PRNGSequence(seed)`: key_{i+1}, sub_i = split(key_i)."""
    key = jax.random.PRNGKey(seed) if isinstance(seed, int) else seed
    out = []
    for _ in range(num):
        key, sub = jax.random.split(key)
        out.append(sub)
    return out


def sample_labels(key: jax.Array, probs: jax.Array) -> jax.Array:
    """Labels [n] of class probabilities [n, C], one `jax.random.choice` per row with the
    row's key from split(key, n): the reference's label draw (an inverse-CDF draw, not
    the Gumbel trick of `jax.random.categorical`)."""
    num, num_classes = probs.shape
    keys = jax.random.split(key, num)
    draw = lambda k, p: jax.random.choice(k, num_classes, shape=(1,), p=p)[0]  # noqa: E731
    return jax.vmap(draw)(keys, probs).astype(jnp.int32)


def labels_log_likelihood(probs: jax.Array, y: jax.Array) -> jax.Array:
    """sum_i log probs[i, y_i]: the environment's log-likelihood of labels, as the
    reference computes it (log of the softmax probabilities)."""
    return jnp.sum(jnp.log(jnp.take_along_axis(probs, y[:, None], axis=1)))
