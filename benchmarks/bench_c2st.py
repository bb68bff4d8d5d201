"""C2ST speed: testbed.metrics.c2st (JAX, folds at once) vs sbibm's scikit-learn C2ST.

Both run the same settings on the same data: z-scored by the reference,
MLPClassifier(relu, (10 d, 10 d), adam, max_iter, random_state=1), 5-fold shuffled KFold,
mean accuracy. The reference is scikit-learn's `cross_val_score` exactly as sbibm calls it.
Three columns a case, each against scikit-learn in the same run:

- cold: our first call in a fresh process with an empty compilation cache (a new machine,
  or `TESTBED_JAX_CACHE=off`): JAX compiles everything;
- cached: our first call in a fresh process whose compilation cache is warm (any later
  script or notebook on the machine: testbed's default cache, see
  testbed/compilation_cache.py);
- warm: a second call in the same process (compiled code in memory).

Fresh-process cases run in subprocesses (the cold one with a new temporary cache folder,
the cached one with the same folder afterwards); scikit-learn runs in a fresh process too,
once, or twice when its first call took under `--sklearn-repeat` seconds, and every ratio
is against its fastest call (it compiles nothing). scikit-learn runs as sbibm's users
run it: its default BLAS threads (`--sklearn-threads n` limits them; on a shared machine
its threads spin-wait for cores). Its folds run one after another (`cross_val_score`
without n_jobs, as sbibm calls it) while ours train at once on every core: wall and CPU
seconds are both printed and recorded, and the CPU ratio is the per-core comparison.
Imports are timed apart and are not in the ratios. Prints both accuracies, the epochs per
fold and the time per epoch (the stopping rule makes epoch counts random: ours may stop
earlier or later than scikit-learn on the same data).

    .venv/bin/python benchmarks/bench_c2st.py                 # 10k vs 10k, d = 2, 5, 10
    .venv/bin/python benchmarks/bench_c2st.py --dims 2 --max-iter 50
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


def data(n: int, d: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(d)
    ref = rng.standard_normal((n, d)).astype(np.float32)
    smp = (rng.standard_normal((n, d)) + shift).astype(np.float32)
    return ref, smp


def sklearn_c2st(reference, samples, max_iter: int, seed: int = 1) -> tuple[float, float]:
    """sbibm's c2st (metrics/c2st.py semantics) with scikit-learn; (accuracy, mean epochs)."""
    from sklearn.model_selection import KFold, cross_validate
    from sklearn.neural_network import MLPClassifier

    mean, std = reference.mean(0), reference.std(0, ddof=1)
    x, y = (reference - mean) / std, (samples - mean) / std
    d = reference.shape[1]
    clf = MLPClassifier(
        activation="relu",
        hidden_layer_sizes=(10 * d, 10 * d),
        max_iter=max_iter,
        solver="adam",
        random_state=seed,
    )
    data = np.concatenate([x, y])
    target = np.concatenate([np.zeros(len(x)), np.ones(len(y))])
    folds = KFold(n_splits=5, shuffle=True, random_state=seed)
    out = cross_validate(
        clf, data, target, cv=folds, scoring="accuracy", return_estimator=True
    )  # cross_val_score's numbers, with the fitted folds kept for their epoch counts
    epochs = np.mean([e.n_iter_ for e in out["estimator"]])
    return float(np.mean(out["test_score"])), float(epochs)


def worker(args) -> None:
    """One fresh process: import, then `args.calls` timed calls; one JSON line out."""
    start = time.perf_counter()
    if args.worker == "ours":
        module = __import__("testbed.metrics.c2st", fromlist=["c2st"])
        from testbed.metrics import MLPConfig

        trainer, epochs = module.train_many, []

        def counted(*a, **k):  # the mean epochs of the folds each call trains
            trained = trainer(*a, **k)
            epochs.append(float(np.mean(trained.n_iter)))
            return trained

        module.train_many = counted
        cfg = MLPConfig(hidden_layers=(10 * args.d, 10 * args.d), max_iter=args.max_iter)

        def call(ref, smp):
            return module.c2st(ref, smp, mlp_config=cfg), epochs[-1]
    else:
        import sklearn.model_selection  # noqa: F401
        import sklearn.neural_network  # noqa: F401

        def call(ref, smp):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return sklearn_c2st(ref, smp, args.max_iter)

    imported = time.perf_counter() - start
    ref, smp = data(args.n, args.d, args.shift)
    out = {"import": imported, "seconds": [], "cpu": [], "accuracy": None, "epochs": None}
    for i in range(args.calls):
        if i > 0 and out["seconds"][0] > args.repeat_below:
            break
        t, c = time.perf_counter(), time.process_time()
        out["accuracy"], out["epochs"] = call(ref, smp)
        out["seconds"].append(time.perf_counter() - t)
        out["cpu"].append(time.process_time() - c)
    print(json.dumps(out), flush=True)


