"""`testbed salvage`: the rows of a damaged results file that can still be read, copied
into a new results file.

The damaged file is never changed: rows are read one by one from a private copy, which
is mended first where SQLite would give up on all of it (a rebuilt header, padding to
the size its header gives, fresh WAL checksums past a damaged frame).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path

from leaderboard import wal
from leaderboard.outputs import SQLITE_HEADER, check_output_path, check_path_name, is_sqlite_file
from leaderboard.store import ResultsStore
from leaderboard.store_checks import (
    PAGE_SIZES,
    foreign_wal,
    header_page_size,
    remove_store,
    resolved,
)
from leaderboard.stored_rows import as_text, row_problem
from testbed.errors import InputError

STORED_COLUMNS = [  # every column of the results table, in its order
    "key",
    "agent",
    "config_key",
    "config",
    "problem_id",
    "seed",
    "status",
    "error",
    "traceback",
    "metrics",
    "wall_seconds",
    "versions",
    "host",
    "finished_at",
    "attempts",
]
MAX_MISSES = 10_000  # consecutive unreadable row ids before salvage stops looking
# Tables of row ids to read when the results table's own pages fail: its indexes.
ROWID_SOURCES = (
    "SELECT max(rowid) FROM results",
    "SELECT rowid FROM results INDEXED BY sqlite_autoindex_results_1",
    "SELECT rowid FROM results INDEXED BY results_agent",
)


def _pad_to_header_size(copy: Path) -> int:
    """Pads a truncated database file with zero bytes up to the size its header gives
    (page size x page count), as SQLite expects of it; returns the bytes added. A file
    cut short otherwise fails at its first look past the end, so no row reads."""
    with open(copy, "rb") as f:
        head = f.read(100)
    if len(head) < 100:
        return 0
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] != head[92:96] or not pages or page_size < 512:  # the count is stale
        return 0
    size, want = copy.stat().st_size, page_size * pages
    if size >= want:
        return 0
    with open(copy, "ab") as f:
        f.write(bytes(want - size))
    return want - size


def _known_rowids(conn: sqlite3.Connection) -> tuple[set[int], bool]:
    """Row ids that the results table or its indexes still name (each read as far as it
    goes), and whether the table's own largest row id was read."""
    found: set[int] = set()
    exact = False
    for query in ROWID_SOURCES:
        try:
            for (rowid,) in conn.execute(query):
                if rowid is not None:
                    found.add(int(rowid))
            exact = exact or query == ROWID_SOURCES[0]
        except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError, TypeError):
            continue
    return found, exact


class Salvaged(tuple):
    """What `salvage` did: (rows copied, rows that could not be read), and `notes`: what
    else is lost that no row count says (pages cut off, a WAL that could not be read)."""

    notes: list[str]

    def __new__(cls, copied: int, lost: int, notes: Iterable[str] = ()) -> Salvaged:
        self = super().__new__(cls, (copied, lost))
        self.notes = list(notes)
        return self

    @property
    def copied(self) -> int:
        return self[0]

    @property
    def lost(self) -> int:
        return self[1]


WAL_CHOICES = ("check", "ignore", "use")


def salvage(path: str | os.PathLike, out: str | os.PathLike, wal_choice: str = "check") -> Salvaged:
    """Copies every row of the (damaged) results file `path` that can still be read into
    the new results file `out`; returns (rows copied, rows that could not be read), with
    notes of what else is lost (`Salvaged`).

    Rows are read one by one by row id from a private copy of the file and its WAL, so a
    damaged page costs only the rows stored on it; `path` is not changed. The copy is
    mended first where SQLite would give up on all of it: a file cut short is padded to
    the size its header gives, and a WAL with a damaged frame gets fresh checksums, so
    the transactions after that frame are read too (`leaderboard.wal.repair`). Row ids
    come from the table and its indexes; past the last one known, reading stops after
    MAX_MISSES ids in a row that hold nothing. A damaged 100-byte header is rebuilt in
    the copy from the pages (`header_page_size`). When no row can be read, `out` is not
    left behind. `path` may be a symbolic link: the file it names and that file's WAL are
    read.

    `wal_choice`: 'check' refuses a WAL that belongs to another store or holds no log
    (zeroed), before anything is written; 'ignore' reads the main file alone; 'use' reads
    the WAL whatever wrote it.
    """
    if wal_choice not in WAL_CHOICES:
        raise InputError(f"wal: got {wal_choice!r}; allowed: one of {', '.join(WAL_CHOICES)}")
    check_path_name("results", path)
    source, target = resolved(path), Path(out)
    if not source.exists():
        raise InputError(f"results: got {str(path)!r}, which does not exist; allowed: a "
                         "results file")  # fmt: skip
    if not source.is_file():
        raise InputError(f"results: got {str(path)!r}, which is not a file; allowed: a "
                         "results file")  # fmt: skip
    with open(source, "rb") as f:
        head = f.read(65536)
    if head[:16] != SQLITE_HEADER and header_page_size(head, source.stat().st_size) is None:
        raise InputError(f"results: got {str(path)!r}, which is not a SQLite file")
    check_path_name("out", out)
    if target.exists() or target.is_symlink():
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
            try:
                with ResultsStore(target, mode="w") as store, store._transaction() as dest:
                    copied, lost = _copy_readable_rows(conn, dest)
            except BaseException:
                remove_store(target)
                raise
        finally:
            conn.close()
    if copied == 0:
        remove_store(target)
    return Salvaged(copied, lost, notes)


