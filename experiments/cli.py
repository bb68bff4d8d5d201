"""The `testbed` command line: list, run, sweep, leaderboard, report, salvage.

Every fault ends in one line `testbed: error: ...` (no traceback) and an exit status:

    0    done (a sweep: every job of it stored as ok)
    1    a sweep ran, and some of its jobs are stored as failed (their reasons are stored)
    2    bad input: an unknown name, a bad value or path, a damaged results file
    3    the machine or a service failed: a full disk, an I/O error, an unreachable cluster
    130  interrupted (Ctrl-C); every job that finished is stored
    141  the reader of the output went away (`testbed ... | head`)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_JOBS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3  # a full disk, an I/O error, a cluster that cannot be reached
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as other Unix tools
MAX_JOBS = 1_000_000  # one sweep's jobs (each is held in memory while it is expanded)
RESULTS = "testbed-results.db"  # the results file when --results is not given
# OSErrors of a path the user gave (exit 2); any other OSError is the machine's (exit 3)
PATH_ERRNOS = ("ENAMETOOLONG", "ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "EROFS",
               "ELOOP", "EEXIST", "EINVAL")  # fmt: skip


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, `<name>: error: ...`, with
    status 2 (argparse prints its usage first); `name` defaults to the program's first
    word, so `testbed sweep`'s errors say `testbed`."""

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.name = name or self.prog.split()[0]

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.name}: error: {message}\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Subcommands parse alike and name their errors as this program does."""
        kwargs.setdefault("parser_class", functools.partial(OneLineParser, name=self.name))
        return super().add_subparsers(**kwargs)


def _parse_sets(pairs: Sequence[str], option: str = "--set") -> dict[str, str]:
    from testbed.errors import InputError

    out = {}
    for pair in pairs:
        if "=" not in pair or not pair.split("=", 1)[0].strip():
            raise InputError(f"{option}: got {pair!r}; allowed: key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def check_problem_options(problem_ids: Sequence[str], options: dict[str, Any]) -> dict[str, Any]:
    """`--option` values checked as `generative.load(id, **options)` checks them, for every
    family among `problem_ids` (an unknown name, a value of the wrong type or out of range is
    one InputError), without building a problem; returns them typed (`num_test_seeds="50"`
    -> 50), as the first family types them."""
    import dataclasses
    import typing

    from generative.registry import split_id, typed_options
    from testbed.errors import InputError
    from testbed.registry import unknown_name

    if not options:
        return {}
    typed_first: dict[str, Any] | None = None
    seen: set[str] = set()
    for pid in problem_ids:
        family, rest = split_id(pid)
        if family.name in seen:
            continue
        seen.add(family.name)
        unknown = sorted(set(options) - set(family.options))
        if unknown and not family.options:
            raise InputError(
                f"--option: got {unknown[0]!r} for {pid}; allowed: none ({family.name} "
                "problems take no options)"
            )
        where = f"--option for {family.name} problems"
        if unknown:
            raise unknown_name(where, unknown[0], family.options)
        typed = typed_options(family, dict(options), where)
        cls = family.option_types
        if cls is None:
            try:
                cls = typing.get_type_hints(family.build).get("return")
            except (NameError, TypeError):
                cls = None
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            names = {f.name for f in dataclasses.fields(cls)}
            fields = {k: v for k, v in {**family.settings(rest), **typed}.items() if k in names}
            try:
                cls(**fields)  # its own checks of the values (ranges, choices)
            except TypeError:  # settings that are not all its fields: types checked only
                pass
            except InputError as e:
                raise InputError(f"{where}: {e}") from None
        typed_first = typed if typed_first is None else typed_first
    return typed_first or {}


def _print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for c in columns:  # never cut a name: wrap it (a terminal) or widen (a pipe or file)
        table.add_column(escape(c), overflow="fold")
    cells = [[escape(_fmt(v)) for v in r] for r in rows]
    for r in cells:  # text from results and docstrings is shown as it is (no rich markup)
        table.add_row(*r)
    console = Console()
    if not console.is_terminal:
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        console = Console(width=max(80, sum(widths) + 3 * len(widths) + 1))
    console.print(table)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _user_modules(args: argparse.Namespace) -> list[str]:
    """--import values: module names as given, `.py` paths made absolute (for workers)."""
    out = []
    for spec in _split(getattr(args, "imports", None) or []):
        is_path = spec.endswith(".py") or os.sep in spec
        out.append(str(Path(spec).expanduser().resolve()) if is_path else spec)
    return out


def _import_user_modules(args: argparse.Namespace) -> None:
    """Imports the modules named by --import (the user's own agents and problems register
    there); a module that cannot be imported is a one-line error."""
    from leaderboard.worker import import_user_module
    from testbed.errors import InputError

    for spec in _user_modules(args):
        try:
            import_user_module(spec)
        except InputError as e:  # e.g. an agent name registered twice: said as it is
            raise InputError(f"--import {spec}: {e}") from None
        except ImportError as e:
            raise InputError(
                f"--import: got {spec!r}; cannot import it ({e}); allowed: a module name "
                "(importable from here) or a path to a .py file"
            ) from None
        except Exception as e:  # the user's module raised: where, in one line
            raise InputError(
                f"--import: {spec!r} raised {type(e).__name__}: {e} ({_where_raised(e)}); "
                f"allowed: a module that imports without error (python {spec} shows the "
                "traceback)"
            ) from None


def _where_raised(e: BaseException) -> str:
    """'file:line' where `e` was raised (a SyntaxError: where the bad code is)."""
    import traceback

    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}"
    frames = traceback.extract_tb(e.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown place"


def cmd_list(args: argparse.Namespace) -> int:
    _import_user_modules(args)
    cols, rows = list_rows(args.what, args.json)
    show_list(args.what, cols, rows, args.json)
    return 0


def list_rows(what: str, as_json: bool) -> tuple[list[str], list[list[Any]]]:
    """`testbed list WHAT`'s columns and rows, as JSON values (`as_json`) or table cells."""
    import agents
    import generative
    import testbed

    if what == "agents":
        rows = []
        for n in agents.names():
            entry = agents.AGENTS.get(n)
            # labels, real_values, posterior, ...; None: not declared (never checked)
            predicts = sorted(entry.predicts) if entry.predicts else None
            if not as_json:
                predicts = ", ".join(predicts) if predicts else "(not declared)"
            rows.append([n, predicts, entry.description])
        cols = ["agent", "predicts", "description"]
    elif what == "problems":
        sweeps = generative.family_sweeps()
        rows = [
            [f.name, f.id_form, _example(generative, sweeps[f.name]), ", ".join(sweeps[f.name]),
             list(f.options) if as_json else ", ".join(f.options), f.description]
            for f in map(generative.FAMILIES.get, generative.FAMILIES)
        ]  # fmt: skip
        cols = ["family", "id form", "example", "sweeps", "options", "description"]
    elif what == "sweeps":
        rows = [[n, len(generative.sweep_ids(n))] for n in generative.sweep_names()]
        cols = ["sweep", "problems"]
    else:
        rows = [
            [n, ", ".join(m.needs), ", ".join(m.gives), m.description]
            for n, m in ((n, testbed.metrics.get(n)) for n in testbed.metrics.names())
        ]
        cols = ["metric", "needs", "gives", "description"]
    return cols, rows


