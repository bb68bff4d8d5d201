"""`dropout`: MC dropout (Gal & Ghahramani) with one dropout mask per key.

Training draws one mask per step, shared by the whole batch (the reference's single
index sample); at evaluation a key is one mask shared by all inputs, so one key is one
coherent function. Decay scale: length_scale * sqrt(T) d / n (adaptive, the default) or
length_scale^2 (1 - rate) / (2 n regularization_tau) (Gal's heuristic). First-layer bias
truncated normal with sd 1/sqrt(d), as the reference's `MLPDropoutENN`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from agents.networks import make_dropout_mlp
from agents.online import adam_learner, agent_key, bandit_decay, online_pieces
from agents.registry import NETWORK, register
from agents.training import (
    Network,
    NetworkConfig,
    ScheduleConfig,
    regularized_loss,
    schedule_sweep,
    temperature_of,
)
from testbed.base import Data, PriorKnowledge
from testbed.config import check_in_range, check_nonnegative, check_positive
from testbed.errors import InputError


@dataclasses.dataclass(frozen=True)
class DropoutConfig(NetworkConfig, ScheduleConfig):
    """MC dropout (reference `McDropoutConfig` defaults)."""

    dropout_rate: float = 0.1
    length_scale: float = 1.0
    regularization_tau: float = 1.0
    dropout_input: bool = False
    exclude_bias_l2: bool = False
    adaptive_weight_scale: bool = True
    hidden_sizes: tuple[int, ...] = (100, 100)

    def __post_init__(self):
        super().__post_init__()
        check_in_range("dropout_rate", self.dropout_rate, 0.0, 1.0)
        if self.dropout_rate >= 1.0:
            raise InputError(
                f"dropout_rate: got {self.dropout_rate!r}; allowed: a number in [0, 1)"
            )
        check_nonnegative("length_scale", self.length_scale)
        check_positive("regularization_tau", self.regularization_tau)


def dropout_sweep() -> list[DropoutConfig]:
    """The reference's `testbed` sweep (38): rate x input dropout, l2, width, schedule."""
    c = DropoutConfig
    rates = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    sweep = [
        c(dropout_rate=r, dropout_input=i, batch_strategy=True, hidden_sizes=(50, 50))
        for r in rates
        for i in (True, False)
    ]
    sweep += [
        c(adaptive_weight_scale=a, length_scale=s, hidden_sizes=(50, 50))
        for a in (True, False)
        for s in (0.01, 0.1, 0.3, 1.0, 3.0, 10.0)
    ]
    sweep += [c(hidden_sizes=h, batch_strategy=True) for h in ((50, 50), (100, 100))]
    return sweep + schedule_sweep(functools.partial(c, hidden_sizes=(50, 50)))


def decay_scale(config: DropoutConfig, prior: PriorKnowledge) -> float:
    """The reference's weight-decay coefficient for MC dropout."""
    if prior.num_train <= 0:
        return 0.0
    if config.adaptive_weight_scale:
        return (
            config.length_scale
            * math.sqrt(temperature_of(prior))
            * prior.input_dim
            / prior.num_train
        )
    return (
        config.length_scale**2
        * (1 - config.dropout_rate)
        / (2.0 * prior.num_train * config.regularization_tau)
    )


@functools.cache
def _dropout_net(hidden, num_classes, input_dim, rate, dropout_input, exclude_bias_l2):
    first_bias_std = 1.0 / math.sqrt(input_dim)  # the reference's `MLPDropoutENN`
    net = make_dropout_mlp(hidden, num_classes, rate, dropout_input, first_bias_std)

    def init(key):
        return net.init(key, jnp.zeros((1, input_dim), jnp.float32), key)

    def loss(params, batch, key, decay):
        outputs = net.apply(params, batch.x, key)
        if exclude_bias_l2:
            weights = {m: {"w": p["w"]} for m, p in params.items()}
        else:
            weights = params
        return regularized_loss(outputs, batch.y, decay, weights)

    return Network(jax.jit(init), loss, jax.jit(net.apply))


def online_dropout(config: DropoutConfig, prior: PriorKnowledge, key: jax.Array):
    """MC dropout learning online: the reference's bandit takes its length scale as the l2
    (2 T length_scale of ||w||^2 / t); each key is one dropout mask."""
    dropout = (float(config.dropout_rate), bool(config.dropout_input))
    net = _dropout_net(*config.architecture(prior), *dropout, bool(config.exclude_bias_l2))
    params = net.init(agent_key(config.seed, key))
    decay = bandit_decay(config.length_scale, prior)
    pieces = online_pieces(net, decay_at=None, num_sampled=0)  # aux: the decay alone
    return adam_learner(*pieces, params, (), decay, config.learning_rate)


@register("dropout", DropoutConfig, sweep=dropout_sweep, predicts=NETWORK, online=online_dropout)
def make_dropout(config: DropoutConfig):
    """MC dropout MLP: each key is one dropout mask (one function for all inputs)."""

    def agent(data: Data, prior: PriorKnowledge):
        dropout = (float(config.dropout_rate), bool(config.dropout_input))
        net = _dropout_net(*config.architecture(prior), *dropout, bool(config.exclude_bias_l2))
        init_key, train_key = config.keys()
        params = net.init(init_key)
        aux = jnp.float32(decay_scale(config, prior))
        return config.trained_sampler(net, params, data, prior, train_key, aux)

    return agent
