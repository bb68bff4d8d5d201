"""Network agents as online learners (`testbed.online.OnlineLearner`) for decision loops.

As the Neural Testbed's bandit (`make_config_l2_for_bandit`): the agent's own weight decay
is taken out of its loss and added back as `decay * ||w||^2 / t` after t observations, with
decay = l2 * 2 * temperature (/ K for an ensemble of K), prior networks excluded; Adam
on replay batches. Per-example bootstrap weights are drawn from (key, replay slot), as
the reference seeds them from the data index, so they need no table of the replay's size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from agents.training import Network, bootstrap_weights, temperature_of
from testbed.base import PriorKnowledge
from testbed.online import OnlineLearner, ReplayBatch

# loss(params, fixed, batch, key, decay) -> scalar; sample(params, fixed, x, key) -> logits
Loss = Callable[[Any, Any, ReplayBatch, jax.Array, jax.Array], jax.Array]
Sample = Callable[[Any, Any, jax.Array, jax.Array], jax.Array]


def bandit_decay(l2: float, prior: PriorKnowledge, num_members: int = 1) -> float:
    """The reference's prior weight in a bandit: l2 * 2 * temperature / K (of ||w||^2 / t)."""
    return float(l2) * 2.0 * temperature_of(prior) / int(num_members)


def agent_key(seed: int, key: jax.Array) -> jax.Array:
    """The learner's key: the problem's agent key mixed with the config's seed."""
    return jax.random.fold_in(key, int(seed))


@functools.cache
def adam_step(loss: Loss) -> Callable:
    """One Adam step on `loss` with the prior's weight state['decay'] / t (cached per loss,
    so the decision loop compiles once per agent structure)."""

    def step(state, batch, key, t):
        params = state["params"]
        grads = jax.grad(loss)(params, state["fixed"], batch, key, state["decay"] / t)
        optimizer = optax.adam(state["learning_rate"])
        updates, opt = optimizer.update(grads, state["opt"], params)
        return {**state, "params": optax.apply_updates(params, updates), "opt": opt}

    return step


@functools.cache
def sampling(sample: Sample) -> Callable:
    """`sample_logits(state, x, key)` of a learner state from `sample(params, fixed, x, key)`."""

    def sample_logits(state, x, key):
        return sample(state["params"], state["fixed"], x, key)

    return sample_logits


@functools.cache
def online_pieces(net: Network, decay_at: int | None, num_sampled: int) -> tuple[Loss, Sample]:
    """(loss, sample) of a network agent's training `Network` learning online, `fixed` a
    tuple: the loss is `net.loss` with the aux `fixed` with the decay inserted at position
    `decay_at` (None: the decay alone), the sampler `net.sample_logits(params,
    *fixed[:num_sampled], x, key)` (cached per network, so the loop compiles once)."""

    def loss(params, fixed, batch, key, decay):
        aux = decay if decay_at is None else (*fixed[:decay_at], decay, *fixed[decay_at:])
        return net.loss(params, batch, key, aux)

    def sample(params, fixed, x, key):
        return net.sample_logits(params, *fixed[:num_sampled], x, key)

    return loss, sample


def adam_learner(
    loss: Loss, sample: Sample, params: Any, fixed: Any, decay: float, learning_rate: float
) -> OnlineLearner:
    """An OnlineLearner trained by Adam: `fixed` holds what training does not change (prior
    networks, scales, bootstrap keys)."""
    state = {
        "params": params,
        "opt": optax.adam(learning_rate).init(params),
        "fixed": fixed,
        "decay": jnp.float32(decay),
        "learning_rate": jnp.float32(learning_rate),
    }
    return OnlineLearner(state, adam_step(loss), sampling(sample))


def slot_weights(key: jax.Array, distribution: str, num_members: int, index: jax.Array):
    """Bootstrap weights [K, b] of the replay slots `index` [b]: each slot's K weights drawn
    from fold_in(key, slot) ('none': ones)."""

    def one(i):
        return bootstrap_weights(jax.random.fold_in(key, i), distribution, num_members, 1)[:, 0]

    return jax.vmap(one)(index).T


def as_rows(batch: ReplayBatch) -> ReplayBatch:
    """The batch with its rows as their own indices (0..b-1): for a training loss that reads
    per-example weights by index from a table made for this batch."""
    return batch._replace(index=jnp.arange(batch.x.shape[0]))
