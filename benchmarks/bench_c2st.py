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
import sys
import time
import warnings
from functools import partial

import numpy as np


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


def count_epochs():
    """Wraps our c2st's trainer to record the mean epochs of the folds it trains."""
    module = sys.modules["testbed.metrics.c2st"]
    trainer, record = module.train_many, []

    def wrapped(*args, **kwargs):
        trained = trainer(*args, **kwargs)
        record.append(float(np.mean(trained.n_iter)))
        return trained

    module.train_many = wrapped
    return record


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

    epochs = count_epochs()
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
                    (theirs, r_ep), r_wall, r_cpu = timed(
                        partial(sklearn_c2st, ref, smp, args.max_iter)
                    )
            else:
                (theirs, r_ep), r_wall, r_cpu = timed(
                    partial(sklearn_c2st, ref, smp, args.max_iter)
                )
        ep = epochs[-1]  # the stopping rule is random: compare the time per epoch too
        print(
            f"d={d:3d} n={args.n}: c2st ours {ours:.4f} sklearn {theirs:.4f} | "
            f"ours {wall:.1f}s wall {cpu:.1f}s cpu (first call incl. compile {compile_wall:.1f}s)"
            f" | sklearn {r_wall:.1f}s wall {r_cpu:.1f}s cpu | "
            f"ratio wall {r_wall / wall:.1f}x, cpu {r_cpu / cpu:.1f}x, "
            f"wall incl. compile {r_wall / compile_wall:.1f}x | epochs per fold ours {ep:.0f} "
            f"sklearn {r_ep:.0f}, wall per epoch ratio {(r_wall / r_ep) / (wall / ep):.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
