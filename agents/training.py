"""The shared SGD loop of the Neural Testbed agents: shuffled batches, jitted scan of steps.

Batches follow the reference's repeat-then-batch stream: each epoch is a fresh random
permutation of the training set and a batch of 100 may span an epoch boundary (n = 1
gives 100 copies of the one example). Indices are computed inside the step from the
step number with a keyed bijection of [0, n) (cheap for any n, no index table), so the
whole loop is one `lax.scan` under `jit`, seeded from the agent's config seed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.tree_util import Partial

from testbed.base import PriorKnowledge
from testbed.config import check_at_least, check_nonnegative, check_one_of, check_positive
from testbed.errors import InputError
from testbed.shuffle import mix32, permuted_index
from testbed.sizes import check_memory
from testbed.waiting import waited

BATCH_SIZE = 100


class Batch(NamedTuple):
    """A training batch: inputs x [b, d], labels y [b] and their data indices [b]."""

    x: jax.Array
    y: jax.Array
    index: jax.Array


class WeightedRows(NamedTuple):
    """A batch as its distinct rows: x [r, d], y [r] and weights [r] summing to 1 (a row's
    count in the batch / batch size), so sum(weight * loss) is the batch's mean loss."""

    x: jax.Array
    y: jax.Array
    weight: jax.Array


def distinct_rows(x: jax.Array, y: jax.Array, index: jax.Array) -> WeightedRows:
    """Batch `index` of the n examples (x, y) as WeightedRows: with n < batch size, every
    example weighted by its count in the batch (fewer rows to compute, n = 1 gives one row
    instead of 100 copies), else the batch's rows, each weighted 1 / batch size."""
    n, size = x.shape[0], index.shape[0]
    if n == 1:  # its one row, whole (jaxlib 0.10.2 fails to compile the scatter below at n = 1)
        return WeightedRows(x, y, jnp.ones(1, jnp.float32))
    if n < size:
        counts = jnp.zeros(n, jnp.float32).at[index].add(1.0)
        return WeightedRows(x, y, counts / size)
    return WeightedRows(x[index], y[index], jnp.full(size, 1.0 / size, jnp.float32))


def batch_indices(key: jax.Array, step: jax.Array, n: int, batch_size: int) -> jax.Array:
    """Data indices of batch `step` of the shuffled repeat-then-batch stream over n examples.

    Epoch e is shuffled by the permutation with seed hash(key, e).
    """
    words = jax.random.bits(key, (2,), jnp.uint32)
    position = step * batch_size + jnp.arange(batch_size)
    epoch, offset = position // n, position % n
    seeds = mix32(words[0] ^ mix32(epoch.astype(jnp.uint32) + words[1]))
    return permuted_index(seeds, offset, n)


def decay_factor(prior: PriorKnowledge, adaptive: bool) -> float:
    """The reference's regularisation scaling: sqrt(T) * d / n (adaptive) or 1 / n.

    A missing temperature counts as 1; with no training data the factor is unused (0).
    """
    if prior.num_train <= 0:
        return 0.0
    scale = math.sqrt(temperature_of(prior)) * prior.input_dim if adaptive else 1.0
    return scale / prior.num_train


def temperature_of(prior: PriorKnowledge) -> float:
    """The prior's temperature (1 when the problem does not say)."""
    return 1.0 if prior.temperature is None else float(prior.temperature)


def scheduled_steps(num_batches: int, batch_strategy: bool, prior: PriorKnowledge) -> int:
    """The reference's `batch_strategy`: x5 steps when n/d > 500, //5 when n/d < 5."""
    if not batch_strategy:
        return num_batches
    ratio = prior.num_train / prior.input_dim
    if ratio > 500:
        return num_batches * 5
    if ratio < 5:
        return num_batches // 5
    return num_batches


def l2_norm_squared(params: Any) -> jax.Array:
    """sum of squares of all leaves of a pytree."""
    return sum(jnp.sum(jnp.square(p)) for p in jax.tree_util.tree_leaves(params))


