"""The library call under the command line: `leaderboard.sweep` checks every input once,
before any job runs or any file is written, and stores what `testbed sweep` stores; the
command line and the scripts reach the library, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import leaderboard
from experiments import cli
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.results import load
from leaderboard.execution.sweeping import (
    MAX_JOBS,
    check_options,
    count_seeds,
    make_executor,
    plan,
    run,
)
from testbed.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("agents", "generative", "leaderboard", "testbed", "experiments", "benchmarks")


def test_a_sweep_stores_what_the_command_line_stores(tmp_path, capsys):
    ids = ["coin/4", "coin/13"]
    summary = leaderboard.sweep(["uniform", "beta_bernoulli"], ids, seeds="0-1",
                                results=tmp_path / "lib.db", executor="inline")  # fmt: skip
    assert (summary.total, summary.ok, summary.failed) == (2 + 4, 6, 0)  # uniform: seed 0 only
    argv = ["sweep", "--agent", "uniform,beta_bernoulli", "--problem", ",".join(ids), "--seeds",
            "0-1", "--executor", "inline", "--results", str(tmp_path / "cli.db")]  # fmt: skip
    assert cli.main(argv) == 0
    columns = ["key", "agent", "problem_id", "seed", "status", "kl_estimate"]
    lib, cmd = (load(tmp_path / n)[columns].sort_values("key") for n in ("lib.db", "cli.db"))
    assert lib.reset_index(drop=True).equals(cmd.reset_index(drop=True))
    again = leaderboard.sweep(["uniform", "beta_bernoulli"], ids, seeds="0-1",
                              results=tmp_path / "lib.db", executor="inline")  # fmt: skip
    assert again.skipped == again.total == 6 and again.ran == 0


def test_the_call_and_its_module_are_apart():
    """`leaderboard.sweep` is the call and its halves live in `leaderboard.execution.sweeping` (a
    module named `sweep` was shadowed by the call: `leaderboard.sweep.plan` failed)."""
    import types

    import leaderboard.execution.sweeping as module  # `import a.b as m` reads the attribute a.b

    assert isinstance(module, types.ModuleType) and leaderboard.sweep is module.sweep


@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"seeds": "0,5-2"}, "--seeds: got '0,5-2', whose range '5-2' runs backwards"),
        ({"seeds": "0,,1"}, "--seeds: got '0,,1', which has an empty item; allowed: integers"),
        ({"seeds": "0,"}, "--seeds: got '0,', which has an empty item"),
        ({"seeds": "0-10000000"}, "sweep: got 10,000,001 jobs"),
        ({"seeds": [0, -1]}, "seeds: got [0, -1]; allowed: integers >= 0"),
        ({"problems": ["coin/0", "nosuch/1"]}, "problem family: got 'nosuch'"),
        ({"options": {"num_test_seeds": "50"}}, "--option: got 'num_test_seeds' for coin/0"),
        ({"overrides": {"nosuch": 1}}, "set nosuch: no agent among uniform has this field"),
        ({"agents": ["nosuch"]}, "agent: got 'nosuch'"),
        ({"executor": "threads"}, "executor: got 'threads'; allowed: one of: local, ray"),
        ({"executor": "inline", "workers": 2}, "workers: got 2 with --executor inline"),
        ({"timeout": -1}, "timeout: got -1; allowed: seconds > 0"),
        ({"workers": -1}, "workers"),
        ({"workers": "x"}, "workers: got 'x'; allowed: an integer >= 0"),
        ({"executor": "inline", "workers": "x"}, "workers: got 'x'; allowed: an integer"),
        ({"executor": InlineExecutor(), "timeout": 5}, "timeout: got 5 beside an executor"),
        ({"imports": ["no_such_module_here"]}, "--import: got 'no_such_module_here'"),
    ],
)
def test_a_bad_input_is_one_error_naming_its_field_and_writes_nothing(tmp_path, kwargs, said):
    given = {"agents": ["uniform"], "problems": ["coin/0"], **kwargs}
    with pytest.raises(InputError, match="^" + said.replace("[", r"\[").replace("(", r"\(")):
        leaderboard.sweep(given.pop("agents"), given.pop("problems"),
                          results=tmp_path / "r.db", **given)  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_plan_is_the_checked_expansion_and_seeds_come_in_every_form():
    jobs = plan(["beta_bernoulli"], "coin", seeds="0-1")  # a sweep's name
    assert len(jobs) == 2 * 18 and {j.seed for j in jobs} == {0, 1}
    assert [j.key for j in plan(["beta_bernoulli"], ["coin/0"], seeds=3)] == [
        j.key for j in plan(["beta_bernoulli"], ["coin/0"], seeds=[3])
    ]
    assert count_seeds("0-4,7") == 6 and count_seeds([1, 2]) == 2 and count_seeds(5) == 1


def test_problem_options_are_typed_once_as_the_problems_take_them():
    assert check_options(["real/iris/1/1"], {"num_test_seeds": "50"}) == {"num_test_seeds": 50}
    assert check_options(["coin/0"], {}) == {}
    with pytest.raises(InputError, match="--option for real problems"):
        check_options(["real/iris/1/1"], {"nosuch": "1"})


def test_run_takes_an_executor_object_and_an_executor_is_named_or_given(tmp_path):
    executor = InlineExecutor()
    assert make_executor(executor) is executor
    summary = run(plan(["uniform"], ["coin/0"]), tmp_path / "r.db", executor, progress=False)
    assert summary.ok == 1


def test_the_command_lines_limit_and_results_file_are_the_librarys():
    assert cli.MAX_JOBS == MAX_JOBS and cli.RESULTS == leaderboard.DEFAULT_PATH


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_nothing_in_the_product_imports_the_command_line():
    """The command line wraps the library; the scripts share experiments.console."""
    found = [
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "cli.py" and "experiments.cli" in _imports(path)
    ]
    assert found == []


def test_a_results_path_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path, capsys):
    """`testbed sweep --results nope/x.db` made the folder (two levels deep too) and ran;
    a typo's folder is now one line naming it, status 2, for the command line, the library
    and the reproductions alike."""
    from experiments import reproduce_wyb

    for results in (tmp_path / "nope" / "x.db", tmp_path / "nope" / "deeper" / "x.db"):
        argv = ["sweep", "--agent", "uniform", "--problem", "coin/2", "--executor", "inline",
                "--results", str(results)]  # fmt: skip
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("testbed: error: results: got "), err
        assert f"whose folder {str(results.parent)!r} does not exist" in err[0]
        assert "allowed: a path in an existing folder" in err[0]
        with pytest.raises(InputError, match=r"^results: .* does not exist; allowed: a path in"):
            leaderboard.sweep("uniform", ["coin/2"], results=results, executor="inline")
        assert list(tmp_path.iterdir()) == []
    argv = ["--agents", "exact", "--problems", "1", "--seeds", "1", "--results",
            str(tmp_path / "nope" / "w.db"), "--out", str(tmp_path / "out")]  # fmt: skip
    assert reproduce_wyb.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("reproduce_wyb: error: results: ") and "does not exist" in err[-1]
    assert list(tmp_path.iterdir()) == []
    summary = leaderboard.sweep("uniform", ["coin/2"], results=tmp_path / "x.db", executor="inline")
    assert summary.ok == 1  # a path in an existing folder
