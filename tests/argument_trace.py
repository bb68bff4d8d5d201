"""The places `testbed sweep`'s arguments visit (issue 58's measure of how far a newcomer
follows them): the product functions called, from the command line's `main` until the
first job would run, with an argument equal to a value the user typed (or with the parsed
arguments), in the order first visited. An import's registrations are not counted.

Run as a script (a fresh process, as a user's command starts) it prints them as JSON:
    python tests/argument_trace.py
in the three states a user's command starts in, each in a process of its own: no index of
the registries (`TESTBED_CATALOG=off`), the first command of an install (it writes the
index), and every later one (the index answers first: `experiments.catalog`). With
`--catalog off|DIR` it traces one state.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("leaderboard", "experiments", "testbed", "generative", "agents")
ARGV = ["sweep", "--agent", "uniform", "--sweep", "classification_2d_test", "--executor",
        "inline", "-q"]  # fmt: skip


class _FirstJob(BaseException):
    """Raised where the first job would run: the trace ends there."""


def _carries(value, typed: set[str], depth: int = 0) -> bool:
    """Whether `value` is the parsed arguments, a typed value, or holds one."""
    if isinstance(value, argparse.Namespace):
        return True
    if isinstance(value, str):
        return value in typed
    if isinstance(value, os.PathLike):
        return os.fspath(value) in typed
    if depth == 0 and isinstance(value, (list, tuple, set, frozenset)):
        return any(_carries(v, typed, 1) for v in list(value)[:50])
    if depth == 0 and isinstance(value, dict):
        return any(_carries(v, typed, 1) for v in list(value.values())[:50])
    return False


def places(argv: list[str]) -> list[str]:
    """`module:function` of each place `argv` visits, in the order first visited."""
    from experiments import cli  # imports nothing of the library: the fast answers stay

    def first_job(*args, **kwargs):
        raise _FirstJob

    typed = {v for v in argv[1:] if not v.startswith("-")}
    roots = tuple(str(ROOT / p) + os.sep for p in PACKAGES)
    main = cli.main.__code__
    seen: dict[str, None] = {}

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or code is main or not code.co_filename.startswith(roots):
            return
        if code.co_qualname == "InlineExecutor.run":
            frame.f_globals["_run_inline"] = first_job  # the trace ends at the first job
        outer = frame.f_back
        while outer is not None and outer.f_code is not main:
            if outer.f_code.co_name == "<module>":
                return  # an import's registrations, not the arguments
            outer = outer.f_back
        if outer is None or code.co_name == "<module>":
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(_carries(frame.f_locals.get(n), typed) for n in names):
            module = ".".join(Path(code.co_filename).relative_to(ROOT).with_suffix("").parts)
            seen[f"{module}:{code.co_qualname}"] = None

    sys.setprofile(profile)
    try:
        cli.main(argv)
    except _FirstJob:
        pass
    finally:
        sys.setprofile(None)
    return list(seen)


def returns(visited: list[str]) -> int:
    """How often the trace comes back to a module it left."""
    left: set[str] = set()
    last, count = None, 0
    for place in visited:
        module = place.split(":")[0]
        if module != last:
            count += module in left
            if last is not None:
                left.add(last)
            last = module
    return count


def states() -> dict[str, list[str]]:
    """The places of each state ('no index', 'first run', 'index'), each traced in a fresh
    process: {state: places}."""
    import subprocess

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for state, catalog in (("no index", "off"), ("first run", folder), ("index", folder)):
            argv = [sys.executable, __file__, "--catalog", catalog]
            run = subprocess.run(
                argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
            )
            out[state] = json.loads(run.stdout.strip().splitlines()[-1])
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] != ["--catalog"]:
        print(json.dumps(states()))
        sys.exit(0)
    os.environ["TESTBED_CATALOG"] = sys.argv[2]  # read when the command starts
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(places([*ARGV, "--results", str(Path(folder) / "r.db")])))
