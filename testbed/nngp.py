"""The NNGP kernel of an infinitely wide ReLU MLP (the Neural Testbed's GP environments).

The network Dense(W_std=1, b_std=1/sqrt(d)) -> ReLU -> Dense(W_std=1, b_std=0) -> ReLU ->
Dense(1, W_std=1, b_std=0) has, as its width goes to infinity, the Gaussian-process
kernel K0 = x.x'/d + 1/d, then for each ReLU the arc-cosine map
E[relu(u) relu(v)] = sqrt(k11 k22) / (2 pi) * (sin t + (pi - t) cos t),
cos t = k12 / sqrt(k11 k22), with (u, v) ~ N(0, [[k11, k12], [k12, k22]]) (a Dense layer
with W_std = 1, b_std = 0 leaves it as it is). Written for NumPy and JAX alike (`xp`).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp


def relu_covariance(k12: Any, k11: Any, k22: Any, xp: Any = jnp) -> Any:
    """E[relu(u) relu(v)] for centred Gaussians with variances k11 [n, 1], k22 [1, m] and
    covariance k12 [n, m]."""
    norms = xp.sqrt(k11 * k22)
    cos = xp.clip(k12 / norms, -1.0, 1.0)
    theta = xp.arccos(cos)
    return norms / (2 * xp.pi) * (xp.sin(theta) + (xp.pi - theta) * cos)


def nngp_kernel(x1: Any, x2: Any, num_hidden: int = 2, xp: Any = jnp) -> Any:
    """K(x1, x2) [n, m] of the benchmark ReLU network with `num_hidden` hidden layers."""
    d = x1.shape[1]
    k12 = (x1 @ x2.T) / d + 1.0 / d
    k11 = xp.sum(x1 * x1, axis=1, keepdims=True) / d + 1.0 / d
    k22 = (xp.sum(x2 * x2, axis=1, keepdims=True) / d + 1.0 / d).T
    for _ in range(num_hidden):
        k12 = relu_covariance(k12, k11, k22, xp)
        k11, k22 = k11 / 2, k22 / 2
    return k12