def show_list(what: str, cols: list[str], rows: list[list[Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], indent=2))
    else:
        _print_table(what, cols, rows)


def _example(generative: Any, sweeps: list[str]) -> str:
    """An example id of a family: the first id of its test sweep (runs quickly, offline),
    else of its first sweep ('' without sweeps)."""
    tests = [s for s in sweeps if s.endswith("_test")]
    ids = generative.sweep_ids((tests or sweeps)[0]) if sweeps else []
    return ids[0] if ids else ""


def cmd_run(args: argparse.Namespace) -> int:
    import agents
    import generative
    import testbed

    _import_user_modules(args)

    overrides: dict[str, Any] = _parse_sets(args.set or [])
    if args.seed is not None:
        overrides["seed"] = args.seed
    agent = agents.load(args.agent, **overrides)
    options = check_problem_options([args.problem], _parse_sets(args.option or [], "--option"))
    problem = generative.load(args.problem, **options)
    from testbed.evaluate import check_fit

    check_fit(agent, problem, args.problem)  # the id in the message, before training
    metrics = _split(args.metrics) if args.metrics else None
    if metrics and "default" in metrics:  # the problem's own metrics, plus the others named
        defaults = list(getattr(problem, "metrics", ()))
        metrics = list(
            dict.fromkeys(m for n in metrics for m in (defaults if n == "default" else [n]))
        )
    from testbed.errors import InputError
    from testbed.progress import activity

    try:
        with activity(f"{agent.name} on {args.problem}", timed=False):
            quality = testbed.evaluate(agent, problem, metrics=metrics)
    except (MemoryError, OverflowError, RuntimeError) as e:  # JAX's out of memory: Runtime
        if isinstance(e, RuntimeError) and "RESOURCE_EXHAUSTED" not in str(e):
            raise
        given = " ".join(f"--set {s}" for s in args.set or []) or "its default config"
        what = "met a number too large" if isinstance(e, OverflowError) else "ran out of memory"
        raise InputError(
            f"{agent.name} on {args.problem} {what} with {given} "
            f"({str(e).splitlines()[0][:160]}); allowed: sizes that fit in this machine's "
            "memory"
        ) from None
    if args.json:
        out = {
            "agent": agent.name,
            "config": agent.config_dict(),
            "problem": args.problem,
            "settings": generative.problem_settings(args.problem),
            "options": options,
            "quality": dict(quality),
        }
        print(json.dumps(out, indent=2))
    else:
        _print_table(
            f"{agent.name} on {args.problem}",
            ["metric", "value"],
            [[k, v] for k, v in quality.items()],
        )
    return 0


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for text in values or [] for v in text.split(",") if v.strip()]


