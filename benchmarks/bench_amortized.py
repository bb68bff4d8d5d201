"""Amortized SBI: one training scored at ten observations, against one observation and
against ten separate trainings (what a sweep did before training was shared).

`npe` (the SBI benchmark's default config) on `sbi/two_moons/<budget>/k`: training,
10,000 posterior draws and the problem's metrics (C2ST, ...) at each observation. The
target (issue 17): ten observations cost at most 1.5x one.

`--sampling` times only the posterior draws of `nle` / `nre` (sbi's slice-sampling MCMC,
the benchmark's settings): 10,000 draws at each of the ten observations one after another
(what `evaluate` does) against one batched MCMC call over the ten (what `evaluate_many`
does, `testbed.evaluate.presample`); `--c2st` adds each observation's C2ST of the batched
draws against the one-by-one draws and of both against the reference posterior.

Usage:
    .venv/bin/python benchmarks/bench_amortized.py                 # budget 1,000
    .venv/bin/python benchmarks/bench_amortized.py --one-by-one    # also 10 trainings
    .venv/bin/python benchmarks/bench_amortized.py --agent nle --sampling [--c2st]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import agents
import generative
from testbed import evaluate, evaluate_many
from testbed.metrics import c2st
from testbed.posterior_adapter import as_posterior


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def time_sampling(args, agent, problems) -> None:
    """NLE / NRE draws at the observations: one after another against one batched call."""
    t_train, post = timed(lambda: agent(problems[0].train_data, problems[0].prior_knowledge))
    requests = [p.sample_request._replace(num_samples=args.num_samples) for p in problems]
    one_by_one = as_posterior(post)
    if not one_by_one.can_sample_many:
        raise SystemExit(f"{args.agent}: its posterior cannot draw at several x in one call")
    seconds, one = [], []
    for r in requests:
        t, draws = timed(lambda r=r: one_by_one.sample(*r))
        seconds.append(t)
        one.append(draws)
    batched = as_posterior(post)
    t_batched = batched.presample(requests)
    many = [batched.sample_timed(*r)[0] for r in requests]
    n, num = len(problems), requests[0].num_samples
    print(
        f"{args.agent} on {args.task}, {args.budget} simulations (1 torch thread), "
        f"{num:,} draws at each of {n} observations (training {t_train:.1f} s)"
    )
    print(
        f"  one after another: {sum(seconds):7.1f} s ({np.mean(seconds):.1f} s each, "
        f"{min(seconds):.1f}-{max(seconds):.1f})"
    )
    print(f"  one batched call:  {t_batched:7.1f} s ({t_batched / n:.1f} s an observation)")
    print(f"  ratio one after another / batched: {sum(seconds) / t_batched:.2f}x")
    if args.c2st:
        print("  k   c2st(batched, one)  c2st(one, ref)  c2st(batched, ref)")
        for k, (p, a, b) in enumerate(zip(problems, one, many), start=1):
            ref = p.reference_samples()
            print(f"  {k:<3} {c2st(a, b):18.3f} {c2st(ref, a):15.3f} {c2st(ref, b):19.3f}")


def main() -> None:
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="two_moons")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--agent", default="npe", help="an amortized agent: npe, nle or nre")
    parser.add_argument("--one-by-one", action="store_true", help="also ten separate trainings")
    parser.add_argument(
        "--sampling", action="store_true", help="nle / nre: draws batched vs one by one only"
    )
    parser.add_argument("--c2st", action="store_true", help="with --sampling: C2ST agreement")
    parser.add_argument(
        "--num-samples", type=int, default=10_000, help="with --sampling: draws per observation"
    )
    args = parser.parse_args()
    agent = agents.load(args.agent, torch_threads=1)
    problems = [generative.load(f"sbi/{args.task}/{args.budget}/{k}") for k in range(1, 11)]
    if args.sampling:
        return time_sampling(args, agent, problems)
    for p in problems:  # reference draws are cached per problem: not part of the timing
        p.reference_samples()

    t_one, one = timed(lambda: evaluate(agent, problems[0]))
    t_ten, ten = timed(lambda: evaluate_many(agent, problems))
    train = ten[0]["train_seconds"]
    scoring = sum(q["evaluation_seconds"] for q in ten) / len(ten)
    sampling = sum(q["sampling_seconds"] for q in ten) / len(ten)
    print(f"{args.agent} on {args.task}, {args.budget} simulations (1 torch thread)")
    print(f"  1 observation:          {t_one:7.1f} s (train {one['train_seconds']:.1f} s)")
    print(f"  10 observations shared: {t_ten:7.1f} s (train {train:.1f} s, {scoring:.1f} s each")
    print("                          scoring: sampling + C2ST, MMD, NLTP, ...)")
    print(f"  ratio 10 shared / 1:    {t_ten / t_one:7.2f}x (target <= 1.5x)")
    algo_one = one["train_seconds"] + one["sampling_seconds"]
    algo_ten = train + sampling * len(ten)
    print(
        f"  train + sampling only:  {algo_ten / algo_one:7.2f}x ({algo_ten:.1f} s vs "
        f"{algo_one:.1f} s; {sampling:.2f} s a sampling)"
    )
    shown = ", ".join(f"{q['c2st']:.3f}" for q in ten)
    print(f"  c2st at k = 1..10: {shown}")
    if args.one_by_one:
        t_sep, _ = timed(lambda: [evaluate(agent, p) for p in problems])
        print(f"  10 separate trainings:  {t_sep:7.1f} s: shared is {t_sep / t_ten:.1f}x faster")


if __name__ == "__main__":
    main()
