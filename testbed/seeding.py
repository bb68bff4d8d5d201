"""Seeds: every random draw of the package comes from one seed, an int or a numpy Generator.

The one `sample` convention: `sample([what it is conditioned on,] num_samples, seed)`, e.g.
`posterior.sample(x_o, num_samples, seed)`, `prior.sample(num_samples, seed)`. The seed is
an int (a fresh stream) or a numpy Generator (its stream continues, for callers that draw
several things in order). Objects of other libraries keep their own API (a torch
Distribution's `sample(sample_shape)`, sbi's `sample(shape, x=...)`).
"""

from __future__ import annotations

import numpy as np

from testbed.errors import bad_value

Seed = int | np.integer | np.random.SeedSequence | np.random.Generator


def make_rng(seed: Seed, field: str = "seed") -> np.random.Generator:
    """A numpy Generator: a Generator is returned as it is (its stream goes on), an int
    seed or a SeedSequence starts a fresh one; anything else is a named InputError."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise bad_value(field, seed, "a non-negative integer or a numpy Generator")
    return np.random.default_rng(int(seed))
