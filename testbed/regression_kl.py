"""The Neural Testbed's sample-based Gaussian KL for regression (`GaussianSampleKL`).

Per test batch of tau inputs with targets y = f(x) + N(0, s^2): the environment's
log-likelihood log N(y; f(x), s^2 I) minus the agent's log mean_m N(y; f_m(x), s^2 I)
over M sampled functions f_m (s: the problem's known noise_std). Averaged over batches,
it estimates the KL from the true predictive to the agent's. Each of the M keys is one
function over all test inputs at once (as the classification estimator; the reference
draws M keys per batch: the same expectation).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from testbed.joint_kl import mixture_log_likelihood, summarize_kl
from testbed.metrics.registry import register
from testbed.sampled_functions import apply_functions, real_values


def gaussian_log_likelihood(residuals: Any, noise_std: Any) -> Any:
    """sum over the last axis of log N(r; 0, noise_std^2): residuals [..., tau] -> [...]."""
    tau = residuals.shape[-1]
    return -0.5 * (
        tau * math.log(2 * math.pi)
        + 2 * tau * jnp.log(noise_std)
        + jnp.sum(jnp.square(residuals), axis=-1) / noise_std**2
    )


def batch_gaussian_log_likelihood(values: jax.Array, aux) -> jax.Array:
    """One function's log N(y_i; f(x_i), s^2 I) per batch: values [N * tau, 1] -> [N]."""
    y, noise_std = aux
    return gaussian_log_likelihood(values[:, 0].reshape(y.shape) - y, noise_std)


@dataclasses.dataclass(frozen=True)
class RegressionBatches:
    """What the estimator reads: test inputs x [N, tau, d], targets y [N, tau], the M
    sampler keys, the environment's log-likelihood [N] and the noise sd the agent's
    functions are scored with."""

    x: Any
    y: Any
    keys: jax.Array
    env_loglik: Any
    noise_std: float

    def agent_loglik(self, sampler) -> jax.Array:
        """log mean_m N(y_i; f_m(x_i), s^2 I) for each batch i: [N]."""
        x = jnp.asarray(self.x, jnp.float32)
        y = jnp.asarray(self.y, jnp.float32)
        x_flat = x.reshape((y.shape[0] * y.shape[1],) + x.shape[2:])
        aux = (y, jnp.float32(self.noise_std))
        funcs = apply_functions(
            sampler, x_flat, self.keys, batch_gaussian_log_likelihood, aux,
            num_classes=1, link=real_values,
        )  # fmt: skip
        return mixture_log_likelihood(funcs.values, funcs.log_weights)


def gaussian_sample_kl(env_loglik: Any, agent_loglik: Any) -> dict[str, float]:
    """Regression KL (Neural Testbed): mean of log N(y; f, s^2) - log mean_m N(y; f_m, s^2).

    Returns kl_estimate, kl_estimate_std and pct_finite_kl, as the classification KL.
    """
    return summarize_kl(env_loglik, agent_loglik)


def _gaussian_kl(evidence) -> dict[str, float]:
    batches = evidence["regression_batches"]
    return gaussian_sample_kl(batches.env_loglik, batches.agent_loglik(evidence["sampler"]))


register(
    "regression_kl",
    ("regression_batches", "sampler"),
    _gaussian_kl,
    ("kl_estimate", "kl_estimate_std", "pct_finite_kl"),
)(gaussian_sample_kl)