def softmax_cross_entropy(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Per-example cross entropy [..., b] of logits [..., b, C] and labels y [b]."""
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    labels = jnp.broadcast_to(y, log_probs.shape[:-1])
    return -jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]


def squared_error(values: jax.Array, y: jax.Array) -> jax.Array:
    """Per-example squared error [..., b] of real outputs [..., b, 1] and targets y [b]."""
    return jnp.square(values[..., 0] - y)


def data_loss(outputs: jax.Array, y: jax.Array) -> jax.Array:
    """Every network agent's per-example loss [..., b]: cross entropy for integer labels
    (classification), squared error for real targets (regression: one output)."""
    if jnp.issubdtype(y.dtype, jnp.floating):
        return squared_error(outputs, y)
    return softmax_cross_entropy(outputs, y)


def regularized_loss(outputs: jax.Array, y: jax.Array, decay: jax.Array, params: Any) -> jax.Array:
    """Mean data loss plus decay * |params|^2: the reference's weight-decayed objective."""
    return jnp.mean(data_loss(outputs, y)) + decay * l2_norm_squared(params)


def index_averaged_loss(
    per_index: Callable[[jax.Array], jax.Array], indices: jax.Array, decay: jax.Array, params: Any
) -> jax.Array:
    """Mean of per_index(index) over sampled indices, plus decay * |params|^2: the loss of
    an epistemic network trained on a few index draws per step (epinet, hypermodel)."""
    return jnp.mean(jax.vmap(per_index)(indices)) + decay * l2_norm_squared(params)


def targets(y: Any) -> jax.Array:
    """Training targets as the loop takes them: int32 labels or float32 values, [n]."""
    y = jnp.asarray(y)
    dtype = jnp.float32 if jnp.issubdtype(y.dtype, jnp.floating) else jnp.int32
    return y.astype(dtype).reshape(-1)


def run_steps(
    update: Callable[[Any, Any, Any], tuple[Any, jax.Array]],
    state: Any,
    x: jax.Array,
    y: jax.Array,
    key: jax.Array,
    start: int | jax.Array,
    num_steps: int,
    batch_size: int = BATCH_SIZE,
    draw: Callable[[jax.Array], Any] | None = None,
    weighted: bool = False,
) -> tuple[Any, jax.Array]:
    """`num_steps` steps `state <- update(state, batch_t, key_t)` from step `start`: one scan.

    Traceable (call it inside `jit`); batch t and key t depend only on (key, t), so a
    loop split into pieces (burn-in, thinning) draws the same stream as one long loop.
    With `draw`, update receives `draw(key_t)` instead of key_t, drawn ahead for a block of
    steps at a time (the same values; a step's large normal draw costs ~1.6x less so).
    With `weighted`, batch_t comes as `distinct_rows` (for a loss that weights its rows).
    Returns the final state and the per-step losses.
    """
    n = x.shape[0]
    data_key, step_key = jax.random.split(key)

    def step(state, index_and_random):
        index, random = index_and_random
        batch = distinct_rows(x, y, index) if weighted else Batch(x[index], y[index], index)
        return update(state, batch, random)

    steps = start + jnp.arange(num_steps)
    if draw is None:

        def keyed_step(state, t):
            index = batch_indices(data_key, t, n, batch_size)
            return step(state, (index, jax.random.fold_in(step_key, t)))

        return jax.lax.scan(keyed_step, state, steps)

    def block(state, ts):
        indices = jax.vmap(lambda t: batch_indices(data_key, t, n, batch_size))(ts)
        drawn = jax.vmap(lambda t: draw(jax.random.fold_in(step_key, t)))(ts)
        return jax.lax.scan(step, state, (indices, drawn))

    size = _draw_block(draw, step_key, num_steps)
    full = num_steps // size * size
    state, values = jax.lax.scan(block, state, steps[:full].reshape(-1, size))
    values = jax.tree.map(lambda v: v.reshape(full, *v.shape[2:]), values)
    if full == num_steps:
        return state, values
    state, rest = block(state, steps[full:])
    return state, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), values, rest)


DRAW_BLOCK_BYTES = 2**25  # drawn ahead per block of steps: 32 MB, 1,000 steps of ~8,000 floats


