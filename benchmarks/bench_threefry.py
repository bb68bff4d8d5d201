"""testbed's unrolled threefry lowering against JAX's own CPU lowering, each timed whole.

Each side runs in a fresh process (`TESTBED_THREEFRY=unrolled` / `rolled`), one XLA
thread as a sweep's worker runs, and times, compilation included:
1. Gaussian draws as `bbb` makes them: 1,000 keys x 2,802 values, on JAX's partitionable
   stream (its default) and on the original one (the Neural Testbed's), 100 calls;
2. `sgmcmc`'s 500,000-step chain on `classification_2d_2021/260` (100 training points).
The draws must agree bit for bit and the chains' last snapshots to float rounding.

Usage:
    .venv/bin/python benchmarks/bench_threefry.py            # ~3 min
    .venv/bin/python benchmarks/bench_threefry.py --quick    # draws only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

SIDE = r"""
import json, resource, sys, time
import jax, numpy as np
from testbed import threefry_cpu

threefry_cpu.install()  # as every entry point does (TESTBED_THREEFRY decides)

def repeat(fn, times):
    for _ in range(times):
        out = fn()
    return out

def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - wall, time.process_time() - cpu

out, path, quick = {"lowering": threefry_cpu.lowering()}, sys.argv[1], sys.argv[2] == "1"
keys = jax.random.split(jax.random.PRNGKey(0), 1000)
arrays = {}
for stream in (True, False):
    with jax.threefry_partitionable(stream):
        draw = jax.jit(jax.vmap(lambda k: jax.random.normal(k, (2802,))))
        first, wall, cpu = timed(lambda: repeat(lambda: draw(keys), 100))
    name = "partitionable" if stream else "original"
    arrays[name] = np.asarray(first)
    out[name] = {"wall": wall, "cpu": cpu}
if not quick:
    import generative
    from agents.sgmcmc import SGMCMCConfig, sample_chain
    problem = generative.load("classification_2d_2021/260")
    config = SGMCMCConfig(temperature_scaling="linear")
    data, prior = problem.train_data, problem.prior_knowledge
    chain, wall, cpu = timed(lambda: sample_chain(config, data, prior))
    arrays["chain"] = np.asarray(chain)[-1]
    out["sgmcmc"] = {"wall": wall, "cpu": cpu}
np.savez(path, **arrays)
print(json.dumps(out))
"""


def run_side(lowering: str, quick: bool, folder: str) -> tuple[dict, dict]:
    """One side's timings and outputs, measured in a fresh process with that lowering."""
    env = {
        **os.environ,
        "TESTBED_THREEFRY": lowering,
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    }
    path = os.path.join(folder, f"{lowering}.npz")
    cmd = [sys.executable, "-c", SIDE, path, "1" if quick else "0"]
    timings = record.run_worker(cmd, env, what=f"the {lowering} side")
    if timings["lowering"] != lowering:
        raise RuntimeError(f"asked for the {lowering} lowering, got {timings['lowering']}")
    with np.load(path) as arrays:
        return timings, {k: arrays[k] for k in arrays.files}


def main() -> None:
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the Gaussian draws only")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    meter, rows = record.Meter(), []
    with tempfile.TemporaryDirectory() as folder:
        ours, ours_out = run_side("unrolled", args.quick, folder)
        jaxs, jax_out = run_side("rolled", args.quick, folder)
    for name in ("partitionable", "original"):
        assert np.array_equal(ours_out[name], jax_out[name]), f"{name} draws differ"
    gap = 0.0
    if "chain" in ours_out:
        scale = np.abs(jax_out["chain"]).max()
        gap = np.abs(ours_out["chain"] - jax_out["chain"]).max() / scale
        assert gap < 1e-3, f"sgmcmc's last snapshots differ by {gap:.1e} of the largest weight"
        print(f"sgmcmc's last snapshots agree within {gap:.1e} of the largest weight")
    print("draws bit for bit equal")
    print(f"{'what':<42} {'ours (unrolled)':>17} {'JAX (rolled)':>14} {'ratio':>7}")
    cases = [("partitionable", "100 x 2.8M Gaussians, JAX's default stream"),
             ("original", "100 x 2.8M Gaussians, the original stream"),
             ("sgmcmc", "sgmcmc 500,000-step chain, n = 100")]  # fmt: skip
    for key, label in cases:
        if key not in ours:
            continue
        a, b = ours[key], jaxs[key]
        print(
            f"{label:<42} {a['wall']:>8.2f} s wall {b['wall']:>8.2f} s wall "
            f"{b['wall'] / a['wall']:>6.2f}x (CPU {a['cpu']:.2f} / {b['cpu']:.2f} s)"
        )
        rows.append(
            {
                "case": f"{label}, one XLA thread, compilation included",
                "ours": f"{a['wall']:.2f} s (CPU {a['cpu']:.2f} s)",
                "reference": f"JAX's rolled lowering: {b['wall']:.2f} s (CPU {b['cpu']:.2f} s)",
                "ratio": f"{record.ratio(b['wall'], a['wall'])} (CPU "
                f"{record.ratio(b['cpu'], a['cpu'])})",
                "agree": "bit for bit" if key != "sgmcmc" or gap == 0 else f"within {gap:.0e}",
            }
        )
    if not args.no_record:
        record.save(__file__, rows, meter)


if __name__ == "__main__":
    main()
