"""Amortized SBI: one training scored at ten observations, against one observation and
against ten separate trainings (what a sweep did before training was shared).

`npe` (the SBI benchmark's default config) on `sbi/two_moons/<budget>/k`: training,
10,000 posterior draws and the problem's metrics (C2ST, ...) at each observation. The
target (issue 17): ten observations cost at most 1.5x one.

Usage:
    .venv/bin/python benchmarks/bench_amortized.py                 # budget 1,000
    .venv/bin/python benchmarks/bench_amortized.py --one-by-one    # also 10 trainings
"""

from __future__ import annotations

import argparse
import time

import agents
import generative
from testbed import evaluate, evaluate_many


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="two_moons")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--agent", default="npe", help="an amortized agent: npe, nle or nre")
    parser.add_argument("--one-by-one", action="store_true", help="also ten separate trainings")
    args = parser.parse_args()
    agent = agents.load(args.agent, torch_threads=1)
    problems = [generative.load(f"sbi/{args.task}/{args.budget}/{k}") for k in range(1, 11)]
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
