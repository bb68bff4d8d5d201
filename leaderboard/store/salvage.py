"""`testbed salvage`: the rows of a damaged results file that can still be read, copied
into a new results file. The damaged file is never changed: rows are read one by one
from a private copy, mended first where SQLite would give up on all of it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path

from leaderboard.outputs import SQLITE_HEADER, check_output_path, check_path_name, is_sqlite_file
from leaderboard.rows import NAMES, as_text, row_problem
from leaderboard.store import wal
from leaderboard.store.checks import (
    PAGE_SIZES,
    foreign_wal,
    header_page_size,
    remove_store,
    resolved,
)
from leaderboard.store.results_store import ResultsStore
from testbed.errors import InputError

WAL_CHOICES = ("check", "ignore", "use")
MAX_MISSES = 10_000  # consecutive unreadable row ids before salvage stops looking
ROWID_SOURCES = (  # the table's own largest row id; then its indexes, if its pages fail
    "SELECT max(rowid) FROM results",
    "SELECT rowid FROM results INDEXED BY sqlite_autoindex_results_1",
    "SELECT rowid FROM results INDEXED BY results_agent",
)


class Salvaged(tuple):
    """What `salvage` did: (rows copied, rows that could not be read), and `notes`: what
    else is lost that no row count says (pages cut off, a header rebuilt)."""

    copied = property(lambda self: self[0])
    lost = property(lambda self: self[1])

    def __new__(cls, copied: int, lost: int, notes: Iterable[str] = ()) -> Salvaged:
        self = super().__new__(cls, (copied, lost))
        self.notes = list(notes)
        return self


def salvage(path: str | os.PathLike, out: str | os.PathLike, wal_choice: str = "check") -> Salvaged:
    """Copies every row of the (damaged) results file `path` that can still be read into
    the new results file `out` (not left behind when no row can be read); returns (rows
    copied, rows that could not be read), with notes of what else is lost.

    Rows are read by row id (from the table and its indexes; past the last one known,
    until MAX_MISSES ids in a row hold nothing) from a private copy of the file and its
    WAL, so a damaged page costs only the rows stored on it. The copy is mended first: a
    damaged 100-byte header rebuilt from the pages (`header_page_size`), a file cut short
    padded to the size its header gives, the WAL's frames written in as a checkpoint
    would, those past a damaged frame too (`wal.replay`). `path` may be a symbolic link:
    the file it names and that file's WAL are read.

    `wal_choice`: 'check' refuses a WAL that belongs to another store or holds no log
    (zeroed), before anything is written; 'ignore' reads the main file alone; 'use' reads
    the WAL whatever wrote it.
    """
    if wal_choice not in WAL_CHOICES:
        raise InputError(f"wal: got {wal_choice!r}; allowed: one of {', '.join(WAL_CHOICES)}")
    source = _check_source(path)
    check_path_name("out", out)
    if Path(out).exists() or Path(out).is_symlink():
        raise InputError(f"out: got {str(out)!r}, which exists; allowed: a new file")
    check_output_path("out", out, [source])
    if wal_choice == "check":
        _check_salvaged_wal(Path(path), source)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="testbed-salvage-") as folder:
        copy = _mended_copy(source, Path(folder), wal_choice != "ignore", notes)
        conn = sqlite3.connect(copy, isolation_level=None)
        conn.text_factory = as_text
        try:
            with ResultsStore(out, mode="w") as store, store._transaction() as dest:
                copied, lost = _copy_readable_rows(conn, dest)
        except BaseException:
            remove_store(Path(out))
            raise
        finally:
            conn.close()
    if copied == 0:
        remove_store(Path(out))
    return Salvaged(copied, lost, notes)


def _check_source(path: str | os.PathLike) -> Path:
    check_path_name("results", path)
    source, allowed = resolved(path), "allowed: a results file"
    if not source.exists():
        raise InputError(f"results: got {str(path)!r}, which does not exist; {allowed}")
    if not source.is_file():
        raise InputError(f"results: got {str(path)!r}, which is not a file; {allowed}")
    with open(source, "rb") as f:
        head = f.read(65536)
    if head[:16] != SQLITE_HEADER and header_page_size(head, source.stat().st_size) is None:
        raise InputError(f"results: got {str(path)!r}, which is not a SQLite file")
    return source


def _check_salvaged_wal(path: Path, source: Path) -> None:
    """salvage's refusal of a WAL that is not the file's own (another store's, or no log)."""
    hidden = wal.hidden_rows(source)
    if hidden is not None and hidden[0] == "unreadable":  # damage is what salvage mends
        reason = f"{hidden[1]}: the rows committed to it, if any, cannot be read"
    elif (reason := foreign_wal(source)) is None:
        return
    raise InputError(
        f"results: {str(wal.wal_path(source))!r} is not a WAL of {str(path)!r} that can be "
        f"read ({reason}); nothing was written; allowed: --wal ignore (copy the rows of "
        f"{str(path)!r} alone) or --wal use (copy the rows SQLite shows with that WAL)"
    )


def _mended_copy(source: Path, folder: Path, with_wal: bool, notes: list[str]) -> Path:
    """The copy (see `salvage`); `notes` get what is missing for good."""
    copy = folder / "results.db"
    shutil.copyfile(source, copy)
    if with_wal and wal.wal_path(source).exists():
        shutil.copyfile(wal.wal_path(source), wal.wal_path(copy))
    log = wal.read(copy) if wal.wal_path(copy).exists() else None
    if not is_sqlite_file(copy):
        _rebuild_header(copy, log.page_size if log and log.header_ok else None)
        notes.append("its header was damaged: rebuilt from its pages in a copy")
    with open(copy, "rb") as f:
        head = f.read(100)
    page_size = wal.page_size_of(copy) or 1
    pages = int.from_bytes(head[28:32], "big") if head[24:28] == head[92:96] else 0
    missing = pages * page_size - copy.stat().st_size if page_size >= 512 else 0
    if missing > 0:  # SQLite reads no row of a file shorter than its header says
        with open(copy, "ab") as f:
            f.write(bytes(missing))
        notes.append(
            f"it was cut short: {-(-missing // page_size):,} of its "
            f"{copy.stat().st_size // page_size:,} pages are missing, and the rows stored "
            "on them (not counted as unreadable) are lost"
        )
    if log is not None:
        wal.replay(copy)
    return copy


def _known_rowids(conn: sqlite3.Connection) -> tuple[set[int], bool]:
    """Row ids that the results table or its indexes still name (each read as far as it
    goes), and whether the table's own largest row id was read."""
    found: set[int] = set()
    exact = False
    for query in ROWID_SOURCES:
        try:
            for (rowid,) in conn.execute(query):  # as far as it goes
                if rowid is not None:
                    found.add(int(rowid))
            exact = exact or query == ROWID_SOURCES[0]
        except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError, TypeError):
            continue
    return found, exact


