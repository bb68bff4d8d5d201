"""The Neural Testbed's prior over classifiers: a random ReLU MLP, logits / temperature.

Weights are fan-in truncated normals (sd 1/sqrt(fan_in), truncated at 2 sd, no variance
correction: Haiku's Linear default); biases are zero except the first layer's, N(0, 1/d).
The environment draws one such function; the `prior` baseline agent draws one per key.
"""

from __future__ import annotations

from collections.abc import Sequence

import haiku as hk
import jax
import jax.numpy as jnp


def make_random_mlp(
    input_dim: int, num_classes: int, hidden: Sequence[int] = (50, 50)
) -> hk.Transformed:
    """A Haiku transform of the generator MLP: init(key, x) draws a function."""

    def net(x: jax.Array) -> jax.Array:
        h = x
        for i, width in enumerate(hidden):
            b_init = hk.initializers.RandomNormal(1.0 / jnp.sqrt(input_dim)) if i == 0 else None
            h = jax.nn.relu(hk.Linear(width, b_init=b_init, name=f"linear_{i}")(h))
        b_init = None if hidden else hk.initializers.RandomNormal(1.0 / jnp.sqrt(input_dim))
        return hk.Linear(num_classes, b_init=b_init, name="logits")(h)

    return hk.without_apply_rng(hk.transform(net))


def sample_logit_fn(
    key: jax.Array,
    input_dim: int,
    num_classes: int,
    temperature: float,
    hidden: Sequence[int] = (50, 50),
):
    """One random function x [n, d] -> logits [n, C] (already divided by temperature)."""
    net = make_random_mlp(input_dim, num_classes, hidden)
    params = net.init(key, jnp.zeros((1, input_dim)))
    return lambda x: net.apply(params, x) / temperature
