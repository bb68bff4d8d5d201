"""The commands the leaderboard prints run as printed (issue 57): the note on a partial
sweep said `testbed sweep --sweep S --results R`, without `--agent` (and `--import` when
the agents or the sweep came from a file), which runs nothing; and a store without jobs of
the asked sweep named no `--shipped-only`. Each printed command is taken from the output
and run with the command line in-process; the sweeps are of coin problems (fast)."""

from __future__ import annotations

import re
import shlex
import sys

import agents
import generative
import leaderboard
from experiments.cli import main
from leaderboard.execution.jobs import check_fit

SWEEP, OTHER = "printed_coins", "printed_other_coins"
MODULE = f'''
import generative


@generative.register_sweep("{SWEEP}")
def printed_coins():
    return ["coin/0", "coin/1", "coin/2"]


@generative.register_sweep("{OTHER}")
def printed_other_coins():
    return ["coin/3", "coin/4"]
'''


def _module(tmp_path, monkeypatch) -> str:
    """The user's file that registers the two sweeps (so a command without its --import
    fails: the sweep is unknown)."""
    module = tmp_path / "printed_sweeps.py"
    module.write_text(MODULE)
    monkeypatch.delitem(sys.modules, module.stem, raising=False)
    return str(module)


def _run(command: str) -> int:
    """Runs a printed `testbed ...` command as the command line would."""
    argv = shlex.split(command)
    assert argv[0] == "testbed", command
    return main(argv[1:])


def test_the_partial_sweep_note_names_a_command_that_runs_the_rest(
    tmp_path, monkeypatch, capsys, scoped_registries
):
    module, db = _module(tmp_path, monkeypatch), str(tmp_path / "mine.db")
    first = ["--agent", "uniform,beta_bernoulli", "--import", module, "--problem", "coin/0"]
    assert main(["sweep", *first, "--seeds", "0-1", "--executor", "inline", "--results", db]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--import", module, "--sweep", SWEEP, "--results", db]) == 0
    (note,) = [s for s in capsys.readouterr().out.splitlines() if "no stored job yet" in s]
    assert note.startswith(f"2 of sweep {SWEEP}'s 3 problems have no stored job yet")
    command = re.search(r"; (testbed sweep .*) runs them$", note).group(1)
    assert shlex.split(command)[2:] == [
        "--sweep", SWEEP, "--agent", "beta_bernoulli,uniform", "--seeds", "0,1",
        "--import", module, "--results", db,
    ]  # fmt: skip
    assert _run(command + " --executor inline") == 0  # (inline: the test's speed)
    ran = leaderboard.load(db)
    for agent, seeds in (("uniform", {0}), ("beta_bernoulli", {0, 1})):
        mine = ran[ran["agent"] == agent]
        assert set(mine["problem_id"]) == {"coin/0", "coin/1", "coin/2"}
        assert set(mine["agent_seed"]) == seeds and set(mine["status"]) == {"ok"}
    capsys.readouterr()
    assert main(["leaderboard", "--import", module, "--sweep", SWEEP, "--results", db]) == 0
    assert "no stored job yet" not in capsys.readouterr().out


def test_a_store_without_the_sweeps_jobs_names_commands_that_run(
    tmp_path, monkeypatch, capsys, scoped_registries
):
    module, db = _module(tmp_path, monkeypatch), str(tmp_path / "mine.db")
    sweep = ["sweep", "--agent", "uniform", "--import", module, "--sweep", SWEEP]
    assert main([*sweep, "--executor", "inline", "--results", db]) == 0
    capsys.readouterr()

    # a sweep of the user's with no stored job: the command that runs it, with its --import
    assert main(["leaderboard", "--import", module, "--sweep", OTHER, "--results", db]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"holds no jobs of sweep '{OTHER}' yet" in err[0]
    command = re.search(r"\((testbed sweep .*) runs it\)$", err[0]).group(1)
    assert _run(command + " --executor inline") == 0
    capsys.readouterr()
    assert main(["leaderboard", "--import", module, "--sweep", OTHER, "--results", db]) == 0
    assert set(leaderboard.load(db)["problem_id"]) == {f"coin/{i}" for i in range(5)}
    assert "uniform" in capsys.readouterr().out  # ranked

    # an SBI sweep: the shipped and published rows at once, and a sweep with an agent
    # that fits it (uniform does not; the sweep itself trains for minutes: not run here)
    assert main(["leaderboard", "--sweep", "sbi_two_moons", "--results", db]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "testbed leaderboard --sweep sbi_two_moons --shipped-only" in err[0]
    sbi = re.search(r"\((testbed sweep .*?) runs it", err[0]).group(1)
    argv = shlex.split(sbi)
    assert argv[argv.index("--results") + 1] == db
    names = argv[argv.index("--agent") + 1].split(",")
    predicts = {n: agents.AGENTS.get(n).predicts for n in names}
    check_fit(predicts, generative.sweep_ids("sbi_two_moons"))
    ours = re.search(r"; (testbed leaderboard .*--shipped-only) ranks", err[0]).group(1)
    assert _run(ours) == 0
    out = capsys.readouterr().out
    assert "C2ST" in out and "(ours, shipped)" in out and "sbibm paper" in out
