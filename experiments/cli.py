"""The `testbed` command line: list, run, sweep, leaderboard, report, salvage.

Every fault ends in one line `testbed: error: ...` (no traceback) and an exit status:

    0    done (a sweep: every job of it stored as ok)
    1    a sweep ran, and some of its jobs are stored as failed (their reasons are stored)
    2    bad input: an unknown name, a bad value or path, a damaged results file
    3    the machine or a service failed: a full disk, an I/O error, an unreachable cluster
    130  interrupted (Ctrl-C); every job that finished is stored
    141  the reader of the output went away (`testbed ... | head`)

Arguments are parsed and results printed here; the work is the library's
(`leaderboard.sweep` for a sweep, which checks every input once).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from experiments.console import (
    EXIT_JOBS_FAILED,
    EXIT_OK,
    OneLineParser,
    add_verbosity,
    fast_answer,
    import_hint,
    interruptible,
    list_rows,
    one_line_errors,
    parse_pairs,
    print_table,
    setup_logging,
    show_list,
    verbosity,
    write_index,
)

# the library's, without importing it (--help answers at once); tests/test_sweep_call.py pins them
MAX_JOBS = 1_000_000  # one sweep's jobs: leaderboard.sweeping.MAX_JOBS
RESULTS = "testbed-results.db"  # the results file when --results is not given: DEFAULT_PATH
MAX_FAILURES_SHOWN = 10


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for text in values or [] for v in text.split(",") if v.strip()]


def _import_user_modules(args: argparse.Namespace) -> tuple[str, ...]:
    """Imports the modules named by --import (the user's own agents and problems register
    there); returns them as workers import them."""
    from leaderboard.sweeping import import_modules

    return import_modules(_split(getattr(args, "imports", None)))


def cmd_list(args: argparse.Namespace) -> int:
    _import_user_modules(args)
    cols, rows = list_rows(args.what, args.json)
    show_list(args.what, cols, rows, args.json)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import generative
    from generative.conjugate.problem import ConjugateProblem
    from leaderboard.sweeping import run_one
    from testbed.metrics.one_sample import rejection_notes

    _import_user_modules(args)
    agent, options, quality = run_one(
        args.agent, args.problem, seed=args.seed, overrides=parse_pairs(args.set or []),
        options=parse_pairs(args.option or [], "--option"),
        metrics=_split(args.metrics) if args.metrics else None,
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
    from leaderboard.sweeping import DEFAULT_TIMEOUT, sweep
    from testbed.errors import InputError

    imports = _import_user_modules(args)
    overrides = parse_pairs(args.set or [])
    options = parse_pairs(args.option or [], "--option")
    if bool(args.sweep) == bool(args.problem):
        raise InputError("give exactly one of --sweep NAME or --problem ID[,ID...]")
    problems = args.sweep or _split(args.problem)
    if not problems:
        raise InputError(
            f"--problem: got {','.join(args.problem)!r}; allowed: one or more problem ids "
            "such as coin/0,coin/1"
        )
    summary = sweep(
        _split(args.agent), problems, seeds=args.seeds, configs=args.configs,
        overrides=overrides, options=options, results=args.results, executor=args.executor,
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
    from leaderboard.board import problem_universe
    from leaderboard.results import load
    from leaderboard.tables import render
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
    from leaderboard import board as lb
    from leaderboard import build as build_board
    from leaderboard.outputs import check_output_path
    from leaderboard.tables import fmt_cell, render

    imports = _import_user_modules(args)  # a family of the user's says how it is ranked
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
        imports=imports,
    )
    if args.export:
        from leaderboard.results import export

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
    from leaderboard import board as lb
    from leaderboard import build as build_board
    from leaderboard.outputs import check_output_path
    from leaderboard.report import write_report

    check_output_path("out", args.out, [] if args.shipped_only else [args.results])
    imports = _import_user_modules(args)
    normalize = None if args.normalize == "none" else args.normalize
    board = build_board(
        None if args.shipped_only else args.results,
        sweep=args.sweep,
        normalize=normalize,
        per_observation=True,
        unranked_ok=True,
        shipped=not args.no_shipped,
        imports=imports,
    )
    path = write_report(board, args.out, title=args.title)
    for note in lb.coverage_notes(board):  # configs scored apart: on stderr, as leaderboard
        print(note, file=sys.stderr)
    print(f"report: {path.resolve()}")
    return 0


def cmd_salvage(args: argparse.Namespace) -> int:
    from leaderboard.salvage import salvage
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


def _add_import(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import", dest="imports", action="append", metavar="MODULE_OR_FILE",
        help="module name(s) or .py file(s) that register your own agents or problems",
    )  # fmt: skip


def _add_overrides(p: argparse.ArgumentParser) -> None:
    """--set (the agent's config) and --option (the problem's)."""
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="agent config override")
    p.add_argument(
        "--option", action="append", metavar="KEY=VALUE",
        help="problem option, as generative.load(id, KEY=VALUE) takes it (e.g. "
        "standardize=feature, num_test_seeds=100); testbed list problems names each family's",
    )  # fmt: skip


def _add_ranking(p: argparse.ArgumentParser, sweep_help: str, *more: str) -> None:
    """--results, --sweep and --normalize of `leaderboard` and `report` (`more`: options
    between --sweep and --normalize, as `--tau`)."""
    p.add_argument("--results", help=f"SQLite results file (default: {RESULTS})")
    if "--out" in more:
        p.add_argument("--out", default="report.html", help="the HTML file to write")
    p.add_argument("--sweep", help=sweep_help)
    if "--tau" in more:
        p.add_argument("--tau", type=int, help="one tau only (default: a table per tau)")
    p.add_argument(
        "--normalize", default="default",
        help="agent whose mean score is 1 (default: each family's own, e.g. uniform), or none",
    )  # fmt: skip


def _add_shipped(p: argparse.ArgumentParser) -> None:
    alone = "rank your results alone, without the package's runs of ours beside them"
    p.add_argument("--no-shipped", action="store_true", help=alone)
    ours = "rank the package's runs of ours on --sweep alone (no results file is read): "
    p.add_argument(
        "--shipped-only", action="store_true", help=ours + "where the reference agents stand"
    )
    _add_import(p)


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="train one agent on one problem and print its quality")
    p.add_argument("--agent", required=True)
    p.add_argument("--problem", required=True, help="a problem id, e.g. classification_2d/75")
    _add_overrides(p)
    p.add_argument("--seed", type=int, help="the agent's seed")
    p.add_argument(
        "--metrics", action="append", metavar="NAME[,NAME]",
        help="metrics to compute instead of the problem's own ('default' adds those)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_import(p)
    add_verbosity(p)
    p.set_defaults(fn=cmd_run)


def _add_sweep(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run agents over a problem sweep into the results store")
    p.add_argument("--agent", action="append", required=True, help="agent name(s), a,b or repeat")
    p.add_argument("--sweep", help="a registered problem sweep (testbed list sweeps)")
    p.add_argument("--problem", action="append", help="problem id(s) instead of a sweep")
    p.add_argument(
        "--configs", choices=["default", "sweep"], default="default",
        help="the agent's default config, or its whole hyper-parameter sweep",
    )  # fmt: skip
    _add_overrides(p)
    p.add_argument("--seeds", default="0", help="agent seeds: 0,1,2 or 0-4 (default 0)")
    p.add_argument(
        "--executor", choices=["local", "ray", "inline"], default="local",
        help="local process pool, Ray cluster, or inline (this process, for debugging)",
    )  # fmt: skip
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    p.add_argument(
        "--workers", type=int, default=0, help="jobs at once, local or ray (0: one per core)"
    )
    p.add_argument(
        "--timeout",
        help="per-job time limit in seconds (default 86400 = 24 h; 0, inf or none: no limit)",
    )
    p.add_argument("--results", default=RESULTS, help="SQLite results file")
    p.add_argument("--retry-failed", action="store_true", help="run failed jobs again")
    p.add_argument(
        "--train-per-job", action="store_true",
        help="train once per problem, not once per training set (the Neural Testbed's tau "
        "pairs share one; so do an SBI task's observations for amortized agents: the same "
        "numbers, up to 10x the training time)",
    )  # fmt: skip
    _add_import(p)
    add_verbosity(p)
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.set_defaults(fn=cmd_sweep)


def _add_leaderboard(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help="rank agents from a results file")
    _add_ranking(
        p, "rank over this sweep's problems (an agent that ran part of them is shown apart)",
        "--tau",
    )  # fmt: skip
    p.add_argument("--all-configs", action="store_true", help="every config, not the best")
    p.add_argument(
        "--metric", default="auto", metavar="RULE",
        help="only the tables of one ranking rule: kl, c2st, or a rule an --import declares",
    )  # fmt: skip
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    p.add_argument("--export", metavar="PATH", help="also write all rows to .csv / .parquet")
    p.add_argument(
        "--failures", action="store_true", help="list the failed jobs and their reasons instead"
    )
    p.add_argument(
        "--per-observation", action="store_true",
        help="also C2ST per observation, beside the SBI benchmark paper's",
    )  # fmt: skip
    _add_shipped(p)
    p.set_defaults(fn=cmd_leaderboard)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="testbed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list agents, problems, sweeps or metrics")
    p.add_argument("what", choices=["agents", "problems", "sweeps", "metrics"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_import(p)
    p.set_defaults(fn=cmd_list)
    _add_run(sub)
    _add_sweep(sub)
    _add_leaderboard(sub)
    p = sub.add_parser("report", help="write a self-contained HTML report")
    _add_ranking(p, "rank over this sweep's problems", "--out")
    p.add_argument("--title", default="testbed leaderboard")
    _add_shipped(p)
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("salvage", help="copy the readable rows of a damaged results file")
    p.add_argument("--results", required=True, help="the damaged results file (not changed)")
    p.add_argument("--out", required=True, help="a new results file for the rows that read")
    p.add_argument(
        "--wal", choices=("check", "ignore", "use"), default="check",
        help="its WAL file: refused when another store's or zeroed (check), left out "
        "(ignore), or read whatever wrote it (use)",
    )  # fmt: skip
    p.set_defaults(fn=cmd_salvage)
    return parser


NUMBER_OPTIONS = ("--timeout",)  # their value may start with "-" (refused, but by us)


def _attach_values(argv: Sequence[str]) -> list[str]:
    """`--timeout -1` as `--timeout=-1`, so a negative value gets our message, not argparse's
    "expected one argument"."""
    out, args = [], list(argv)
    while args:
        arg = args.pop(0)
        value = args[0] if args else ""
        if arg in NUMBER_OPTIONS and value.startswith("-") and value[1:2] != "-":
            arg = f"{arg}={args.pop(0)}"
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    # `--help` and a usage error need none of the libraries: answered before they load;
    # so are `list` and a mistyped name, from the registries' index (experiments.catalog)
    args = build_parser().parse_args(_attach_values(sys.argv[1:] if argv is None else argv))
    answered = fast_answer(args, MAX_JOBS)
    if answered is not None:
        return answered
    fresh = "agents" not in sys.modules  # the registries hold no one else's entries yet
    # argv None: the process's own command line (`testbed`, `python -m experiments.cli`),
    # which an interrupt ends at once; a caller of main(argv) gets the status back
    return interruptible("testbed", lambda: _main(args, index=fresh), ends_process=argv is None)


def _main(args: argparse.Namespace, index: bool = False) -> int:
    from leaderboard.worker import enable_compilation_cache
    from testbed import threefry_cpu

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    setup_logging()
    enable_compilation_cache()
    threefry_cpu.install()  # the same random bits as JAX's, faster on the CPU
    setup_logging(verbosity(args))
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