def _draw_block(draw: Callable, key: jax.Array, num_steps: int) -> int:
    """Steps per block of `run_steps`'s draws: at most 1,000 and DRAW_BLOCK_BYTES of draws."""
    shapes = jax.tree.leaves(jax.eval_shape(draw, key))
    per_step = max(1, sum(s.size * s.dtype.itemsize for s in shapes))
    return max(1, min(num_steps, 1000, DRAW_BLOCK_BYTES // per_step))


def _adam_update(loss_fn: Callable, learning_rate: jax.Array, aux: Any) -> Callable:
    optimizer = optax.adam(learning_rate)

    def update(state, batch, key):
        params, opt_state = state
        loss, grads = jax.value_and_grad(loss_fn)(params, batch, key, aux)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return update


@functools.partial(jax.jit, static_argnames=("loss_fn", "num_steps", "batch_size"))
def _fit(loss_fn, params, x, y, key, aux, learning_rate, num_steps, batch_size):
    update = _adam_update(loss_fn, learning_rate, aux)
    state = (params, optax.adam(learning_rate).init(params))
    (params, _), losses = run_steps(update, state, x, y, key, 0, num_steps, batch_size)
    return params, losses


def fit(
    loss_fn: Callable[[Any, Batch, jax.Array, Any], jax.Array],
    params: Any,
    x: Any,
    y: Any,
    key: jax.Array,
    num_steps: int,
    *,
    aux: Any = None,
    learning_rate: float = 1e-3,
    batch_size: int = BATCH_SIZE,
) -> tuple[Any, np.ndarray]:
    """Minimises `loss_fn(params, batch, key, aux)` with Adam for `num_steps` batches.

    One jitted scan, compiled once per (loss_fn, shapes, num_steps): build `loss_fn` once
    per network structure (e.g. with `functools.cache`) and pass everything that varies
    between problems (decay scales, prior networks, bootstrap weights) in `aux`, so a
    sweep over problems reuses the compiled loop. With no data or no steps the
    parameters come back unchanged. Returns (params, losses [num_steps]).
    """
    x = jnp.asarray(x, jnp.float32)
    y = targets(y)
    if x.shape[0] == 0 or num_steps <= 0:
        return params, np.zeros((0,), np.float32)
    lr = jnp.asarray(learning_rate, jnp.float32)
    params, losses = waited(  # the one scan's computation: Ctrl-C stops the wait at once
        lambda: jax.block_until_ready(
            _fit(loss_fn, params, x, y, key, aux, lr, int(num_steps), int(batch_size))
        )
    )
    return params, np.asarray(losses)


class Network(NamedTuple):
    """A network agent's pieces for one architecture, built once (`functools.cache`) so a
    sweep over problems reuses the compiled loop: `init`, the training `loss` and the
    one-key sampler `sample_logits(params, *fixed, x, key)`; `fit` compiles the loss."""

    init: Callable[..., Any]
    loss: Callable[..., jax.Array]
    sample_logits: Callable[..., jax.Array]


def bind_sampler(sample_logits: Callable, *fixed: Any) -> Partial:
    """The predictive (x, key) -> sample_logits(*fixed, x, key): one key, one function. A
    `jax.tree_util.Partial`, so evaluators pass the trained arrays to one compiled program
    that every problem of a sweep reuses (build `sample_logits` once per structure)."""
    return Partial(sample_logits, *fixed)


def bootstrap_weights(key: jax.Array, distribution: str, num_members: int, n: int) -> jax.Array:
    """Per-(member, example) loss weights [K, n], fixed for the whole training run.

    'none': 1; 'bernoulli': 2 * Bernoulli(1/2); 'exponential': Exp(1) (all mean 1).
    """
    shape = (num_members, n)
    if distribution == "none":
        return jnp.ones(shape, jnp.float32)
    if distribution == "bernoulli":
        return 2.0 * jax.random.bernoulli(key, 0.5, shape).astype(jnp.float32)
    if distribution == "exponential":
        return jax.random.exponential(key, shape, jnp.float32)
    raise ValueError(f"unknown bootstrap distribution {distribution!r}")


def check_hidden_sizes(name: str, sizes: tuple[int, ...], allow_empty: bool = True) -> None:
    """Hidden layer widths: a tuple of integers >= 1 (non-empty unless allowed)."""
    if (not sizes and not allow_empty) or any(int(w) < 1 for w in sizes):
        need = "integers >= 1" + ("" if allow_empty else ", at least one")
        raise InputError(f"{name}: got {sizes!r}; allowed: a tuple of {need} (e.g. 50,50)")


BYTES_PER_WEIGHT = 16  # float32 weight, its gradient and Adam's two moments


def network_bytes(widths: tuple[int, ...], num_members: int) -> int:
    """A lower bound of the bytes K networks of these hidden widths hold while training:
    their hidden-to-hidden weights and biases and one input and one output weight per unit,
    each with its gradient and Adam's moments (the input and output sizes come later)."""
    units = sum(widths) * 3 + sum(a * b for a, b in zip(widths, widths[1:]))
    return BYTES_PER_WEIGHT * int(num_members) * units


def check_network_memory(widths: tuple[int, ...], num_members: int = 1) -> None:
    """Refuses, before anything is allocated, hidden sizes (and a number of members) whose
    networks alone would hold more than the memory bound (`testbed.sizes`): one line naming
    the widest layer or `num_ensemble`, not a hang or an interpreter abort minutes later."""
    if not widths:
        return
    widest = max(range(len(widths)), key=lambda i: widths[i])

    def needed(hidden_sizes: int, num_ensemble: int) -> int:
        resized = widths[:widest] + (hidden_sizes,) + widths[widest + 1 :]
        return network_bytes(resized, num_ensemble)

    sizes = {"hidden_sizes": widths[widest], "num_ensemble": num_members}
    defaults = {"hidden_sizes": 50, "num_ensemble": 1}
    check_memory(needed, sizes, "the networks' weights in training", defaults)


# Config pieces shared by the network agents. Each agent's config inherits the pieces it
# has (the fields, their checks and their meaning are written once) and redeclares a
# field to change its default. Cooperative __post_init__: every piece checks its fields.


@dataclasses.dataclass(frozen=True)
class SGDConfig:
    """Adam on minibatches of 100: the number of batches, the step size, the seed."""

    num_batches: int = 1000
    learning_rate: float = 1e-3
    seed: int = 0

    def __post_init__(self):
        check_at_least("num_batches", self.num_batches, 1)
        check_positive("learning_rate", self.learning_rate)

    def num_steps(self, prior: PriorKnowledge) -> int:
        """SGD steps for a problem (`num_batches`, unless a batch schedule says otherwise)."""
        return self.num_batches

    def fit(self, loss_fn: Callable, params: Any, data: Any, prior: PriorKnowledge, key, aux=None):
        """`fit` on the problem's data with this config's steps and learning rate."""
        steps, lr = self.num_steps(prior), self.learning_rate
        return fit(loss_fn, params, data.x, data.y, key, steps, aux=aux, learning_rate=lr)

    def keys(self, num: int = 2) -> jax.Array:
        """`num` keys split from the config's seed (initialisation, training, ...)."""
        return jax.random.split(jax.random.PRNGKey(self.seed), num)

    def trained_sampler(
        self, net: Network, params: Any, data: Any, prior: PriorKnowledge, key, aux, *fixed: Any
    ) -> Callable:
        """Trains `params` on the data (`net.loss` with `aux`); returns the predictive
        (x, key) -> net.sample_logits(trained params, *fixed, x, key)."""
        params, _ = self.fit(net.loss, params, data, prior, key, aux=aux)
        return bind_sampler(net.sample_logits, params, *fixed)


@dataclasses.dataclass(frozen=True)
class NetworkConfig(SGDConfig):
    """An MLP's hidden layer widths (empty: linear, unless the agent needs a layer)."""

    hidden_sizes: tuple[int, ...] = (50, 50)
    needs_hidden_layer: ClassVar[bool] = False

    def __post_init__(self):
        super().__post_init__()
        check_hidden_sizes("hidden_sizes", self.hidden_sizes, not self.needs_hidden_layer)
        members = getattr(self, "num_ensemble", 1)
        members = int(members) if isinstance(members, int | float) and members >= 1 else 1
        check_network_memory(tuple(int(w) for w in self.hidden_sizes), members)

    def architecture(self, prior: PriorKnowledge) -> tuple[tuple[int, ...], int, int]:
        """(hidden sizes, classes, input dim): the MLP's shapes on a problem, the first part
        of every network agent's structure key (the compiled loop is built once per key)."""
        return tuple(self.hidden_sizes), prior.num_classes, prior.input_dim


@dataclasses.dataclass(frozen=True)
class WeightDecayConfig(SGDConfig):
    """The reference's l2 decay: l2 * sqrt(T) d / n (adaptive) or l2 / n (see decay_factor)."""

    l2_weight_decay: float = 1.0
    adaptive_weight_scale: bool = True

    def __post_init__(self):
        super().__post_init__()
        check_nonnegative("l2_weight_decay", self.l2_weight_decay)

    def decay(self, prior: PriorKnowledge) -> float:
        return self.l2_weight_decay * decay_factor(prior, self.adaptive_weight_scale)


@dataclasses.dataclass(frozen=True)
class ScheduleConfig(SGDConfig):
    """The reference's `batch_strategy`: more or fewer steps by the data ratio n / d."""

    batch_strategy: bool = False

    def num_steps(self, prior: PriorKnowledge) -> int:
        return scheduled_steps(self.num_batches, self.batch_strategy, prior)


@dataclasses.dataclass(frozen=True)
class RegularizedMLPConfig(NetworkConfig, WeightDecayConfig, ScheduleConfig):
    """An MLP trained with weight decay and the batch schedule (mlp, ensemble, ...)."""


# The reference's sweep blocks that several network agents share. `make` builds a config
# from keyword settings (a config class, or a functools.partial of one with fixed settings).

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def schedule_sweep(make: Callable[..., Any]) -> list[Any]:
    """The reference's 4 schedule variants: batch_strategy (True, False) x num_batches 500, 1000."""
    return [
        make(batch_strategy=strategy, num_batches=steps)
        for strategy in (True, False)
        for steps in (500, 1000)
    ]


def weight_decay_sweep(make: Callable[..., Any]) -> list[Any]:
    """The reference's 14 decay variants: adaptive scaling (True, False) x l2 in `L2_GRID`."""
    return [
        make(l2_weight_decay=l2, adaptive_weight_scale=adaptive)
        for adaptive in (True, False)
        for l2 in L2_GRID
    ]


BOOTSTRAP = ("none", "bernoulli", "exponential")
TEMP_SCALES = ("sqrt", "linear", "lin", "none")


def prior_temperature_scale(prior_scale: float, how: str, temperature: float) -> float:
    """The prior function's scale after temperature scaling ('lin' means 'linear')."""
    if how in ("linear", "lin"):
        return prior_scale / temperature
    if how == "sqrt":
        return prior_scale / math.sqrt(temperature)
    return prior_scale


@dataclasses.dataclass(frozen=True)
class PriorFunctionConfig(SGDConfig):
    """Randomized prior functions (scaled by the temperature as `temp_scale_prior` says) and
    bootstrap weights per (member, example): ensemble+ and the hypermodel."""

    prior_scale: float = 3.0
    temp_scale_prior: str = "sqrt"
    distribution: str = "none"

    def __post_init__(self):
        super().__post_init__()
        check_nonnegative("prior_scale", self.prior_scale)
        check_one_of("temp_scale_prior", self.temp_scale_prior, TEMP_SCALES)
        check_one_of("distribution", self.distribution, BOOTSTRAP)

    def scaled_prior(self, prior: PriorKnowledge) -> float:
        """The prior functions' scale at the problem's temperature."""
        return prior_temperature_scale(
            self.prior_scale, self.temp_scale_prior, temperature_of(prior)
        )
