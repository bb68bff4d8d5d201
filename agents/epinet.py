"""`epinet`: a base MLP plus a small epistemic network and a fixed additive prior.

Output for index z ~ N(0, I_D) (one z per key):
  mu(x) + sigma_L([sg(x), sg(h(x))], z) . z + prior_scale / T * sum_i z_i p_i(x)
where h is the base MLP's last hidden layer (sg = stop-gradient), sigma_L an MLP
(epi_hiddens) on [x, h, z] with C * D outputs reshaped [C, D], and p_i D fixed random MLPs
(add_hiddens). Loss: cross entropy averaged over D index samples per step plus
0.2 * (d / n)^0.7 * sum of squared trainable weights (prior excluded); steps x10 when
n / d > 500 (all as the reference's factory, which no reference sweep registers). The
reference's periodic prior loss (every 100,000 steps, i.e. effectively never at its
step counts) and its zero-scaled epinet prior are omitted.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import haiku as hk
import jax
import jax.numpy as jnp

from agents.networks import init_ensemble, make_mlp
from agents.online import adam_learner, agent_key, bandit_decay, online_pieces
from agents.registry import NETWORK, register
from agents.training import (
    Network,
    NetworkConfig,
    check_hidden_sizes,
    data_loss,
    index_averaged_loss,
    temperature_of,
)
from testbed.base import Data, PriorKnowledge
from testbed.config import check_at_least, check_nonnegative


@dataclasses.dataclass(frozen=True)
class EpinetConfig(NetworkConfig):
    """Epinet with an additive MLP-ensemble prior (reference `EpinetConfig` defaults)."""

    index_dim: int = 8
    l2_weight_decay: float = 0.2
    prior_scale: float = 0.3
    epi_hiddens: tuple[int, ...] = (15, 15)
    add_hiddens: tuple[int, ...] = (5, 5)
    needs_hidden_layer: ClassVar[bool] = True  # the epinet reads the base's last features

    def __post_init__(self):
        super().__post_init__()
        check_at_least("index_dim", self.index_dim, 1)
        check_nonnegative("l2_weight_decay", self.l2_weight_decay)
        check_nonnegative("prior_scale", self.prior_scale)
        check_hidden_sizes("epi_hiddens", self.epi_hiddens)
        check_hidden_sizes("add_hiddens", self.add_hiddens)

    def num_steps(self, prior: PriorKnowledge) -> int:
        """The reference's schedule for the epinet: 10x the batches when n / d > 500."""
        return self.num_batches * (10 if prior.num_train / prior.input_dim > 500 else 1)


def epinet_sweep() -> list[EpinetConfig]:
    """The reference registers epinet in no sweep: its default config alone."""
    return [EpinetConfig()]


@functools.cache
def _structure(hidden, num_classes, input_dim, epi_hiddens, add_hiddens, index_dim):
    def forward(x, z):
        h = x
        for width in hidden:
            h = jax.nn.relu(hk.Linear(width, name="base")(h))
        mean = hk.Linear(num_classes, name="base_out")(h)
        feats = jax.lax.stop_gradient(jnp.concatenate([x, h], axis=-1))
        zz = jnp.broadcast_to(z, (x.shape[0], index_dim))
        e = jnp.concatenate([feats, zz], axis=-1)
        for width in epi_hiddens:
            e = jax.nn.relu(hk.Linear(width, name="epi")(e))
        e = hk.Linear(num_classes * index_dim, name="epi_out")(e)
        return mean + e.reshape(-1, num_classes, index_dim) @ z

    net = hk.without_apply_rng(hk.transform(forward))
    prior_net = make_mlp(add_hiddens, num_classes)
    dummy = jnp.zeros((1, input_dim), jnp.float32)

    def init(key):
        net_key, prior_key = jax.random.split(key)
        params = net.init(net_key, dummy, jnp.zeros((index_dim,)))
        return params, init_ensemble(prior_net, prior_key, index_dim, input_dim)

    def output(params, prior_params, prior_scale, x, z):
        prior = jnp.einsum("i,inc->nc", z, jax.vmap(lambda p: prior_net.apply(p, x))(prior_params))
        return net.apply(params, x, z) + prior_scale * prior

    def loss(params, batch, key, aux):
        prior_params, prior_scale, decay = aux
        zs = jax.random.normal(key, (index_dim, index_dim))

        def single(z):
            logits = output(params, prior_params, prior_scale, batch.x, z)
            return jnp.mean(data_loss(logits, batch.y))

        return index_averaged_loss(single, zs, decay, params)

    @jax.jit
    def sample_logits(params, prior_params, prior_scale, x, key):
        return output(params, prior_params, prior_scale, x, jax.random.normal(key, (index_dim,)))

    return Network(jax.jit(init), loss, sample_logits)


def online_epinet(config: EpinetConfig, prior: PriorKnowledge, key: jax.Array):
    """The epinet learning online: its prior networks as in training, the decay l2 * 2T of
    ||w||^2 / t."""
    epistemic = (tuple(config.epi_hiddens), tuple(config.add_hiddens), config.index_dim)
    net = _structure(*config.architecture(prior), *epistemic)
    params, prior_params = net.init(agent_key(config.seed, key))
    fixed = (prior_params, jnp.float32(config.prior_scale / temperature_of(prior)))
    decay = bandit_decay(config.l2_weight_decay, prior)
    pieces = online_pieces(net, decay_at=2, num_sampled=2)  # aux (*fixed, decay)
    return adam_learner(*pieces, params, fixed, decay, config.learning_rate)


@register("epinet", EpinetConfig, sweep=epinet_sweep, predicts=NETWORK, online=online_epinet)
def make_epinet(config: EpinetConfig):
    """Epinet (Osband et al. 2021) on an MLP base network; one index z per key."""

    def agent(data: Data, prior: PriorKnowledge):
        epistemic = (tuple(config.epi_hiddens), tuple(config.add_hiddens), config.index_dim)
        net = _structure(*config.architecture(prior), *epistemic)
        init_key, train_key = config.keys()
        params, prior_params = net.init(init_key)
        scale = jnp.float32(config.prior_scale / temperature_of(prior))
        n = max(prior.num_train, 1)
        decay = jnp.float32(config.l2_weight_decay * (prior.input_dim / n) ** 0.7)
        aux = (prior_params, scale, decay)
        return config.trained_sampler(net, params, data, prior, train_key, aux, prior_params, scale)

    return agent
