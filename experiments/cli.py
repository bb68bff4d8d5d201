"""The `testbed` command line: list, run, sweep, leaderboard, report, salvage.

Every fault ends in one line `testbed: error: ...` (no traceback) and an exit status:

    0    done (a sweep: every job of it stored as ok)
    1    a sweep ran, and some of its jobs are stored as failed (their reasons are stored)
    2    bad input: an unknown name, a bad value or path, a damaged results file
    3    the machine or a service failed: a full disk, an I/O error, an unreachable cluster
    130  interrupted (Ctrl-C); every job that finished is stored
    141  the reader of the output went away (`testbed ... | head`)

Arguments are parsed and results printed here (each command's options:
`experiments.cli_parser`); the work is the library's (`leaderboard.sweep` for a sweep,
which checks every input once).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from experiments import catalog, cli_parser
from experiments.cli_parser import RESULTS
from experiments.comma_lists import LISTS, split_items
from experiments.console import (
    EXIT_BROKEN_PIPE,
    EXIT_JOBS_FAILED,
    EXIT_OK,
    environment,
    import_hint,
    interruptible,
    list_rows,
    one_line_errors,
    parse_pairs,
    print_table,
    setup_logging,
    show_list,
    silence_stdout,
    write_index,
)

# the library's, without importing it (--help answers at once); tests/test_sweep_call.py pins it
MAX_JOBS = 1_000_000  # one sweep's jobs: leaderboard.execution.sweeping.MAX_JOBS
MAX_FAILURES_SHOWN = 10


def _import_user_modules(specs: Sequence[str] | None) -> Any:
    """Imports the modules --import names (the user's own agents and problems register
    there), once: returns them imported (`leaderboard.execution.sweeping.UserModules`),
    which the library takes as they are."""
    from leaderboard.execution.sweeping import import_modules

    return import_modules(split_items(specs, "--import", what=LISTS["--import"]) if specs else [])


def cmd_list(args: argparse.Namespace) -> int:
    _import_user_modules(args.imports)
    cols, rows = list_rows(args.what, args.json)
    show_list(args.what, cols, rows, args.json)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import generative
    from generative.conjugate.problem import ConjugateProblem
    from leaderboard.execution.sweeping import run_one
    from testbed.metrics.one_sample import rejection_notes

    _import_user_modules(args.imports)
    overrides = parse_pairs(args.set or [])
    problem_options = parse_pairs(args.option or [], "--option")
    given = args.metrics  # --metrics, each time it was given, or None
    metrics = split_items(given, "--metrics", what=LISTS["--metrics"]) if given else None
    agent, options, quality = run_one(
        args.agent, args.problem, seed=args.seed, overrides=overrides, options=problem_options,
        metrics=metrics,
    )  # fmt: skip
    if not args.json:
        title = f"{agent.name} on {args.problem}"
        print_table(title, ["metric", "value"], _folded_series(quality))
        alpha = float(options.get("alpha", ConjugateProblem.alpha))  # the tests' level
        for line in rejection_notes(quality, alpha):
            print(line)
        return 0
    settings = generative.problem_settings(args.problem)
    out = {"agent": agent.name, "config": agent.config_dict(), "problem": args.problem,
           "settings": settings, "options": options, "quality": dict(quality)}  # fmt: skip
    print(json.dumps(out, indent=2))
    return 0


def _folded_series(quality: dict) -> list[list]:
    """The metrics as table rows, a series `<name>_w00`, `<name>_w01`, ... (a bandit's
    regret curve) folded into one row `<name>_w00..wNN` of its first and last values (the
    JSON output and the store keep every value)."""
    rows, series = [], {}
    for key, value in quality.items():
        match = re.fullmatch(r"(.+)_w(\d\d)", key)
        if match:
            if match.group(1) not in series:
                rows.append([match.group(1), None])
            series.setdefault(match.group(1), []).append((match.group(2), value))
        else:
            rows.append([key, value])
    for row in rows:
        if row[0] in series and row[1] is None:
            (first, v0), (last, v1) = series[row[0]][0], series[row[0]][-1]
            row[:] = [f"{row[0]}_w{first}..w{last}", f"{v0:.3g} ... {v1:.3g}"]
    return rows


def cmd_sweep(args: argparse.Namespace) -> int:
    from leaderboard.execution.sweeping import DEFAULT_TIMEOUT, sweep
    from testbed.errors import InputError

    imports = _import_user_modules(args.imports)
    overrides = parse_pairs(args.set or [])
    options = parse_pairs(args.option or [], "--option")
    if bool(args.sweep) == bool(args.problem):
        raise InputError("give exactly one of --sweep NAME or --problem ID[,ID...]")
    problems = args.sweep or split_items(args.problem, "--problem", what=LISTS["--problem"])
    names = split_items(args.agent, "--agent", what=LISTS["--agent"])
    summary = sweep(
        names, problems, seeds=args.seeds, configs=args.configs, overrides=overrides,
        options=options, results=args.results, executor=args.executor,
        workers=args.workers, timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
        address=args.address, imports=imports, retry_failed=args.retry_failed,
        share_training=not args.train_per_job, progress=not args.quiet,
    )  # fmt: skip
    if args.json:
        print(json.dumps({**vars(summary), "results": args.results}, indent=2))
    else:
        _print_summary(summary, args.results)
    return EXIT_JOBS_FAILED if summary.any_failed else EXIT_OK


def _print_summary(summary: Any, results: str) -> None:
    """The sweep's one-line summary, then its failures (the first MAX_FAILURES_SHOWN)."""
    print(
        f"{summary.total} job{'' if summary.total == 1 else 's'}: {summary.skipped} already "
        f"stored, {summary.ok} ok, "
        f"{summary.failed} failed in {summary.seconds:.1f} s -> {results}"
    )
    if summary.stored_failed:
        print(f"  {summary.stored_failed} failed (stored earlier; --retry-failed re-runs them)")
    if summary.by_others:
        print(f"  {summary.by_others} finished by another sweep on the same results file")
    failures = summary.failures + summary.other_failures
    for key, reason in failures[:MAX_FAILURES_SHOWN]:
        print(f"  failed {key}: {reason}")
    if len(failures) > MAX_FAILURES_SHOWN:
        print(
            f"  ... and {len(failures) - MAX_FAILURES_SHOWN} more failed "
            f"(testbed leaderboard --failures --results {results} lists them all)"
        )


