"""Keyed pseudo-random permutations computed in place: no sort, no index table, no PRNG call.

Used inside jitted training loops (the agents' SGD stream, the metric classifiers' epochs):
element i of a shuffled epoch is `permuted_index(seed, i, n)`, so a batch's indices cost a
few integer operations each and depend only on (seed, position), whatever the batching.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

ROUNDS = 24  # 6 leave visible structure (runs of neighbours); from ~18 on, batches look random


def mix32(v):
    """A 32-bit integer hash of uint32 values (multiply / xor-shift finaliser).

    Works on JAX and NumPy uint32 arrays alike (NumPy constants keep NumPy input on the host).
    """
    v = (v ^ (v >> 16)) * np.uint32(0x7FEB352D)
    v = (v ^ (v >> 15)) * np.uint32(0x846CA68B)
    return v ^ (v >> 16)


def permuted_index(seed: jax.Array, offset: jax.Array, n: int | jax.Array) -> jax.Array:
    """perm_seed(offset) for a pseudo-random permutation of [0, n) chosen by `seed` (uint32).

    Swap-or-not shuffle (Hoang, Morris & Rogaway 2012): each round pairs x with
    (k_r - x) mod n and swaps the pair when a keyed hash of the pair says so; every round
    is an involution of [0, n), so the composition is a bijection for any n >= 1 (n may be
    traced). Offsets must lie in [0, n).
    """
    size = jnp.asarray(n).astype(jnp.uint32)
    x = offset.astype(jnp.uint32)
    for r in range(ROUNDS):
        k_r = mix32(seed ^ jnp.uint32(0x9E3779B9 * (2 * r + 1) % 2**32))
        h_r = mix32(seed + jnp.uint32(0x85EBCA6B * (2 * r + 2) % 2**32))
        partner = k_r % size + size - x  # in (0, 2n): reduce mod n without a division
        partner = jnp.where(partner >= size, partner - size, partner)
        pick = jnp.maximum(x, partner)
        swap = (mix32(pick ^ h_r) >> 31) == 1
        x = jnp.where(swap, partner, x)
    return x.astype(jnp.int32)
