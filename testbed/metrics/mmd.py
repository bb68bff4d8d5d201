"""Unbiased MMD^2 with a Gaussian kernel, bandwidth by the median heuristic (sbibm's MMD).

k(a, b) = exp(-|a - b|^2 / (2 s^2)), s = the lower median of the pairwise distances of the
reference (sbibm's default, as torch.median of pdist) or of the pooled sample ('pooled').
MMD^2 = mean_{i!=j} k(x_i, x_j) + mean_{i!=j} k(y_i, y_j) - 2 mean_{i,j} k(x_i, y_j).
Kernel sums run blockwise in JAX, so 10k x 10k needs no 10k^2 matrix in memory.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from testbed.config import check_one_of
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


def squared_distances(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """|a_i - b_j|^2 into `out` [len(a), len(b)], summed over dimensions in exactly the
    order (and precision) of `np.sum((a[:, None] - b[None]) ** 2, axis=-1)`: numpy's
    pairwise summation (sequential below 8 terms, 8 accumulators up to 128, halves above),
    one dimension at a time, so no [len(a), len(b), d] temporary is made."""

    def term(k: int, dst: np.ndarray) -> np.ndarray:
        np.subtract(a[:, k, None], b[None, :, k], out=dst)
        return np.multiply(dst, dst, out=dst)

    scratch = np.empty_like(out)

    def total(lo: int, n: int, dst: np.ndarray) -> np.ndarray:
        if n < 8:  # 0 + t0 + t1 + ...
            term(lo, dst)
            for k in range(lo + 1, lo + n):
                dst += term(k, scratch)
            return dst
        if n <= 128:
            r = [term(lo + j, np.empty_like(out)) for j in range(8)]
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
        dst += total(lo + half, n - half, np.empty_like(out))
        return dst

    return total(0, a.shape[1], out)


def median_bandwidth(x: np.ndarray, block: int = 512) -> float:
    """The lower median of the pairwise distances |x_i - x_j|, i < j (torch.median of
    torch.pdist), in x's precision.

    Selected on squared distances (sqrt is monotone, so the same element), each row block
    written into one buffer with the pairs j <= i set to +inf (they sort last), so there is
    no copy of the upper triangle; equal to the straightforward computation bit for bit.
    """
    n = x.shape[0]
    starts = range(0, n - 1, block)
    sizes = [min(block, n - s) * (n - s - 1) for s in starts]
    buf = np.empty(sum(sizes), x.dtype)
    below = np.tril(np.ones((block, block), bool), -1)  # column j - s - 1 < row i - s
    pos = 0
    for s, size in zip(starts, sizes):
        a = x[s : s + block]
        m = buf[pos : pos + size].reshape(a.shape[0], n - s - 1)
        squared_distances(a, x[s + 1 :], m)
        w = min(a.shape[0], m.shape[1])
        m[:, :w][below[: a.shape[0], :w]] = np.inf
        pos += size
    k = (n * (n - 1) // 2 - 1) // 2
    return float(np.sqrt(np.partition(buf, k)[k]))


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
