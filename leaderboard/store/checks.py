"""What a results file must be before the store opens it (`check_file`): a path that
names a SQLite file (its header intact, or `testbed salvage` can rebuild it), in a
writable place for a sweep, with one name (no hard link: SQLite gives each name a WAL),
whose WAL is its own and hides no committed row (`leaderboard.store.wal`).

SQLite replays any WAL whose checksums hold, whichever database wrote it; a store names
itself in its meta table (`STORE_ID`) and every write stamps that name into the WAL's
generation (`WAL_STAMP`), which `foreign_wal` compares with the main file's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
import urllib.parse
from pathlib import Path

from leaderboard.outputs import SQLITE_HEADER, check_path_name, database_of
from leaderboard.rows import DEFAULT_PATH, as_text
from leaderboard.store import wal
from testbed.errors import InputError

STORE_ID, WAL_STAMP = "store_id", "wal_stamp"  # meta rows: the store's id, and its stamp
PAGE_SIZES = tuple(2**k for k in range(9, 17))
_ALLOWED = "allowed: a results file written by 'testbed sweep'"


def resolved(path: str | os.PathLike) -> Path:
    """The file `path` names: absolute, every symbolic link followed (SQLite keeps a
    database's `-wal` and `-shm` beside the file a link points to, not beside the link)."""
    return Path(os.path.realpath(os.fspath(path)))


def _read_only(path: Path) -> bool:
    """Mode bits count even for root."""
    writable = path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    return not writable or not os.access(path, os.W_OK)


def check_file(path: Path, mode: str) -> Path:
    """The file a results path names (`resolved`: every check, open and WAL look-up goes
    to it), or an InputError, before anything opens it, for a path that is no results file,
    cannot be written for a sweep (mode 'w'; WAL mode writes `-wal` and `-shm` beside it),
    has more than one name, or whose WAL would show other rows than the ones committed."""
    target = Path(os.path.realpath(path))  # as `resolved`
    check_path_name("results", path)
    if path.is_dir():
        raise InputError(
            f"results: got {str(path)!r}, which is a folder; allowed: a results file path "
            f"such as {str(path / DEFAULT_PATH)!r}"
        )
    if (database := database_of(path) or database_of(target)) is not None:
        raise InputError(
            f"results: got {str(path)!r}, a side file of the SQLite file {str(database)!r}; "
            f"allowed: the results file itself ({str(database)!r})"
        )
    folder = next((p for p in path.absolute().parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise InputError(
            f"results: got {str(path)!r}, whose folder {str(folder)!r} is a file; allowed: a "
            "path in a folder"
        )
    if mode == "w" and not target.parent.exists():  # a typo's folder is never made
        raise InputError(
            f"results: got {str(path)!r}, whose folder {str(path.parent)!r} does not exist; "
            "allowed: a path in an existing folder (make it first)"
        )
    if path.exists() and not path.is_file():
        raise InputError(f"results: got {str(path)!r}, which is not a regular file; {_ALLOWED}")
    if mode == "r" and not path.exists():
        raise InputError(f"results: got {str(path)!r}, which does not exist; {_ALLOWED}")
    # One name only, to write or to read: SQLite names a database's `-wal` and `-shm` after
    # the name it is opened by, so each hard link (`cp -l`, a backup tool) gets its own log:
    # two sweeps through two names run every job twice, a checkpoint through one loses the
    # rows committed to the other's log, and a reader cannot even look for the other names.
    with contextlib.suppress(OSError):  # missing: nothing to compare (a sweep makes it)
        if (names := target.stat().st_nlink) > 1:
            raise InputError(
                f"results: got {str(path)!r}, a file with {names} names (hard links), each "
                "of which SQLite gives its own WAL, so rows committed through one are missed "
                "or lost through another; allowed: a results file with one name (copy it "
                "with `cp` without -l, or remove the other link)"
            )
    if path.exists() and path.stat().st_size > 0:
        with open(target, "rb") as f:
            head = f.read(65536)
        if head[:16] != SQLITE_HEADER and header_page_size(head, target.stat().st_size):
            raise InputError(
                f"results: {str(path)!r} is damaged (its header, the first 100 bytes, is "
                "not SQLite's, though its pages are); allowed: an intact results file "
                f"(`testbed salvage --results {path} --out NEW.db` rebuilds the header "
                "in a copy and copies every row that can still be read)"
            )
        if head[:16] != SQLITE_HEADER:
            raise InputError(f"results: got {str(path)!r}, which is not a SQLite file; {_ALLOWED}")
    reason = "the file is read-only" if target.exists() and _read_only(target) else None
    if mode == "w" and (reason or _read_only(target.parent)):
        reason = reason or f"its folder {str(target.parent)!r} is read-only"
        raise InputError(
            f"results: got {str(path)!r}, which cannot be written: {reason}; allowed: a "
            "writable path"
        )
    if target.exists():
        _check_wal(target, path)
    return target


def header_page_size(head: bytes, size: int) -> int | None:
    """The page size of a SQLite file whose 100-byte header is damaged, found from its
    first page's b-tree (the schema table's: its cells must lie inside the page), or None
    when the bytes do not look like a SQLite file. `head`: the file's first 64 KiB."""
    if len(head) < 112 or head[100] not in (5, 13):  # interior or leaf table page
        return None
    start = 112 if head[100] == 5 else 108
    cells = int.from_bytes(head[103:105], "big")
    content = int.from_bytes(head[105:107], "big") or 65536
    pointers = [
        int.from_bytes(head[start + 2 * i : start + 2 * i + 2], "big") for i in range(cells)
    ]
    first = start + 2 * cells
    for page_size in PAGE_SIZES:
        if size % page_size and size > page_size:  # a file cut short keeps a whole page 1
            continue
        if first <= content <= page_size and all(first <= p < page_size for p in pointers):
            return page_size
    return None


def meta_value(conn: sqlite3.Connection, name: str) -> str | None:
    """The value of meta row `name`, or None."""
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return None if row is None else as_text(row[0])


def private_copy(database: Path) -> tuple[tempfile.TemporaryDirectory, Path]:
    """A copy of `database` and its WAL in a new temporary folder (until its `cleanup`)."""
    folder = tempfile.TemporaryDirectory(prefix="testbed-results-")
    copy = Path(folder.name) / database.name
    try:
        shutil.copyfile(database, copy)
        shutil.copyfile(wal.wal_path(database), wal.wal_path(copy))
    except BaseException:
        folder.cleanup()
        raise
    return folder, copy


def remove_store(path: Path) -> None:
    """Deletes a results file this process made (salvage's, or one an open left empty)
    and its side files."""
    for name in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(OSError):
            name.unlink()


def _store_ids(database: Path, query: str) -> tuple[str | None, str | None] | str:
    """(the store id, the store its WAL stamp names) as SQLite shows `database` opened
    with the URI `query`; (None, None) without a meta table; else SQLite's error. Read
    with its WAL and failing in place (a read-only folder without the -shm), from a copy."""
    uri = "file:" + urllib.parse.quote(str(database)) + query
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        conn.text_factory = as_text
        try:
            stamp = meta_value(conn, WAL_STAMP)
            return meta_value(conn, STORE_ID), stamp.split(" ")[0] if stamp else None
        finally:
            conn.close()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None, None
        error = str(e)
    except (sqlite3.Error, UnicodeDecodeError) as e:
        error = str(e) or type(e).__name__
    if query != "?mode=ro":
        return error
    try:
        folder, copy = private_copy(database)
    except OSError:
        return error
    with folder:
        return _store_ids(copy, "")


def foreign_wal(database: Path) -> str | None:
    """Why the WAL beside `database` (a resolved path) is another store's, or None.

    Every write rewrites a meta row naming the store (`WAL_STAMP`), so a WAL that holds
    rows holds the meta page too: read with its WAL, the file must name the store its main
    file alone names (read as immutable, which ignores the WAL). A main file of an
    earlier version names no store: nothing to compare. A copy (`cp`) has the store's id."""
    try:
        if wal.wal_path(database).stat().st_size <= wal.HEADER:
            return None
    except OSError:
        return None
    alone = _store_ids(database, "?immutable=1")
    if isinstance(alone, str) or alone[0] is None:
        return None
    ours, shown = alone[0], _store_ids(database, "?mode=ro")
    if isinstance(shown, str):  # the main file reads alone, and not with this log
        if not any(w in shown.lower() for w in ("malformed", "not a database", "corrupt")):
            return None  # busy, or cannot be opened here: the open says why
        return (
            f"read with it, the file is unreadable ({' '.join(shown.split())[:100]}), and "
            f"without it, it is store {ours[:12]}: another store's log, or a damaged one"
        )
    theirs = next((i for i in shown if i != ours), ours)
    if theirs == ours:
        return None
    whose = "a store of an earlier version" if theirs is None else f"store {theirs[:12]}"
    return f"it was written by {whose}; {database.name} is store {ours[:12]}"


def _check_wal(file: Path, path: Path) -> None:
    """Refuses, before anything reads or writes the file, a WAL that would show other rows
    than the ones committed to it: committed transactions after a damaged frame, bytes but
    no log (zeroed), or another store's log."""
    log_file, hidden, shown = wal.wal_path(file), wal.hidden_rows(file), str(path)
    if hidden is not None and hidden[0] == "damaged":
        raise InputError(
            f"results: {shown!r} is damaged ({hidden[1]}); allowed: an intact results file "
            f"(`testbed salvage --results {path} --out NEW.db` copies every row that can "
            "still be read, those transactions' too)"
        )
    if hidden is not None:
        raise InputError(
            f"results: the WAL file {str(log_file)!r} of {shown!r} {hidden[1]} (zeroed or "
            "overwritten): rows committed to it, if any, cannot be read, and a write would "
            f"replace it; nothing was written; allowed: move it aside to use {shown!r} as "
            f"its main file holds it (`testbed salvage --results {path} --out NEW.db --wal "
            "ignore` copies those rows)"
        )
    if (foreign := foreign_wal(file)) is not None:
        raise InputError(
            f"results: {str(log_file)!r} is not the WAL of {shown!r} ({foreign}); SQLite "
            "would show that store's rows as these, and a write would mix them; nothing was "
            f"written; allowed: move the WAL file aside to use {shown!r} as its main file "
            f"holds it, or `testbed salvage --results {path} --out NEW.db --wal ignore` (its "
            "main file's rows) or `--wal use` (the rows the other store's WAL shows)"
        )
