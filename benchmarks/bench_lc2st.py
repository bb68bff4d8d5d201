"""L-C2ST speed: testbed.metrics.LC2ST (1 + H classifiers trained at once) vs sbi's LC2ST.

Same data (Gaussian toy: theta ~ N(0, I), x ~ N(theta, I), an estimator with its spread
inflated by `--scale`), same classifier settings (sbi's MLP defaults: hidden (10 d_theta)^2,
adam, early stopping with patience 50, max_iter 1000), N_cal calibration pairs, H null
trials, evaluation on 10,000 draws at x_o. Prints both p-values, wall and CPU seconds, and
the ratio. `--sbi-null-trials k` times only k of sbi's H null trainings and scales that
time by H / k (printed as an extrapolation).

    .venv/bin/python benchmarks/bench_lc2st.py                      # N_cal 10,000, H 100
    .venv/bin/python benchmarks/bench_lc2st.py --sbi-null-trials 10
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-cal", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--scale", type=float, default=1.2, help="estimator spread factor")
    parser.add_argument("--sbi-null-trials", type=int, default=None)
    args = parser.parse_args()
    theta, x, post, theta_o, x_o = toy(args.num_cal, args.scale)

    from testbed.metrics import LC2ST

    start = clock()
    ours = LC2ST(theta, x, post, num_trials_null=args.trials).train()
    p_ours = ours.p_value(theta_o, x_o)
    wall, cpu = since(start)
    epochs = np.concatenate([ours.trained_clfs.n_iter, ours.trained_clfs_null.n_iter])
    print(
        f"ours: p = {p_ours:.3f}, {wall:.1f}s wall {cpu:.1f}s cpu (incl. compilation); "
        f"epochs per classifier median {np.median(epochs):.0f}, max {epochs.max()}",
        flush=True,
    )

    import torch
    from sbi.diagnostics import LC2ST as SbiLC2ST

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
    factor = args.trials / k
    r_wall = obs_wall + null_wall * factor
    r_cpu = obs_cpu + null_cpu * factor
    note = f" (null time extrapolated from {k} of {args.trials} trials)" if k < args.trials else ""
    ref_null = [c.n_iter_ for clfs in ref.trained_clfs_null.values() for c in clfs]
    print(
        f"sbi:  p = {p_ref:.3f}{' with ' + str(k) + ' trials' if note else ''}, "
        f"{r_wall:.1f}s wall {r_cpu:.1f}s cpu{note}; null epochs per classifier median "
        f"{np.median(ref_null):.0f}, max {max(ref_null)}",
        flush=True,
    )
    # early stopping makes the epoch counts random: also compare the time per null epoch
    ours_null = ours.trained_clfs_null.n_iter
    per_epoch = (null_wall / np.sum(ref_null)) / (wall / np.sum(epochs))
    print(
        f"N_cal={args.num_cal} H={args.trials}: ratio sbi / ours = {r_wall / wall:.1f}x wall, "
        f"{r_cpu / cpu:.1f}x cpu; mean null epochs ours {np.mean(ours_null):.0f} sbi "
        f"{np.mean(ref_null):.0f}, wall per epoch ratio {per_epoch:.1f}x"
    )


if __name__ == "__main__":
    main()
