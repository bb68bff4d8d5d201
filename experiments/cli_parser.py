"""The `testbed` command line's argument parser: each command's options, defaults and help.

Kept apart from the commands (`experiments.cli`), whose functions it is given; it imports
nothing of the stack, so `--help` and a usage error answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from experiments.console import OneLineParser, add_verbosity

# the library's, without importing it (--help answers at once); tests/test_sweep_call.py pins it
RESULTS = "testbed-results.db"  # the results file when --results is not given: DEFAULT_PATH

Command = Callable[[argparse.Namespace], int]  # a command's function: its exit status


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


def _add_run(sub: Any, fn: Command) -> None:
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
    p.set_defaults(fn=fn)


def _add_sweep(sub: Any, fn: Command) -> None:
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
    p.add_argument(
        "--address", help="Ray cluster address (default: RAY_ADDRESS if set, else a local Ray)"
    )
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
    p.set_defaults(fn=fn)


def _add_leaderboard(sub: Any, fn: Command) -> None:
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
    p.set_defaults(fn=fn)


def build_parser(description: str, commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    """The parser of `testbed`, whose `args.fn` is the function `commands` gives for the
    command named (list, run, sweep, leaderboard, report, salvage)."""
    parser = OneLineParser(prog="testbed", description=description, number_options=["--timeout"])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list agents, problems, sweeps or metrics")
    p.add_argument("what", choices=["agents", "problems", "sweeps", "metrics"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_import(p)
    p.set_defaults(fn=commands["list"])
    _add_run(sub, commands["run"])
    _add_sweep(sub, commands["sweep"])
    _add_leaderboard(sub, commands["leaderboard"])
    p = sub.add_parser("report", help="write a self-contained HTML report")
    _add_ranking(p, "rank over this sweep's problems", "--out")
    p.add_argument("--title", default="testbed leaderboard")
    _add_shipped(p)
    p.set_defaults(fn=commands["report"])
    p = sub.add_parser("salvage", help="copy the readable rows of a damaged results file")
    p.add_argument("--results", required=True, help="the damaged results file (not changed)")
    p.add_argument("--out", required=True, help="a new results file for the rows that read")
    p.add_argument(
        "--wal", choices=("check", "ignore", "use"), default="check",
        help="its WAL file: refused when another store's or zeroed (check), left out "
        "(ignore), or read whatever wrote it (use)",
    )  # fmt: skip
    p.set_defaults(fn=commands["salvage"])
    return parser
