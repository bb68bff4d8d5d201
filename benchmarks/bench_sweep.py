"""One agent's whole sweep, timed whole: `testbed sweep` as a user runs it, wall and CPU.

Runs `testbed sweep --agent A --sweep S --workers W` into a fresh results store and
prints its wall hours, the CPU hours of all its processes, the trainings it made and
whether every job finished. `--before` also runs it with `--train-per-job` (each
problem trains its own agent, as the Neural Testbed's leaderboard runs a sweep) and
prints the ratio. The sweep's programs are compiled in the run (a cold cache) unless
`--warm` keeps the user's compilation cache; `--keep DIR` keeps the results stores.

    .venv/bin/python benchmarks/bench_sweep.py --agent sgmcmc --sweep classification_2d
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

TESTBED = Path(sys.executable).with_name("testbed")


def children_cpu() -> float:
    """CPU seconds of the child processes waited for so far (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kl_gap(a: Path, b: Path) -> float:
    """The largest |KL difference| between two stores' runs of the same jobs."""
    from leaderboard.execution.results import load

    kl = [load(p).set_index("key")["kl_estimate"] for p in (a, b)]
    return float((kl[0] - kl[1].reindex(kl[0].index)).abs().max())


def timed_sweep(args, folder: Path, per_job: bool) -> dict:
    """Runs the sweep once into a store of its own: wall and CPU seconds, jobs, status."""
    from leaderboard.execution.results import load

    results = folder / ("per-job.db" if per_job else "shared.db")
    if results.exists():  # a resumed sweep is not timed whole
        sys.exit(f"bench_sweep: {results} exists; allowed: a --keep folder without one")
    cmd = [str(TESTBED), "sweep", "--agent", args.agent, "--sweep", args.sweep,
           "--workers", str(args.workers), "--results", str(results), "-q"]  # fmt: skip
    cmd += ["--train-per-job"] if per_job else []
    env = dict(os.environ)
    if not args.warm:
        env["TESTBED_JAX_CACHE"] = str(folder / ("cache-per-job" if per_job else "cache"))
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, check=False)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    df = load(results)
    ok = int((df["status"] == "ok").sum())
    shared = df["shared_training"] if "shared_training" in df else None
    trainings = len(df) if shared is None else int((1 / shared.fillna(1)).sum().round())
    return {"wall": wall, "cpu": cpu, "jobs": len(df), "ok": ok, "trainings": trainings,
            "status": done.returncode}  # fmt: skip


def hours(run: dict) -> str:
    """Wall and CPU time in hours, or in minutes for a sweep under an hour."""
    if run["wall"] >= 3600:
        return f"{run['wall'] / 3600:.2f} h wall, {run['cpu'] / 3600:.2f} CPU h"
    return f"{run['wall'] / 60:.1f} min wall, {run['cpu'] / 60:.1f} CPU min"


def row_of(args, runs: dict) -> dict:
    """The speed table's row: ours (training shared) and, when timed, one training a problem."""
    after = runs[False]
    row = {
        "case": f"{args.agent}, the whole {args.sweep} sweep ({after['jobs']} problems), "
        f"{args.workers} workers",
        "ours": f"{hours(after)} ({after['trainings']} trainings, {after['ok']} jobs ok)",
        "reference": "one training a problem, as the Neural Testbed's leaderboard runs it: "
        "not timed (--before)",
        "ratio": "n/a",
        "agree": "",
    }
    if True in runs:
        before = runs[True]
        row["reference"] = f"one training a problem (--train-per-job): {hours(before)}"
        row["ratio"] = f"{before['wall'] / after['wall']:.2f}x"
        row["agree"] = f"KLs within {before['kl_gap']:.1e}" if "kl_gap" in before else ""
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="sgmcmc")
    parser.add_argument("--sweep", default="classification_2d")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--before", action="store_true", help="also time --train-per-job")
    parser.add_argument("--warm", action="store_true", help="keep the compilation cache")
    parser.add_argument("--keep", default=None, help="a folder for the stores (default: temp)")
    parser.add_argument("--no-record", action="store_true")
    args = record.arguments(parser)
    meter = record.Meter()
    print(f"{args.agent} on the whole {args.sweep} sweep, {args.workers} workers", flush=True)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for per_job in (False, True) if args.before else (False,):
            run = runs[per_job] = timed_sweep(args, folder, per_job)
            if per_job:  # the same numbers as the shared run's, problem by problem
                run["kl_gap"] = kl_gap(folder / "shared.db", folder / "per-job.db")
            what = "one training per problem" if per_job else "training shared"
            print(f"   {what}: {hours(run)}; {run['ok']}/{run['jobs']} jobs ok, "
                  f"{run['trainings']} trainings", flush=True)  # fmt: skip
    after = runs[False]
    if args.before:
        before = runs[True]
        print(f"   shared training is {before['wall'] / after['wall']:.2f}x faster (wall)")
    print(f"   {meter.load_note()}")
    unfinished = [r for r in runs.values() if r["status"] != 0 or r["ok"] < r["jobs"]]
    if unfinished:  # a sweep with failed jobs is no sweep's cost
        sys.exit("bench_sweep: some jobs failed; not recorded")
    if not args.no_record:
        record.save(__file__, [row_of(args, runs)], meter)


if __name__ == "__main__":
    main()
