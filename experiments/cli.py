"""The `testbed` command line: list, run (sweep, leaderboard, report come with the leaderboard).

Bad input prints one line `testbed: error: ...` and exits with status 2, no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2
        self.exit(EXIT_BAD_INPUT, f"testbed: error: {message}\n")


def _parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    from testbed.errors import InputError

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise InputError(f"--set: got {pair!r}; allowed: key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[_fmt(v) for v in r])
    Console().print(table)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def cmd_list(args: argparse.Namespace) -> int:
    import agents
    import generative
    import testbed

    if args.what == "agents":
        rows = [[n, agents.AGENTS.get(n).description] for n in agents.names()]
        cols = ["agent", "description"]
    elif args.what == "problems":
        rows = [
            [f.name + "/...", f.description]
            for f in map(generative.FAMILIES.get, generative.FAMILIES)
        ]
        cols = ["problem family", "description"]
    elif args.what == "sweeps":
        rows = [[n, len(generative.sweep_ids(n))] for n in generative.sweep_names()]
        cols = ["sweep", "problems"]
    else:
        rows = [[n, testbed.metrics.get(n).description] for n in testbed.metrics.names()]
        cols = ["metric", "description"]
    if args.json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], indent=2))
    else:
        _print_table(args.what, cols, rows)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import agents
    import generative
    import testbed

    overrides: dict[str, Any] = _parse_sets(args.set or [])
    if args.seed is not None:
        overrides["seed"] = args.seed
    agent = agents.load(args.agent, **overrides)
    problem = generative.load(args.problem)
    quality = testbed.evaluate(agent, problem)
    if args.json:
        out = {
            "agent": agent.name,
            "config": agent.config_dict(),
            "problem": args.problem,
            "settings": generative.problem_settings(args.problem),
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


def cmd_not_yet(args: argparse.Namespace) -> int:
    from testbed.errors import InputError

    raise InputError(
        f"'testbed {args.command}' is not available yet: it comes with the leaderboard"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="testbed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("list", help="list agents, problems, sweeps or metrics")
    p.add_argument("what", choices=["agents", "problems", "sweeps", "metrics"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_list)

    p = sub.add_parser("run", help="train one agent on one problem and print its quality")
    p.add_argument("--agent", required=True)
    p.add_argument("--problem", required=True, help="a problem id, e.g. classification_2d/75")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="agent config override")
    p.add_argument("--seed", type=int, help="the agent's seed")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_run)

    for name in ("sweep", "leaderboard", "report"):
        p = sub.add_parser(name, help="(coming with the leaderboard)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(fn=cmd_not_yet)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = build_parser().parse_args(argv)
    from testbed.errors import InputError

    try:
        return args.fn(args)
    except InputError as e:
        print(f"testbed: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("testbed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
