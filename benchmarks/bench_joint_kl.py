"""Speed of the joint-KL evaluation against the reference's algorithm, in one run.

The reference (neural_testbed `CategoricalKLSampledXSampledY`) maps over the M sampler
keys separately for every one of the N test batches. Ours applies each key once to all
N * tau inputs (jitted, chunked `lax.map`) and evaluates a K-member ensemble once per
member. Prints the seconds of each and the ratio. Usage:

    .venv/bin/python benchmarks/bench_joint_kl.py [--num-batches 1000] [--num-samples 1000]
    .venv/bin/python benchmarks/bench_joint_kl.py --full-sweep   # classification_2d, uniform
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import agents
import generative
import testbed
from testbed.base import FiniteSampler
from testbed.joint_kl import joint_log_likelihoods, sample_keys, summarize_kl
from testbed.random_mlp import make_random_mlp


@functools.partial(jax.jit, static_argnums=0)
def _reference_batch(sampler, xb, yb, keys):
    logits = jax.lax.map(lambda k: sampler(xb, k), keys)  # [M, tau, C]
    log_probs = jax.nn.log_softmax(logits)
    s = jnp.take_along_axis(log_probs, yb[None, :, None], axis=2)[..., 0].sum(-1)
    return jax.nn.logsumexp(s) - jnp.log(keys.shape[0])


def reference_loop(sampler, x, y, keys):
    """The reference's algorithm: for each test batch, lax.map the sampler over M keys."""
    return jnp.stack([_reference_batch(sampler, x[i], y[i], keys) for i in range(x.shape[0])])


def timed(fn, *args):
    """(output, seconds of the first call incl. compilation, seconds of a second call)."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    cold = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, cold, time.perf_counter() - start


def make_samplers(num_members: int):
    net = make_random_mlp(2, 2)
    params = jax.vmap(lambda k: net.init(k, jnp.zeros((1, 2))))(
        jax.random.split(jax.random.PRNGKey(0), num_members)
    )
    all_logits = lambda x: jax.vmap(lambda p: net.apply(p, x))(params)  # noqa: E731
    ensemble = FiniteSampler(all_logits, num_members)

    def member_sampler(x, key):  # the same ensemble seen as an opaque sampler
        p = jax.tree.map(lambda a: a[ensemble.index(key)], params)
        return net.apply(p, x)

    def fresh_sampler(x, key):  # a new random function per key (like the prior agent)
        return net.apply(net.init(key, x[:1]), x)

    return ensemble, member_sampler, fresh_sampler


def bench_estimator(num_batches: int, num_samples: int, tau: int) -> None:
    problem = generative.load("classification_2d/250")
    x, y, env_ll = problem.test_batches(jax.random.PRNGKey(0), num_batches, tau)
    keys = sample_keys(jax.random.PRNGKey(1), num_samples)
    ensemble, member_sampler, fresh_sampler = make_samplers(100)
    print(f"joint KL, N={num_batches} batches x M={num_samples} samples, tau={tau}")
    print("seconds for one evaluation; cold = first call incl. compilation (as in a sweep)")
    print(
        f"{'sampler':<34}{'ref cold':>9}{'ours cold':>10}{'ratio':>7}"
        f"{'ref warm':>10}{'ours warm':>10}{'ratio':>7}"
    )
    cases = [
        ("opaque sampler (100-member MLP)", member_sampler, member_sampler),
        ("fresh MLP per key (prior agent)", fresh_sampler, fresh_sampler),
        ("FiniteSampler (K=100 members)", member_sampler, ensemble),
    ]
    for name, ref_sampler, our_sampler in cases:
        ref, ref_cold, ref_warm = timed(reference_loop, ref_sampler, x, y, keys)
        ours, our_cold, our_warm = timed(joint_log_likelihoods, our_sampler, x, y, keys)
        np.testing.assert_allclose(ref, ours, rtol=1e-4, atol=1e-4)
        kl = summarize_kl(env_ll, ours)["kl_estimate"]
        print(
            f"{name:<34}{ref_cold:>9.2f}{our_cold:>10.2f}{ref_cold / our_cold:>6.1f}x"
            f"{ref_warm:>10.2f}{our_warm:>10.2f}{ref_warm / our_warm:>6.1f}x  (KL {kl:.4f})"
        )


def bench_full_sweep(sweep: str, agent: str) -> None:
    ids = generative.sweep_ids(sweep)
    start = time.perf_counter()
    for problem_id in ids:
        testbed.evaluate(agents.load(agent), generative.load(problem_id))
    total = time.perf_counter() - start
    print(
        f"full {sweep} ({len(ids)} problems) with {agent}: {total:.1f} s "
        f"({total / len(ids):.2f} s per problem, load + train + evaluate)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-batches", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--full-sweep", action="store_true")
    parser.add_argument("--sweep", default="classification_2d")
    parser.add_argument("--agent", default="uniform")
    args = parser.parse_args()
    if args.full_sweep:
        bench_full_sweep(args.sweep, args.agent)
    else:
        bench_estimator(args.num_batches, args.num_samples, args.tau)


if __name__ == "__main__":
    main()