def _executor(args: argparse.Namespace) -> Any:
    from leaderboard.executors import DEFAULT_TIMEOUT, InlineExecutor, LocalExecutor, RayExecutor

    imports = tuple(_user_modules(args))
    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    if args.executor == "inline":
        return InlineExecutor(imports=imports, timeout=timeout)
    if args.executor == "ray":
        return RayExecutor(
            address=args.address, timeout=timeout, workers=args.workers, imports=imports
        )
    return LocalExecutor(workers=args.workers, timeout=timeout, imports=imports)


MAX_FAILURES_SHOWN = 10


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


def count_seeds(text: str) -> int:
    """How many seeds `--seeds` names (ranges counted, not expanded); an InputError for a
    range that runs backwards (`5-2`, which named no seed and was dropped unsaid)."""
    from testbed.errors import InputError

    count = 0
    for part in (p.strip() for p in str(text).split(",")):
        lo, sep, hi = part.partition("-")
        if sep and lo.strip().isdigit() and hi.strip().isdigit():
            low, high = int(lo), int(hi)
            if high < low:
                raise InputError(
                    f"--seeds: got {text!r}, whose range {part!r} runs backwards (it names no "
                    f"seed); allowed: ranges low-high such as {high}-{low}"
                )
            count += high - low + 1
        elif part:
            count += 1
    return count


def _check_sweep_size(agent_names: Sequence[str], problems: int, seeds: int, configs: str):
    """An InputError, before any job is made, for a sweep of more than MAX_JOBS jobs
    (`--seeds 0-10000000` grew to gigabytes without a word)."""
    import agents
    from testbed.errors import InputError

    per_agent = [len(agents.sweep(n)) if configs == "sweep" else 1 for n in agent_names]
    total = sum(per_agent) * problems * seeds
    if total > MAX_JOBS:
        raise InputError(
            f"sweep: got {total:,} jobs ({sum(per_agent):,} agent configs x {problems:,} "
            f"problems x {seeds:,} seeds); allowed: at most {MAX_JOBS:,} jobs in one sweep "
            "(fewer --seeds, problems or configs; several sweeps may share one --results file)"
        )


