"""What the command line and the experiment scripts share at the terminal: one-line usage
errors, logging to stderr, Ctrl-C that is never lost, tables, and a sweep's line on stderr;
and `testbed list`'s rows, answered from the registries or from their index
(experiments.catalog) before the stack loads.

Imports nothing of the stack at module level: `--help` and a usage error answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from experiments.comma_lists import split_choices, split_items  # noqa: F401  (here too)

EXIT_OK = 0
EXIT_JOBS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3  # a full disk, an I/O error, a cluster that cannot be reached
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as other Unix tools
# OSErrors of a path the user gave (exit 2); any other OSError is the machine's (exit 3)
PATH_ERRNOS = ("ENAMETOOLONG", "ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "EROFS",
               "ELOOP", "EEXIST", "EINVAL")  # fmt: skip


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, `<name>: error: ...`, with
    status 2 (argparse prints its usage first); `name` defaults to the program's first
    word, so `testbed sweep`'s errors say `testbed`."""

    def __init__(
        self,
        *args: Any,
        name: str | None = None,
        number_options: Sequence[str] = (),
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.name = name or self.prog.split()[0]
        self.number_options = tuple(number_options)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, with `--timeout -1` read as `--timeout=-1` for each of
        `number_options` (a negative value gets our message, not argparse's "expected one
        argument")."""
        given, self._given = list(sys.argv[1:] if args is None else args), []
        while given:  # self._given: the arguments as parsed, for error()'s hints
            arg = given.pop(0)
            value = given[0] if given else ""
            if arg in self.number_options and value.startswith("-") and value[1:2] != "-":
                arg = f"{arg}={given.pop(0)}"
            self._given.append(arg)
        return super().parse_known_args(self._given, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.name}: error: {message}{self._hint(message)}\n")

    def _hint(self, message: str) -> str:
        """Did-you-mean for a mistyped subcommand or option: argparse says `invalid choice`
        or, for `--agnet`, only that `--agent` is required."""
        from testbed.config import did_you_mean

        choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        options = sorted(set(_option_strings(self)))
        typed = [a.split("=", 1)[0] for a in getattr(self, "_given", []) if a.startswith("--")]
        names = [o.lstrip("-") for o in options if o.startswith("--")]  # dashes match anything
        for word in (w for w in typed if w not in options):
            near = did_you_mean(word.lstrip("-"), names).replace(" '", " '--")
            if near:
                return f"; got {word}{near}"
        return ""

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Subcommands parse alike and name their errors as this program does."""
        kwargs.setdefault("parser_class", functools.partial(OneLineParser, name=self.name))
        return super().add_subparsers(**kwargs)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of its subcommands' parsers."""
    out = []
    for action in parser._actions:
        out += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _option_strings(sub)
    return out


def script_parser(name: str, description: str) -> OneLineParser:
    """The parser of `python -m experiments.<name>`: its errors say `<name>: error: ...`,
    its help shows each option's default."""
    return OneLineParser(
        prog=f"python -m experiments.{name}",
        name=name,
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table on stdout; names are never cut (wrapped on a terminal, the table
    widened for a pipe or a file) and text is shown as it is (no rich markup)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for c in columns:
        table.add_column(escape(c), overflow="fold")
    cells = [[escape(_fmt(v)) for v in r] for r in rows]
    for r in cells:
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
    from leaderboard.execution.sweeping import run

    start = time.perf_counter()
    summary = run(jobs, results, executor, progress=True)
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


# What every command loads; a Ctrl-C while they import waits until they are loaded.
STACK = ("leaderboard.execution.executors", "leaderboard.execution.worker",
         "leaderboard.execution.runner", "generative", "agents")  # fmt: skip


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


def interruptible(
    prog: str, run: Callable[[], int], *, ends_process: bool = False, chosen: Any = None
) -> int:
    """`run()` as a command runs: its settings installed (`installed`), Ctrl-C while the
    stack loads waits for it, later ones are never lost (a KeyboardInterrupt that Python
    drops inside JAX's gc callback is recorded and raised again); an interrupt ends in one
    line and status 130.

    `ends_process` (this process is the command: its `__main__`): after that line the
    process ends at once (`end_interrupted`), not through the interpreter's exit, which
    waits for native work the interrupt abandoned in flight."""
    try:
        with installed(chosen):
            _import_stack()
            from leaderboard.execution.executors import recorded_interrupts

            with recorded_interrupts():
                return run()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        if ends_process:
            end_interrupted()
        return EXIT_INTERRUPTED


def environment() -> Any:
    """A command's settings (a `testbed.settings.Settings`): the environment, read once
    at its start, before the stack loads (`experiments.catalog.environment`)."""
    from experiments import catalog

    return catalog.environment()


@contextlib.contextmanager
def installed(chosen: Any = None) -> Iterator[Any]:
    """A command's settings in force while it runs, the rest of it reading them
    (`testbed.settings.using`): `chosen` (as `environment()` read them), else the
    environment's, read now. One read of the environment per command."""
    with _interrupts_held():
        from testbed import settings  # imports the testbed (JAX): Ctrl-C held, as below

    pinned = settings.current() if chosen is None else settings.Settings(tuple(chosen.values))
    with settings.using(pinned):
        yield pinned


def end_interrupted() -> NoReturn:
    """Ends an interrupted command's process now with status 130, its output flushed.

    By then the command has closed its results store (each finished job or cell was
    committed as it finished) and stopped its workers (`finally` blocks); what is left is
    the interpreter's exit, which can wait minutes for work the interrupt abandoned: XLA
    cannot cancel a running computation and joins the threads that run it when JAX's
    client is destroyed (at exit); a library's exit handler may wait for its own pool."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def os_error(e: OSError) -> tuple[int, str]:
    """(exit status, one line) for an OSError: a path the user gave (2), else the
    machine's (3)."""
    import errno

    from leaderboard.outputs import shown

    where = f" ({shown(e.filename)})" if e.filename else ""
    text = f"{e.strerror or e}{where}"
    if e.errno in {getattr(errno, n) for n in PATH_ERRNOS if hasattr(errno, n)}:
        return EXIT_BAD_INPUT, f"{text}; allowed: a path that can be used here"
    return EXIT_ENVIRONMENT, f"{text} (the machine's fault, not the input's)"


def silence_stdout() -> None:
    """Points stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout is not a real file
        pass


def one_line_errors(prog: str, run: Callable[[], int], hint: Callable[[str], str] | None = None):
    """`run()`'s status, each fault one line `<prog>: error: ...` with its status: bad
    input 2 (`hint(message)` appended), the machine's fault 3, the output's reader gone
    141 (nothing said), any other OSError 2 or 3 by its errno."""
    from testbed.errors import EnvironmentFault, InputError

    try:
        return run()
    except InputError as e:
        return bad_input(prog, f"{e}{hint(str(e)) if hint else ''}")
    except EnvironmentFault as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except BrokenPipeError:  # e.g. `testbed list agents --json | head`: the reader left
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as e:  # not said by a check of ours: one line all the same
        status, line = os_error(e)
        print(f"{prog}: error: {line}", file=sys.stderr)
        return status


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
            # how it learns in a bandit (online or refit), for agents that predict labels
            bandit = "oracle" if entry.oracle else entry.learns
            bandit = bandit if not entry.predicts or "labels" in entry.predicts else None
            if not as_json:
                predicts = ", ".join(predicts) if predicts else "(not declared)"
                bandit = bandit or ""
            rows.append([n, predicts, bandit, entry.description])
        cols = ["agent", "predicts", "in a bandit", "description"]
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
    """`testbed list`'s rows as JSON or as a table."""
    if as_json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], indent=2))
    else:
        print_table(what, cols, rows)


