"""Unbiased MMD^2 with a Gaussian kernel, bandwidth by the median heuristic (sbibm's MMD).

k(a, b) = exp(-|a - b|^2 / (2 s^2)), s = the lower median of the pairwise distances of the
reference (sbibm's default, as torch.median of pdist) or of the pooled sample ('pooled').
MMD^2 = mean_{i!=j} k(x_i, x_j) + mean_{i!=j} k(y_i, y_j) - 2 mean_{i,j} k(x_i, y_j).
Kernel sums run blockwise in JAX, so 10k x 10k needs no 10k^2 matrix in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from testbed.config import check_at_least, check_one_of, check_positive
from testbed.errors import InputError
from testbed.metrics.c2st import z_score
from testbed.metrics.inputs import as_samples, same_dim
from testbed.metrics.registry import register

Bandwidth = Literal["reference", "pooled"]


def _blocks(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """x padded to a multiple of `block` rows, reshaped [B, block, d], and a row mask."""
    n = x.shape[0]
    pad = (-n) % block
    xp = np.concatenate([x, np.zeros((pad, x.shape[1]), x.dtype)])
    mask = np.arange(n + pad) < n
    return xp.reshape(-1, block, x.shape[1]), mask.reshape(-1, block)


@partial(jax.jit, static_argnames=("exclude_diagonal",))
def _kernel_sum(a_blocks, a_mask, b, scale, exclude_diagonal: bool):
    """sum_{i, j} k(a_i, b_j) over valid rows (i != j when a is b), in float32 blocks."""

    def one(args):
        i, xa, ma = args
        d2 = jnp.sum((xa[:, None, :] - b[None, :, :]) ** 2, axis=-1)
        k = jnp.exp(-d2 / (2.0 * scale**2)) * ma[:, None]
        if exclude_diagonal:
            rows = i * xa.shape[0] + jnp.arange(xa.shape[0])
            k = jnp.where(rows[:, None] == jnp.arange(b.shape[0])[None, :], 0.0, k)
        return jnp.sum(k)

    idx = jnp.arange(a_blocks.shape[0])
    return jnp.sum(jax.lax.map(one, (idx, a_blocks, a_mask)))


def squared_distances(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, workspace: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """|a_i - b_j|^2 into `out` [len(a), len(b)], summed over dimensions in exactly the
    order (and precision) of `np.sum((a[:, None] - b[None]) ** 2, axis=-1)`: numpy's
    pairwise summation (sequential below 8 terms, 8 accumulators up to 128, halves above),
    one dimension at a time, so no [len(a), len(b), d] temporary is made. `workspace`:
    flat arrays of at least `out.size` to reuse for the temporaries (`workspace_size(d)`
    of them; more are made when they run out)."""
    spare = iter(workspace)

    def fresh() -> np.ndarray:
        buf = next(spare, None)
        return np.empty_like(out) if buf is None else buf[: out.size].reshape(out.shape)

    def term(k: int, dst: np.ndarray) -> np.ndarray:
        np.subtract(a[:, k, None], b[None, :, k], out=dst)
        return np.multiply(dst, dst, out=dst)

    scratch = fresh()

    def total(lo: int, n: int, dst: np.ndarray) -> np.ndarray:
        if n < 8:  # 0 + t0 + t1 + ...
            term(lo, dst)
            for k in range(lo + 1, lo + n):
                dst += term(k, scratch)
            return dst
        if n <= 128:
            r = [term(lo + j, fresh()) for j in range(8)]
            i = 8
            while i < n - n % 8:
                for j in range(8):
                    r[j] += term(lo + i + j, scratch)
                i += 8
            for x, y in ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (4, 6)):
                r[x] += r[y]
            np.add(r[0], r[4], out=dst)  # ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            for k in range(i, n):
                dst += term(lo + k, scratch)
            return dst
        half = n // 2 - (n // 2) % 8
        total(lo, half, dst)
        dst += total(lo + half, n - half, fresh())
        return dst

    return total(0, a.shape[1], out)


def workspace_size(d: int) -> int:
    """The temporaries `squared_distances` takes for `d` dimensions below 129: a scratch,
    and 8 accumulators from 8 dimensions on."""
    return 1 if d < 8 else 9


def _row_blocks(x: np.ndarray, block: int):
    """For blocks of rows starting at s: the squared distances of its rows i to the rows
    j > s of x ([rows, n - s - 1], in one reused buffer), with the pairs j <= i set to +inf
    (they sort last and count nowhere): every pair i < j exactly once. The temporaries are
    reused too (allocating them afresh for each block cost more than the arithmetic at
    d = 10), and blocks are cut so that all of them take about `2 * block` rows' worth."""
    n, d = x.shape
    spares = workspace_size(d)
    block = max(1, min(n, 2 * block // (1 + spares)))
    flat = np.empty(block * (n - 1), x.dtype)
    workspace = [np.empty_like(flat) for _ in range(spares)]
    below = np.tril(np.ones((block, block), bool), -1)  # column j - s - 1 < row i - s
    for s in range(0, n - 1, block):
        a = x[s : s + block]
        shape = (a.shape[0], n - s - 1)
        m = flat[: shape[0] * shape[1]].reshape(shape)
        squared_distances(a, x[s + 1 :], m, workspace)
        w = min(a.shape[0], m.shape[1])
        m[:, :w][below[: a.shape[0], :w]] = np.inf
        yield m


def _median_bracket(x: np.ndarray, pilot: int) -> tuple[float, float]:
    """Squared distances (lo, hi) that hold the median pair's with near certainty: the
    0.5 -/+ 6 sd quantiles of `pilot` random pairs (seeded: the same bracket every call)."""
    n = x.shape[0]
    rng = np.random.default_rng(0)
    i = rng.integers(0, n, pilot)
    j = rng.integers(0, n - 1, pilot)
    j += j >= i  # j != i
    d2 = np.sort(np.sum((x[i] - x[j]) ** 2, axis=-1))
    width = 6.0 * np.sqrt(0.25 / pilot) + 1.0 / pilot
    lo = d2[max(0, int(np.floor(pilot * (0.5 - width))))]
    hi = d2[min(pilot - 1, int(np.ceil(pilot * (0.5 + width))))]
    return lo, hi


def median_bandwidth(
    x: np.ndarray, block: int = 512, pilot: int = 65_536, direct_below: int = 1 << 21
) -> float:
    """The lower median of the pairwise distances |x_i - x_j|, i < j (torch.median of
    torch.pdist), in x's precision; equal to the straightforward computation bit for bit.

    Selected on squared distances (sqrt is monotone, so the same element), computed block
    by block in numpy's summation order. Below `direct_below` pairs they are all kept and
    partitioned. Above, no n^2 / 2 buffer is made (10,000 rows: 200 MB, whose first touch
    cost 0.2-2 s here): a bracket from `pilot` random pairs, one pass that counts the pairs
    below it and keeps the few inside (about 2%), the median among those; should the
    bracket miss (about 1e-9), every pair is kept instead.
    """
    n = x.shape[0]
    pairs = n * (n - 1) // 2
    k = (pairs - 1) // 2  # the lower median's rank
    if pairs >= direct_below:
        lo, hi = _median_bracket(x, pilot)
        below, inside = 0, []
        for m in _row_blocks(x, block):
            below += int(np.count_nonzero(m < lo))
            inside.append(m[(m >= lo) & (m <= hi)])
        kept = np.concatenate(inside)
        if 0 <= k - below < kept.size:
            kept.partition(k - below)
            return float(np.sqrt(kept[k - below]))
    kept = np.concatenate([m.ravel().copy() for m in _row_blocks(x, block)])  # +inf last
    kept.partition(k)
    return float(np.sqrt(kept[k]))


@register("mmd", ("reference_samples", "posterior_samples"))
def mmd(
    reference,
    samples,
    *,
    bandwidth: Bandwidth = "reference",
    scale: float | None = None,
    z_score_data: bool = False,
    block: int = 256,
) -> float:
    """Unbiased MMD^2 between reference and samples, Gaussian kernel (sbibm's defaults).

    bandwidth: 'reference' (median heuristic on the reference, sbibm) or 'pooled'; a given
    `scale` overrides both. Returns MMD^2 (not its square root).
    """
    x = as_samples(reference, "reference", min_rows=2)
    y = as_samples(samples, "samples", min_rows=2)
    same_dim(x, y, "reference", "samples")
    check_one_of("bandwidth", bandwidth, ("reference", "pooled"))
    if scale is not None:
        check_positive("scale", scale)  # 0, < 0 or inf gave MMD 0: "identical"
    if isinstance(block, bool) or not isinstance(block, int | np.integer):
        raise InputError(f"block: got {block!r}; allowed: an integer >= 1")
    check_at_least("block", block, 1)
    if z_score_data:
        x, y = z_score(x, y)
    if scale is None:
        scale = median_bandwidth(x if bandwidth == "reference" else np.concatenate([x, y]))
    scale = jnp.float32(max(scale, 1e-8))
    n, m = x.shape[0], y.shape[0]
    xb, xm = _blocks(x, block)
    yb, ym = _blocks(y, block)
    kxx = float(_kernel_sum(xb, xm, jnp.asarray(x), scale, True))
    kyy = float(_kernel_sum(yb, ym, jnp.asarray(y), scale, True))
    kxy = float(_kernel_sum(xb, xm, jnp.asarray(y), scale, False))
    return kxx / (n * (n - 1)) + kyy / (m * (m - 1)) - 2.0 * kxy / (n * m)
