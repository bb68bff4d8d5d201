"""`hypermodel`: a linear hypermodel theta(z) = W z + b over MLP weights, plus an additive prior.

Index z ~ N(0, I / index_dim) (the reference's `ScaledGaussianIndexer`); one z per key.
Output f_{theta(z)}(x) + s * p_z(x), with p_z a fixed random MLP (prior_hidden_sizes)
whose layer weights are linear in disjoint slices of z ("independent layers") and
s = prior_scale / sqrt(T) ('sqrt'), / T ('linear') or 1 ('none'). Loss: cross entropy
(times bootstrap weights, Gaussian-index versions as in enn) averaged over
`num_index_samples` z's, plus l2 * sqrt(T) d / n * (|W|^2 + |b|^2). 2000 steps by default.

By default b starts at Haiku's default MLP init and W at a truncated normal with
variance 1 / fan_avg, and the prior MLP's per-layer generators are Gaussian with unit-norm
columns (approximations of today's enn). `enn_2021` gives the enn library of October
2021, behind the Neural Testbed's 2021 figure: b = 0, W ~ TruncatedNormal(1 / sqrt(D))
(Haiku's Linear default with fan-in D, so every generated weight starts with the same
spread whatever its layer's fan-in) and the `HyperLinear` prior
(`networks.make_hyper_linear_prior`). The reference's
sweep passes temp_scale_prior='lin' which this factory (unlike ensemble+) does read as
1/T; we use 'linear' with the same meaning ('lin' is accepted as an alias).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from agents.networks import make_flat_mlp, make_hyper_linear_prior, make_linear_index_prior
from agents.online import adam_learner, agent_key, as_rows, bandit_decay
from agents.registry import NETWORK, register
from agents.training import (
    BOOTSTRAP,
    Network,
    PriorFunctionConfig,
    RegularizedMLPConfig,
    check_hidden_sizes,
    data_loss,
    index_averaged_loss,
    schedule_sweep,
)
from testbed.base import Data, PriorKnowledge
from testbed.config import check_at_least


@dataclasses.dataclass(frozen=True)
class HypermodelConfig(RegularizedMLPConfig, PriorFunctionConfig):
    """Linear hypermodel with additive prior (reference `HypermodelConfig` defaults)."""

    index_dim: int = 6
    num_index_samples: int = 16
    prior_scale: float = 1.0
    prior_hidden_sizes: tuple[int, ...] = (10,)
    num_batches: int = 2000
    enn_2021: bool = False  # the 2021 enn's initialisation and prior (see module doc)

    def __post_init__(self):
        super().__post_init__()
        check_at_least("index_dim", self.index_dim, 1)
        check_at_least("num_index_samples", self.num_index_samples, 1)
        check_hidden_sizes("prior_hidden_sizes", self.prior_hidden_sizes)


def hypermodel_sweep() -> list[HypermodelConfig]:
    """The reference's `testbed` sweep (24): prior, index dim, l2, bootstrap, schedule."""
    c = functools.partial(HypermodelConfig, num_batches=1000, batch_strategy=True)
    sweep = [
        c(prior_hidden_sizes=h, prior_scale=s, temp_scale_prior=t)
        for h in ((10,), (10, 10))
        for s in (1.0, 3.0)
        for t in ("linear", "sqrt")
    ]
    sweep += [c(index_dim=d) for d in (1, 3, 5, 7)]
    sweep += [c(l2_weight_decay=l2) for l2 in (0.1, 0.3, 1.0, 3.0, 10.0)]
    sweep += [c(distribution=d) for d in BOOTSTRAP]
    return sweep + schedule_sweep(HypermodelConfig)


def gaussian_bootstrap(distribution: str, boot: jax.Array, z: jax.Array) -> jax.Array:
    """enn's bootstrap weights for Gaussian indices: per-example vectors boot [b, 2, D].

    bernoulli: 1 + sign(b1 . z); exponential: ((b1 . z)^2 + (b2 . z)^2) / 2; none: 1.
    """
    if distribution == "none":
        return jnp.ones(boot.shape[:1])
    proj = boot @ z * math.sqrt(z.shape[0])  # z ~ N(0, I/D): rescale to unit variance
    if distribution == "bernoulli":
        return 1.0 + jnp.sign(proj[:, 0])
    return 0.5 * (proj[:, 0] ** 2 + proj[:, 1] ** 2)


