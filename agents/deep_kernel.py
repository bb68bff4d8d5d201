"""`deep_kernel`: an MLP's normalised last hidden layer as the features of a Bayesian linear head.

Train an MLP (weight decay * sqrt(T) d / n); phi(x) = last hidden / |last hidden|
('only_output' normalisation: the network trains unnormalised). With Phi the features of
up to `num_inference_samples` training inputs, sigma2 = sigma_squared_factor * T and
L = chol(sigma2 I + Phi^T Phi), a key draws eps ~ N(0, I) [F, C] and gives
  logits(x) = mlp(x) + c * phi(x) L^-T eps,   c = scale_factor sqrt(sigma2) / sqrt(n T),
as the reference. The steps field is `num_batches` (the reference calls it num_train_steps).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp

from agents.networks import make_mlp_with_features
from agents.registry import NETWORK, register
from agents.training import (
    NetworkConfig,
    bind_sampler,
    decay_factor,
    regularized_loss,
    temperature_of,
)
from testbed.base import Data, PriorKnowledge
from testbed.config import check_at_least, check_nonnegative, check_positive


@dataclasses.dataclass(frozen=True)
class DeepKernelConfig(NetworkConfig):
    """Deep kernel (reference `DeepKernelConfig` defaults)."""

    weight_decay: float = 1.0
    scale_factor: float = 2.0
    num_inference_samples: int = 32_768
    sigma_squared_factor: float = 4.0
    needs_hidden_layer: ClassVar[bool] = True  # the head reads the last hidden features

    def __post_init__(self):
        super().__post_init__()
        check_nonnegative("weight_decay", self.weight_decay)
        check_nonnegative("scale_factor", self.scale_factor)
        check_at_least("num_inference_samples", self.num_inference_samples, 1)
        check_positive("sigma_squared_factor", self.sigma_squared_factor)


def deep_kernel_sweep() -> list[DeepKernelConfig]:
    """The reference's `testbed_2d` sweep (30): scale factor x sigma^2 factor."""
    return [
        DeepKernelConfig(scale_factor=s, sigma_squared_factor=v)
        for s in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
        for v in (0.5, 1.0, 2.0, 3.0, 4.0)
    ]


def _normalise(h):
    return h / (1e-6 + jnp.linalg.norm(h, axis=-1, keepdims=True))


@functools.cache
def _structure(hidden, num_classes):
    net = make_mlp_with_features(hidden, num_classes)

    def loss(params, batch, key, decay):
        logits, _ = net.apply(params, batch.x)
        return regularized_loss(logits, batch.y, decay, params)

    @jax.jit
    def cholesky(params, x, sigma2):
        phi = _normalise(net.apply(params, x)[1])
        return jnp.linalg.cholesky(sigma2 * jnp.eye(phi.shape[1]) + phi.T @ phi)

    @jax.jit
    def sample_logits(params, chol, scale, x, key):
        mean, h = net.apply(params, x)
        eps = jax.random.normal(key, (chol.shape[0], num_classes))
        draw = jax.scipy.linalg.solve_triangular(chol, eps, lower=True, trans="T")
        return mean + scale * _normalise(h) @ draw

    return jax.jit(net.init), loss, cholesky, sample_logits


@register("deep_kernel", DeepKernelConfig, sweep=deep_kernel_sweep, predicts=NETWORK)
def make_deep_kernel(config: DeepKernelConfig):
    """Bayesian linear head on a trained MLP's normalised features; one head draw per key."""

    def agent(data: Data, prior: PriorKnowledge):
        init, loss, cholesky, sample_logits = _structure(
            tuple(config.hidden_sizes), prior.num_classes
        )
        init_key, train_key, sub_key = config.keys(3)
        params = init(init_key, jnp.zeros((1, prior.input_dim), jnp.float32))
        aux = jnp.float32(config.weight_decay * decay_factor(prior, True))
        params, _ = config.fit(loss, params, data, prior, train_key, aux=aux)
        x = jnp.asarray(data.x, jnp.float32)
        if x.shape[0] > config.num_inference_samples:
            keep = jax.random.permutation(sub_key, x.shape[0])[: config.num_inference_samples]
            x = x[keep]
        temperature = temperature_of(prior)
        sigma2 = config.sigma_squared_factor * temperature
        chol = cholesky(params, x, jnp.float32(sigma2))
        n = max(prior.num_train, 1)
        scale = jnp.float32(config.scale_factor * math.sqrt(sigma2) / math.sqrt(n * temperature))
        return bind_sampler(sample_logits, params, chol, scale)

    return agent
