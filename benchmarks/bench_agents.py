"""Training speed of the Neural Testbed agents, with ratios measured in the same run.

1. Training seconds per problem for each agent at its default config (first call, with
   compilation, and a second call on a problem of the same size, compiled code reused).
2. Our vectorized ensemble (K members in one scan) against training the K members one
   after another (K = 1 runs, compiled once), the reference's alternative.
3. sgmcmc steps per second of our single jitted scan against a jitted step called from a
   Python loop (the reference steps its SGLD optimizer from Python).
4. (`--only sgmcmc-sweep`) sgmcmc's training time over the 2021 sweep's seven training-set
   sizes at the full default chain against its legacy program (each step drawing its
   noise, every batch computed on 100 rows), and the 420-problem sweep's training hours on
   2 workers that follow.

Usage:
    .venv/bin/python benchmarks/bench_agents.py            # all three, sgmcmc 50,000 steps
    .venv/bin/python benchmarks/bench_agents.py --sgmcmc-steps 500000   # the full default
    .venv/bin/python benchmarks/bench_agents.py --only ensemble sgmcmc --members 30
    # sgmcmc-sweep (~20 min), one thread as a sweep's worker runs:
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
        .venv/bin/python benchmarks/bench_agents.py --only sgmcmc-sweep
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import agents
import generative
from agents.ensemble import train_ensemble
from agents.sgmcmc import SGMCMCConfig, _structure, sample_chain
from agents.training import Batch, batch_indices
from testbed.base import FiniteSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

PROBLEMS = ("classification_2d/75", "classification_2d/76")  # n = 10, T = 0.1 (tutorial's)


def block(sampler, x) -> None:
    """Waits for training to finish (JAX dispatches asynchronously)."""
    if isinstance(sampler, FiniteSampler):
        jax.block_until_ready(sampler.all_logits(x))
    else:
        jax.block_until_ready(sampler(x, jax.random.PRNGKey(0)))


def timed_train(name: str, problem, **overrides) -> float:
    agent = agents.load(name, **overrides)
    start = time.perf_counter()
    block(agent(problem.train_data, problem.prior_knowledge), problem.train_data.x[:2])
    return time.perf_counter() - start


def bench_training(names: list[str], sgmcmc_steps: int) -> None:
    print("1. training seconds per problem, default config (n = 10, d = 2)")
    print(f"   {'agent':<20} {'first (compile)':>16} {'second':>10}")
    first, second = (generative.load(p) for p in PROBLEMS)
    for name in names:
        overrides = {}
        if name == "sgmcmc" and sgmcmc_steps != 500_000:
            burn = sgmcmc_steps // 5
            overrides = dict(num_batches=sgmcmc_steps, burn_in_time=burn)
        t1 = timed_train(name, first, **overrides)
        t2 = timed_train(name, second, **overrides)
        note = f"  ({sgmcmc_steps:,} steps)" if name == "sgmcmc" else ""
        print(f"   {name:<20} {t1:>16.2f} {t2:>10.2f}{note}", flush=True)


def bench_ensemble(num_members: int) -> None:
    problem = generative.load(PROBLEMS[0])
    data, prior = problem.train_data, problem.prior_knowledge
    kwargs = dict(hidden=(50, 50), l2_weight_decay=1.0, adaptive=True, num_steps=1000)

    def vectorized(seed):
        block(train_ensemble(data, prior, num_members=num_members, seed=seed, **kwargs), data.x)

    def one_by_one(seed):
        for k in range(num_members):
            block(train_ensemble(data, prior, num_members=1, seed=seed + k, **kwargs), data.x)

    vectorized(0), one_by_one(0)  # compile both
    start = time.perf_counter()
    vectorized(1)
    t_vec = time.perf_counter() - start
    start = time.perf_counter()
    one_by_one(1)
    t_seq = time.perf_counter() - start
    print(
        f"2. ensemble K = {num_members}, 1000 steps (compiled): vectorized {t_vec:.2f} s, "
        f"one member after another {t_seq:.2f} s, ratio {t_seq / t_vec:.1f}x"
    )
    return {
        "case": f"ensemble, K = {num_members} members x 1000 steps (compiled)",
        "ours": f"{t_vec:.1f} s (one vectorized scan)",
        "reference": f"one member after another (as the Neural Testbed trains them): {t_seq:.1f} s",
        "ratio": record.ratio(t_seq, t_vec) + " (both use every core)",
        "agree": "",
    }


def bench_sgmcmc(num_steps: int, loop_steps: int) -> None:
    problem = generative.load(PROBLEMS[0])
    data, prior = problem.train_data, problem.prior_knowledge
    burn = num_steps // 5
    config = SGMCMCConfig(num_batches=num_steps, burn_in_time=burn)
    jax.block_until_ready(
        sample_chain(SGMCMCConfig(num_batches=2000, burn_in_time=400), data, prior)
    )  # a different (smaller) program: not reused
    start = time.perf_counter()
    snapshots = jax.block_until_ready(sample_chain(config, data, prior))
    t_scan = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(sample_chain(config, data, prior))
    t_scan_warm = time.perf_counter() - start

    # the reference's pattern: one jitted step per Python iteration
    init, loss, _ = _structure(50, prior.num_classes, prior.input_dim)
    x, y = jnp.asarray(data.x, jnp.float32), jnp.asarray(data.y, jnp.int32)
    key = jax.random.PRNGKey(0)

    @jax.jit
    def step(theta, momentum, t):
        index = batch_indices(key, t, x.shape[0], 100)
        grad = jax.grad(loss)(theta, Batch(x[index], y[index], index), 0.01)
        noise = jax.random.normal(jax.random.fold_in(key, t), theta.shape)
        momentum = 0.9 * momentum + 0.01 * grad - 0.1 * noise
        return theta - 0.01 * momentum, momentum

    theta = init(key)
    momentum = jnp.zeros_like(theta)
    theta, momentum = step(theta, momentum, 0)  # compile
    start = time.perf_counter()
    for t in range(loop_steps):
        theta, momentum = step(theta, momentum, t)
    jax.block_until_ready(theta)
    t_loop = time.perf_counter() - start
    scan_rate = num_steps / t_scan_warm
    loop_rate = loop_steps / t_loop
    print(
        f"3. sgmcmc {num_steps:,} steps, {snapshots.shape[0]} snapshots: first call "
        f"{t_scan:.1f} s, compiled {t_scan_warm:.1f} s = {scan_rate:,.0f} steps/s; "
        f"Python loop of a jitted step {loop_rate:,.0f} steps/s; ratio {scan_rate / loop_rate:.1f}x"
        f" (default 500,000 steps: {500_000 / scan_rate:.0f} s scanned, "
        f"{500_000 / loop_rate:.0f} s looped)"
    )
    return {
        "case": f"sgmcmc, {num_steps:,} steps (compiled)",
        "ours": f"{scan_rate:,.0f} steps/s (one jitted scan; first call {t_scan:.1f} s)",
        "reference": f"a Python loop of a jitted step (the Neural Testbed's pattern): "
        f"{loop_rate:,.0f} steps/s",
        "ratio": record.ratio(scan_rate, loop_rate),
        "agree": "",
    }


def bench_sgmcmc_sweep(num_steps: int) -> None:
    """sgmcmc's training over the 2021 sweep's sizes: today's program against its legacy
    form (each step drawing its noise, every batch computed on its 100 rows).

    One tau = 1 problem of each num_train (T = 0.1); the 420-problem sweep holds 60 of each,
    so its training time on 2 workers is 30x the sum of the seven. A before / after of our
    own code, printed only (the speed table compares against the reference's code)."""
    config = SGMCMCConfig(num_batches=num_steps, burn_in_time=num_steps // 5)
    short = SGMCMCConfig(num_batches=20_000, burn_in_time=4_000)
    print(f"4. sgmcmc training, {num_steps:,} steps, one problem of each 2021 num_train")
    print(f"   {'num_train':>9} {'today':>8} {'legacy':>8}")
    total, worst = {False: 0.0, True: 0.0}, 0.0
    for j in range(7):  # problem 60 j + 20: num_train block j, T = 0.1, tau = 1
        problem = generative.load(f"classification_2d_2021/{60 * j + 20}")
        data, prior = problem.train_data, problem.prior_knowledge
        seconds = {}
        for legacy in (False, True):
            jax.block_until_ready(sample_chain(short, data, prior, legacy))  # compile
            start = time.perf_counter()
            jax.block_until_ready(sample_chain(config, data, prior, legacy))
            seconds[legacy] = time.perf_counter() - start
            total[legacy] += seconds[legacy]
        a, b = (np.asarray(sample_chain(short, data, prior, legacy)) for legacy in (False, True))
        worst = max(worst, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
        n = prior.num_train
        print(f"   {n:>9} {seconds[False]:>7.1f}s {seconds[True]:>7.1f}s", flush=True)
    hours = {k: 30 * v / 3600 for k, v in total.items()}
    print(
        f"   420-problem sweep, training on 2 workers: {hours[False]:.2f} h today, "
        f"{hours[True]:.2f} h legacy ({total[True] / total[False]:.2f}x); snapshots of a "
        f"20,000-step chain agree within {worst:.1e} (relative to the largest weight)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["training", "ensemble", "sgmcmc"])
    parser.add_argument("--agents", nargs="*", default=None)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--sgmcmc-steps", type=int, default=50_000)
    parser.add_argument("--loop-steps", type=int, default=5_000)
    parser.add_argument("--sweep-steps", type=int, default=500_000)
    parser.add_argument("--no-record", action="store_true")
    args = record.arguments(parser)
    meter, rows = record.Meter(), []
    names = args.agents or [
        "mlp", "logistic_regression", "ensemble", "ensemble+", "dropout", "sgmcmc", "bbb",
        "hypermodel", "epinet", "deep_kernel", "knn", "random_forest",
    ]  # fmt: skip
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; numpy {np.__version__}")
    if "training" in args.only:
        bench_training(names, args.sgmcmc_steps)
    if "ensemble" in args.only:
        rows.append(bench_ensemble(args.members))
    if "sgmcmc" in args.only:
        rows.append(bench_sgmcmc(args.sgmcmc_steps, args.loop_steps))
    if "sgmcmc-sweep" in args.only:
        bench_sgmcmc_sweep(args.sweep_steps)
    if rows and not args.no_record:
        record.save(__file__, rows, meter)


if __name__ == "__main__":
    main()
