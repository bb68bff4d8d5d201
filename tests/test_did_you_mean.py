"""Did-you-mean on every name and flag a user types: a mistyped subcommand or option of
`testbed` and of the reproductions, and their comma-separated choices."""

from __future__ import annotations

import pytest

from experiments import ppl_power, reproduce_decisions, reproduce_lc2st, reproduce_wyb
from experiments.cli import main


@pytest.mark.parametrize(
    "argv, said",
    [
        (["leaderbord"], "(did you mean 'leaderboard'?)"),
        (["run", "--agnet", "mlp", "--problem", "coin/1"], "got --agnet (did you mean '--agent'?)"),
        (["sweep", "--agent", "mlp", "--sweep", "coin", "--reslts", "x.db"],
         "got --reslts (did you mean '--results'"),
    ],
)  # fmt: skip
def test_testbed_suggests_the_subcommand_or_option(capsys, argv, said):
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


@pytest.mark.parametrize(
    "script, argv, said",
    [
        (reproduce_wyb, ["--agents", "stann", "--report"], "got 'stann' (did you mean 'stan'?)"),
        (reproduce_lc2st, ["--tasks", "two_moon", "--report"],
         "got 'two_moon' (did you mean 'two_moons'?)"),
        (ppl_power, ["--samplers", "thined", "--report"], "(did you mean 'thinned'?)"),
        (reproduce_decisions, ["--seedz", "3"], "got --seedz (did you mean '--seeds'?)"),
    ],
)  # fmt: skip
def test_reproductions_suggest_the_name(tmp_path, monkeypatch, capsys, script, argv, said):
    monkeypatch.chdir(tmp_path)
    try:
        code = script.main(argv)
    except SystemExit as ended:  # argparse's own errors
        code = ended.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