def _example(generative: Any, sweeps: list[str]) -> str:
    """An example id of a family: the first id of its test sweep (runs quickly, offline),
    else of its first sweep ('' without sweeps)."""
    tests = [s for s in sweeps if s.endswith("_test")]
    ids = generative.sweep_ids((tests or sweeps)[0]) if sweeps else []
    return ids[0] if ids else ""


def write_index() -> None:
    """Writes the registries' index for later commands when none matches this state."""
    from experiments import catalog

    if catalog.cache_dir() is None or catalog.load() is not None:
        return
    try:
        catalog.write(catalog.build(list_rows))
    except Exception as e:  # a cache: never the command's failure
        logging.getLogger("testbed.catalog").debug("index not written: %s", e)


def check_range(option: str, value: int, low: int, high: int) -> None:
    """An InputError naming `option` when `value` is not in low..high."""
    from testbed.errors import InputError

    if not low <= value <= high:
        raise InputError(f"{option}: got {value}; allowed: {low} to {high}")


def check_not_empty(option: str, value: str, allowed: str) -> None:
    """An InputError naming `option` when the path `value` is empty (it would name the
    current folder); `allowed` says what to give, e.g. `a results file such as real.db`."""
    from testbed.errors import InputError

    if not value.strip():
        raise InputError(f"{option}: got {value!r}, which is empty; allowed: {allowed}")


def shown(text: str, out: Path, failed: Any, what: str = "table and figure") -> int:
    """A reproduction's end: its tables on stdout, where its files are on stderr; its exit
    status (1 when a job or cell failed)."""
    print(text)
    print(f"\n{what}: {out.resolve()}", file=sys.stderr)
    return 1 if failed else 0


def shown_tables(out: Path, names: Sequence[str], failed: Any, what: str = "tables and figure"):
    """`shown` of the markdown tables `names` that a reproduction wrote in `out`, one after
    the other (a blank line between)."""
    text = "\n".join((out / name).read_text() for name in names)
    return shown(text, out, failed, what)


def bad_input(prog: str, error: Exception | str) -> int:
    """A script's refusal of its input (an InputError, said by a check of ours): one line
    `<prog>: error: ...` on stderr; returns the status to exit with (2)."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT


def add_store_options(parser: argparse.ArgumentParser, results: str, out: str, out_help: str):
    """A reproduction's --results (its results store, default `results`), --out (default
    `out`, as `out_help` says) and --workers (processes, 0: one per core)."""
    parser.add_argument("--results", default=results, help="results store")
    parser.add_argument("--out", default=out, help=out_help)
    parser.add_argument("--workers", type=int, default=1, help="processes (0: one per core)")


def parse_pairs(pairs: Sequence[str], option: str = "--set") -> dict[str, str]:
    """`key=value` pairs as a dict (values as text: the agent or problem types them)."""
    from testbed.errors import InputError

    out = {}
    for pair in pairs:
        if "=" not in pair or not pair.split("=", 1)[0].strip():
            raise InputError(f"{option}: got {pair!r}; allowed: key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def add_verbosity(p: argparse.ArgumentParser) -> None:
    """-q/--quiet and -v/--verbose, one or the other."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no progress, only warnings and errors"
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", help="also say each phase and finished job"
    )


def import_hint(command: str, message: str) -> str:
    """For an unknown agent, problem family or sweep (`message`, an error of `testbed
    command`) that a .py file here or in examples/ registers: where, and the --import that
    registers it ('' otherwise)."""
    import re

    from experiments import catalog

    if command not in ("run", "sweep", "leaderboard", "report", "list"):
        return ""
    found = re.match(r"(agent|problem family|sweep): got '([^']*)'", message)
    return catalog.import_hint(found.group(1), found.group(2)) if found else ""