@functools.cache
def _structure(
    hidden, num_classes, input_dim, prior_hidden, index_dim, num_samples, dist, enn_2021
):
    mlp = make_flat_mlp(hidden, num_classes, input_dim)
    make_index_prior = make_hyper_linear_prior if enn_2021 else make_linear_index_prior

    def init(key):
        base_key, w_key, prior_key = jax.random.split(key, 3)
        b = mlp.init(base_key)
        shape = (b.shape[0], index_dim)
        if enn_2021:  # Haiku's Linear default over the index: sd 1 / sqrt(D); zero bias
            w = jax.random.truncated_normal(w_key, -2.0, 2.0, shape) / math.sqrt(index_dim)
            return {"w": w, "b": jnp.zeros_like(b)}, prior_key
        std = math.sqrt(2.0 / (b.shape[0] + index_dim))
        w = std * jax.random.truncated_normal(w_key, -2.0, 2.0, shape)
        return {"w": w, "b": b}, prior_key

    def make_prior(key):
        return make_index_prior(key, input_dim, prior_hidden, num_classes, index_dim)

    def forward(params, prior_key, prior_scale, x, z):
        out = mlp.apply(params["w"] @ z + params["b"], x)
        return out + prior_scale * jax.lax.stop_gradient(make_prior(prior_key)(x, z))

    def index(key):
        return jax.random.normal(key, (index_dim,)) / math.sqrt(index_dim)

    def loss(params, batch, key, aux):
        prior_key, prior_scale, boot, decay = aux

        def single(k):
            z = index(k)
            ce = data_loss(forward(params, prior_key, prior_scale, batch.x, z), batch.y)
            return jnp.mean(ce * gaussian_bootstrap(dist, boot[batch.index], z))

        return index_averaged_loss(single, jax.random.split(key, num_samples), decay, params)

    @jax.jit
    def sample_logits(params, prior_key, prior_scale, x, key):
        return forward(params, prior_key, prior_scale, x, index(key))

    def online_loss(params, fixed, batch, key, decay):
        prior_key, prior_scale, boot_key = fixed
        slots = jax.vmap(
            lambda i: jax.random.normal(jax.random.fold_in(boot_key, i), (2, index_dim))
        )
        boot = slots(batch.index) / math.sqrt(index_dim)
        return loss(params, as_rows(batch), key, (prior_key, prior_scale, boot, decay))

    def online_sample(params, fixed, x, key):
        prior_key, prior_scale, _ = fixed
        return forward(params, prior_key, prior_scale, x, index(key))

    net = Network(jax.jit(init), loss, sample_logits)
    return net, (online_loss, online_sample)


def _network(config: HypermodelConfig, prior: PriorKnowledge):
    return _structure(
        *config.architecture(prior),
        tuple(config.prior_hidden_sizes),
        config.index_dim,
        config.num_index_samples,
        config.distribution,
        bool(config.enn_2021),
    )


def online_hypermodel(config: HypermodelConfig, prior: PriorKnowledge, key: jax.Array):
    """The hypermodel learning online: its prior and Gaussian-index bootstrap as in training,
    the decay l2 * 2T of ||w||^2 / t."""
    _, (loss, sample) = _network(config, prior)
    init_key, boot_key = jax.random.split(agent_key(config.seed, key))
    params, prior_key = _network(config, prior)[0].init(init_key)
    fixed = (prior_key, jnp.float32(config.scaled_prior(prior)), boot_key)
    decay = bandit_decay(config.l2_weight_decay, prior)
    return adam_learner(loss, sample, params, fixed, decay, config.learning_rate)


@register(
    "hypermodel",
    HypermodelConfig,
    sweep=hypermodel_sweep,
    predicts=NETWORK,
    online=online_hypermodel,
)
def make_hypermodel(config: HypermodelConfig):
    """Linear hypermodel over MLP weights with an additive random prior; one z per key."""

    def agent(data: Data, prior: PriorKnowledge):
        net, _ = _network(config, prior)
        init_key, train_key, boot_key = config.keys(3)
        params, prior_key = net.init(init_key)
        scale = jnp.float32(config.scaled_prior(prior))
        n = max(int(data.x.shape[0]), 1)
        boot = jax.random.normal(boot_key, (n, 2, config.index_dim)) / math.sqrt(config.index_dim)
        decay = jnp.float32(config.decay(prior))
        aux = (prior_key, scale, boot, decay)
        return config.trained_sampler(net, params, data, prior, train_key, aux, prior_key, scale)

    return agent
