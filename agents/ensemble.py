"""`ensemble`: K MLPs trained together (vectorized) on the same batches; one member per key.

As the reference (`make_einsum_ensemble_mlp_enn`, zero biases): each step draws K member
indices with replacement and averages their cross entropies (a member drawn twice counts
twice), plus l2 / K * sqrt(T) d / n * sum of all members' squared weights. The sampler is
a `FiniteSampler`: M evaluation keys cost K member evaluations. The ensemble family, `mlp`,
`logistic_regression` (K = 1), `ensemble` and `ensemble+` (prior functions, bootstrap), is
one agent with four configs: each registers with `register_ensemble`, trains as
`ensemble_agent` and learns online as `online_members`, with the `members` its config asks for.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.tree_util import Partial

from agents.networks import apply_ensemble, init_ensemble, make_mlp
from agents.online import adam_learner, agent_key, as_rows, bandit_decay, slot_weights
from agents.registry import NETWORK, register
from agents.training import (
    NetworkConfig,
    PriorFunctionConfig,
    RegularizedMLPConfig,
    WeightDecayConfig,
    bootstrap_weights,
    data_loss,
    l2_norm_squared,
    schedule_sweep,
    weight_decay_sweep,
)
from testbed.base import Data, FiniteSampler, PriorKnowledge
from testbed.config import check_at_least


@functools.cache
def _ensemble_loss(hidden, num_classes, first_bias_std, num_members):
    """Loss of K members (built once per structure so the training loop is compiled once).

    aux = (prior_params or None, prior_scale, bootstrap weights [K, n], decay scale).
    """
    net = make_mlp(hidden, num_classes, first_bias_std)

    def loss(params, batch, key, aux):
        prior_params, prior_scale, weights, decay = aux
        logits = apply_ensemble(net, params, batch.x)
        if prior_params is not None:
            logits = logits + prior_scale * apply_ensemble(net, prior_params, batch.x)
        per_member = jnp.mean(data_loss(logits, batch.y) * weights[:, batch.index], -1)
        draws = jax.random.randint(key, (num_members,), 0, num_members)
        counts = jnp.bincount(draws, length=num_members)
        return jnp.dot(counts, per_member) / num_members + decay * l2_norm_squared(params)

    return net, loss


@functools.cache
def _ensemble_logits(hidden, num_classes, first_bias_std):
    net = make_mlp(hidden, num_classes, first_bias_std)

    @jax.jit
    def all_logits(params, prior_params, prior_scale, x):
        out = apply_ensemble(net, params, x)
        if prior_params is not None:
            out = out + prior_scale * apply_ensemble(net, prior_params, x)
        return out

    return all_logits


def train_ensemble(
    data: Data,
    prior: PriorKnowledge,
    config: WeightDecayConfig,
    *,
    num_members: int,
    first_bias_std: float | None = None,
    prior_scale: float = 0.0,
    prior_seed: int | None = None,
    distribution: str = "none",
) -> FiniteSampler:
    """Trains K members at once with `config`'s decay, steps, learning rate and seed (its
    hidden widths; none for a linear model); `prior_scale` > 0 adds fixed random prior
    networks.

    Member k's output is f_k(x) + prior_scale * p_k(x), with p_k an untrained copy of the
    architecture initialised from `prior_seed` (ensemble+). `distribution` sets the
    bootstrap weights of each (member, example) pair for the whole run.
    """
    sizes = config.hidden_sizes if isinstance(config, NetworkConfig) else ()
    hidden = tuple(int(h) for h in sizes)
    net, loss = _ensemble_loss(hidden, prior.num_classes, first_bias_std, num_members)
    init_key, train_key, boot_key = config.keys(3)
    params = init_ensemble(net, init_key, num_members, prior.input_dim)
    prior_params = None
    if prior_scale != 0.0:
        pkey = jax.random.split(jax.random.PRNGKey(prior_seed if prior_seed is not None else 0))[0]
        prior_params = init_ensemble(net, pkey, num_members, prior.input_dim)
    n = int(data.x.shape[0])
    weights = bootstrap_weights(boot_key, distribution, num_members, max(n, 1))
    decay = config.decay(prior) / num_members
    aux = (prior_params, jnp.float32(prior_scale), weights, jnp.float32(decay))
    params, _ = config.fit(loss, params, data, prior, train_key, aux=aux)
    apply = _ensemble_logits(hidden, prior.num_classes, first_bias_std)
    scale = jnp.float32(prior_scale)
    return FiniteSampler(Partial(apply, params, prior_params, scale), num_members)


@functools.cache
def _online_pieces(hidden, num_classes, first_bias_std, num_members, distribution):
    """(loss, sample) of K members learning online; fixed = (prior params or None, prior
    scale, bootstrap key)."""
    net, loss = _ensemble_loss(hidden, num_classes, first_bias_std, num_members)

    def online_loss(params, fixed, batch, key, decay):
        prior_params, prior_scale, boot_key = fixed
        weights = slot_weights(boot_key, distribution, num_members, batch.index)
        return loss(params, as_rows(batch), key, (prior_params, prior_scale, weights, decay))

    def sample(params, fixed, x, key):
        prior_params, prior_scale, _ = fixed
        out = apply_ensemble(net, params, x)
        if prior_params is not None:
            out = out + prior_scale * apply_ensemble(net, prior_params, x)
        return out[jax.random.randint(key, (), 0, num_members)]

    return net, online_loss, sample


def online_ensemble(
    config: WeightDecayConfig,
    prior: PriorKnowledge,
    key: jax.Array,
    *,
    num_members: int,
    first_bias_std: float | None = None,
    prior_scale: float = 0.0,
    distribution: str = "none",
):
    """K members as an online learner (`agents.online`): the decay l2 * 2T / K of ||w||^2 / t,
    prior networks (when `prior_scale` > 0) and bootstrap weights drawn from the key."""
    sizes = config.hidden_sizes if isinstance(config, NetworkConfig) else ()
    hidden = tuple(int(h) for h in sizes)
    net, loss, sample = _online_pieces(
        hidden, prior.num_classes, first_bias_std, num_members, distribution
    )
    init_key, prior_key, boot_key = jax.random.split(agent_key(config.seed, key), 3)
    params = init_ensemble(net, init_key, num_members, prior.input_dim)
    prior_params = None
    if prior_scale != 0.0:
        prior_params = init_ensemble(net, prior_key, num_members, prior.input_dim)
    fixed = (prior_params, jnp.float32(prior_scale), boot_key)
    decay = bandit_decay(config.l2_weight_decay, prior, num_members)
    return adam_learner(loss, sample, params, fixed, decay, config.learning_rate)


@dataclasses.dataclass(frozen=True)
class EnsembleConfig(RegularizedMLPConfig):
    """Vanilla ensemble (reference `VanillaEnsembleConfig` defaults)."""

    num_ensemble: int = 100

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_ensemble", self.num_ensemble, 1)


def ensemble_sweep() -> list[EnsembleConfig]:
    """The reference's `testbed` sweep (23): K, then adaptive x l2, then batch schedule."""
    with_strategy = functools.partial(EnsembleConfig, batch_strategy=True)
    sweep = [with_strategy(num_ensemble=k) for k in (1, 3, 10, 30, 100)]
    return sweep + weight_decay_sweep(with_strategy) + schedule_sweep(EnsembleConfig)


