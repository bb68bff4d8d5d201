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


@functools.partial(jax.jit, static_argnames=("sampler", "reduce", "chunk_size", "link"))
def _map_keys(sampler, reduce, x, keys, aux, chunk_size, link):
    """Each key applied once to all of x: jitted (and cached) per sampler and reduce."""
    return jax.lax.map(
        lambda k: _checked(reduce, sampler(x, k), aux, link), keys, batch_size=chunk_size
    )


@functools.partial(jax.jit, static_argnames=("all_logits", "reduce", "link"))
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
    num_keys = keys.shape[0]
    if isinstance(sampler, FiniteSampler):
        ok, shape = _is_traceable(sampler.all_logits, x)
        if ok:
            _check_members(shape, sampler.num_functions, x.shape[0], num_classes, link)
            values, bad_nan, bad_inf = _map_members(sampler.all_logits, reduce, x, aux, link)
        else:
            logits = np.asarray(sampler.all_logits(np.asarray(x)))
            _check_members(logits.shape, sampler.num_functions, x.shape[0], num_classes, link)
            values, bad_nan, bad_inf = _map_members(
                lambda _: jnp.asarray(logits), reduce, x, aux, link
            )
        _raise_if_bad(bad_nan, bad_inf, link)
        index = jax.vmap(sampler.index)(keys)
        counts = jnp.bincount(index, length=sampler.num_functions)
        return WeightedFunctions(values, jnp.log(counts / num_keys))

    ok, shape = _is_traceable(sampler, x, keys[0])
    if ok:
        _check_shape(shape, x.shape[0], num_classes, link)
        chunk = _divisor_at_most(num_keys, chunk_size)  # no remainder: one compiled body
        values, bad_nan, bad_inf = _map_keys(sampler, reduce, x, keys, aux, chunk, link)
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
