"""Our runs of the Neural Testbed's reference agents on its sweeps, shipped with the package.

The reference publishes no per-problem results, so a new agent could only be ranked
after days of compute on the reference agents. This script runs them here, through the
results store (interrupted runs resume), and writes them as the package's shipped source
`neural_testbed` (`leaderboard.published("neural_testbed")`), which `testbed leaderboard`
and the report rank beside a user's agent, labelled `<agent> (ours, shipped)`:

- `classification_2d` (tau 1 and 10) and `regression`: every reference agent at today's
  defaults (`run`);
- `classification_2d_2021`: the 2021 figure's seven agents at the reference's 2021
  defaults, from `experiments.reproduce_neural_testbed`'s results store.

Run:
    python -m experiments.ship_neural_testbed run --results nt-ship.db --workers 2
    python -m experiments.ship_neural_testbed write --results nt-ship.db \\
        --results neural-testbed-reproduction.db --out leaderboard/data/neural_testbed.csv.gz
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from testbed.errors import InputError

CLASSIFICATION_AGENTS = (  # the reference's agents, cheapest first
    "uniform", "average_class_probs", "prior", "knn", "random_forest", "logistic_regression",
    "mlp", "dropout", "deep_kernel", "bbb", "epinet", "hypermodel", "ensemble", "ensemble+",
    "sgmcmc",
)  # fmt: skip
REGRESSION_AGENTS = (
    "uniform", "gp_posterior", "logistic_regression", "mlp", "dropout", "deep_kernel", "bbb",
    "epinet", "hypermodel", "ensemble", "ensemble+", "sgmcmc",
)  # fmt: skip
SWEEPS = {"classification_2d": CLASSIFICATION_AGENTS, "regression": REGRESSION_AGENTS}


def expected_jobs(sweeps: Sequence[str] = (*SWEEPS, "classification_2d_2021")) -> list:
    """The jobs the shipped source holds: each sweep's agents at today's defaults, the 2021
    sweep's at the figure's 2021 defaults."""
    import generative
    from experiments.reproduce_neural_testbed import FIGURE_2021
    from leaderboard.execution.sweeping import plan

    jobs = []
    for sweep in sweeps:
        ids = generative.sweep_ids(sweep)
        if sweep in SWEEPS:
            jobs += plan(SWEEPS[sweep], ids)
        else:
            for agent, overrides in FIGURE_2021.items():
                jobs += plan([agent], ids, overrides=overrides)
    return jobs


def coverage(rows: pd.DataFrame, jobs: Sequence) -> pd.DataFrame:
    """Per sweep and agent: the expected jobs and how many the rows hold."""
    have = set(rows["key"])
    table = pd.DataFrame(
        [
            {"sweep": j.problem_id.split("/")[0], "agent": j.agent, "done": j.key in have}
            for j in jobs
        ]  # fmt: skip
    )
    return table.groupby(["sweep", "agent"], sort=False)["done"].agg(["sum", "size"]).reset_index()


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import OneLineParser, bad_input, setup_logging

    parser = OneLineParser(
        prog="python -m experiments.ship_neural_testbed", name="ship_neural_testbed",
        description=__doc__.splitlines()[0],
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the reference agents on today's sweeps (resumes)")
    run.add_argument("--results", default="neural-testbed-ship.db")
    run.add_argument("--workers", type=int, default=0, help="parallel jobs (0: one per core)")
    run.add_argument("--sweeps", default=",".join(SWEEPS))
    run.add_argument(
        "--no-shipped", action="store_true",
        help="compute every job, also those whose runs the package ships",
    )  # fmt: skip
    write = sub.add_parser(
        "write", help="add the stores' runs to the shipped source (the runs it holds stay)"
    )
    write.add_argument("--results", action="append", required=True)
    write.add_argument("--out", default="leaderboard/data/neural_testbed.csv.gz")
    args = parser.parse_args(argv)
    setup_logging()
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    try:
        if args.command == "run":
            return _run(args)
        return _write(args)
    except InputError as e:
        return bad_input("ship_neural_testbed", e)


def _run(args) -> int:
    from experiments.console import split_choices
    from leaderboard.execution.sweeping import make_executor, run
    from leaderboard.execution.worker import enable_compilation_cache

    sweeps = split_choices(args.sweeps, "--sweeps", list(SWEEPS))
    enable_compilation_cache()
    jobs = expected_jobs(sweeps)
    if not args.no_shipped:
        from experiments.reproduction import take_shipped

        take_shipped(jobs, args.results)
    summary = run(jobs, args.results, make_executor("local", workers=args.workers))
    print(f"{summary.total} jobs: {summary.ok} ok, {summary.failed} failed -> {args.results}")
    return 1 if summary.any_failed else 0


def _write(args) -> int:
    from leaderboard.execution.shipped_store import from_results
    from leaderboard.outputs import check_output_path, write_atomically
    from leaderboard.ranking import shipped

    check_output_path("--out", args.out, args.results)  # never a store (--out is read too)
    jobs = expected_jobs()
    keys = {j.key for j in jobs}
    missing = [r for r in args.results if not Path(r).exists()]
    if missing:
        raise InputError(f"--results: got {missing[0]!r}, which does not exist; allowed: a "
                         "results store")  # fmt: skip
    parts = []
    for results in args.results:
        try:
            parts.append(from_results(results, keys))
        except InputError:  # a store with none of the expected jobs
            continue
    if not parts:
        raise InputError(f"--results: {', '.join(args.results)} hold none of the jobs to ship")
    rows = pd.concat(parts, ignore_index=True).drop_duplicates("key")
    # the runs --out holds already stay: a store that lacks them does not drop them
    kept = shipped.shipped(path=args.out)
    kept = kept[kept["key"].isin(keys) & ~kept["key"].isin(set(rows["key"]))]
    if len(kept):
        print(f"{len(kept)} runs kept from {args.out} (no store given holds them)")
        rows = pd.concat([rows, kept], ignore_index=True)
    notes = shipped.provenance("Our runs of the Neural Testbed's reference agents on its sweeps")
    write_atomically("--out", args.out, lambda tmp: shipped.write(rows, tmp, notes),
                     keep_suffix=True)  # fmt: skip
    print(coverage(rows, jobs).to_string(index=False))
    print(f"{len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("ship_neural_testbed", main, ends_process=True))
