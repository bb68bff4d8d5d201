"""Haiku networks of the testbed agents: MLPs, vectorized ensembles, dropout, priors.

Weights use Haiku's Linear default (truncated normal, sd 1/sqrt(fan_in)); biases are
zero unless `first_bias_std` asks for a N(0, std^2)-like truncated-normal first-layer
bias (ensemble+, dropout, as the reference). An ensemble is one parameter pytree with a
leading member axis, applied with `vmap` (XLA batches the K matmuls into one einsum).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


def _bias_init(first_bias_std: float | None, layer: int):
    if layer == 0 and first_bias_std is not None:
        return hk.initializers.TruncatedNormal(first_bias_std)
    return None


def make_mlp(
    hidden: Sequence[int], num_classes: int, first_bias_std: float | None = None
) -> hk.Transformed:
    """A ReLU MLP x [n, d] -> logits [n, C] (hidden = () is logistic regression)."""
    hidden = tuple(hidden)

    def net(x):
        h = x
        for i, width in enumerate(hidden):
            h = jax.nn.relu(hk.Linear(width, b_init=_bias_init(first_bias_std, i))(h))
        return hk.Linear(num_classes, b_init=_bias_init(first_bias_std, len(hidden)))(h)

    return hk.without_apply_rng(hk.transform(net))


class FlatMLP(NamedTuple):
    """An MLP whose weights are one flat vector [P] (for distributions over the weights)."""

    init: Callable[[jax.Array], jax.Array]  # key -> Haiku's default initial weights [P]
    apply: Callable[[jax.Array, jax.Array], jax.Array]  # (weights [P], x [n, d]) -> logits


def make_flat_mlp(hidden: Sequence[int], num_classes: int, input_dim: int) -> FlatMLP:
    """`make_mlp` on inputs of `input_dim`, its weights raveled into one vector."""
    net = make_mlp(hidden, num_classes)
    dummy = jnp.zeros((1, input_dim), jnp.float32)
    _, unravel = ravel_pytree(net.init(jax.random.PRNGKey(0), dummy))

    def init(key):
        return ravel_pytree(net.init(key, dummy))[0]

    def apply(theta, x):
        return net.apply(unravel(theta), x)

    return FlatMLP(init, apply)


def make_mlp_with_features(hidden: Sequence[int], num_classes: int) -> hk.Transformed:
    """A ReLU MLP returning (logits [n, C], last hidden layer [n, hidden[-1]])."""
    hidden = tuple(hidden)

    def net(x):
        h = x
        for width in hidden:
            h = jax.nn.relu(hk.Linear(width)(h))
        return hk.Linear(num_classes)(h), h

    return hk.without_apply_rng(hk.transform(net))


def make_dropout_mlp(
    hidden: Sequence[int],
    num_classes: int,
    rate: float,
    dropout_input: bool,
    first_bias_std: float | None = None,
) -> hk.Transformed:
    """MC-dropout MLP `apply(params, x, key)`: one mask per key, shared by all rows of x.

    Units are kept with probability 1 - rate and scaled by 1/(1 - rate) (inverted
    dropout) on the input (if `dropout_input`) and on every hidden layer.
    """
    hidden = tuple(hidden)
    keep = 1.0 - rate

    def drop(h, key):
        if rate == 0.0:
            return h
        mask = jax.random.bernoulli(key, keep, h.shape[-1:])
        return jnp.where(mask, h / keep, 0.0)

    def net(x, key):
        keys = jax.random.split(key, len(hidden) + 1)
        h = drop(x, keys[0]) if dropout_input else x
        for i, width in enumerate(hidden):
            h = jax.nn.relu(hk.Linear(width, b_init=_bias_init(first_bias_std, i))(h))
            h = drop(h, keys[i + 1])
        return hk.Linear(num_classes, b_init=_bias_init(first_bias_std, len(hidden)))(h)

    return hk.without_apply_rng(hk.transform(net))


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def init_ensemble(net: hk.Transformed, key: jax.Array, num_members: int, input_dim: int, *args):
    """K independently initialised parameter sets stacked on a leading axis (jitted)."""
    dummy = jnp.zeros((1, input_dim), jnp.float32)
    keys = jax.random.split(key, num_members)
    return jax.vmap(lambda k: net.init(k, dummy, *args))(keys)


def apply_ensemble(net: hk.Transformed, params, x: jax.Array) -> jax.Array:
    """All members at x: [K, n, C]."""
    return jax.vmap(lambda p: net.apply(p, x))(params)


def index_split(index_dim: int, num_layers: int) -> list[tuple[int, int]]:
    """Contiguous (start, stop) slices of the index, one per layer, as even as possible."""
    bounds = [round(i * index_dim / num_layers) for i in range(num_layers + 1)]
    out = []
    for i in range(num_layers):
        start = min(bounds[i], index_dim - 1)
        out.append((start, max(bounds[i + 1], start + 1)))
    return out


def make_linear_index_prior(
    key: jax.Array,
    input_dim: int,
    hidden: Sequence[int],
    num_classes: int,
    index_dim: int,
):
    """A fixed random MLP whose layer weights are linear in the index z (hypermodel prior).

    Layer l's weight matrix is G_l z_l with z_l its own slice of the index ("independent
    layers") and G_l a random Gaussian tensor with unit-norm columns; biases are zero.
    Returns prior(x [n, d], z [D]) -> [n, C].
    """
    sizes = (input_dim, *tuple(hidden), num_classes)
    num_layers = len(sizes) - 1
    slices = index_split(index_dim, num_layers)
    gens = []
    for layer, (k, (a, b)) in enumerate(
        zip(jax.random.split(key, num_layers), slices, strict=True)
    ):
        fan_in, fan_out = sizes[layer], sizes[layer + 1]
        g = jax.random.normal(k, (fan_in * fan_out, b - a))
        g = g / jnp.linalg.norm(g, axis=0, keepdims=True)
        gens.append(g.reshape(fan_in, fan_out, -1))

    def prior(x, z):
        h = x
        for layer, (g, (a, b)) in enumerate(zip(gens, slices, strict=True)):
            h = h @ jnp.einsum("iok,k->io", g, z[a:b])
            if layer < num_layers - 1:
                h = jax.nn.relu(h)
        return h

    return prior


def make_hyper_linear_prior(
    key: jax.Array,
    input_dim: int,
    hidden: Sequence[int],
    num_classes: int,
    index_dim: int,
):
    """The hypermodel prior of the enn library of 2021 (`HyperLinear` layers).

    Layer l (fan-in h, fan-out o) owns the chunk z_l of `np.array_split(range(D), L)` (all
    of z when D < L); its weights are w z_l with w ~ N(0, 1) [o, h, k] normalised to unit
    norm over k and scaled by 1 / sqrt(h), and its bias b z_l with b ~ N(0, 1) [o, k]
    normalised over k. ReLU between layers. Returns prior(x [n, d], z [D]) -> [n, C].
    """
    sizes = (input_dim, *tuple(hidden), num_classes)
    num_layers = len(sizes) - 1
    if index_dim < num_layers:
        chunks = [(0, index_dim)] * num_layers
    else:
        bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(index_dim), num_layers)])
        chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    layers = []
    for layer, (k, (a, b)) in enumerate(zip(jax.random.split(key, num_layers), chunks)):
        fan_in, fan_out = sizes[layer], sizes[layer + 1]
        w_key, b_key = jax.random.split(k)
        w = jax.random.normal(w_key, (fan_out, fan_in, b - a))
        w = w / jnp.linalg.norm(w, axis=-1, keepdims=True) / np.sqrt(fan_in)
        bias = jax.random.normal(b_key, (fan_out, b - a))
        layers.append((w, bias / jnp.linalg.norm(bias, axis=-1, keepdims=True)))

    def prior(x, z):
        h = x
        for layer, ((w, bias), (a, b)) in enumerate(zip(layers, chunks)):
            h = h @ (w @ z[a:b]).T + bias @ z[a:b]
            if layer < num_layers - 1:
                h = jax.nn.relu(h)
        return h

    return prior
