"""L-C2ST speed: testbed.metrics.LC2ST (1 + H classifiers trained at once) vs sbi's LC2ST.

Same data (Gaussian toy: theta ~ N(0, I), x ~ N(theta, I), an estimator with its spread
inflated by `--scale`), same classifier settings (sbi's MLP defaults: hidden (10 d_theta)^2,
adam, early stopping with patience 50, max_iter 1000), N_cal calibration pairs, H null
trials, evaluation on 10,000 draws at x_o. One call = train the 1 + H classifiers and
compute the p-value at x_o. Ours in three columns, each against sbi in the same run:

- cold: first call in a fresh process with an empty compilation cache;
- cached: first call in a fresh process whose compilation cache is warm (testbed's
  default cache, see testbed/compilation_cache.py);
- warm: a second call (a new LC2ST on the same data) in that process.

Our fresh-process cases run in subprocesses (imports timed apart, not in the ratios).
sbi runs in this process (it compiles nothing) with torch's default threads
(`--sbi-threads n` sets n). `--sbi-null-trials k` times only k of its H null trainings and
scales that time by H / k (printed as an extrapolation). Prints both
p-values, wall and CPU seconds, the ratios and the time per epoch (early stopping makes
epoch counts random).

    .venv/bin/python benchmarks/bench_lc2st.py                      # N_cal 10,000, H 100
    .venv/bin/python benchmarks/bench_lc2st.py --sbi-null-trials 10
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402


def toy(n: int, scale: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((n, 2)).astype(np.float32)
    x = (theta + rng.standard_normal((n, 2))).astype(np.float32)
    sd = scale * np.sqrt(0.5)
    post = (x / 2 + sd * rng.standard_normal((n, 2))).astype(np.float32)
    x_o = np.array([0.5, -0.5], np.float32)
    theta_o = (x_o / 2 + sd * rng.standard_normal((10_000, 2))).astype(np.float32)
    return theta, x, post, theta_o, x_o


def clock():
    return time.perf_counter(), time.process_time()


def since(start):
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def worker(args) -> None:
    """One fresh process: import, then `args.calls` timed calls; one JSON line out."""
    start = time.perf_counter()
    from testbed.metrics import LC2ST

    imported = time.perf_counter() - start
    theta, x, post, theta_o, x_o = toy(args.num_cal, args.scale)
    out = {"import": imported, "wall": [], "cpu": []}
    for _ in range(args.calls):
        t = clock()
        test = LC2ST(theta, x, post, num_trials_null=args.trials).train()
        out["p_value"] = test.p_value(theta_o, x_o)
        out["statistic"] = float(test.get_statistic_on_observed_data(theta_o, x_o))
        wall, cpu = since(t)
        out["wall"].append(wall)
        out["cpu"].append(cpu)
        epochs = np.concatenate([test.trained_clfs.n_iter, test.trained_clfs_null.n_iter])
        out["epochs"] = int(np.sum(epochs))
        out["null_epochs"] = test.trained_clfs_null.n_iter.tolist()
    print(json.dumps(out), flush=True)


def fresh(args, calls: int, cache: str) -> dict:
    """Runs `worker` in a new process with TESTBED_JAX_CACHE=cache."""
    env = record.cache_env(cache)
    cmd = [
        sys.executable, __file__, "--worker", "--num-cal", str(args.num_cal),
        "--trials", str(args.trials), "--scale", str(args.scale), "--calls", str(calls),
    ]  # fmt: skip
    return record.run_worker(cmd, env)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-cal", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--scale", type=float, default=1.2, help="estimator spread factor")
    parser.add_argument("--sbi-null-trials", type=int, default=None)
    parser.add_argument("--sbi-threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def reference(args) -> dict:
    """sbi's LC2ST on the same toy: its p-value and statistic, seconds (wall, CPU; the
    null trainings extrapolated to --trials when fewer ran) and null epochs."""
    import torch
    from sbi.diagnostics import LC2ST as SbiLC2ST

    if args.sbi_threads > 0:
        torch.set_num_threads(args.sbi_threads)

    theta, x, post, theta_o, x_o = toy(args.num_cal, args.scale)
    k = args.sbi_null_trials or args.trials
    t = lambda a: torch.as_tensor(np.array(a))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = clock()
        ref = SbiLC2ST(t(theta), t(x), t(post), num_trials_null=k)
        ref.train_on_observed_data(verbosity=0)
        obs_wall, obs_cpu = since(start)
        start = clock()
        ref.train_under_null_hypothesis(verbosity=0)
        null_wall, null_cpu = since(start)
        p_ref = ref.p_value(t(theta_o), t(x_o))
        stat_ref = float(ref.get_statistic_on_observed_data(t(theta_o), t(x_o)))
    factor = args.trials / k
    return {
        "k": k, "p": p_ref, "statistic": stat_ref, "null_wall": null_wall,
        "wall": obs_wall + null_wall * factor, "cpu": obs_cpu + null_cpu * factor,
        "null_epochs": [c.n_iter_ for clfs in ref.trained_clfs_null.values() for c in clfs],
    }  # fmt: skip


def _row(args, cold: dict, cached: dict, sbi: dict) -> dict:
    """The speed table's row: ours (cold, cached, warm) beside sbi's LC2ST."""
    warm, r_wall, r_cpu, ref_null = cached["wall"][1], sbi["wall"], sbi["cpu"], sbi["null_epochs"]
    per_epoch = (sbi["null_wall"] / np.sum(ref_null)) / (warm / cached["epochs"])
    p_ref, stat_ref = sbi["p"], sbi["statistic"]
    same = (cached["p_value"] < 0.05) == (p_ref < 0.05)
    return {
        "case": f"L-C2ST, 1 + {args.trials} classifiers, N_cal = {args.num_cal:,} (2-d toy, "
        f"spread x{args.scale})",
        "ours": f"{warm:.1f} s warm, {cached['wall'][0]:.1f} s cached, {cold['wall'][0]:.1f} s "
        f"cold (wall); CPU {cached['cpu'][1]:.1f} s warm; null epochs median "
        f"{np.median(cached['null_epochs']):.0f}",
        "reference": f"sbi's LC2ST (its defaults; sklearn MLP), all {args.trials} null trainings "
        f"timed: {r_wall:.0f} s wall, {r_cpu:.0f} s CPU; null epochs median "
        f"{np.median(ref_null):.0f}, max {max(ref_null)}",
        "ratio": f"{record.ratio(r_wall, warm)} warm, {record.ratio(r_wall, cached['wall'][0])} "
        f"cached, {record.ratio(r_wall, cold['wall'][0])} cold (wall); "
        f"{record.ratio(r_cpu, cached['cpu'][1])} CPU warm; {per_epoch:.1f}x wall per epoch",
        "agree": f"p {cached['p_value']:.2f} vs {p_ref:.2f}, T {cached['statistic']:.3f} vs "
        f"{stat_ref:.3f} ({'same decision' if same else 'DIFFERENT decisions'} at 0.05)",
    }


def main() -> None:
    args = record.arguments(_parser())
    if args.worker:
        worker(args)
        return

    meter = record.Meter()
    with tempfile.TemporaryDirectory(prefix="bench-lc2st-cache-") as cache:
        cold = fresh(args, 1, cache)
        cached = fresh(args, 2, cache)
    print(
        f"ours: p = {cached['p_value']:.3f}; cold {cold['wall'][0]:.1f}s wall "
        f"{cold['cpu'][0]:.1f}s cpu, cached {cached['wall'][0]:.1f}s wall "
        f"{cached['cpu'][0]:.1f}s cpu, warm {cached['wall'][1]:.1f}s wall "
        f"{cached['cpu'][1]:.1f}s cpu (import {cold['import']:.1f}s apart); epochs per "
        f"classifier median {np.median(cached['null_epochs']):.0f}, max "
        f"{max(cached['null_epochs'])}",
        flush=True,
    )

    sbi = reference(args)
    k, p_ref, stat_ref, null_wall = sbi["k"], sbi["p"], sbi["statistic"], sbi["null_wall"]
    r_wall, r_cpu, ref_null = sbi["wall"], sbi["cpu"], sbi["null_epochs"]
    note = f" (null time extrapolated from {k} of {args.trials} trials)" if k < args.trials else ""
    print(
        f"sbi:  p = {p_ref:.3f}{' with ' + str(k) + ' trials' if note else ''}, "
        f"{r_wall:.1f}s wall {r_cpu:.1f}s cpu{note}; null epochs per classifier median "
        f"{np.median(ref_null):.0f}, max {max(ref_null)}",
        flush=True,
    )
    # early stopping makes the epoch counts random: also compare the time per null epoch
    warm = cached["wall"][1]
    per_epoch = (null_wall / np.sum(ref_null)) / (warm / cached["epochs"])
    print(
        f"N_cal={args.num_cal} H={args.trials}: ratio sbi / ours = "
        f"{r_wall / cold['wall'][0]:.1f}x cold, {r_wall / cached['wall'][0]:.1f}x cached, "
        f"{r_wall / warm:.1f}x warm (wall); {r_cpu / cached['cpu'][1]:.1f}x cpu warm; mean "
        f"null epochs ours {np.mean(cached['null_epochs']):.0f} sbi {np.mean(ref_null):.0f}, "
        f"wall per epoch ratio {per_epoch:.1f}x (warm)"
    )
    same = (cached["p_value"] < 0.05) == (p_ref < 0.05)
    print(
        f"observed statistic ours {cached['statistic']:.4f} sbi {stat_ref:.4f}; both "
        f"{'reject' if p_ref < 0.05 else 'keep'} at 0.05: {same}"
    )
    if note or args.no_record:
        return
    record.save(__file__, [_row(args, cold, cached, sbi)], meter)


if __name__ == "__main__":
    main()
