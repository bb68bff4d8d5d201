"""Apply an epistemic sampler to many inputs under many keys, fast and checked.

One key is one function for all rows of x, so the N test batches of an estimator are
stacked into one input array and each key is applied once to all of them: M calls of
N * tau rows instead of N * M calls of tau rows. JAX-traceable samplers are mapped over
keys in jitted chunks; others are looped in Python; a `FiniteSampler` (K functions) is
applied once per function and the M keys become a histogram of member indices.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

from testbed.base import FiniteSampler
from testbed.errors import InputError


@dataclasses.dataclass(frozen=True)
class WeightedFunctions:
    """Per-function values [F, ...] with mixture log-weights [F] (logsumexp = 0)."""

    values: jax.Array
    log_weights: jax.Array


def log_softmax(logits: jax.Array) -> jax.Array:
    """Classification outputs: logits [n, C] -> log-probabilities."""
    return jax.nn.log_softmax(logits, axis=-1)


def real_values(values: jax.Array) -> jax.Array:
    """Regression outputs: real values [n, 1], used as they are."""
    return values


def _what(link: Callable) -> str:
    return "logits" if link is log_softmax else "real values"


def _check_shape(
    out_shape: tuple[int, ...], num_rows: int, num_classes: int | None, link=log_softmax
) -> None:
    if (
        len(out_shape) != 2
        or out_shape[0] != num_rows
        or (num_classes is not None and out_shape[1] != num_classes)
    ):
        want = f"[{num_rows}, {num_classes if num_classes is not None else 'C'}]"
        raise InputError(
            f"sampler output: got shape {list(out_shape)}; allowed: {_what(link)} of shape {want}"
        )


def _check_members(
    out_shape: tuple[int, ...],
    num_functions: int,
    num_rows: int,
    num_classes: int | None,
    link=log_softmax,
) -> None:
    """`all_logits(x)` of a FiniteSampler: one [n, C] block per declared function."""
    if len(out_shape) != 3 or out_shape[0] != num_functions:
        c = num_classes if num_classes is not None else "C"
        raise InputError(
            f"sampler output (all_logits): got shape {list(out_shape)}; allowed: "
            f"[{num_functions}, {num_rows}, {c}] (num_functions = {num_functions})"
        )
    _check_shape(out_shape[1:], num_rows, num_classes, link)


def check_sampler(sampler: Any, link: Callable = log_softmax) -> None:
    """An InputError naming what the agent returned when it is no sampler: not callable (a
    dict, an array, a model object without `__call__`), or a FiniteSampler whose
    `all_logits` is not callable. (It failed with "'dict' object is not callable" deep
    inside an estimator.)"""
    if isinstance(sampler, FiniteSampler):
        if callable(getattr(sampler, "all_logits", None)):
            return
        got = f"a FiniteSampler whose all_logits is {type(sampler.all_logits).__name__}"
    elif callable(sampler):
        return
    else:
        got = f"a {type(sampler).__name__}"
        if isinstance(sampler, dict):
            got += f" (keys: {', '.join(map(str, list(sampler)[:5]))})"
    shape = "[n, C]" if link is log_softmax else "[n, 1]"
    raise InputError(
        f"predictive: got {got}, which cannot be called; allowed: an epistemic sampler, a "
        f"callable (x [n, d], key) -> {_what(link)} {shape} (or a FiniteSampler of K "
        "functions; see testbed.base)"
    )


def _is_traceable(fn: Callable, *args) -> tuple[bool, tuple[int, ...] | None]:
    if getattr(fn, "traceable", True) is False:
        return False, None
    try:
        out = jax.eval_shape(fn, *args)
    except Exception:  # any failure to trace means: loop in Python instead
        return False, None
    return True, tuple(out.shape)


def _checked(reduce: Callable, out: jax.Array, aux: Any, link: Callable = log_softmax):
    """`reduce(link(out), aux)`, with flags for NaN and infinite outputs (+inf logits; an
    infinite real value)."""
    out = jnp.asarray(out, jnp.float32)
    bad_nan = jnp.any(jnp.isnan(out))
    bad_inf = jnp.any(jnp.isposinf(out) if link is log_softmax else jnp.isinf(out))
    return reduce(link(out), aux), bad_nan, bad_inf


def traced(fn: Callable) -> Partial:
    """`fn` as a `jax.tree_util.Partial`, the form the compiled maps below take it in.

    A Partial whose bound arguments are all arrays (a trained network's) passes them as
    arguments of the compiled program, its function being the program's cache key, so every
    problem of a sweep with the same function and shapes reuses one program. Anything else
    (a closure; a Partial that binds settings `fn` may branch on) is the cache key itself and
    is compiled with its values as constants: once per trained predictive, about as long as
    scoring it (10 s for a hypermodel at tau = 1).
    """
    if isinstance(fn, Partial) and all(_is_array(v) for v in jax.tree.leaves(fn)):
        return fn
    return Partial(fn)


def _is_array(value: Any) -> bool:
    return isinstance(value, jax.Array | np.ndarray | np.generic)


@functools.partial(jax.jit, static_argnames=("reduce", "chunk_size", "link"))
def _map_keys(sampler, reduce, x, keys, aux, chunk_size, link):
    """Each key applied once to all of x: compiled (and cached) per function and reduce."""
    return jax.lax.map(
        lambda k: _checked(reduce, sampler(x, k), aux, link), keys, batch_size=chunk_size
    )


@functools.partial(jax.jit, static_argnames=("reduce", "link"))
def _map_members(all_logits, reduce, x, aux, link):
    return jax.vmap(lambda out: _checked(reduce, out, aux, link))(all_logits(x))


def _raise_if_bad(bad_nan, bad_inf, link=log_softmax) -> None:
    if link is not log_softmax:
        if bool(np.any(bad_nan)) or bool(np.any(bad_inf)):
            kind = "NaN" if bool(np.any(bad_nan)) else "infinite"
            raise InputError(f"sampler output: got {kind} values; allowed: finite real values")
        return
    if bool(np.any(bad_nan)):
        raise InputError(
            "sampler output: got NaN logits; allowed: finite logits (or -inf for probability 0)"
        )
    if bool(np.any(bad_inf)):
        raise InputError(
            "sampler output: got +inf logits; allowed: finite logits (or -inf for probability 0)"
        )


def _divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is <= limit (chunks of keys without a remainder)."""
    for d in range(min(n, limit), 0, -1):
        if n % d == 0 and (d >= limit // 4 or d == n):
            return d
    return min(n, limit)


def apply_functions(
    sampler: Callable,
    x: jax.Array,
    keys: jax.Array,
    reduce: Callable[[jax.Array, Any], jax.Array],
    aux: Any = None,
    *,
    num_classes: int | None = None,
    chunk_size: int = 64,
    link: Callable = log_softmax,
) -> WeightedFunctions:
    """`reduce(link(sampler(x, key)), aux)` for each key, as a weighted mixture.

    `reduce` should be a module-level function (jitted code is cached per sampler and
    reduce); `aux` carries its array arguments. Returns F = M values with equal weights,
    or F = K values weighted by how often the M keys selected each member when `sampler`
    is a `FiniteSampler`. NaN or +inf logits and wrong output shapes raise an `InputError`.
    `link` is `log_softmax` (classification: logits) or `real_values` (regression: any
    non-finite value is an error).
    """
    check_sampler(sampler, link)
    num_keys = keys.shape[0]
    if isinstance(sampler, FiniteSampler):
        ok, shape = _is_traceable(sampler.all_logits, x)
        if ok:
            _check_members(shape, sampler.num_functions, x.shape[0], num_classes, link)
            values, bad_nan, bad_inf = _map_members(
                traced(sampler.all_logits), reduce, x, aux, link
            )
        else:
            logits = np.asarray(sampler.all_logits(np.asarray(x)))
            _check_members(logits.shape, sampler.num_functions, x.shape[0], num_classes, link)
            values, bad_nan, bad_inf = _map_members(
                traced(lambda _: jnp.asarray(logits)), reduce, x, aux, link
            )
        _raise_if_bad(bad_nan, bad_inf, link)
        index = jax.vmap(sampler.index)(keys)
        counts = jnp.bincount(index, length=sampler.num_functions)
        return WeightedFunctions(values, jnp.log(counts / num_keys))

    ok, shape = _is_traceable(sampler, x, keys[0])
    if ok:
        _check_shape(shape, x.shape[0], num_classes, link)
        chunk = _divisor_at_most(num_keys, chunk_size)  # no remainder: one compiled body
        values, bad_nan, bad_inf = _map_keys(traced(sampler), reduce, x, keys, aux, chunk, link)
    else:
        outs = []
        x_np = np.asarray(x)
        for k in keys:
            logits = np.asarray(sampler(x_np, k), dtype=np.float32)
            _check_shape(logits.shape, x.shape[0], num_classes, link)
            outs.append(_checked(reduce, jnp.asarray(logits), aux, link))
        values, bad_nan, bad_inf = (jnp.stack(v) for v in zip(*outs))
    _raise_if_bad(bad_nan, bad_inf, link)
    return WeightedFunctions(values, jnp.full((num_keys,), -jnp.log(num_keys)))


# Per-batch functions: each test batch i has its own M keys (keys [N, M]), as the Neural
# Testbed's estimators of 2021 drew them. A batch's M functions are applied to its tau
# inputs only and reduced to one number at once, so memory stays per batch.


def key_shape(keys: jax.Array) -> tuple[int, ...]:
    """The shape of an array of PRNG keys without the key data: typed keys as they are,
    raw uint32 keys without their last axis (a single raw key has shape ())."""
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        return tuple(keys.shape)
    return tuple(keys.shape[:-1])


def _chunk_of_batches(num_batches: int, rows_per_batch: int, target_rows: int) -> int:
    """Batches per compiled step: about `target_rows` sampler rows, no remainder."""
    want = max(1, target_rows // max(rows_per_batch, 1))
    return _divisor_at_most(num_batches, want)


@functools.partial(
    jax.jit, static_argnames=("reduce", "batches_per_chunk", "keys_per_chunk", "link")
)
def _map_batches(sampler, reduce, x, y, keys, aux, batches_per_chunk, keys_per_chunk, link):
    """reduce(link(outputs of batch i's M functions), uniform weights, y_i, aux_i) per batch."""
    num_keys = keys.shape[1]
    log_w = jnp.full((num_keys,), -jnp.log(num_keys), jnp.float32)

    def one_batch(args):
        xb, yb, kb, ab = args
        out = jax.lax.map(lambda k: sampler(xb, k), kb, batch_size=keys_per_chunk)
        out = jnp.asarray(out, jnp.float32)
        bad = _bad_flags(out, link)
        return (reduce(link(out), log_w, yb, ab), *bad)

    return jax.lax.map(one_batch, (x, y, keys, aux), batch_size=batches_per_chunk)


@functools.partial(jax.jit, static_argnames=("reduce", "batches_per_chunk", "link"))
def _map_member_batches(all_logits, reduce, x, y, log_w, aux, batches_per_chunk, link):
    """reduce(link(all K functions at batch i's inputs), batch i's member weights, y_i, aux_i)."""

    def one_batch(args):
        xb, yb, wb, ab = args
        out = jnp.asarray(all_logits(xb), jnp.float32)  # [K, tau, C]
        bad = _bad_flags(out, link)
        return (reduce(link(out), wb, yb, ab), *bad)

    return jax.lax.map(one_batch, (x, y, log_w, aux), batch_size=batches_per_chunk)


def _bad_flags(out: jax.Array, link: Callable) -> tuple[jax.Array, jax.Array]:
    bad_inf = jnp.any(jnp.isposinf(out) if link is log_softmax else jnp.isinf(out))
    return jnp.any(jnp.isnan(out)), bad_inf


def member_log_weights(sampler: FiniteSampler, keys: jax.Array) -> jax.Array:
    """log(count / M) of each member among each batch's M keys: [N, K] from keys [N, M]."""
    index = jax.vmap(jax.vmap(sampler.index))(keys)  # [N, M]
    num_batches, num_keys = index.shape
    rows = jnp.broadcast_to(jnp.arange(num_batches)[:, None], index.shape)
    counts = jnp.zeros((num_batches, sampler.num_functions)).at[rows, index].add(1.0)
    return jnp.log(counts / num_keys)


def reduce_per_batch(
    sampler: Callable,
    x: jax.Array,
    y: jax.Array,
    keys: jax.Array,
    reduce: Callable,
    aux: Any = None,
    *,
    num_classes: int | None = None,
    target_rows: int = 40_000,
    link: Callable = log_softmax,
) -> jax.Array:
    """`reduce(link(outputs) [F, tau, C], log_weights [F], y_i, aux_i)` for each batch i: [N].

    x: [N, tau, d] inputs, y: [N, tau] labels, keys: [N, M] (batch i's own M keys) or
    [M] (the same M keys for every batch); aux: a pytree of arrays with leading axis N
    (or None). A traceable sampler is applied per (batch, key); a `FiniteSampler` is
    applied once per member and each batch weighs its K members by how often its keys
    select them. `reduce` must be a module-level function (compiled code is cached on
    it). Non-traceable samplers with keys per batch would need N * M calls and are
    refused; NaN or +inf outputs and wrong shapes raise an `InputError`.
    """
    check_sampler(sampler, link)
    x = jnp.asarray(x)
    y = jnp.asarray(y, jnp.int32)
    num_batches, tau = y.shape
    if len(key_shape(keys)) == 1:  # shared keys: each batch gets the same M
        keys = jnp.broadcast_to(keys, (num_batches,) + keys.shape)
    num_keys = key_shape(keys)[1]
    if isinstance(sampler, FiniteSampler):
        ok, shape = _is_traceable(sampler.all_logits, x[0])
        if not ok:
            raise InputError(_UNTRACEABLE)
        _check_members(shape, sampler.num_functions, tau, num_classes, link)
        rows = tau * sampler.num_functions
        chunk = _chunk_of_batches(num_batches, rows, target_rows)
        log_w = member_log_weights(sampler, keys)
        values, bad_nan, bad_inf = _map_member_batches(
            traced(sampler.all_logits), reduce, x, y, log_w, aux, chunk, link
        )
    else:
        ok, shape = _is_traceable(sampler, x[0], keys[0, 0])
        if not ok:
            raise InputError(_UNTRACEABLE)
        _check_shape(shape, tau, num_classes, link)
        # about 400 functions a step (a sampler's weights per key stay in cache) and at
        # most ~40,000 rows (its activations): measured best on bbb and dropout MLPs
        key_chunk = _divisor_at_most(num_keys, 100)
        functions = max(key_chunk, min(400, target_rows // max(tau, 1)))
        chunk = _divisor_at_most(num_batches, max(1, functions // key_chunk))
        values, bad_nan, bad_inf = _map_batches(
            traced(sampler), reduce, x, y, keys, aux, chunk, key_chunk, link
        )
    _raise_if_bad(bad_nan, bad_inf, link)
    return values


_UNTRACEABLE = (
    "sampler: got one that JAX cannot trace, on a problem that draws its own sampler keys "
    "for every test batch (N x M function draws); allowed: a JAX-traceable sampler or a "
    "FiniteSampler whose all_logits is traceable"
)
