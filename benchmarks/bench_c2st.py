"""C2ST speed: testbed.metrics.c2st (JAX, folds at once) vs sbibm's scikit-learn C2ST.

Both run the same settings on the same data in this process: z-scored by the reference,
MLPClassifier(relu, (10 d, 10 d), adam, max_iter, random_state=1), 5-fold shuffled KFold,
mean accuracy. The reference is scikit-learn's `cross_val_score` exactly as sbibm calls it.
Prints both accuracies, wall and CPU seconds, and the ratio (reference / ours).

    .venv/bin/python benchmarks/bench_c2st.py                 # 10k vs 10k, d = 2 and 10
    .venv/bin/python benchmarks/bench_c2st.py --max-iter 50   # cap epochs for both
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import partial

import numpy as np


def sklearn_c2st(reference, samples, max_iter: int, seed: int = 1) -> float:
    """sbibm's c2st (metrics/c2st.py semantics) with scikit-learn."""
    from sklearn.model_selection import KFold, cross_val_score
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
    return float(np.mean(cross_val_score(clf, data, target, cv=folds, scoring="accuracy")))


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="samples per set")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 10])
    parser.add_argument("--shift", type=float, default=0.2, help="mean shift of the samples")
    parser.add_argument("--max-iter", type=int, default=10_000, help="epochs cap (both)")
    parser.add_argument("--sklearn-threads", type=int, default=None, help="BLAS threads cap")
    args = parser.parse_args()

    from testbed.metrics import MLPConfig, c2st

    for d in args.dims:
        rng = np.random.default_rng(d)
        ref = rng.standard_normal((args.n, d)).astype(np.float32)
        smp = (rng.standard_normal((args.n, d)) + args.shift).astype(np.float32)
        cfg = MLPConfig(hidden_layers=(10 * d, 10 * d), max_iter=args.max_iter)
        # the first call compiles (reported separately); then time a call on the data
        warm = (rng.standard_normal(ref.shape).astype(np.float32), ref)  # same shapes
        _, compile_wall, _ = timed(partial(c2st, *warm, mlp_config=cfg))
        ours, wall, cpu = timed(partial(c2st, ref, smp, mlp_config=cfg))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if args.sklearn_threads:
                from threadpoolctl import threadpool_limits

                with threadpool_limits(args.sklearn_threads):
                    theirs, r_wall, r_cpu = timed(partial(sklearn_c2st, ref, smp, args.max_iter))
            else:
                theirs, r_wall, r_cpu = timed(partial(sklearn_c2st, ref, smp, args.max_iter))
        print(
            f"d={d:3d} n={args.n}: c2st ours {ours:.4f} sklearn {theirs:.4f} | "
            f"ours {wall:.1f}s wall {cpu:.1f}s cpu (first call incl. compile {compile_wall:.1f}s)"
            f" | sklearn {r_wall:.1f}s wall {r_cpu:.1f}s cpu | "
            f"ratio wall {r_wall / wall:.1f}x, cpu {r_cpu / cpu:.1f}x, "
            f"wall incl. compile {r_wall / compile_wall:.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