def cmd_sweep(args: argparse.Namespace) -> int:
    import generative
    from leaderboard.jobs import expand, parse_seeds
    from leaderboard.runner import run_sweep
    from leaderboard.store import ResultsStore
    from testbed.errors import InputError

    _import_user_modules(args)
    agent_names = _split(args.agent)
    seed_count = count_seeds(args.seeds)
    overrides = _parse_sets(args.set or [])
    options = _parse_sets(args.option or [], "--option")
    if bool(args.sweep) == bool(args.problem):
        raise InputError("give exactly one of --sweep NAME or --problem ID[,ID...]")
    if args.sweep:
        ids = generative.sweep_ids(args.sweep)
    else:
        ids = _split(args.problem)
        if not ids:
            raise InputError(
                f"--problem: got {','.join(args.problem)!r}; allowed: one or more problem ids "
                "such as coin/0,coin/1"
            )
        for pid in ids:
            generative.problem_settings(pid)  # an unknown id fails here, before any job
    _check_sweep_size(agent_names, len(ids), seed_count, args.configs)
    seeds = parse_seeds(args.seeds)
    problem_options = check_problem_options(ids, options)
    jobs = expand(
        agent_names, ids, seeds=seeds, overrides=overrides, configs=args.configs,
        problem_options=problem_options,
    )  # fmt: skip
    executor = _executor(args)
    if args.executor == "inline" and args.workers:
        raise InputError(
            f"workers: got {args.workers} with --executor inline, which runs one job at a time "
            "in this process; allowed: --executor local or ray for parallel workers"
        )
    connect = getattr(executor, "connect", None)
    if connect is not None:  # a cluster that does not answer: one line, and no results file
        connect()
    try:
        with ResultsStore(args.results, mode="w") as store:  # Ctrl-C: recorded by `main`
            summary = run_sweep(
                jobs,
                store,
                executor,
                retry_failed=args.retry_failed,
                progress=not args.quiet,
                share_training=not args.train_per_job,
            )
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    if args.json:
        print(json.dumps({**vars(summary), "results": args.results}, indent=2))
    else:
        _print_summary(summary, args.results)
    return 1 if summary.any_failed else 0


def cmd_failures(args: argparse.Namespace) -> int:
    """`testbed leaderboard --failures`: every failed job with its stored reason (of
    `--sweep` only when given)."""
    from leaderboard.board import problem_universe
    from leaderboard.store import load
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
        _print_table(f"failed jobs ({len(failed)})", cols, failed.values.tolist())
        if len(failed):
            print("(tracebacks: --format json, or leaderboard.load(PATH)['traceback'])")
    else:
        print(render(failed, args.format))
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    _check_shipped_only(args, "failures", "export")
    from leaderboard import board as lb
    from leaderboard.outputs import check_output_path
    from leaderboard.tables import fmt_cell, render

    _import_user_modules(args)  # a family of the user's says how it is ranked
    if args.failures:
        return cmd_failures(args)
    if args.export:
        check_output_path("export", args.export, [args.results])
    normalize = None if args.normalize == "none" else args.normalize
    board = lb.build(
        None if args.shipped_only else args.results,
        sweep=args.sweep,
        tau=args.tau,
        normalize=normalize,
        best_only=not args.all_configs,
        metric=args.metric,
        per_observation=args.per_observation,
        shipped=not args.no_shipped,
    )
    if args.export:
        from leaderboard.store import export

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
            _print_table(title, [lb.SHORT_NAMES.get(c, str(c)) for c in table.columns], rows)
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
    from leaderboard.outputs import check_output_path
    from leaderboard.report import write_report

    check_output_path("out", args.out, [] if args.shipped_only else [args.results])
    _import_user_modules(args)
    normalize = None if args.normalize == "none" else args.normalize
    board = lb.build(
        None if args.shipped_only else args.results,
        sweep=args.sweep,
        normalize=normalize,
        per_observation=True,
        unranked_ok=True,
        shipped=not args.no_shipped,
    )
    path = write_report(board, args.out, title=args.title)
    for note in lb.coverage_notes(board):  # configs scored apart: on stderr, as leaderboard
        print(note, file=sys.stderr)
    print(f"report: {path.resolve()}")
    return 0


