"""Thompson sampling on a finite-armed bandit with any agent's predictive.

At step t one function of the agent's predictive (one key) is evaluated at every action,
the action with the highest probability of reward (class 1) is played (ties broken
uniformly at random), and a Bernoulli reward is observed;
regret = best probability - chosen probability. An online learner then takes
`steps_per_obs` SGD steps on batches drawn uniformly from a replay of the last `capacity`
observations, all T steps in one compiled `lax.scan`; any other agent is refit on the data
seen so far every `refit_every` steps (before its first refit it plays uniformly).

Every step's randomness comes from `step_keys(key, T)`: the same action-selection noise
and reward draws whichever way the agent learns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from testbed.base import Data, FiniteSampler
from testbed.errors import InputError
from testbed.online import OnlineLearner, ReplayBatch
from testbed.progress import activity
from testbed.sampled_functions import apply_functions


class Trace(NamedTuple):
    """What a run did: regret [T] (float32), action [T] and reward [T] (int32)."""

    regret: np.ndarray
    action: np.ndarray
    reward: np.ndarray


class StepRandom(NamedTuple):
    """Per-step randomness: the function key, the tie-noise key, the reward's uniform draw
    and the SGD key of each of the T steps (memory O(T) whatever the number of actions)."""

    function: jax.Array
    ties: jax.Array
    reward: jax.Array
    train: jax.Array


@functools.partial(jax.jit, static_argnums=1)
def step_keys(key: jax.Array, num_steps: int) -> StepRandom:
    """Every step's draws from one key: step t's come from fold_in(key, t)."""

    def one(t):
        f, n, r, s = jax.random.split(jax.random.fold_in(key, t), 4)
        return f, n, jax.random.uniform(r), s

    f, n, r, s = jax.vmap(one)(jnp.arange(num_steps))
    return StepRandom(f, n, r, s)


def choose(reward_probs: jax.Array, tie_key: jax.Array) -> jax.Array:
    """The action with the highest predicted probability of reward [N], ties broken
    uniformly at random. (The reference adds 1e-7 uniform noise instead, which in float32
    is below the resolution near 0.5 and so favours the first actions of a tie.)"""
    ties = jax.random.uniform(tie_key, reward_probs.shape)
    best = reward_probs >= jnp.max(reward_probs)
    return jnp.argmax(jnp.where(best, ties, -1.0))


def reward_probs(logits: jax.Array) -> jax.Array:
    """P(reward = 1) of logits [..., n, C] (class 1 of a softmax)."""
    return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)[..., 1]


BLOCK = 1000  # steps per compiled call: Ctrl-C and progress are heard between blocks


@functools.partial(
    jax.jit, static_argnames=("step", "sample_logits", "capacity", "batch_size", "steps_per_obs")
)
def _online(step, sample_logits, carry, actions, probs, inputs, capacity, batch_size,
            steps_per_obs):  # fmt: skip
    """A block of Thompson steps of an online learner from `carry` (state, replay, first
    non-finite step): one `lax.scan`."""
    best = jnp.max(probs)

    def one(carry, inputs):
        state, buf_x, buf_y, first_bad = carry
        t, fkey, tie_key, u, skey = inputs
        logits = sample_logits(state, actions, fkey)
        bad = ~jnp.all(jnp.isfinite(logits))
        first_bad = jnp.where((first_bad < 0) & bad, t, first_bad)
        a = choose(reward_probs(logits), tie_key)
        p = probs[a]
        r = (u < p).astype(jnp.int32)
        slot = t % capacity
        buf_x, buf_y = buf_x.at[slot].set(actions[a]), buf_y.at[slot].set(r)
        seen = jnp.minimum(t + 1, capacity)
        observations = (t + 1).astype(jnp.float32)

        def sgd(state, j):
            index_key, loss_key = jax.random.split(jax.random.fold_in(skey, j))
            index = jax.random.randint(index_key, (batch_size,), 0, seen)
            batch = ReplayBatch(buf_x[index], buf_y[index], index)
            return step(state, batch, loss_key, observations), None

        state, _ = jax.lax.scan(sgd, state, jnp.arange(steps_per_obs))
        return (state, buf_x, buf_y, first_bad), (best - p, a.astype(jnp.int32), r)

    return jax.lax.scan(one, carry, inputs)


def run_online(
    learner: OnlineLearner,
    actions: jax.Array,
    probs: jax.Array,
    random: StepRandom,
    *,
    capacity: int,
    batch_size: int,
    steps_per_obs: int,
) -> tuple[Any, Trace]:
    """T Thompson steps of an online learner, compiled whole and run in blocks of BLOCK steps
    (the same steps as one call); returns its final state and the trace. Non-finite logits
    at any step raise an InputError naming the step."""
    actions = jnp.asarray(actions, jnp.float32)
    probs = jnp.asarray(probs, jnp.float32)
    num_steps = int(random.reward.shape[0])
    buffers = (jnp.zeros((capacity, actions.shape[1]), jnp.float32),
               jnp.zeros((capacity,), jnp.int32))  # fmt: skip
    carry = (learner.state, *buffers, jnp.int32(-1))
    inputs = (jnp.arange(num_steps), random.function, random.ties, random.reward, random.train)
    done, outs = [0], []
    with activity(lambda: f"bandit step {done[0]:,} of {num_steps:,}"):
        for start in range(0, num_steps, BLOCK):
            block = jax.tree.map(lambda v, s=start: v[s : s + BLOCK], inputs)
            carry, out = _online(
                learner.step, learner.sample_logits, carry, actions, probs, block,
                int(capacity), int(batch_size), int(steps_per_obs),
            )  # fmt: skip
            outs.append(jax.tree.map(np.asarray, out))
            done[0] = min(start + BLOCK, num_steps)
    _raise_if_bad(int(carry[3]))
    regret, action, reward = (np.concatenate(parts) for parts in zip(*outs))
    return carry[0], Trace(regret, action, reward)


def _raise_if_bad(first_bad: int) -> None:
    if first_bad >= 0:
        raise InputError(
            f"agent's predictive: got non-finite logits at bandit step {first_bad}; "
            "allowed: finite logits at every step"
        )


_choose_all = jax.jit(jax.vmap(choose))


def _class_one(log_probs: jax.Array, aux: Any) -> jax.Array:
    return jnp.exp(log_probs[:, 1])


def predicted_probs(sampler: Callable, actions: jax.Array, keys: jax.Array) -> np.ndarray:
    """P(reward) [k, N] at every action under each key's function of `sampler` (JAX
    samplers mapped over the keys, others looped; checked as every evaluator checks)."""
    actions = jnp.asarray(actions, jnp.float32)
    values = apply_functions(sampler, actions, keys, _class_one, num_classes=2)
    if isinstance(sampler, FiniteSampler):  # values per member: each key's member
        return np.asarray(values.values)[np.asarray(jax.vmap(sampler.index)(keys))]
    return np.asarray(values.values)


def run_refit(
    fit: Callable[[Data, int], Callable] | None,
    actions: jax.Array,
    probs: jax.Array,
    random: StepRandom,
    *,
    refit_every: int,
    fixed: Callable | None = None,
) -> Trace:
    """T Thompson steps of an agent refit every `refit_every` steps: `fit(data, t)` returns
    its sampler trained on the first t observations; before the first refit it plays
    uniformly. With `fixed` (an oracle's predictive), that sampler plays every step."""
    probs_np = np.asarray(probs, np.float64)
    dim = actions.shape[1]
    num_steps = int(random.reward.shape[0])
    uniforms = np.asarray(random.reward)
    xs = np.zeros((num_steps, dim), np.float32)
    ys = np.zeros((num_steps,), np.int32)
    chosen = np.zeros((num_steps,), np.int32)
    sampler = fixed
    for start in range(0, num_steps, refit_every):
        stop = min(start + refit_every, num_steps)
        if fixed is None and start > 0:
            sampler = fit(Data(xs[:start], ys[:start]), start)
        if sampler is None:
            predicted = jnp.full((stop - start, probs_np.shape[0]), 0.5, jnp.float32)
        else:
            predicted = jnp.asarray(predicted_probs(sampler, actions, random.function[start:stop]))
        chosen[start:stop] = np.asarray(_choose_all(predicted, random.ties[start:stop]))
        p = probs_np[chosen[start:stop]]
        ys[start:stop] = (uniforms[start:stop] < p).astype(np.int32)
        xs[start:stop] = np.asarray(actions)[chosen[start:stop]]
    regret = (probs_np.max() - probs_np[chosen]).astype(np.float32)
    return Trace(regret, chosen, ys)
