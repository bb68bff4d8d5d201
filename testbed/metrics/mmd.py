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


def pairwise_distances_upper(x: np.ndarray, block: int = 512) -> np.ndarray:
    """All |x_i - x_j| for i < j (as torch.pdist), computed blockwise from differences."""
    out = []
    for start in range(0, x.shape[0] - 1, block):
        a = x[start : start + block]
        d = np.sqrt(np.sum((a[:, None, :] - x[None, start + 1 :, :]) ** 2, axis=-1))
        upper = np.arange(d.shape[1])[None, :] >= np.arange(a.shape[0])[:, None]  # j > i
        out.append(d[upper])  # row-major: the order of np.triu_indices
    return np.concatenate(out) if out else np.zeros(0, x.dtype)


def median_bandwidth(x: np.ndarray) -> float:
    """The lower median of the pairwise distances (torch.median semantics)."""
    d = pairwise_distances_upper(x)
    k = (d.size - 1) // 2
    return float(np.partition(d, k)[k])


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