def cmd_salvage(args: argparse.Namespace) -> int:
    from leaderboard.store import salvage
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


def _add_no_shipped(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-shipped",
        action="store_true",
        help="rank your results alone, without the package's runs of ours beside them",
    )
    p.add_argument(
        "--shipped-only",
        action="store_true",
        help="rank the package's runs of ours on --sweep alone (no results file is read): "
        "where the reference agents stand",
    )


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
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE_OR_FILE",
        help="module name(s) or .py file(s) that register your own agents or problems",
    )


def _add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="problem option, as generative.load(id, KEY=VALUE) takes it (e.g. "
        "standardize=feature, num_test_seeds=100); testbed list problems names each family's",
    )


def _add_verbosity(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no progress, only warnings and errors"
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", help="also say each phase and finished job"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="testbed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list agents, problems, sweeps or metrics")
    p.add_argument("what", choices=["agents", "problems", "sweeps", "metrics"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_import(p)
    p.set_defaults(fn=cmd_list)

    p = sub.add_parser("run", help="train one agent on one problem and print its quality")
    p.add_argument("--agent", required=True)
    p.add_argument("--problem", required=True, help="a problem id, e.g. classification_2d/75")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="agent config override")
    _add_option(p)
    p.add_argument("--seed", type=int, help="the agent's seed")
    p.add_argument(
        "--metrics",
        action="append",
        metavar="NAME[,NAME]",
        help="metrics to compute instead of the problem's own ('default' adds those)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_import(p)
    _add_verbosity(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("sweep", help="run agents over a problem sweep into the results store")
    p.add_argument("--agent", action="append", required=True, help="agent name(s), a,b or repeat")
    p.add_argument("--sweep", help="a registered problem sweep (testbed list sweeps)")
    p.add_argument("--problem", action="append", help="problem id(s) instead of a sweep")
    p.add_argument(
        "--configs",
        choices=["default", "sweep"],
        default="default",
        help="the agent's default config, or its whole hyper-parameter sweep",
    )
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="agent config override")
    _add_option(p)
    p.add_argument("--seeds", default="0", help="agent seeds: 0,1,2 or 0-4 (default 0)")
    p.add_argument(
        "--executor",
        choices=["local", "ray", "inline"],
        default="local",
        help="local process pool, Ray cluster, or inline (this process, for debugging)",
    )
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
        "--train-per-job",
        action="store_true",
        help="train once per problem, not once per training set (the Neural Testbed's tau "
        "pairs share one; so do an SBI task's observations for amortized agents: the same "
        "numbers, up to 10x the training time)",
    )
    _add_import(p)
    _add_verbosity(p)
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.set_defaults(fn=cmd_sweep)

    p = sub.add_parser("leaderboard", help="rank agents from a results file")
    p.add_argument("--results", help=f"SQLite results file (default: {RESULTS})")
    p.add_argument(
        "--sweep",
        help="rank over this sweep's problems (an agent that ran part of them is shown apart)",
    )
    p.add_argument("--tau", type=int, help="one tau only (default: a table per tau)")
    p.add_argument(
        "--normalize",
        default="default",
        help="agent whose mean score is 1 (default: each family's own, e.g. uniform), or none",
    )
    p.add_argument("--all-configs", action="store_true", help="every config, not the best")
    p.add_argument("--metric", choices=["auto", "kl", "c2st"], default="auto")
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    p.add_argument("--export", metavar="PATH", help="also write all rows to .csv / .parquet")
    p.add_argument(
        "--failures", action="store_true", help="list the failed jobs and their reasons instead"
    )
    p.add_argument(
        "--per-observation",
        action="store_true",
        help="also C2ST per observation, beside the SBI benchmark paper's",
    )
    _add_no_shipped(p)
    _add_import(p)
    p.set_defaults(fn=cmd_leaderboard)

    p = sub.add_parser("report", help="write a self-contained HTML report")
    p.add_argument("--results", help=f"SQLite results file (default: {RESULTS})")
    p.add_argument("--out", default="report.html", help="the HTML file to write")
    p.add_argument("--sweep", help="rank over this sweep's problems")
    p.add_argument(
        "--normalize",
        default="default",
        help="agent whose mean score is 1 (default: each family's own, e.g. uniform), or none",
    )
    p.add_argument("--title", default="testbed leaderboard")
    _add_no_shipped(p)
    _add_import(p)
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


class _OneLine(logging.Formatter):
    """`testbed: warning: message` on one line (log records from the testbed's modules);
    progress lines carry the time (`testbed: 16:16:39 sweep: 3/7 done, ...`), but not on
    a terminal's status line."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        level = "" if record.levelno == logging.INFO else record.levelname.lower() + ": "
        if record.name == "testbed.progress" and not getattr(record, "status", False):
            level = time.strftime("%H:%M:%S ", time.localtime(record.created)) + level
        return f"testbed: {level}{text}"


class _Stderr(logging.Handler):
    """Writes to whatever sys.stderr is at the time (tests replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


def setup_logging(level: int = logging.INFO) -> None:
    """The `testbed` logger to stderr at `level` (WARNING with --quiet, DEBUG with -v);
    on a terminal progress keeps one status line (testbed.progress.StatusLine)."""
    from testbed.progress import StatusLine

    logger = logging.getLogger("testbed")
    for old in [h for h in logger.handlers if isinstance(h, _Stderr | StatusLine)]:
        logger.removeHandler(old)
    handler = StatusLine() if sys.stderr.isatty() else _Stderr()
    handler.setFormatter(_OneLine())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def run_jobs(jobs: Sequence, results: str, executor: Any):
    """Run `jobs` into the results store `results` (what it holds is skipped), then say on
    stderr what ran and why the first failures failed; returns the sweep's summary."""
    from leaderboard.runner import run_sweep
    from leaderboard.store import ResultsStore

    start = time.perf_counter()
    with ResultsStore(results, mode="w") as store:
        summary = run_sweep(jobs, store, executor, progress=True)
    print(
        f"{summary.total} runs: {summary.skipped} already stored, {summary.ok} ok, "
        f"{summary.failed} failed in {time.perf_counter() - start:.0f} s -> {results}",
        file=sys.stderr,
    )
    for key, reason in summary.failures[:10]:
        print(f"  failed {key}: {reason}", file=sys.stderr)
    return summary


def stored_keys(results: str) -> set[str]:
    """The keys of the jobs a results store holds, read and never written (`--report`)."""
    from leaderboard.store import ResultsStore
    from testbed.errors import InputError

    if not Path(results).exists():
        raise InputError(f"--results: got {results!r}, no such file")
    with ResultsStore(results, mode="r") as store:
        return store.keys()


def _verbosity(args: argparse.Namespace) -> int:
    """The logging level the options ask for."""
    if getattr(args, "quiet", False):
        return logging.WARNING
    return logging.DEBUG if getattr(args, "verbose", False) else logging.INFO


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


# What every command loads; a Ctrl-C while they import waits until they are loaded.
STACK = ("leaderboard.executors", "leaderboard.worker", "leaderboard.runner", "generative",
         "agents")  # fmt: skip


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C inside the block waits for its end, then raises KeyboardInterrupt. Only in
    the main thread over Python's default handler (a caller's handler is left alone)."""
    import threading

    pending: list[int] = []
    hold = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if hold:
        signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        if hold:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt


def _import_stack() -> None:
    """Sets up logging (before a plugin can warn) and imports the stack with Ctrl-C held
    back: a KeyboardInterrupt raised inside an import can leave a native extension half
    initialised (a later import fails, or the process crashes) or be dropped by a
    garbage-collection callback (the sweep then ran to its end)."""
    import importlib

    with _interrupts_held():
        setup_logging()
        for name in STACK:
            importlib.import_module(name)


def interruptible(prog: str, run: Callable[[], int]) -> int:
    """`run()` as a command runs: Ctrl-C while the stack loads waits for it, later ones
    are never lost (a KeyboardInterrupt that Python drops inside JAX's gc callback is
    recorded and raised again); an interrupt ends in one line and status 130."""
    try:
        _import_stack()
        from leaderboard.executors import recorded_interrupts

        with recorded_interrupts():
            return run()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    # `--help` and a usage error need none of the libraries: answered before they load;
    # so are `list` and a mistyped name, from the registries' index (experiments.catalog)
    args = build_parser().parse_args(_attach_values(sys.argv[1:] if argv is None else argv))
    answered = _fast_answer(args)
    if answered is not None:
        return answered
    fresh = "agents" not in sys.modules  # the registries hold no one else's entries yet
    return interruptible("testbed", lambda: _main(args, index=fresh))


def _fast_answer(args: argparse.Namespace) -> int | None:
    """The answer of experiments.catalog's index, or None (the command takes the whole way).
    A process that has imported the registries already (a test, a notebook: it may have
    registered its own agents or problems) asks them, not the index."""
    from experiments import catalog

    if any(m in sys.modules for m in ("agents", "generative", "testbed")):
        return None
    try:
        return catalog.fast_answer(args, max_jobs=MAX_JOBS, show=show_list)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _write_index() -> None:
    """Writes the registries' index for later commands when none matches this state."""
    from experiments import catalog

    if catalog.cache_dir() is None or catalog.load() is not None:
        return
    try:
        catalog.write(catalog.build(list_rows))
    except Exception as e:  # a cache: never the command's failure
        logging.getLogger("testbed.catalog").debug("index not written: %s", e)


def _main(args: argparse.Namespace, index: bool = False) -> int:
    from leaderboard.worker import enable_compilation_cache

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    setup_logging()
    enable_compilation_cache()
    setup_logging(_verbosity(args))
    if index:  # before any --import: the index holds what every command sees
        _write_index()
    from testbed.errors import EnvironmentFault, InputError

    try:
        if args.fn in (cmd_run, cmd_sweep):  # a bad setting fails here, not in every job
            from testbed.progress import progress_mode

            progress_mode()
        return args.fn(args)
    except InputError as e:
        print(f"testbed: error: {e}{_import_hint(args, str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EnvironmentFault as e:
        print(f"testbed: error: {e}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except BrokenPipeError:  # e.g. `testbed list agents --json | head`: the reader left
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as e:  # not said by a check of ours: one line all the same
        status, line = _os_error(e)
        print(f"testbed: error: {line}", file=sys.stderr)
        return status


def _import_hint(args: argparse.Namespace, message: str) -> str:
    """For an unknown agent, problem family or sweep that a .py file here or in examples/
    registers: where, and the --import that registers it ('' otherwise)."""
    import re

    from experiments.catalog import import_hint

    if args.command not in ("run", "sweep", "leaderboard", "report", "list"):
        return ""
    found = re.match(r"(agent|problem family|sweep): got '([^']*)'", message)
    return import_hint(found.group(1), found.group(2)) if found else ""


def _os_error(e: OSError) -> tuple[int, str]:
    """(exit status, one line) for an OSError: a path the user gave (2), else the
    machine's (3)."""
    import errno

    from leaderboard.outputs import shown

    where = f" ({shown(e.filename)})" if e.filename else ""
    text = f"{e.strerror or e}{where}"
    if e.errno in {getattr(errno, n) for n in PATH_ERRNOS if hasattr(errno, n)}:
        return EXIT_BAD_INPUT, f"{text}; allowed: a path that can be used here"
    return EXIT_ENVIRONMENT, f"{text} (the machine's fault, not the input's)"


def _silence_stdout() -> None:
    """Points stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout is not a real file
        pass


if __name__ == "__main__":
    sys.exit(main())
