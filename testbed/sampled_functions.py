"""Apply an epistemic sampler to many inputs under many keys, fast and checked.

One key is one function for all rows of x, so the N test batches of an estimator are
stacked into one input array and each key is applied once to all of them: M calls of
N * tau rows instead of N * M calls of tau rows. JAX-traceable samplers are mapped over
keys in jitted chunks; others are looped in Python; a `FiniteSampler` (K functions) is
applied once per function and the M keys become a histogram of member indices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

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


def _check_shape(out_shape: tuple[int, ...], num_rows: int, num_classes: int | None) -> None:
    if (
        len(out_shape) != 2
        or out_shape[0] != num_rows
        or (num_classes is not None and out_shape[1] != num_classes)
    ):
        want = f"[{num_rows}, {num_classes if num_classes is not None else 'C'}]"
        raise InputError(
            f"sampler output: got shape {list(out_shape)}; allowed: logits of shape {want}"
        )


def _is_traceable(fn: Callable, *args) -> tuple[bool, tuple[int, ...] | None]:
    if getattr(fn, "traceable", True) is False:
        return False, None
    try:
        out = jax.eval_shape(fn, *args)
    except Exception:  # any failure to trace means: loop in Python instead
        return False, None
    return True, tuple(out.shape)


def _reduce_logits(reduce: Callable[[jax.Array], jax.Array]):
    """Wraps `reduce(log_probs [R, C]) -> [...]` to also flag NaN and +inf logits."""

    def fn(logits):
        logits = jnp.asarray(logits, jnp.float32)
        bad_nan = jnp.any(jnp.isnan(logits))
        bad_inf = jnp.any(jnp.isposinf(logits))
        return reduce(jax.nn.log_softmax(logits, axis=-1)), bad_nan, bad_inf

    return fn


def _raise_if_bad(bad_nan, bad_inf) -> None:
    if bool(np.any(bad_nan)):
        raise InputError(
            "sampler output: got NaN logits; allowed: finite logits (or -inf for probability 0)"
        )
    if bool(np.any(bad_inf)):
        raise InputError(
            "sampler output: got +inf logits; allowed: finite logits (or -inf for probability 0)"
        )


def apply_functions(
    sampler: Callable,
    x: jax.Array,
    keys: jax.Array,
    reduce: Callable[[jax.Array], jax.Array],
    *,
    num_classes: int | None = None,
    chunk_size: int = 64,
) -> WeightedFunctions:
    """`reduce(log_softmax(sampler(x, key)))` for each sampled key, as a weighted mixture.

    Returns F = M values with equal weights, or F = K values weighted by how often the M
    keys selected each member when `sampler` is a `FiniteSampler`. NaN or +inf logits and
    wrong output shapes raise an `InputError`.
    """
    num_keys = keys.shape[0]
    step = _reduce_logits(reduce)
    if isinstance(sampler, FiniteSampler):
        ok, shape = _is_traceable(sampler.all_logits, x)
        if ok:
            _check_shape(shape[1:], x.shape[0], num_classes)
            values, bad_nan, bad_inf = jax.jit(jax.vmap(step))(sampler.all_logits(x))
        else:
            logits = np.asarray(sampler.all_logits(np.asarray(x)))
            _check_shape(logits.shape[1:], x.shape[0], num_classes)
            values, bad_nan, bad_inf = jax.vmap(step)(jnp.asarray(logits))
        _raise_if_bad(bad_nan, bad_inf)
        index = jax.vmap(sampler.index)(keys)
        counts = jnp.bincount(index, length=sampler.num_functions)
        return WeightedFunctions(values, jnp.log(counts / num_keys))

    ok, shape = _is_traceable(sampler, x, keys[0])
    if ok:
        _check_shape(shape, x.shape[0], num_classes)
        per_key = jax.jit(
            lambda ks: jax.lax.map(lambda k: step(sampler(x, k)), ks, batch_size=chunk_size)
        )
        values, bad_nan, bad_inf = per_key(keys)
    else:
        outs = []
        x_np = np.asarray(x)
        for k in keys:
            logits = np.asarray(sampler(x_np, k), dtype=np.float32)
            _check_shape(logits.shape, x.shape[0], num_classes)
            outs.append(step(jnp.asarray(logits)))
        values, bad_nan, bad_inf = (jnp.stack(v) for v in zip(*outs))
    _raise_if_bad(bad_nan, bad_inf)
    return WeightedFunctions(values, jnp.full((num_keys,), -jnp.log(num_keys)))
