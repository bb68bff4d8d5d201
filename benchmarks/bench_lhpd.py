"""local-HPD speed and agreement: testbed.metrics.LocalHPD (all 11 x (1 + H) regressions
trained at once) vs the authors' procedure with scikit-learn (JuliaLinhart/lc2st,
lhpd.py: one MLPClassifier(hidden (100,), alpha=0, max_iter=25000) a level and a trial).

Data as the L-C2ST appendix's 10-d tasks: theta ~ U(-1, 1)^d, x = theta + 0.1 eps; the
estimator q(. | x) = N(x, (0.1 s(x))^2 I) with a spread s(x) = 1 + 0.2 tanh(2 x_1) that is
wrong by an amount that depends on x (so the test has something local to find); HPD values
of the N_cal calibration pairs from L = 1,000 draws of q. Both sides regress the same HPD
values on the same x at the same levels; ours also trains its H null trials, the
reference `--sklearn-null-trials k` of them (their time scaled by H / k, printed as an
extrapolation). Agreement: at each of 10 observations, the two observed statistics T
(beside scikit-learn's own T from a second seed: its seed-to-seed spread is the yardstick)
and the decisions at 0.05 when each T is set against our null (the null is a property of
the procedure, not of the library), and the two nulls' mean statistics. Timed whole in
one run, ours first (its JIT compilation included), both single-process: wall and CPU
seconds.

    .venv/bin/python benchmarks/bench_lhpd.py                      # N_cal 10,000, H 100
    .venv/bin/python benchmarks/bench_lhpd.py --num-cal 2000 --trials 20 --no-record
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

NOISE = 0.1
NUM_DRAWS = 1_000  # the authors' L
NUM_OBS = 10
NUM_LEVELS = 11  # the authors'


def spread(x: np.ndarray) -> np.ndarray:
    """q's spread factor at each x [N]: 0.8 to 1.2 along x_1."""
    return 1.0 + 0.2 * np.tanh(2.0 * x[:, 0])


