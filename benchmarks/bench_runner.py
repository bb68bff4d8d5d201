"""Job throughput of the local executor (1 and 2 workers) and the results store's overhead.

Reference: the same jobs run one after another in this process (`run_job` in a loop, the
way a script without a runner does it). Prints jobs/s and the ratio to the reference;
the store's cost per committed job (WAL, synchronous=FULL) against the mean job time.

    .venv/bin/python benchmarks/bench_runner.py [--sweep classification_2d_test]
        [--agent uniform] [--seeds 0-1] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402


def run_pool(jobs, workers: int) -> tuple[float, float]:
    """(wall seconds including worker start-up, seconds from first to last result)."""
    from leaderboard.execution.executors import LocalExecutor

    stamps: list[float] = []
    start = time.perf_counter()
    LocalExecutor(workers=workers).run(jobs, lambda results: stamps.append(time.perf_counter()))
    wall = time.perf_counter() - start
    return wall, stamps[-1] - stamps[0]


def store_overhead(num: int, folder: Path) -> float:
    """Seconds per `ResultsStore.record` (one committed transaction each)."""
    from leaderboard.execution.jobs import Job
    from leaderboard.store import ResultsStore

    results = []
    for i in range(num):
        job = Job.make("uniform", {}, f"classification_2d_test/{i % 7}", seed=i).as_dict()
        metrics = {f"m{k}": 0.1 * k for k in range(12)}
        results.append({**job, "status": "ok", "metrics": metrics, "wall_seconds": 1.0})
    with ResultsStore(folder / "bench.db") as store:
        start = time.perf_counter()
        for r in results:
            store.record(r)
        return (time.perf_counter() - start) / num


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default="classification_2d_test")
    parser.add_argument("--agent", default="uniform")
    parser.add_argument("--seeds", default="0-1")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--no-record", action="store_true")
    args = record.arguments(parser)
    meter, rows = record.Meter(), []

    from leaderboard.execution.sweeping import plan
    from leaderboard.execution.worker import run_job

    jobs = plan([args.agent], args.sweep, seeds=args.seeds)
    print(f"{len(jobs)} jobs: {args.agent} on {args.sweep}, seeds {args.seeds}")

    start = time.perf_counter()
    walls = [run_job(j).wall_seconds for j in jobs]
    reference = time.perf_counter() - start
    ref_rate = len(jobs) / reference
    print(f"reference (in-process loop): {reference:7.1f} s  {ref_rate:6.2f} jobs/s")

    for workers in [int(w) for w in args.workers.split(",")]:
        wall, steady = run_pool(jobs, workers)
        rate = len(jobs) / wall
        steady_rate = (len(jobs) - 1) / steady if steady > 0 else float("nan")
        print(
            f"local executor, {workers} worker(s): {wall:7.1f} s  {rate:6.2f} jobs/s "
            f"(ratio to reference {rate / ref_rate:.2f}; after start-up {steady_rate:.2f} "
            f"jobs/s, ratio {steady_rate / ref_rate:.2f})"
        )
        rows.append(
            {
                "case": f"{len(jobs)} jobs of {args.agent} on {args.sweep}, {workers} worker(s)",
                "ours": f"{rate:.2f} jobs/s ({steady_rate:.2f} after start-up)",
                "reference": f"the same jobs in one process, one after another: {ref_rate:.2f} "
                "jobs/s",
                "ratio": f"{rate / ref_rate:.2f}x ({steady_rate / ref_rate:.2f}x after start-up)",
                "agree": "",
            }
        )

    with tempfile.TemporaryDirectory() as folder:
        per_job = store_overhead(200, Path(folder))
    mean_job = statistics.mean(walls)
    print(
        f"store: {1e3 * per_job:.2f} ms per committed job; mean job {mean_job:.2f} s "
        f"-> overhead ratio {per_job / mean_job:.4f}"
    )
    rows.append(
        {
            "case": "results store, per committed job (WAL, synchronous=FULL)",
            "ours": f"{1e3 * per_job:.2f} ms",
            "reference": f"a mean job of {mean_job:.2f} s",
            "ratio": f"overhead {per_job / mean_job:.4f} of a job",
            "agree": "",
        }
    )
    if not args.no_record:
        record.save(__file__, rows, meter)


if __name__ == "__main__":
    main()
