"""A results store has one name, and no output lands on it or its side files.

1. Two names of one file (a hard link, as `cp -l` or a backup tool makes) got two WAL
   logs, since SQLite names `-wal` and `-shm` after the path it opens: two sweeps through
   the two names ran every job twice, and a checkpoint through one name lost the rows
   committed to the other's log. A store with more than one name is refused, to write and
   to read, before anything runs.
2. A reproduction's `--out` that was the store or one of its side files (`<store>-wal`,
   made a folder) passed the checks and stopped the run with a traceback once cells were
   stored. Every reproduction refuses it in one line, before any cell runs, by resolved
   path (a symbolic link or a `./` spelling too).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

import leaderboard
from experiments.cli import main
from leaderboard.execution.jobs import Job
from leaderboard.outputs import check_output_folder, check_output_path
from leaderboard.store import ResultsStore
from testbed.errors import InputError

SIDE_NAMES = ("", "-wal", "-shm", "-journal", ".checkpoints")  # the store's own names
REPRODUCTIONS = (
    "reproduce_lc2st",
    "reproduce_wyb",
    "ppl_power",
    "reproduce_decisions",
    "reproduce_real_data",
    "reproduce_neural_testbed",
    "reproduce_sbibm",
    "tune_references",
)


def _store(path: Path, problems=("coin/0",)) -> Path:
    """A store holding one finished row a problem."""
    with ResultsStore(path) as store:
        for problem in problems:
            job = Job.make("uniform", {}, problem).as_dict()
            metrics = {"kl_estimate": 0.1, "train_seconds": 1.0, "evaluation_seconds": 1.0}
            store.record({**job, "status": "ok", "metrics": metrics, "wall_seconds": 1.0})
    return path


def _keys(path: Path) -> set[str]:
    with ResultsStore(path, mode="r") as store:
        return store.keys()


def _error_line(capsys, prog: str) -> str:
    """The one line of stderr, `<prog>: error: ...`, with no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _no_store_opened(monkeypatch) -> None:
    """Opening any results store from here on fails the test: a refusal comes first."""

    def opened(*args, **kwargs):
        raise AssertionError("a results store was opened before --out was checked")

    monkeypatch.setattr(ResultsStore, "__init__", opened)


# ----------------------------------------------------------------------------- hard links


def test_a_hard_linked_store_is_refused_by_a_sweep_with_one_line_and_no_row(tmp_path, capsys):
    first = _store(tmp_path / "a.db")
    second = tmp_path / "b.db"
    os.link(first, second)
    before = os.stat(first)
    for name in (second, first):  # through either name
        argv = ["sweep", "--agent", "uniform", "--problem", "coin/1,coin/2", "--executor",
                "inline", "--results", str(name), "--quiet"]  # fmt: skip
        assert main(argv) == 2
        line = _error_line(capsys, "testbed")
        assert line.startswith(f"testbed: error: results: got {str(name)!r}, a file with 2 names")
        assert "(hard links)" in line and "allowed: a results file with one name" in line
        assert "`cp` without -l" in line
    after = os.stat(first)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    side = [p.name for p in tmp_path.iterdir() if p.name not in ("a.db", "b.db")]
    assert side == []  # no WAL of either name: nothing was opened
    second.unlink()  # one name again: the store works, with its one row and no other
    assert _keys(first) == {Job.make("uniform", {}, "coin/0").key}


def test_a_library_open_of_a_hard_linked_store_raises_input_error(tmp_path):
    first = _store(tmp_path / "a.db")
    second = tmp_path / "copy-l.db"
    os.link(first, second)
    third = tmp_path / "backup.db"
    os.link(first, third)
    for name in (first, second):
        for mode in ("w", "r"):  # a reader through one name misses the others' WALs
            with pytest.raises(InputError, match=r"^results: got .*, a file with 3 names"):
                ResultsStore(name, mode=mode)
    with pytest.raises(InputError, match=r"3 names \(hard links\)"):
        leaderboard.load(second)
    with pytest.raises(InputError, match=r"3 names \(hard links\)"):
        leaderboard.sweep("uniform", ["coin/1"], results=second, executor="inline",
                          progress=False)  # fmt: skip
    link = tmp_path / "symbolic.db"
    link.symlink_to(first)  # a symbolic link is one more path, not one more name
    with pytest.raises(InputError, match="3 names"):
        ResultsStore(link, mode="r")
    second.unlink()
    third.unlink()
    with ResultsStore(link, mode="w") as store:  # one name: opens for a sweep as before
        assert store.count() == {"ok": 1, "failed": 0}