def log_q(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log q(theta | x) up to its constant in theta, for theta [..., N, d], x [N, d]."""
    sd = NOISE * spread(x)
    d = x.shape[1]
    return -0.5 * np.sum((theta - x) ** 2, axis=-1) / sd**2 - d * np.log(sd)


def toy(num_cal: int, dim: int, seed: int = 0):
    """Calibration x [N, d], their HPD values under q [N], and the observations [10, d]."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(-1.0, 1.0, (num_cal, dim))
    x = theta + NOISE * rng.standard_normal((num_cal, dim))
    sd = NOISE * spread(x)[None, :, None]
    draws = x[None] + sd * rng.standard_normal((NUM_DRAWS, num_cal, dim))
    hpd = np.mean(log_q(draws, x) > log_q(theta, x)[None], axis=0)
    theta_o = rng.uniform(-1.0, 1.0, (NUM_OBS, dim))
    x_o = theta_o + NOISE * rng.standard_normal((NUM_OBS, dim))
    return x.astype(np.float32), hpd, x_o.astype(np.float32)


def clock():
    return time.perf_counter(), time.process_time()


def since(start):
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def ours(args, x, hpd, x_o) -> dict:
    """testbed's LocalHPD: statistics and null statistics at each observation, seconds."""
    from testbed.metrics import LocalHPD

    start = clock()
    test = LocalHPD(x, hpd, num_trials_null=args.trials).train()
    scores = [test.scores(xo) for xo in x_o]
    wall, cpu = since(start)
    return {
        "T": np.array([s.scores[0] for s in scores]),
        "null": np.stack([s.scores[1:] for s in scores]),  # [obs, H]
        "wall": wall,
        "cpu": cpu,
        "epochs": np.asarray(test.trained[0].n_iter).tolist(),
        "null_epochs": np.asarray(test.trained_null[0].n_iter).tolist(),
    }


def authors(values: np.ndarray, x, x_o, seed: int | None = None) -> tuple[np.ndarray, list[int]]:
    """The authors' regressions of one trial: T at each observation and the epochs
    (`seed`: scikit-learn's random_state; the authors' leave it unset)."""
    from sklearn.neural_network import MLPClassifier

    levels = np.linspace(0.0, float(np.max(values)) - 0.001, NUM_LEVELS)
    coverage, epochs = [], []
    for level in levels:
        clf = MLPClassifier(
            hidden_layer_sizes=(100,), alpha=0.0, max_iter=25_000, random_state=seed
        )
        clf.fit(x, (values <= level).astype(int))
        coverage.append(clf.predict_proba(x_o)[:, 1])
        epochs.append(int(clf.n_iter_))
    return np.mean((np.stack(coverage, axis=1) - levels) ** 2, axis=1), epochs


def reference(args, x, hpd, x_o) -> dict:
    """The authors' procedure: observed T, seconds with the null extrapolated to H."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = clock()
        stat, epochs = authors(hpd, x, x_o, seed=0)
        obs_wall, obs_cpu = since(start)
        again, _ = authors(hpd, x, x_o, seed=1)  # its own seed-to-seed spread, untimed
        start = clock()
        k = args.sklearn_null_trials
        null = [
            authors(np.random.default_rng(t).uniform(size=hpd.shape[0]), x, x_o, seed=t)
            for t in range(k)
        ]
        null_wall, null_cpu = since(start)
    factor = args.trials / k
    return {
        "T": stat, "T_again": again, "epochs": epochs, "k": k,
        "null": np.stack([t for t, _ in null], axis=1),  # [obs, k]
        "null_epochs": [e for _, es in null for e in es],
        "wall": obs_wall + null_wall * factor, "cpu": obs_cpu + null_cpu * factor,
    }  # fmt: skip


def p_values(stat: np.ndarray, null: np.ndarray) -> np.ndarray:
    """The authors' p-value at each observation (the share of null statistics above T)."""
    from testbed.metrics.lc2st import p_value_from

    return np.array([p_value_from(t, n, "sbi") for t, n in zip(stat, null)])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-cal", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--trials", type=int, default=100, help="null trials H")
    parser.add_argument("--sklearn-null-trials", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    return parser


def main() -> None:
    args = record.arguments(_parser())
    bad = [(f, v, f"an integer >= {low}") for f, v, low in
           (("--num-cal", args.num_cal, 100), ("--dim", args.dim, 1), ("--trials", args.trials, 1))
           if v < low]  # fmt: skip
    if not 1 <= args.sklearn_null_trials <= args.trials:
        bad.append(("--sklearn-null-trials", args.sklearn_null_trials, "1 to --trials"))
    if bad:
        flag, value, allowed = bad[0]
        print(f"bench_lhpd: error: {flag}: got {value}; allowed: {allowed}", file=sys.stderr)
        sys.exit(2)
    meter = record.Meter()
    x, hpd, x_o = toy(args.num_cal, args.dim)
    ours_ = ours(args, x, hpd, x_o)
    print(
        f"ours: {ours_['wall']:.1f}s wall {ours_['cpu']:.1f}s cpu for 11 x (1 + {args.trials}) "
        f"regressions (compilation included); observed epochs {ours_['epochs']}",
        flush=True,
    )
    ref = reference(args, x, hpd, x_o)
    print(
        f"sklearn: {ref['wall']:.1f}s wall {ref['cpu']:.1f}s cpu (null extrapolated from "
        f"{ref['k']} of {args.trials} trials); observed epochs {ref['epochs']}",
        flush=True,
    )
    null_ours, null_ref = np.mean(ours_["null"]), np.mean(ref["null"])
    print(
        f"null statistics (mean over observations and trials): ours {null_ours:.4f} "
        f"({args.trials} trials, epochs median {np.median(ours_['null_epochs']):.0f}), "
        f"sklearn {null_ref:.4f} ({ref['k']} trials, epochs median "
        f"{np.median(ref['null_epochs']):.0f})",
        flush=True,
    )
    ours_gap = np.abs(ours_["T"] - ref["T"])
    seed_gap = np.abs(ref["T_again"] - ref["T"])  # scikit-learn against itself
    p_ours, p_ref = p_values(ours_["T"], ours_["null"]), p_values(ref["T"], ours_["null"])
    same = int(np.sum((p_ours <= 0.05) == (p_ref <= 0.05)))
    for i in range(NUM_OBS):
        print(
            f"  x_o {i}: T ours {ours_['T'][i]:.4f} sklearn {ref['T'][i]:.4f} (sklearn, "
            f"another seed {ref['T_again'][i]:.4f}); p ours {p_ours[i]:.2f} sklearn "
            f"{p_ref[i]:.2f}"
        )
    ratio_wall = record.ratio(ref["wall"], ours_["wall"])
    ratio_cpu = record.ratio(ref["cpu"], ours_["cpu"])
    gaps = (
        f"|T ours - T sklearn| median {np.median(ours_gap):.4f}, sklearn's two seeds "
        f"{np.median(seed_gap):.4f}"
    )
    print(
        f"N_cal={args.num_cal} d={args.dim} H={args.trials}: ratio sklearn / ours = "
        f"{ratio_wall} wall, {ratio_cpu} cpu; same decision at 0.05 at {same} of {NUM_OBS} "
        f"observations; {gaps}"
    )
    if args.no_record:
        return
    row = {
        "case": f"local-HPD, 11 x (1 + {args.trials}) regressions, N_cal = {args.num_cal:,} "
        f"({args.dim}-d x, spread wrong along x_1)",
        "ours": f"{ours_['wall']:.0f} s wall, {ours_['cpu']:.0f} s CPU (compilation included)",
        "reference": f"the authors' procedure with scikit-learn's MLPClassifier, {ref['k']} of "
        f"{args.trials} null trials timed and scaled: {ref['wall']:.0f} s wall, "
        f"{ref['cpu']:.0f} s CPU",
        "ratio": f"{ratio_wall} wall, {ratio_cpu} CPU",
        "agree": f"same decision at {same} of {NUM_OBS} observations; {gaps}; null T mean "
        f"ours {null_ours:.4f}, sklearn {null_ref:.4f}",
    }
    record.save(__file__, [row], meter)


if __name__ == "__main__":
    main()