def fresh(kind: str, d: int, args, calls: int, cache: str, repeat_below: float = 1e9) -> dict:
    """Runs `worker` in a new process (cache: a folder for TESTBED_JAX_CACHE, or 'off')."""
    env = record.cache_env(cache)
    if kind == "sklearn" and args.sklearn_threads > 0:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = str(args.sklearn_threads)
    cmd = [
        sys.executable, __file__, "--worker", kind, "--d", str(d), "--n", str(args.n),
        "--shift", str(args.shift), "--max-iter", str(args.max_iter),
        "--calls", str(calls), "--repeat-below", str(repeat_below),
    ]  # fmt: skip
    return record.run_worker(cmd, env, f"{kind} worker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="samples per set")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--shift", type=float, default=0.2, help="mean shift of the samples")
    parser.add_argument("--max-iter", type=int, default=10_000, help="epochs cap (both)")
    parser.add_argument(
        "--sklearn-repeat", type=float, default=60.0,
        help="time scikit-learn a second time (warm column) when its first call took less",
    )  # fmt: skip
    parser.add_argument(
        "--sklearn-threads", type=int, default=0, help="scikit-learn's BLAS threads (0: default)"
    )
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--worker", choices=("ours", "sklearn"), help=argparse.SUPPRESS)
    parser.add_argument("--d", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--repeat-below", type=float, default=1e9, help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = record.arguments(_parser())
    if args.worker:
        worker(args)
        return

    print(
        f"C2ST {args.n} vs {args.n}, seconds of one call (imports apart); ratio = "
        f"scikit-learn's fastest call / ours in this run (scikit-learn BLAS threads: "
        f"{args.sklearn_threads or 'default'})\n"
        f"{'d':>3} {'sklearn first':>13} {'again':>6} | {'ours cold':>9} {'ratio':>6} | "
        f"{'cached':>6} {'ratio':>6} | {'warm':>6} {'ratio':>6} | accuracy ours / sklearn, "
        "epochs a fold, per-epoch ratio (warm)",
        flush=True,
    )
    meter, rows = record.Meter(), []
    for d in args.dims:
        theirs = fresh("sklearn", d, args, 2, "off", args.sklearn_repeat)
        with tempfile.TemporaryDirectory(prefix="bench-c2st-cache-") as cache:
            cold = fresh("ours", d, args, 1, cache)
            cached = fresh("ours", d, args, 2, cache)
        r_first, ref = theirs["seconds"][0], min(theirs["seconds"])
        ours_cold, ours_cached, ours_warm = cold["seconds"][0], *cached["seconds"]
        per_epoch = (ref / theirs["epochs"]) / (ours_warm / cached["epochs"])
        second = f"{theirs['seconds'][1]:>5.2f}s" if len(theirs["seconds"]) > 1 else "    - "
        print(
            f"{d:>3} {r_first:>12.2f}s {second} | {ours_cold:>8.2f}s "
            f"{ref / ours_cold:>5.1f}x | {ours_cached:>5.2f}s {ref / ours_cached:>5.1f}x "
            f"| {ours_warm:>5.2f}s {ref / ours_warm:>5.1f}x | {cached['accuracy']:.4f} / "
            f"{theirs['accuracy']:.4f}, {cached['epochs']:.0f} / {theirs['epochs']:.0f}, "
            f"{per_epoch:.1f}x  (imports: ours {cold['import']:.1f}s, sklearn "
            f"{theirs['import']:.1f}s)",
            flush=True,
        )
        fastest = int(np.argmin(theirs["seconds"]))
        ref_cpu, warm_cpu = theirs["cpu"][fastest], cached["cpu"][1]
        print(f"    CPU seconds: scikit-learn {ref_cpu:.2f}, ours warm {warm_cpu:.2f}", flush=True)
        threads = args.sklearn_threads or "default"
        rows.append(
            {
                "case": f"C2ST {args.n:,} vs {args.n:,}, d = {d}",
                "ours": f"{ours_warm:.2f} s warm, {ours_cached:.2f} s cached, {ours_cold:.2f} s "
                f"cold (wall); CPU {warm_cpu:.2f} s warm; {cached['epochs']:.0f} epochs a fold",
                "reference": f"sbibm's C2ST (scikit-learn MLPClassifier, cross_val_score, folds "
                f"one after another; BLAS threads {threads}): {ref:.2f} s wall, {ref_cpu:.2f} s "
                f"CPU; {theirs['epochs']:.0f} epochs a fold",
                "ratio": f"{record.ratio(ref, ours_warm)} warm, {record.ratio(ref, ours_cached)} "
                f"cached, {record.ratio(ref, ours_cold)} cold (wall); "
                f"{record.ratio(ref_cpu, warm_cpu)} CPU warm; {per_epoch:.1f}x wall per epoch",
                "agree": f"accuracy {cached['accuracy']:.4f} vs {theirs['accuracy']:.4f}",
            }
        )
        if not args.no_record:  # each case as it ends (a long run may be cut short)
            record.save(__file__, rows[-1:], meter)


if __name__ == "__main__":
    main()
