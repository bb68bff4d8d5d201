"""SBI task simulators: ours (numpy, batched) vs the SBI benchmark's own (sbibm's torch and
pyro simulators, batched, called as sbi users call them), with the outputs compared.

The reference is `sbibm.get_task(name).get_simulator()(theta)` on a torch batch, from the
sbibm 1.1.0 wheel (MIT): sbibm itself does not install on current stacks (it pins
sbi < 0.22), so its package folder is put on the path from the wheel
(`--sbibm-wheel PATH`, or downloaded with pip), and pyro-ppl must be installed
(`pip install -c constraints.txt pyro-ppl`). Its SIR and Lotka-Volterra simulators call
Julia through diffeqtorch (Julia <= 1.5), which cannot be installed here: those two tasks
have no reference time and no ratio (ours is printed alone). sbibm's slcp_distractors
loads a pickled mixture that torch >= 2.6 refuses by default; the benchmark loads it with
`weights_only=False` (the file ships in the wheel).

Both sides simulate the same parameter sets (our prior draws), each timed whole at
`--batch` (Bernoulli GLM: `--batch-glm`, sbibm's GLM loops over parameter sets in Python),
wall and CPU seconds (torch may use every core; ours runs in one thread). The outputs are
compared in distribution, per coordinate: a two-sample Kolmogorov-Smirnov test between
our and sbibm's simulations at the same parameters (independent noise), Bonferroni over
the coordinates; 'agree' when the smallest p-value times the coordinates is above 0.001.
Last column: our seconds for 10,000 reference posterior draws at observation 1 (the
benchmark ships 10,000 per observation from a pipeline of hours; no ratio).

    .venv/bin/python benchmarks/bench_sbi_tasks.py [--tasks two_moons slcp] [--batch 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from generative import sbi  # noqa: E402

JULIA = ("sir", "lotka_volterra")


def sbibm_module(wheel: str | None, folder: str):
    """sbibm imported from the wheel's files (extracted to `folder`)."""
    if wheel is None:
        from experiments.sbibm_wheel import download_wheel

        wheel = str(download_wheel(folder))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(folder, [n for n in z.namelist() if n.startswith("sbibm/")])
    sys.path.insert(0, folder)
    import sbibm

    return sbibm


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start) -> tuple[float, float]:
    return time.perf_counter() - start[0], time.process_time() - start[1]


def agreement(ours: np.ndarray, theirs: np.ndarray) -> tuple[bool, float]:
    """(agree, smallest Bonferroni-corrected KS p-value over the coordinates)."""
    p = [stats.ks_2samp(ours[:, j], theirs[:, j]).pvalue for j in range(ours.shape[1])]
    corrected = min(1.0, float(np.min(p)) * ours.shape[1])
    return corrected > 1e-3, corrected


def bench_task(name: str, batch: int, sbibm, rows: list, num_reference: int) -> None:
    import torch

    task = sbi.get_task(name)
    theta = task.sample_prior(batch, seed=0)
    task.simulate(theta[:10], seed=0)  # warm caches (design matrix, mixture, ...)
    start = clock()
    ours = task.simulate(theta, seed=1)
    ours_wall, ours_cpu = since(start)
    x_o = task.observation(1)
    start = time.perf_counter()
    task.reference_posterior(x_o, num_reference, seed=0)
    ref_seconds = time.perf_counter() - start
    ours_text = f"{ours_wall:.3f} s wall, {ours_cpu:.3f} s CPU"
    if name in JULIA or sbibm is None:
        why = "Julia (diffeqtorch) cannot be installed" if name in JULIA else "no sbibm"
        print(f"{name:24s} {batch:>6d} {ours_wall:9.3f} {'-':>9s} {'-':>8s}  {why}", flush=True)
        rows.append(
            {
                "case": f"simulator {name}, batch {batch}",
                "ours": ours_text + f"; {num_reference:,} reference draws {ref_seconds:.1f} s",
                "reference": f"sbibm's simulator needs {why}: not run",
                "ratio": "none",
                "agree": "",
            }
        )
        return
    their_task = sbibm.get_task(name)
    simulator = their_task.get_simulator()
    th = torch.as_tensor(theta, dtype=torch.float32)
    torch.manual_seed(0)
    simulator(th[:10])  # warm up (lazy files)
    start = clock()
    with torch.no_grad():
        theirs = simulator(th).numpy()
    their_wall, their_cpu = since(start)
    ok, p = agreement(np.asarray(ours, np.float64), theirs.astype(np.float64))
    ratio_wall, ratio_cpu = record.ratio(their_wall, ours_wall), record.ratio(their_cpu, ours_cpu)
    print(
        f"{name:24s} {batch:>6d} {ours_wall:9.3f} {their_wall:9.3f} {ratio_wall:>8s} "
        f"(CPU {ours_cpu:.3f} / {their_cpu:.3f} s, {ratio_cpu}); KS p {p:.3g} "
        f"{'agree' if ok else 'DIFFER'}; reference draws {ref_seconds:.2f} s",
        flush=True,
    )
    rows.append(
        {
            "case": f"simulator {name}, batch {batch}",
            "ours": ours_text + f"; {num_reference:,} reference draws {ref_seconds:.1f} s",
            "reference": f"sbibm 1.1.0 `get_simulator()(theta)`, torch ({torch.get_num_threads()}"
            f" threads): {their_wall:.3f} s wall, {their_cpu:.3f} s CPU",
            "ratio": f"{ratio_wall} wall, {ratio_cpu} CPU",
            "agree": f"{'same' if ok else 'DIFFERENT'} distribution per coordinate (two-sample "
            f"KS, Bonferroni p = {p:.2g})",
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=sbi.task_names())
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--batch-glm", type=int, default=1_000)
    parser.add_argument("--reference", type=int, default=10_000, help="reference draws")
    parser.add_argument("--sbibm-wheel", default=None, help="sbibm-1.1.0 wheel (else pip)")
    parser.add_argument("--no-record", action="store_true")
    args = record.arguments(parser)
    meter = record.Meter()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-sbibm-") as folder:
        import torch

        load = torch.load
        torch.load = lambda *a, **k: load(*a, **{**k, "weights_only": False})  # sbibm's files
        sbibm = sbibm_module(args.sbibm_wheel, folder)
        print(
            f"{'task':24s} {'batch':>6s} {'ours s':>9s} {'sbibm s':>9s} {'ratio':>8s}  "
            f"(torch threads {torch.get_num_threads()}, {os.cpu_count()} cores)",
            flush=True,
        )
        for name in args.tasks:
            batch = args.batch_glm if name.startswith("bernoulli_glm") else args.batch
            bench_task(name, batch, sbibm, rows, args.reference)
            if not args.no_record:  # each task as it ends (a long run may be cut short)
                record.save(__file__, rows[-1:], meter)


if __name__ == "__main__":
    main()