def members(config: WeightDecayConfig, prior: PriorKnowledge) -> dict[str, Any]:
    """The members a config of the ensemble family asks for, as `train_ensemble` and
    `online_ensemble` take them: K = its `num_ensemble` (1 without one: mlp,
    logistic_regression); with prior functions (a `PriorFunctionConfig`: ensemble+), a
    first-layer bias of sd 1/sqrt(d), the prior functions' scale at the problem's
    temperature and the bootstrap distribution."""
    settings = {"num_members": getattr(config, "num_ensemble", 1)}
    if isinstance(config, PriorFunctionConfig):
        settings.update(
            first_bias_std=1.0 / math.sqrt(prior.input_dim),
            prior_scale=config.scaled_prior(prior),
            distribution=config.distribution,
        )
    return settings


def ensemble_agent(config: WeightDecayConfig):
    """The agent of a config of the ensemble family: `train_ensemble` with its `members`
    (prior functions initialised from seed + 999, as the reference)."""

    def agent(data: Data, prior: PriorKnowledge):
        settings = members(config, prior)
        if isinstance(config, PriorFunctionConfig):
            settings["prior_seed"] = config.seed + 999
        return train_ensemble(data, prior, config, **settings)

    return agent


def online_members(config: WeightDecayConfig, prior: PriorKnowledge, key: jax.Array):
    """A config of the ensemble family learning online: `online_ensemble` with its
    `members` (a greedy agent in a bandit for K = 1: every key, one function)."""
    return online_ensemble(config, prior, key, **members(config, prior))


def register_ensemble(name: str, config_cls: type, sweep: Callable[[], list[Any]]):
    """`register` for an agent of the ensemble family (mlp, logistic_regression, ensemble,
    ensemble+; the factory returns `ensemble_agent(config)`): a network agent that learns
    online in a bandit as `online_members`."""
    return register(name, config_cls, sweep=sweep, predicts=NETWORK, online=online_members)


@register_ensemble("ensemble", EnsembleConfig, ensemble_sweep)
def make_ensemble(config: EnsembleConfig):
    """Deep ensemble of K MLPs trained together; each key picks one member."""
    return ensemble_agent(config)
