"""Outputs never land on inputs (issue 48, reproduction 1): every command and script that
writes a file checks its target, before any job runs, against the run's stores and inputs
(resolved paths, hard links) and its folder; a refusal is one line and status 2, and
writes go through a temporary file and a rename."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import experiments.console
from experiments import reproduce_sbibm
from experiments.cli import main
from leaderboard.outputs import check_output_path
from leaderboard.store import ResultsStore
from testbed.errors import InputError

ARGS = ["--tasks", "two_moons", "--budgets", "1000", "--agents", "rej_abc", "--observations",
        "1,2", "--workers", "1"]  # fmt: skip


def _sbibm_store(path: Path) -> Path:
    """A reproduction store whose one cell (two_moons, 1000, rej_abc) is finished."""
    jobs = reproduce_sbibm.jobs_for(["two_moons"], [1000], ["rej_abc"], [1, 2], {})
    with ResultsStore(path) as store:
        for job in jobs:
            metrics = {"c2st": 0.9, "train_seconds": 1.0, "evaluation_seconds": 1.0}
            store.record({**job.as_dict(), "status": "ok", "metrics": metrics})
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_jobs(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a job ran before the outputs were checked")

    monkeypatch.setattr(experiments.console, "run_jobs", refuse)


def _one_line(capsys, match: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if "error:" in line]
    assert len(errors) == 1 and match in errors[0], err
    assert not any("Traceback" in line for line in err)


def test_report_ship_onto_the_store_is_refused_and_the_store_kept(tmp_path, capsys):
    """`reproduce_sbibm --report --ship r.db` wrote the CSV over the results store (exit 0;
    the next leaderboard said r.db was not SQLite)."""
    db = _sbibm_store(tmp_path / "r.db")
    before = _sha(db)
    out = ["--results", str(db), "--out", str(tmp_path / "out")]
    assert reproduce_sbibm.main([*ARGS, *out, "--report", "--ship", str(db)]) == 2
    _one_line(capsys, "--ship: got")
    assert _sha(db) == before
    link = tmp_path / "hard.csv"  # the store through a hard link
    os.link(db, link)
    assert reproduce_sbibm.main([*ARGS, *out, "--report", "--ship", str(link)]) == 2
    _one_line(capsys, "would overwrite results")
    assert _sha(db) == before
    link.unlink()  # a store with two names is refused even to read (test_store_names.py)
    assert len(ResultsStore(db, mode="r").rows()) == 2
    # a good target: written whole, through a temporary file
    ship = tmp_path / "ours.csv"
    assert reproduce_sbibm.main([*ARGS, *out, "--report", "--ship", str(ship)]) == 0
    assert ship.read_text().count("rej_abc") >= 2
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_ship_into_a_folder_or_a_missing_one_is_one_line_before_any_job(
    tmp_path, capsys, monkeypatch
):
    """`--ship` to an existing folder or into a missing one ended in a traceback and left
    `adir.tmp`; without --report the path was checked only after every job had run."""
    _no_jobs(monkeypatch)
    folder = tmp_path / "adir"
    folder.mkdir()
    db = tmp_path / "new.db"
    out = ["--results", str(db), "--out", str(tmp_path / "out")]
    cases = [
        (str(folder), "which is a folder"),
        (str(tmp_path / "missing" / "ours.csv"), "does not exist"),
        (str(tmp_path / "out" / "table.md"), "a file this run reads"),  # its own table
    ]
    for ship, message in cases:
        for report in ([], ["--report"]):
            assert reproduce_sbibm.main([*ARGS, *out, *report, "--ship", ship]) == 2, ship
            _one_line(capsys, message)
    assert not db.exists()  # refused before a store was made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]  # no *.tmp left
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    frozen.chmod(0o555)
    try:
        assert reproduce_sbibm.main([*ARGS, *out, "--ship", str(frozen / "x.csv")]) == 2
        _one_line(capsys, "cannot be written")
    finally:
        frozen.chmod(0o755)


def test_report_and_export_into_a_missing_folder_are_refused(tmp_path, capsys):
    """Minor: `--export` and `report --out` created missing folders silently."""
    db = tmp_path / "r.db"
    with ResultsStore(db) as store:
        job = {"agent": "uniform", "config": {}, "config_key": "c", "problem_id": "coin/0"}
        metrics = {"kl_estimate": 0.1, "train_seconds": 1.0, "evaluation_seconds": 1.0}
        store.record({"key": "k", **job, "seed": 0, "status": "ok", "metrics": metrics,
                      "wall_seconds": 2.0})  # fmt: skip
    cases = [
        ["report", "--results", str(db), "--out", str(tmp_path / "nope" / "r.html")],
        ["leaderboard", "--results", str(db), "--export", str(tmp_path / "nope" / "r.csv")],
        ["salvage", "--results", str(db), "--out", str(tmp_path / "nope" / "s.db")],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        _one_line(capsys, "does not exist; allowed: a path in an existing folder")
    assert not (tmp_path / "nope").exists()


def test_an_input_of_the_run_is_no_output(tmp_path):
    data = tmp_path / "paper.csv"
    data.write_text("a,b\n")
    link = tmp_path / "link.csv"
    link.symlink_to(data)
    hard = tmp_path / "hard.csv"
    os.link(data, hard)
    for target in (data, link, hard):
        with pytest.raises(InputError, match="a file this run reads"):
            check_output_path("--out", target, inputs=[data])
    assert check_output_path("--out", tmp_path / "new.csv", inputs=[data])
    assert check_output_path("--out", tmp_path / "sub" / "x.md", make_folder=True)
    with pytest.raises(InputError, match="does not exist"):
        check_output_path("--out", tmp_path / "a" / "b" / "x.md", make_folder=True)
