"""ddKS orthant statistic: ours (JAX, orthant codes + bincount) vs the paper's own code.

The reference is the ddKS of the paper's repository (github.com/pnnl/DDKS, not on PyPI:
clone it and pass `--ddks-repo PATH`), called as its README says:
`ddks.methods.ddKS(oneway=True)(pred, true)` on torch tensors, its other settings at their
defaults (method 'all': every point of `pred` is a test point). `oneway=True` is the
statistic ours computes (`statistic_reference(samples, reference)`: the largest gap over
the test points = samples and their 2^d orthants). Its file `ddks/methods/ddks.py` is
loaded alone (the package's __init__ imports data and plotting modules with extra
dependencies).

Each side runs in a fresh process on the same data, timed whole (ours: its first call,
compile included, and a second call), with wall time, CPU time and peak memory. The
paper's method builds [n, d, n] comparison tensors (8 bytes an entry) and loops over the
2^d orthants: at d = 10, n = 10,000 that is over 16 GB before the loop (and about 1e12
operations), so it cannot run whole on this machine; the ratio is measured at the sizes
given by --sizes, where it does. Ours at n = 10,000 is timed alone. The two statistics
agree to 1/n: a test point's own sample point counts as 'above' in theirs (>=) and 'at
or below' in ours (>).

    .venv/bin/python benchmarks/bench_ddks.py --ddks-repo ~/DDKS [--d 10] [--sizes 500 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record  # noqa: E402


def data(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Samples N(0.1, 1) and a reference N(0, I) sample of the same size."""
    rng = np.random.default_rng(0)
    samples = (rng.standard_normal((n, d)) + 0.1).astype(np.float32)
    return samples, rng.standard_normal((n, d)).astype(np.float32)


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def worker(args) -> None:
    """One fresh process: one side on one size; prints one JSON line."""
    samples, reference = data(args.n, args.d)
    out = {"wall": [], "cpu": []}
    if args.worker == "ours":
        import jax

        from testbed.metrics.ddks import statistic_reference

        def call():
            return float(jax.block_until_ready(statistic_reference(samples, reference)))

        calls = 2
    else:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        path = Path(args.ddks_repo) / "ddks" / "methods" / "ddks.py"
        spec = importlib.util.spec_from_file_location("pnnl_ddks", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        pred, true = torch.from_numpy(samples), torch.from_numpy(reference)

        def call():
            return float(module.ddKS(oneway=True)(pred, true))

        calls = 1
    for _ in range(calls):
        start = clock()
        out["statistic"] = call()
        out["wall"].append(time.perf_counter() - start[0])
        out["cpu"].append(time.process_time() - start[1])
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)


def fresh(kind: str, n: int, args) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, "--n", str(n), "--d", str(args.d)]
    if args.ddks_repo:
        cmd += ["--ddks-repo", args.ddks_repo]
    return record.run_worker(cmd, what=f"{kind} worker")


def _size_row(args, n: int, theirs: dict, ours: dict, agree: bool) -> dict:
    """The speed table's row of one size: ours beside the paper's ddKS."""
    return {
        "case": f"ddKS one-way, d = {args.d}, n = {n} against n reference points",
        "ours": f"{ours['wall'][0]:.2f} s first call (compile included), "
        f"{ours['wall'][1]:.3f} s again; CPU {ours['cpu'][0]:.2f} / "
        f"{ours['cpu'][1]:.3f} s; peak {ours['peak_mb']:.0f} MB",
        "reference": f"the paper's ddKS (pnnl/DDKS `ddKS(oneway=True)`, torch, "
        f"{os.cpu_count()} threads): {theirs['wall'][0]:.1f} s wall, "
        f"{theirs['cpu'][0]:.1f} s CPU; peak {theirs['peak_mb']:.0f} MB",
        "ratio": f"{record.ratio(theirs['wall'][0], ours['wall'][0])} first call, "
        f"{record.ratio(theirs['wall'][0], ours['wall'][1])} again (wall); "
        f"{record.ratio(theirs['cpu'][0], ours['cpu'][1])} CPU again",
        "agree": f"D {theirs['statistic']:.5f} vs {ours['statistic']:.5f} "
        f"({'within' if agree else 'NOT within'} 1/n: ties count differently)",
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000])
    parser.add_argument("--large", type=int, default=10_000, help="ours alone at this n")
    parser.add_argument("--ddks-repo", default=None, help="a checkout of pnnl/DDKS")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--worker", choices=("ours", "paper"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = _parser()
    args = record.arguments(parser)
    if args.worker:
        worker(args)
        return
    if not args.ddks_repo:
        parser.error("--ddks-repo PATH (a checkout of github.com/pnnl/DDKS) is required")

    meter = record.Meter()
    rows = []
    print(f"ddKS one-way, d = {args.d}: seconds (wall / CPU) and peak memory of a fresh process")
    for n in args.sizes:
        theirs, ours = fresh("paper", n, args), fresh("ours", n, args)
        gap = abs(theirs["statistic"] - ours["statistic"])
        agree = gap <= 1.0 / n + 1e-6
        print(
            f"n = {n}: paper {theirs['wall'][0]:.2f} s / {theirs['cpu'][0]:.2f} s, "
            f"{theirs['peak_mb']:.0f} MB; ours first {ours['wall'][0]:.2f} s / "
            f"{ours['cpu'][0]:.2f} s, again {ours['wall'][1]:.3f} s / {ours['cpu'][1]:.3f} s, "
            f"{ours['peak_mb']:.0f} MB; ratio {record.ratio(theirs['wall'][0], ours['wall'][0])}"
            f" wall first call, {record.ratio(theirs['wall'][0], ours['wall'][1])} again; "
            f"statistics {theirs['statistic']:.5f} / {ours['statistic']:.5f} "
            f"({'agree' if agree else 'DIFFER'} within 1/n)",
            flush=True,
        )
        rows.append(_size_row(args, n, theirs, ours, agree))
        if not args.no_record:  # each size as it ends (the paper's code takes minutes)
            record.save(__file__, rows[-1:], meter)
    big = fresh("ours", args.large, args)
    scale = f"n^2 from n = {args.sizes[-1]}: " if args.sizes else ""
    if args.sizes:
        factor = (args.large / args.sizes[-1]) ** 2
        grows = (
            f"{theirs['wall'][0] * factor / 3600:.0f} h and "
            f"{theirs['peak_mb'] * factor / 1e3:.0f} GB (estimates, not timed)"
        )
    else:
        grows = "hours and hundreds of GB (its time and memory grow as n^2)"
    print(
        f"n = {args.large}: ours {big['wall'][0]:.2f} s first call, {big['wall'][1]:.2f} s "
        f"again, peak {big['peak_mb']:.0f} MB; the paper's code: {scale}{grows}; not run",
        flush=True,
    )
    rows.append(
        {
            "case": f"ddKS one-way, d = {args.d}, n = {args.large}",
            "ours": f"{big['wall'][0]:.2f} s first call, {big['wall'][1]:.2f} s again; "
            f"peak {big['peak_mb']:.0f} MB",
            "reference": f"the paper's ddKS cannot run here whole: scaled by {scale}{grows}",
            "ratio": "none (no whole run of the reference possible; see the rows above)",
            "agree": "",
        }
    )
    if not args.no_record:
        record.save(__file__, rows[-1:], meter)


if __name__ == "__main__":
    main()
