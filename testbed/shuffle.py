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


def permuted_index(
    seed: jax.Array, offset: jax.Array, n: int | jax.Array, *, rolled: bool = False
) -> jax.Array:
    """perm_seed(offset) for a pseudo-random permutation of [0, n) chosen by `seed` (uint32).

    Swap-or-not shuffle (Hoang, Morris & Rogaway 2012): each round pairs x with
    (k_r - x) mod n and swaps the pair when a keyed hash of the pair says so; every round
    is an involution of [0, n), so the composition is a bijection for any n >= 1 (n may be
    traced). Offsets must lie in [0, n). `rolled=True` runs the rounds in a `fori_loop`
    (the same integers): a program one round long, which compiles several times faster
    (0.3 s -> 0.08 s for 16,000 offsets here) and runs faster too on many offsets (an
    epoch's order); unrolled (the default) suits many calls over a few (a step's batch).
    """
    size = jnp.asarray(n).astype(jnp.uint32)
    x = offset.astype(jnp.uint32)
    if rolled:
        x = jax.lax.fori_loop(0, ROUNDS, lambda r, x: _round(seed, size, r, x), x)
    else:
        for r in range(ROUNDS):
            x = _round(seed, size, r, x)
    return x.astype(jnp.int32)


def _round(seed, size, r, x):
    """Round r of the swap-or-not shuffle (r a Python or a traced integer)."""
    if isinstance(r, int):
        k_r = mix32(seed ^ jnp.uint32(0x9E3779B9 * (2 * r + 1) % 2**32))
        h_r = mix32(seed + jnp.uint32(0x85EBCA6B * (2 * r + 2) % 2**32))
    else:  # the same constants, computed in uint32 (products wrap mod 2^32)
        r = r.astype(jnp.uint32)
        k_r = mix32(seed ^ (jnp.uint32(0x9E3779B9) * (2 * r + 1)))
        h_r = mix32(seed + jnp.uint32(0x85EBCA6B) * (2 * r + 2))
    partner = k_r % size + size - x  # in (0, 2n): reduce mod n without a division
    partner = jnp.where(partner >= size, partner - size, partner)
    pick = jnp.maximum(x, partner)
    swap = (mix32(pick ^ h_r) >> 31) == 1
    return jnp.where(swap, partner, x)