# -------------------------------------------------------------- a reproduction's --out


def _outs(store: Path) -> list[str]:
    """--out values that name `store` or one of its side names: directly, through a
    symbolic link (dangling while the store is new), and spelled with `./`."""
    link = store.with_name("latest")
    if not link.is_symlink():
        link.symlink_to(store)
    spelled = [os.path.join(store.parent, ".", store.name + "-wal"), f"./{store.name}"]
    return [str(store) + side for side in SIDE_NAMES] + [str(link), *spelled]


@pytest.mark.parametrize("name", REPRODUCTIONS)
def test_a_reproductions_out_on_a_new_store_or_its_side_files_is_refused_first(
    name, tmp_path, capsys, monkeypatch
):
    """`--out <store>-wal` (a folder the reproduction makes, or a file) or the store itself
    is refused in one line, status 2, before the store is opened or made."""
    script = importlib.import_module(f"experiments.{name}")
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "r.db"
    _no_store_opened(monkeypatch)
    for out in _outs(store):
        assert script.main(["--results", "r.db", "--out", out]) == 2, out
        line = _error_line(capsys, name)
        assert line.startswith(f"{name}: error: --out: got "), line
        assert f"it is the results store {str(store)!r} or one of its files" in line, line
        assert "; allowed: a " in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]  # no store, no folder


@pytest.mark.parametrize("name", REPRODUCTIONS)
def test_a_reproductions_out_on_a_stored_store_keeps_every_row(name, tmp_path, capsys, monkeypatch):
    """The same with rows stored: the store and its rows are as they were."""
    script = importlib.import_module(f"experiments.{name}")
    store = _store(tmp_path / "r.db", ("coin/0", "coin/1"))
    keys, before = _keys(store), store.read_bytes()
    files = sorted(p.name for p in tmp_path.iterdir())  # the store and what reading it left
    _no_store_opened(monkeypatch)
    for out in (str(store) + "-wal", str(store), str(store) + "-shm"):
        assert script.main(["--results", str(store), "--out", out]) == 2, out
        line = _error_line(capsys, name)
        assert f"--out: got {out!r}, which would overwrite results" in line, line
    assert store.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # no folder made
    assert all((tmp_path / f).is_file() for f in files)
    monkeypatch.undo()
    assert _keys(store) == keys and len(keys) == 2


def test_an_output_folder_beside_the_store_is_allowed_and_one_in_its_names_is_not(tmp_path):
    """Only the store's own names are refused: a folder named like them is not, and no
    check makes a folder."""
    store = _store(tmp_path / "r.db")
    for folder in ("out", "r.db-wal2", "r.dbx", "r"):
        assert check_output_folder("--out", tmp_path / folder, ["t.md"], [store])
    for inside in ("r.db.checkpoints/t.md", "r.db-wal/sub/t.md", "./r.db-shm/t.md"):
        with pytest.raises(InputError, match="--out: got .*, which would overwrite results"):
            check_output_path("--out", tmp_path / inside, [store], make_folder=True)
    with pytest.raises(InputError, match="whose folder .* is a file"):  # the store, a file
        check_output_path("--out", tmp_path / "r.db" / "t.md", [store], make_folder=True)
    (tmp_path / "folder").write_text("a file")
    with pytest.raises(InputError, match="a file; allowed: a folder"):
        check_output_folder("--out", tmp_path / "folder", ["t.md"], [store])
    with pytest.raises(InputError, match="a file this run reads"):
        check_output_folder("--out", tmp_path / "out", ["t.md"], [store], [tmp_path / "out/t.md"])
    with pytest.raises(InputError, match="--out: got '', which is empty; allowed: a folder"):
        check_output_folder("--out", "", ["t.md"], [store])  # not the current folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "r.db"]
