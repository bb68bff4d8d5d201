"""A results store knows its files (issue 48): its path is resolved once, so a symbolic
link reads and checks the file it names and that file's WAL; a WAL that is not the
store's own (another store's, or zeroed) is refused before anything is read or written;
a damaged header is rebuilt by salvage; the end of a sweep leaves no row in the WAL.

Each test names the fault it reproduces; each fails on the code before the fix.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from experiments.cli import main
from leaderboard.execution.jobs import Job
from leaderboard.execution.results import load
from leaderboard.store import ResultsStore
from leaderboard.store import results_store as store_module
from leaderboard.store.salvage import salvage
from testbed.errors import InputError


def _record(store: ResultsStore, i: int, tag: str = "") -> None:
    job = Job.make("uniform", {"i": i, "tag": tag}, f"coin/{i % 18}").as_dict()
    store.record({**job, "status": "ok", "metrics": {"kl_estimate": 0.1 + i / 1000}})


def _rows_in_wal(folder: Path, name: str, rows: int, tag: str = "") -> Path:
    """A copy of a store whose rows are all still in its WAL (as a killed driver leaves
    it): `folder/name` and `folder/name-wal`."""
    live = folder / f"live-{name}"
    store = ResultsStore(live)
    for i in range(rows):
        _record(store, i, tag)
    copy = folder / name
    shutil.copyfile(live, copy)
    shutil.copyfile(live.with_name(live.name + "-wal"), copy.with_name(name + "-wal"))
    store.close()
    return copy


def _checkpointed(path: Path, rows: int, tag: str = "") -> Path:
    with ResultsStore(path) as store:
        for i in range(rows):
            _record(store, i, tag)
    return path


def _digest(path: Path) -> dict[str, str]:
    return {
        suffix: hashlib.sha256(path.with_name(path.name + suffix).read_bytes()).hexdigest()
        for suffix in ("", "-wal")
        if path.with_name(path.name + suffix).exists()
    }


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("testbed: error: "), err
    assert match in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------ a store through a link


def test_a_damaged_wal_is_found_through_a_symbolic_link(tmp_path, capsys):
    """Reproduction 2: a --results path that is a symlink skipped the damaged-WAL check
    (the -wal was looked for beside the link): the leaderboard showed a part of the rows
    without a word, and a sweep through the link destroyed the rest."""
    data = tmp_path / "data"
    data.mkdir()
    db = _rows_in_wal(data, "r.db", 60)
    wal = db.with_name("r.db-wal")
    with open(wal, "r+b") as f:  # damage an early frame: later commits are dropped
        f.seek(32 + 24 + 100)
        f.write(b"\xff" * 100)
    link = tmp_path / "latest.db"
    link.symlink_to(db)
    before = _digest(db)
    with pytest.raises(InputError, match="is damaged"):
        ResultsStore(link, mode="r")
    with pytest.raises(InputError, match="is damaged"):
        ResultsStore(link, mode="w")
    assert main(["leaderboard", "--results", str(link)]) == 2
    _one_line_error(capsys, "testbed salvage")
    assert _digest(db) == before  # nothing written


def test_salvage_through_a_link_reads_the_files_the_link_names(tmp_path, capsys):
    """Reproduction 2: `salvage` through a link read no row of an undamaged store whose
    rows were in its WAL (the WAL was looked for beside the link)."""
    data = tmp_path / "data"
    data.mkdir()
    db = _rows_in_wal(data, "r.db", 40)
    link = tmp_path / "latest.db"
    link.symlink_to(db)
    out = tmp_path / "new.db"
    assert main(["salvage", "--results", str(link), "--out", str(out)]) == 0
    assert "salvaged 40 rows" in capsys.readouterr().out
    assert len(load(out)) == 40
    with ResultsStore(link, mode="r") as s:  # read through the link: every row
        assert len(s.rows()) == 40


def test_a_relative_path_and_a_link_name_one_store(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    _checkpointed(data / "r.db", 3)
    (tmp_path / "link.db").symlink_to(Path("data") / "r.db")
    monkeypatch.chdir(tmp_path)
    with ResultsStore("link.db") as s:
        assert s.file == (data / "r.db").resolve() and s.path == Path("link.db")
        _record(s, 3)
    assert not (tmp_path / "link.db-wal").exists()  # side files beside the file itself
    assert len(load(data / "r.db")) == 4


# ------------------------------------------------------------------ a WAL of another store


@pytest.mark.parametrize("good_rows, other_rows", [(12, 5), (200, 3)])
def test_a_stale_wal_of_another_store_is_refused_and_nothing_is_written(
    tmp_path, capsys, good_rows, other_rows
):
    """Reproduction 3: another store's WAL left beside a good store was applied silently:
    the leaderboard showed the other store's rows, and the next sweep left only those.
    (With 200 rows of its own the store read with the other log is malformed: that log
    is refused as not its own too, not as a damaged store.)"""
    good = _checkpointed(tmp_path / "good.db", good_rows, tag="good")
    other = _rows_in_wal(tmp_path, "other.db", other_rows, tag="other")
    shutil.copyfile(other.with_name("other.db-wal"), tmp_path / "good.db-wal")
    before = _digest(good)
    for mode in ("r", "w"):
        with pytest.raises(InputError, match="is not the WAL of") as e:
            ResultsStore(good, mode=mode)
        assert "good.db-wal" in str(e.value) and "'" + str(good) + "'" in str(e.value)
    assert main(["leaderboard", "--results", str(good)]) == 2
    _one_line_error(capsys, "is not the WAL of")
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
            "--results", str(good), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    _one_line_error(capsys, "nothing was written")
    assert _digest(good) == before
    # salvage lets the user keep either
    with pytest.raises(InputError, match="--wal ignore"):
        salvage(good, tmp_path / "x.db")
    assert not (tmp_path / "x.db").exists()
    assert salvage(good, tmp_path / "own.db", "ignore") == (good_rows, 0)
    assert set(load(tmp_path / "own.db")["config"].map(lambda c: "good" in c)) == {True}
    if other_rows == 5:  # what SQLite shows with the other log: that store's rows
        copied, _ = salvage(good, tmp_path / "theirs.db", "use")
        assert copied == 5
    assert _digest(good) == before
    # moved aside, the store is itself again
    (tmp_path / "good.db-wal").rename(tmp_path / "good.db-wal.other")
    assert len(load(good)) == good_rows


def test_the_stores_own_wal_is_read_and_a_store_of_an_earlier_version_gets_an_id(tmp_path):
    db = _rows_in_wal(tmp_path, "r.db", 7)
    with ResultsStore(db, mode="r") as s:  # its own WAL: every row
        assert len(s.rows()) == 7
    old = tmp_path / "old.db"
    _checkpointed(old, 2)
    with sqlite3.connect(old) as conn:  # as an earlier version made it: no id
        conn.execute("DELETE FROM meta WHERE name IN ('store_id', 'wal_stamp')")
    conn.close()
    with ResultsStore(old) as s:
        assert s.store_id and len(s.rows()) == 2
    with sqlite3.connect(f"file:{old}?immutable=1", uri=True) as conn:  # in the main file
        found = conn.execute("SELECT value FROM meta WHERE name = 'store_id'").fetchone()
    conn.close()
    assert found == (s.store_id,)


# ------------------------------------------------------------------ a zeroed WAL


def test_a_zeroed_wal_is_refused_not_read_as_an_empty_store(tmp_path, capsys):
    """Minor: a zeroed -wal read as "no finished jobs yet" (SQLite ignores a log without
    a header), and the next write replaced it."""
    db = _rows_in_wal(tmp_path, "r.db", 20)
    wal = db.with_name("r.db-wal")
    wal.write_bytes(bytes(wal.stat().st_size))
    before = _digest(db)
    for mode in ("r", "w"):
        with pytest.raises(InputError, match="zeros but no WAL header"):
            ResultsStore(db, mode=mode)
    assert main(["leaderboard", "--results", str(db)]) == 2
    _one_line_error(capsys, "nothing was written")
    assert _digest(db) == before
    with pytest.raises(InputError, match="--wal ignore"):
        salvage(db, tmp_path / "x.db")


# ------------------------------------------------------------------ salvage


def test_salvage_rebuilds_a_damaged_header(tmp_path, capsys):
    """Minor: salvage gave up on a store whose page-1 header was damaged ("not a SQLite
    file") though every row was intact."""
    db = _checkpointed(tmp_path / "r.db", 150)
    data = bytearray(db.read_bytes())
    data[0:100] = bytes(range(100, 200))  # the whole header
    db.write_bytes(bytes(data))
    assert main(["leaderboard", "--results", str(db)]) == 2
    _one_line_error(capsys, "its header")
    out = tmp_path / "new.db"
    assert main(["salvage", "--results", str(db), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "salvaged 150 rows" in said and "header was damaged" in said
    assert len(load(out)) == 150


def test_salvage_of_a_missing_file_says_it_is_missing(tmp_path, capsys):
    """Minor: `salvage --results nosuch.db` said "not a SQLite file"."""
    assert main(["salvage", "--results", str(tmp_path / "nosuch.db"), "--out", "x.db"]) == 2
    _one_line_error(capsys, "which does not exist")


def test_salvage_of_a_store_cut_short_says_pages_are_missing(tmp_path, capsys):
    """Minor: a truncated store reported "0 unreadable" while rows were lost."""
    db = _checkpointed(tmp_path / "r.db", 300)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    out = tmp_path / "new.db"
    assert main(["salvage", "--results", str(db), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "pages are missing" in said, said


# ------------------------------------------------------------------ the end of a sweep


def test_closing_waits_for_a_reader_so_the_wal_ends_empty(tmp_path):
    """Reproduction 7: "a finished sweep's rows live in results.db alone" was false while
    a reader held a transaction open at the sweep's end: every row stayed in the WAL."""
    db = tmp_path / "r.db"
    store = ResultsStore(db)
    for i in range(18):
        _record(store, i)
    reader = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM results").fetchall()  # a snapshot held open
    threading.Timer(2.5, lambda: reader.execute("COMMIT")).start()
    start = time.monotonic()
    store.close()
    assert time.monotonic() - start >= 2.0
    assert db.with_name("r.db-wal").stat().st_size == 0  # (the reader still has it open)
    reader.close()
    alone = tmp_path / "alone.db"
    shutil.copyfile(db, alone)
    assert len(load(alone)) == 18


def test_a_reader_that_never_lets_go_is_named_in_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(store_module, "CHECKPOINT_SECONDS", 0.5)
    db = tmp_path / "r.db"
    store = ResultsStore(db)
    _record(store, 0)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM results").fetchall()
    with caplog.at_level("WARNING", logger="testbed.results"):
        store.close()
    reader.close()
    assert "stay in" in caplog.text and "r.db-wal" in caplog.text


FILES_UP_TO = (  # SQLite gets EFBIG past the limit, as it gets ENOSPC on a full disk
    "import os, resource, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def test_a_full_disk_at_creation_leaves_no_empty_store(tmp_path):
    """Minor: a disk full when the store was made left a 0-byte `.db`, which every later
    command refused as "an empty file"."""
    db = tmp_path / "r.db"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", FILES_UP_TO, "1000", "-m", "experiments.cli", "sweep",
         "--agent", "uniform", "--problem", "coin/0", "--executor", "inline", "--results",
         str(db), "--quiet"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "the machine's fault" in proc.stderr
    assert not db.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["connect", "schema"])
def test_a_ctrl_c_at_creation_leaves_no_empty_store(tmp_path, monkeypatch, where):
    """CI: a Ctrl-C between SQLite making the file and the schema's commit left a 0-byte
    `.db` that the next `testbed report` refused as "an empty file"."""
    import leaderboard.store.results_store as store_module

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "connect":  # the file is made, its quick check not yet run
        real = store_module.ResultsStore._connect

        def connect_then_interrupt(target, **kwargs):
            real(target, **kwargs).close()
            interrupt()

        patched = staticmethod(connect_then_interrupt)
        monkeypatch.setattr(store_module.ResultsStore, "_connect", patched)
    else:  # inside the schema's transaction
        monkeypatch.setattr(store_module, "versions", interrupt)
    db = tmp_path / "r.db"
    with pytest.raises(KeyboardInterrupt):
        ResultsStore(db)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    with ResultsStore(db) as s:  # the next sweep makes it afresh
        assert s.rows() == []


def test_a_sweep_stopped_by_a_full_disk_says_what_is_stored(tmp_path):
    """A sweep stopped by the machine said only what failed; now also how many of its
    jobs are stored (the run again resumes from there)."""
    db = tmp_path / "r.db"
    root = Path(__file__).resolve().parents[1]
    ids = ",".join(f"coin/{i}" for i in range(18))
    proc = subprocess.run(
        [sys.executable, "-c", FILES_UP_TO, str(48 * 1024), "-m", "experiments.cli", "sweep",
         "--agent", "uniform", "--problem", ids, "--executor", "inline", "--results", str(db),
         "--quiet"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the machine's fault" in lines[0], proc.stderr
    stored = len(load(db))
    assert f"{stored} of the sweep's 18 are stored: run it again to resume" in lines[0]
