"""Wall time per SBI run (simulate + train + draw 10,000 posterior samples) for each agent.

Usage: .venv/bin/python benchmarks/bench_sbi_agents.py [--agents npe rej_abc ...]
       [--tasks two_moons gaussian_linear] [--budget 10000] [--observation 1] [--c2st]

Prints, per task and agent, our wall time next to the SBI benchmark's published median
runtime where our reference notes have it (main_paper.csv RT, minutes, one CPU, AWS;
/work/shared/reference/sbibm_and_sbi.md A5). Our ABC agents replace sbi's MCABC / SMCABC:
for them the same run also times sbi's implementation with the same settings and prints
the ratio sbi / ours. The neural agents *are* sbi (wrapped), so there is nothing to
replace; their line shows the published runtime only. torch runs on one thread, as in
the benchmark. `cpu` is this process's CPU time: the fairer single-CPU figure when other
jobs share the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

# Published median RT in minutes at 10^4 simulations (two_moons; only these are in our notes).
PUBLISHED_MINUTES = {
    ("two_moons", 10_000): {"npe": 6.0, "snpe": 16.4, "nle": 6.8, "rej_abc": 0.02},
}
ALL_AGENTS = ("npe", "snpe", "nle", "snle", "nre", "snre", "rej_abc", "smc_abc")


def time_ours(agent_name: str, problem, num_samples: int) -> tuple[float, float, np.ndarray]:
    """(wall seconds, CPU seconds of this process, samples) for one full run."""
    import agents

    start, cpu = time.perf_counter(), time.process_time()
    post = agents.load(agent_name)(problem.train_data, problem.prior_knowledge)
    samples = post.sample(problem.x_o, num_samples, seed=0)
    return time.perf_counter() - start, time.process_time() - cpu, samples


def quiet(fn, *args):
    """fn(*args) with sbi's progress prints (stdout) and bars (stderr) kept out of the table."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args)


def time_sbi_abc(agent_name: str, problem, num_samples: int):
    """sbi's MCABC / SMCABC with the benchmark's settings on the same budgeted simulator."""
    import torch
    from sbi.inference import MCABC, SMCABC

    from agents.sbi_torch import make_torch_prior, make_torch_simulator

    access = problem.train_data
    prior = make_torch_prior(access, problem.prior_knowledge)
    simulator = make_torch_simulator(access, problem.prior_knowledge)
    x_o = torch.as_tensor(np.asarray(problem.x_o, np.float32))
    budget = access.budget
    start = time.perf_counter()
    if agent_name == "rej_abc":
        method = MCABC(simulator, prior, distance="l2", simulation_batch_size=1000)
        kde = method(x_o, budget, quantile=100 / budget, kde=True, kde_kwargs={"bandwidth": "cv"})
        samples = kde.sample(num_samples)
    else:
        pop = 1000 if budget > 10_000 else 100
        method = SMCABC(
            simulator, prior, distance="l2", simulation_batch_size=1000, algorithm_variant="C"
        )
        kde = method(
            x_o,
            num_particles=pop,
            num_initial_pop=int(np.clip(5 * pop, pop, max(0.5 * budget, pop))),
            num_simulations=budget,
            epsilon_decay=0.2,
            distance_based_decay=True,
            kernel_variance_scale=0.5,
            use_last_pop_samples=True,
            kde=True,
            kde_kwargs={"bandwidth": "cv"},
            kde_sample_weights=True,
        )
        samples = kde.sample(num_samples)
    return time.perf_counter() - start, np.asarray(samples, np.float32)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=list(ALL_AGENTS), choices=ALL_AGENTS)
    parser.add_argument("--tasks", nargs="+", default=["two_moons", "gaussian_linear"])
    parser.add_argument("--budget", type=int, default=10_000, choices=(1_000, 10_000, 100_000))
    parser.add_argument("--observation", type=int, default=1)
    parser.add_argument("--num-samples", type=int, default=10_000)
    parser.add_argument("--c2st", action="store_true", help="also score C2ST (not timed)")
    parser.add_argument("--no-record", action="store_true")
    return parser


def main() -> None:
    args = record.arguments(_parser())
    meter, rows = record.Meter(), []

    import torch

    import generative
    from testbed import metrics

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"budget {args.budget}, observation {args.observation}, {args.num_samples} samples")
    print(
        f"{'task':<18}{'agent':<9}{'ours [min]':>11}{'cpu [min]':>10}{'published [min]':>16}"
        f"{'sbi impl [min]':>15}{'sbi/ours':>9}{'c2st':>7}"
    )
    for task in args.tasks:
        for name in args.agents:
            pid = f"sbi/{task}/{args.budget}/{args.observation}"
            ours, cpu, samples = quiet(time_ours, name, generative.load(pid), args.num_samples)
            published = PUBLISHED_MINUTES.get((task, args.budget), {}).get(name)
            ref = ratio = ""
            their_samples = None
            if name in ("rej_abc", "smc_abc"):
                theirs, their_samples = quiet(
                    time_sbi_abc, name, generative.load(pid), args.num_samples
                )
                ref, ratio = f"{theirs / 60:.3f}", f"{theirs / ours:.1f}"
            c2st = agree = ""
            if args.c2st:
                problem = generative.load(pid)
                c2st = f"{metrics.c2st(problem.reference_samples(), samples):.3f}"
                if their_samples is not None:
                    c2st_sbi = metrics.c2st(problem.reference_samples(), their_samples)
                    agree = f"C2ST against the reference {c2st} (ours) vs {c2st_sbi:.3f} (sbi)"
            if their_samples is not None:
                rows.append(
                    {
                        "case": f"{name} on {task}, {args.budget:,} simulations, "
                        f"{args.num_samples:,} draws (simulate + run + sample)",
                        "ours": f"{ours:.2f} s wall, {cpu:.2f} s CPU",
                        "reference": f"sbi's {'MCABC' if name == 'rej_abc' else 'SMCABC'} with "
                        f"the benchmark's settings, same simulator: {theirs:.2f} s wall",
                        "ratio": record.ratio(theirs, ours) + " wall (both one torch thread)",
                        "agree": agree,
                    }
                )
            pub = f"{published:.2f}" if published is not None else "n/a"
            print(
                f"{task:<18}{name:<9}{ours / 60:>11.3f}{cpu / 60:>10.3f}{pub:>16}{ref:>15}"
                f"{ratio:>9}{c2st:>7}",
                flush=True,
            )
    if rows and not args.no_record:
        record.save(__file__, rows, meter)


if __name__ == "__main__":
    main()
