"""Speed of the joint-KL evaluation against the reference's algorithm, in one run.

The reference (neural_testbed `CategoricalKLSampledXSampledY`) maps over the M sampler
keys separately for every one of the N test batches. Ours applies each key once to all
N * tau inputs (jitted, chunked `lax.map`) and evaluates a K-member ensemble once per
member. Each case is timed in fresh processes (the first problem of a shape, as a
script or notebook meets it; imports and the test batches apart):

- reference: first call (it compiles; JAX's cache is off, as in the reference) and a
  second call in the same process (warm);
- ours cold: first call with an empty compilation cache;
- ours cached: first call with that cache warm (testbed's default cache, see
  testbed/compilation_cache.py), and a second call in the same process (warm).

Prints the seconds of each and the ratios reference / ours (cold and cached against the
reference's first call, warm against its second). Usage:

    .venv/bin/python benchmarks/bench_joint_kl.py [--num-batches 1000] [--num-samples 1000]
    .venv/bin/python benchmarks/bench_joint_kl.py --full-sweep   # classification_2d, uniform
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import agents
import generative
import testbed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

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


def timed(fn, *args, calls: int = 2):
    """(output, [seconds of each call]); the first call includes compilation."""
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        seconds.append(time.perf_counter() - start)
    return out, seconds


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


CASES = (
    "opaque sampler (100-member MLP)",
    "fresh MLP per key (prior agent)",
    "FiniteSampler (K=100 members)",
)


def worker(args) -> None:
    """One fresh process: the test batches, then `args.calls` timed calls of one case's
    reference or ours; one JSON line out (the batch log-likelihoods' sum to compare)."""
    problem = generative.load("classification_2d/250")
    x, y, env_ll = problem.test_batches(jax.random.PRNGKey(0), args.num_batches, args.tau)
    keys = sample_keys(jax.random.PRNGKey(1), args.num_samples)
    ensemble, member_sampler, fresh_sampler = make_samplers(100)
    ref_sampler, our_sampler = {
        CASES[0]: (member_sampler, member_sampler),
        CASES[1]: (fresh_sampler, fresh_sampler),
        CASES[2]: (member_sampler, ensemble),
    }[CASES[args.case]]
    if args.worker == "ref":
        out, seconds = timed(reference_loop, ref_sampler, x, y, keys, calls=args.calls)
    else:
        out, seconds = timed(joint_log_likelihoods, our_sampler, x, y, keys, calls=args.calls)
    kl = summarize_kl(env_ll, out)["kl_estimate"]
    print(json.dumps({"seconds": seconds, "kl": kl, "loglik": np.asarray(out).tolist()}))


def fresh(args, kind: str, case: int, calls: int, cache: str) -> dict:
    """Runs `worker` in a new process with TESTBED_JAX_CACHE=cache."""
    env = record.cache_env(cache)
    cmd = [
        sys.executable, __file__, "--worker", kind, "--case", str(case), "--calls", str(calls),
        "--num-batches", str(args.num_batches), "--num-samples", str(args.num_samples),
        "--tau", str(args.tau),
    ]  # fmt: skip
    return record.run_worker(cmd, env, f"{kind} worker")


def bench_estimator(args) -> None:
    meter, rows = record.Meter(), []
    print(f"joint KL, N={args.num_batches} batches x M={args.num_samples} samples, tau={args.tau}")
    print("seconds of one evaluation in a fresh process; ratio = reference / ours")
    print(
        f"{'sampler':<34}{'ref first':>10}{'ref warm':>9} |{'ours cold':>10}{'ratio':>7} |"
        f"{'cached':>7}{'ratio':>7} |{'warm':>6}{'ratio':>7}"
    )
    for case, name in enumerate(CASES):
        ref = fresh(args, "ref", case, 2, "off")
        with tempfile.TemporaryDirectory(prefix="bench-kl-cache-") as cache:
            cold = fresh(args, "ours", case, 1, cache)
            cached = fresh(args, "ours", case, 2, cache)
        np.testing.assert_allclose(ref["loglik"], cached["loglik"], rtol=1e-4, atol=1e-4)
        r_first, r_warm = ref["seconds"]
        ours_cold, (ours_cached, ours_warm) = cold["seconds"][0], cached["seconds"]
        print(
            f"{name:<34}{r_first:>9.2f}s{r_warm:>8.2f}s |{ours_cold:>9.2f}s"
            f"{r_first / ours_cold:>6.1f}x |{ours_cached:>6.2f}s{r_first / ours_cached:>6.1f}x |"
            f"{ours_warm:>5.2f}s{r_warm / ours_warm:>6.1f}x  (KL {cached['kl']:.4f})",
            flush=True,
        )
        rows.append(
            {
                "case": f"joint KL, tau = {args.tau}, N = {args.num_batches}, "
                f"M = {args.num_samples}: {name}",
                "ours": f"{ours_warm:.2f} s warm, {ours_cached:.2f} s cached, {ours_cold:.2f} s "
                "cold",
                "reference": f"the Neural Testbed's algorithm (per-batch lax.map over the M keys, "
                f"written out: neural_testbed pins TF 2.8 and cannot be installed): "
                f"{r_warm:.2f} s warm, {r_first:.2f} s first call",
                "ratio": f"{record.ratio(r_warm, ours_warm)} warm, "
                f"{record.ratio(r_first, ours_cached)} cached, {record.ratio(r_first, ours_cold)}"
                " cold (wall)",
                "agree": f"the same batch log-likelihoods (1e-4); KL {cached['kl']:.4f}",
            }
        )
    if not args.no_record:
        record.save(__file__, rows, meter)


def bench_full_sweep(sweep: str, agent: str, save: bool) -> None:
    meter = record.Meter()
    ids = generative.sweep_ids(sweep)
    start = time.perf_counter()
    for problem_id in ids:
        testbed.evaluate(agents.load(agent), generative.load(problem_id))
    total = time.perf_counter() - start
    print(
        f"full {sweep} ({len(ids)} problems) with {agent}: {total:.1f} s "
        f"({total / len(ids):.2f} s per problem, load + train + evaluate)"
    )
    row = {
        "case": f"the whole {sweep} sweep ({len(ids)} problems) with {agent}, one process",
        "ours": f"{total:.0f} s ({total / len(ids):.2f} s a problem: load, train, evaluate)",
        "reference": "none run: the Neural Testbed (TF 2.8 pins) cannot be installed here",
        "ratio": "none (the earlier 5x was against an older version of this project)",
        "agree": "",
    }
    if save:
        record.save(__file__, [row], meter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-batches", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--full-sweep", action="store_true")
    parser.add_argument("--sweep", default="classification_2d")
    parser.add_argument("--agent", default="uniform")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--worker", choices=("ref", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("--case", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=2, help=argparse.SUPPRESS)
    args = record.arguments(parser)
    if args.worker:
        worker(args)
    elif args.full_sweep:
        bench_full_sweep(args.sweep, args.agent, not args.no_record)
    else:
        bench_estimator(args)


if __name__ == "__main__":
    main()
