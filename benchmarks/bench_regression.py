"""GP regression: the whole `regression` sweep with one agent, and two ratios to the
reference's algorithms, in one run.

1. The NNGP kernel and the function draw: a float64 Cholesky (our fallback) against the
   reference's float32 `jax.random.multivariate_normal` (what problems use when it is
   finite), same kernel and key; whether the float32 draw is finite, and how far apart.
2. The Gaussian KL estimator: ours (each of M keys applied once to all N test inputs)
   against the reference's `GaussianSampleKL` (vmap over N batches of vmap over M keys).
3. `testbed sweep --agent <agent> --sweep <sweep>`: wall time, and the mean job seconds
   per (d, n) cell from the results store (building the problem is part of a job).

    .venv/bin/python benchmarks/bench_regression.py [--agent mlp] [--sweep regression]
        [--workers 2] [--results /tmp/bench_regression.db] [--skip-sweep]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import agents
import generative
from testbed.nngp import nngp_kernel
from testbed.reference_rng import reference_stream
from testbed.regression_kl import gaussian_log_likelihood


def bench_draw(n: int, d: int) -> None:
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(0), (n, d)))
    key = jax.random.PRNGKey(1)
    with reference_stream():
        start = time.perf_counter()
        k64 = np.asarray(nngp_kernel(jnp.asarray(x), jnp.asarray(x)), np.float64)
        z = np.asarray(jax.random.normal(key, (n,)), np.float64)
        ours = np.linalg.cholesky(k64 + 1e-5 * np.eye(n)) @ z
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        kernel = nngp_kernel(jnp.asarray(x), jnp.asarray(x)) + 1e-5 * jnp.eye(n)
        ref = jax.block_until_ready(jax.random.multivariate_normal(key, jnp.zeros(n), kernel))
        t_ref = time.perf_counter() - start
    finite = bool(np.all(np.isfinite(np.asarray(ref))))
    gap = float(np.max(np.abs(np.asarray(ref) - ours))) if finite else float("nan")
    print(
        f"function draw d={d:3d} n={n:5d}: float64 {t_ours:6.2f} s, reference (float32) "
        f"{t_ref:6.2f} s, ratio {t_ref / t_ours:5.2f}x; reference finite: {finite}, "
        f"max |difference| {gap:.2e}"
    )


def reference_estimator(sampler, problem) -> float:
    """The reference's GaussianSampleKL: per batch key, tau indices and noise, M keys from
    split(batch key, M), vmapped over batches and keys."""
    s = problem.settings
    cache, f = jnp.asarray(problem.x_cache), jnp.asarray(problem.f_cache)

    def one(key):
        x_key, y_key = jax.random.split(key)
        idx = jax.random.randint(x_key, (s.tau,), 0, cache.shape[0])
        noise = jax.random.normal(y_key, (s.tau,)) * s.noise_std
        y = f[idx] + noise
        keys = jax.random.split(key, s.num_enn_samples)
        values = jax.vmap(lambda k: sampler(cache[idx], k)[:, 0])(keys)
        ll = gaussian_log_likelihood(values - y, s.noise_std)
        true = gaussian_log_likelihood(noise, s.noise_std)
        return true - (jax.nn.logsumexp(ll) - jnp.log(s.num_enn_samples))

    with reference_stream():
        keys = jax.random.split(problem._estimator_key, s.num_batches)
        return float(jnp.mean(jax.jit(jax.vmap(one))(keys)))


def bench_estimator(agent: str) -> None:
    problem = generative.load("regression/133")  # d 10, n 100, noise 0.1
    sampler = agents.load(agent)(problem.train_data, problem.prior_knowledge)
    times = {}
    for name, run in (
        ("ours", lambda: problem.evaluate(sampler)["kl_estimate"]),
        ("reference", lambda: reference_estimator(sampler, problem)),
    ):
        run()  # compile
        start = time.perf_counter()
        value = run()
        times[name] = (time.perf_counter() - start, value)
    (t_ours, kl_ours), (t_ref, kl_ref) = times["ours"], times["reference"]
    print(
        f"Gaussian KL estimator, {agent} on regression/133 (N=1001, M=100, warm): ours "
        f"{t_ours:.3f} s (KL {kl_ours:.4f}), reference {t_ref:.3f} s (KL {kl_ref:.4f}), "
        f"ratio {t_ref / t_ours:.1f}x"
    )


def bench_sweep(agent: str, sweep: str, workers: int, results: str) -> None:
    testbed_cli = Path(sys.executable).with_name("testbed")
    cmd = [str(testbed_cli), "sweep", "--agent", agent, "--sweep", sweep, "--quiet"]
    cmd += ["--workers", str(workers), "--results", results]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "TESTBED_PROGRESS": "off"})
    wall = time.perf_counter() - start
    from leaderboard.execution.results import load

    df = load(results)
    df = df[df["agent"] == agent]
    ok = df[df["status"] == "ok"]
    print(
        f"sweep {sweep} with {agent}: {len(df)} jobs ({len(ok)} ok), wall {wall / 60:.1f} min "
        f"on {workers} workers; per job {df['wall_seconds'].mean():.1f} s mean, "
        f"{df['wall_seconds'].median():.1f} s median"
    )
    cells = ok.groupby(["input_dim", "num_train"])
    table = cells[["wall_seconds", "train_seconds", "evaluation_seconds", "kl_estimate"]].mean()
    print(table.round(3).to_string())


def main() -> None:
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="mlp")
    parser.add_argument("--sweep", default="regression")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default="/tmp/bench_regression.db")
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()
    for d, n in ((1, 1100), (10, 2000), (100, 5000)):
        bench_draw(n, d)
    bench_estimator(args.agent)
    if not args.skip_sweep:
        bench_sweep(args.agent, args.sweep, args.workers, args.results)


if __name__ == "__main__":
    main()