def cmd_failures(args: argparse.Namespace) -> int:
    """`testbed leaderboard --failures`: every failed job with its stored reason (of
    `--sweep` only when given)."""
    from leaderboard.execution.results import load
    from leaderboard.ranking.board import problem_universe
    from leaderboard.ranking.tables import render
    from testbed.errors import InputError

    for option, value in (("--export", args.export), ("--tau", args.tau)):
        if value is not None:
            raise InputError(
                f"{option}: got {value!r} with --failures, which lists failed jobs only; "
                f"allowed: --failures or {option}, not both"
            )
    df = load(args.results, problem_universe(args.sweep))
    cols = ["key", "agent", "problem_id", "agent_seed", "attempts", "finished_at", "error"]
    if args.format in ("csv", "json"):  # the stored traceback too (None: timeout, dead worker)
        cols.append("traceback")
    failed = df.loc[df["status"] == "failed", cols].reset_index(drop=True)
    if args.format == "table":
        print_table(f"failed jobs ({len(failed)})", cols, failed.values.tolist())
        if len(failed):
            print("(tracebacks: --format json, or leaderboard.load(PATH)['traceback'])")
    else:
        print(render(failed, args.format))
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    _check_shipped_only(args, "failures", "export")
    from leaderboard import build as build_board
    from leaderboard.outputs import check_output_path
    from leaderboard.ranking import board as lb
    from leaderboard.ranking.tables import fmt_cell, render

    imports = _import_user_modules(args.imports)  # a family of the user's says how it is ranked
    if args.failures:
        return cmd_failures(args)
    if args.export:
        check_output_path("export", args.export, [args.results])
    normalize = None if args.normalize == "none" else args.normalize
    board = build_board(
        None if args.shipped_only else args.results,
        sweep=args.sweep,
        tau=args.tau,
        normalize=normalize,
        best_only=not args.all_configs,
        metric=args.metric,
        per_observation=args.per_observation,
        shipped=not args.no_shipped,
        imports=imports.specs,
    )
    if args.export:
        from leaderboard.execution.results import export

        n = export(args.results, args.export)
        print(f"exported {n} rows to {args.export}", file=sys.stderr)
    full = args.format in ("csv", "json")
    tables = lb.tables(board, full=full)
    if args.format == "table":
        for title, table in tables:
            rows = [
                [fmt_cell(c, v) for c, v in zip(table.columns, r)]
                for r in table.itertuples(index=False)
            ]
            print_table(title, [lb.SHORT_NAMES.get(c, str(c)) for c in table.columns], rows)
        print("\n".join(lb.legend(board)))
    elif args.format == "markdown":
        print("\n\n".join(f"### {title}\n\n{render(t, 'markdown')}" for title, t in tables))
    elif args.format == "csv":
        import pandas as pd

        kinds = [t.assign(table=title) for title, t in tables]
        rows = pd.concat(kinds, ignore_index=True)
        # a column missing from one table is NaN there, which made ranks and counts floats
        ints = {c for t in tables for c in t[1].columns if pd.api.types.is_integer_dtype(t[1][c])}
        print(render(rows.astype({c: "Int64" for c in ints}), "csv"))
    else:
        print(json.dumps({title: json.loads(render(t, "json")) for title, t in tables}, indent=2))
    notes = [lb.failures_note(board), lb.missing_note(board)]
    if args.format != "table":  # the table's legend has them
        notes += lb.shipped_notes(board)
    for note in notes:
        if note:  # csv, json, markdown: kept out of the output, on stderr
            print(note, file=sys.stdout if args.format == "table" else sys.stderr)
    for note in lb.coverage_notes(board):  # configs scored apart: on stderr, in every format
        print(note, file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    _check_shipped_only(args)
    from leaderboard import build as build_board
    from leaderboard.outputs import check_output_path
    from leaderboard.ranking import board as lb
    from leaderboard.ranking.report import write_report

    check_output_path("out", args.out, [] if args.shipped_only else [args.results])
    imports = _import_user_modules(args.imports)
    normalize = None if args.normalize == "none" else args.normalize
    board = build_board(
        None if args.shipped_only else args.results,
        sweep=args.sweep,
        normalize=normalize,
        per_observation=True,
        unranked_ok=True,
        shipped=not args.no_shipped,
        imports=imports.specs,
    )
    path = write_report(board, args.out, title=args.title)
    for note in lb.coverage_notes(board):  # configs scored apart: on stderr, as leaderboard
        print(note, file=sys.stderr)
    print(f"report: {path.resolve()}")
    return 0


def cmd_salvage(args: argparse.Namespace) -> int:
    from leaderboard.store.salvage import salvage
    from testbed.errors import InputError

    done = salvage(args.results, args.out, args.wal)
    copied, lost = done
    notes = "".join(f"; {note}" for note in done.notes)
    if copied == 0:
        raise InputError(
            f"results: no row of {args.results!r} could be read ({lost} unreadable{notes}), "
            f"so {args.out!r} was not written; allowed: a results file with readable rows"
        )
    print(f"salvaged {copied} rows of {args.results} -> {args.out} ({lost} unreadable{notes})")
    return 0


def _check_shipped_only(args: argparse.Namespace, *options: str) -> None:
    """--shipped-only reads no results file: options that act on one are refused (else
    `args.results` gets its default)."""
    from testbed.errors import InputError

    if not args.shipped_only:
        args.results = args.results or RESULTS
        return
    if args.results is not None:
        raise InputError("--results: --shipped-only reads no results file; allowed: one of "
                         "--results, --shipped-only")  # fmt: skip
    if args.no_shipped:
        raise InputError("--no-shipped: leaves out the runs --shipped-only ranks; allowed: one "
                         "of --no-shipped, --shipped-only")  # fmt: skip
    for option in options:
        if getattr(args, option):
            raise InputError(
                f"--{option}: acts on a results file, and --shipped-only reads none; allowed: "
                f"--{option} without --shipped-only (the shipped rows: "
                "leaderboard.published(NAME))"
            )


def build_parser() -> argparse.ArgumentParser:
    """The `testbed` parser (`experiments.cli_parser`), each command run by its `cmd_*` here."""
    commands = {
        "list": cmd_list, "run": cmd_run, "sweep": cmd_sweep, "leaderboard": cmd_leaderboard,
        "report": cmd_report, "salvage": cmd_salvage,
    }  # fmt: skip
    return cli_parser.build_parser(__doc__.splitlines()[0], commands)


def main(argv: Sequence[str] | None = None) -> int:
    # `--help` and a usage error need none of the libraries: answered before they load;
    # so are `list` and a mistyped name, from the registries' index (experiments.catalog)
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    chosen = environment()  # the command's settings: the environment, read once
    # a process that has imported the registries (a test, a notebook: it may have registered
    # its own agents or problems) asks them, not the index
    fresh = not any(m in sys.modules for m in ("agents", "generative", "testbed"))
    answered = None
    try:
        if fresh:
            answered = catalog.fast_answer(args, max_jobs=MAX_JOBS, show=show_list, chosen=chosen)
    except BrokenPipeError:  # `testbed list agents | head`
        silence_stdout()
        return EXIT_BROKEN_PIPE
    if answered is not None:
        return answered
    # argv None: the process's own command line (`testbed`, `python -m experiments.cli`),
    # which an interrupt ends at once; a caller of main(argv) gets the status back
    return interruptible(
        "testbed", lambda: _main(args, index=fresh), ends_process=argv is None, chosen=chosen
    )


def _main(args: argparse.Namespace, index: bool = False) -> int:
    from leaderboard.execution.worker import enable_compilation_cache
    from testbed import settings, threefry_cpu

    settings.quiet_tensorflow()  # before TensorFlow may load (TFDS preparing a dataset)
    setup_logging()
    enable_compilation_cache()
    threefry_cpu.install()  # the same random bits as JAX's, faster on the CPU
    quiet, verbose = getattr(args, "quiet", False), getattr(args, "verbose", False)
    setup_logging(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    if index:  # before any --import: the index holds what every command sees
        write_index()

    def run() -> int:
        if args.fn in (cmd_run, cmd_sweep):  # a bad setting fails here, not in every job
            from testbed.progress import progress_mode

            progress_mode()
        return args.fn(args)

    return one_line_errors("testbed", run, hint=lambda message: import_hint(args.command, message))


if __name__ == "__main__":
    sys.exit(main())
