"""ddKS orthant statistic at d = 10, n = 10,000: vectorized (JAX) vs a straightforward loop.

The loop is the paper's form (adKS): for every test point and every one of the 2^d orthants,
count the sample inside with a boolean mask and compare with the exact orthant mass. It is
timed on a subset of test points and extrapolated linearly (its cost is exactly linear in the
number of test points); both forms are first checked equal on a small problem.
Run: .venv/bin/python benchmarks/bench_ddks.py [--n 10000] [--d 10] [--loop-points 8]
"""

from __future__ import annotations

import argparse
import itertools
import time

import jax
import numpy as np
from scipy import stats

from testbed.metrics.ddks import statistic_exact, statistic_reference


def loop_statistic(samples: np.ndarray, cdf_at, test_points: np.ndarray) -> float:
    """max over test points and orthants of |fraction inside - exact mass| (Python loops)."""
    best = 0.0
    d = samples.shape[1]
    for t in test_points:
        f = cdf_at(t)
        for bits in itertools.product([False, True], repeat=d):
            above = np.array(bits[::-1])
            inside = np.all((samples > t) == above, axis=1).mean()
            mass = np.prod(np.where(above, 1.0 - f, f))
            best = max(best, abs(inside - mass))
    return best


def timed(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--loop-points", type=int, default=8)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    # Equality on a small problem (all test points in both forms).
    small = rng.standard_normal((120, args.d)).astype(np.float32)
    vec = float(statistic_exact(small, stats.norm.cdf(small).astype(np.float32)))
    loop = loop_statistic(small.astype(np.float64), stats.norm.cdf, small.astype(np.float64))
    print(
        f"check n=120 d={args.d}: vectorized {vec:.6f} loop {loop:.6f} |diff| {abs(vec - loop):.1e}"
    )

    x = rng.standard_normal((args.n, args.d)).astype(np.float32)
    cdf = stats.norm.cdf(x).astype(np.float32)
    start = time.perf_counter()
    jax.block_until_ready(statistic_exact(x, cdf))
    first = time.perf_counter() - start
    vec_s = timed(lambda: statistic_exact(x, cdf))
    ref = rng.standard_normal((args.n, args.d)).astype(np.float32)
    jax.block_until_ready(statistic_reference(x, ref))
    ref_s = timed(lambda: statistic_reference(x, ref))

    m = args.loop_points
    start = time.perf_counter()
    loop_statistic(x.astype(np.float64), stats.norm.cdf, x[:m].astype(np.float64))
    loop_s = (time.perf_counter() - start) * args.n / m

    print(f"d={args.d} n={args.n} ({args.n} test points x {2**args.d} orthants)")
    print(f"  vectorized, exact masses : {vec_s:8.3f} s   (first call incl. compile {first:.2f} s)")
    print(f"  vectorized, ref. sample  : {ref_s:8.3f} s   (n reference points)")
    print(f"  loop (extrapolated from {m} test points): {loop_s:10.1f} s")
    print(f"  ratio loop / vectorized : {loop_s / vec_s:10.0f}x")


if __name__ == "__main__":
    main()