def _check_salvaged_wal(path: Path, source: Path) -> None:
    """salvage's refusal of a WAL that is not the file's own (another store's, or no log)."""
    log_file = wal.wal_path(source)
    reason = None if wal.damage(source) else wal.unreadable(source)
    if reason is not None:
        reason = f"{reason}: the rows committed to it, if any, cannot be read"
    else:
        reason = foreign_wal(source)
    if reason is not None:
        raise InputError(
            f"results: {str(log_file)!r} is not a WAL of {str(path)!r} that can be read "
            f"({reason}); nothing was written; allowed: --wal ignore (copy the rows of "
            f"{str(path)!r} alone) or --wal use (copy the rows SQLite shows with that WAL)"
        )


def _mended_copy(source: Path, folder: Path, with_wal: bool, notes: list[str]) -> Path:
    """A copy of the results file and its WAL in `folder`, its header rebuilt when damaged,
    padded to its header's size, the WAL's checksums renewed past a damaged frame (see
    `salvage`); `notes` get what is missing for good."""
    copy = folder / "results.db"
    shutil.copyfile(source, copy)
    source_wal = wal.wal_path(source)
    if with_wal and source_wal.exists():
        shutil.copyfile(source_wal, wal.wal_path(copy))
    if not is_sqlite_file(copy):
        _rebuild_header(copy, wal.log_page_size(wal.wal_path(copy)))
        notes.append("its header was damaged: rebuilt from its pages in a copy")
    added = _pad_to_header_size(copy)
    if added:
        page_size = wal.page_size_of(copy) or 1
        notes.append(
            f"it was cut short: {-(-added // page_size):,} of its "
            f"{copy.stat().st_size // page_size:,} pages are missing, and the rows stored "
            "on them (not counted as unreadable) are lost"
        )
    if wal.wal_path(copy).exists():
        damage = wal.scan(copy)
        if damage is not None and damage.lost_commits:
            wal.repair(wal.wal_path(copy), wal.page_size_of(copy))
    return copy


def _copy_readable_rows(conn: sqlite3.Connection, dest: sqlite3.Connection) -> tuple[int, int]:
    """Copies every readable, sound row of `conn` into `dest` by row id; returns (rows
    copied, rows lost: unreadable, named by an index but gone, or unsound)."""
    known, exact = _known_rowids(conn)
    last = max(known, default=0)
    copied, lost = 0, 0
    query = f"SELECT {', '.join(STORED_COLUMNS)} FROM results WHERE rowid = ?"
    insert = (
        f"INSERT OR IGNORE INTO results ({', '.join(STORED_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(STORED_COLUMNS))})"
    )
    rowid, misses, seen = 0, 0, 0
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
        values = dict(zip(STORED_COLUMNS, row))
        if row_problem(values["metrics"], values["config"]) is not None:
            lost += 1
            continue
        dest.execute(insert, row)
        copied += 1
    # ids past the last row there is are not rows: not counted as lost
    return copied, lost + sum(1 for i in failed if i <= max(last, seen))


def _rebuild_header(copy: Path, wal_page_size: int | None) -> bool:
    """Rewrites the damaged 100-byte header of the private copy `copy` of a results file
    from what its pages say (page size, page count) and SQLite's fixed values; returns
    False when the file does not look like a SQLite file (nothing changed)."""
    with open(copy, "rb") as f:
        head = f.read(65536)
    size = copy.stat().st_size
    page_size = header_page_size(head, size)
    if page_size is None or (wal_page_size and wal_page_size != page_size):
        page_size = wal_page_size if wal_page_size in PAGE_SIZES else page_size
    if page_size is None:
        return False
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
    return True