def _copy_readable_rows(conn: sqlite3.Connection, dest: sqlite3.Connection) -> tuple[int, int]:
    """Copies every readable, sound row of `conn` into `dest` by row id; returns (rows
    copied, rows lost: unreadable, named by an index but gone, or unsound)."""
    known, exact = _known_rowids(conn)
    last = max(known, default=0)
    query = f"SELECT {', '.join(NAMES)} FROM results WHERE rowid = ?"
    insert = (
        f"INSERT OR IGNORE INTO results ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})"
    )
    copied, lost, rowid, misses, seen = 0, 0, 0, 0, 0
    failed: list[int] = []  # ids that raised, or that an index names
    while rowid < last or (not exact and misses < MAX_MISSES):
        rowid += 1
        try:
            row = conn.execute(query, (rowid,)).fetchone()
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            row = None
            failed.append(rowid)
        else:
            if row is None and rowid in known:
                failed.append(rowid)
        if row is None:
            misses += 1
            continue
        misses, seen = 0, rowid
        values = dict(zip(NAMES, row))
        if row_problem(values["metrics"], values["config"]) is not None:
            lost += 1
            continue
        dest.execute(insert, row)
        copied += 1
    # ids past the last row there is are not rows: not counted as lost
    return copied, lost + sum(1 for i in failed if i <= max(last, seen))


def _rebuild_header(copy: Path, wal_page_size: int | None) -> None:
    """Rewrites the damaged 100-byte header of the private copy `copy` from what its pages
    say (page size, page count) and SQLite's fixed values (`salvage` checked that its
    pages look like SQLite's)."""
    with open(copy, "rb") as f:
        head = f.read(65536)
    size = copy.stat().st_size
    page_size = header_page_size(head, size)
    if wal_page_size in PAGE_SIZES:
        page_size = wal_page_size
    h = bytearray(head[:100])
    h[0:16] = SQLITE_HEADER
    h[16:18] = (1 if page_size == 65536 else page_size).to_bytes(2, "big")
    journal = 2 if wal.wal_path(copy).exists() else 1  # 2: WAL mode (else the log is ignored)
    h[18:24] = bytes([journal, journal, 0, 64, 32, 32])
    pages = -(-size // page_size)
    h[28:32] = pages.to_bytes(4, "big")
    if int.from_bytes(h[32:36], "big") > pages:  # a freelist past the end: none
        h[32:40] = bytes(8)
    if not 1 <= int.from_bytes(h[44:48], "big") <= 4:
        h[44:48] = (4).to_bytes(4, "big")
    h[52:60] = bytes(4) + (1).to_bytes(4, "big")  # no auto-vacuum; UTF-8
    h[64:68] = bytes(4)
    h[72:92] = bytes(20)
    h[92:96] = h[24:28]  # the page count is valid for this change counter
    with open(copy, "r+b") as f:
        f.write(bytes(h))
