"""What a results file must be before the store opens it: a path that names a SQLite
file (its header intact, or `testbed salvage` can rebuild it), in a writable place for a
sweep, with one name (no hard link: SQLite gives each name a WAL), whose WAL is its own.

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

from leaderboard import wal
from leaderboard.outputs import SQLITE_HEADER, check_path_name, database_of
from leaderboard.rows import DEFAULT_PATH
from leaderboard.stored_rows import as_text
from testbed.errors import InputError

# meta rows: the store's own id (written when it is made), and a stamp of it that every
# write rewrites, so that each WAL generation holds the meta page (see `foreign_wal`)
STORE_ID, WAL_STAMP = "store_id", "wal_stamp"
PAGE_SIZES = tuple(2**k for k in range(9, 17))


def read_only_reason(path: Path) -> str | None:
    """Why `path` cannot be written (mode bits count even for root), or None."""
    if path.exists():
        mode = path.stat().st_mode
        if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
            return "the file is read-only"
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists():
        mode = parent.stat().st_mode
        # WAL mode writes `-wal` and `-shm` files beside the database.
        if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(
            parent, os.W_OK
        ):
            return f"its folder {str(parent)!r} is read-only"
    return None


def resolved(path: str | os.PathLike) -> Path:
    """The file `path` names: absolute, every symbolic link followed (SQLite keeps a
    database's `-wal` and `-shm` beside the file a link points to, not beside the link)."""
    return Path(os.path.realpath(os.fspath(path)))


def check_path(path: Path, mode: str, target: Path | None = None) -> None:
    """An InputError for a results path that is no results file (before anything opens it);
    `target` is the file it names (`resolved`)."""
    allowed = "allowed: a results file written by 'testbed sweep'"
    check_path_name("results", path)
    target = target or resolved(path)
    if path.is_dir():
        raise InputError(
            f"results: got {str(path)!r}, which is a folder; allowed: a results file path "
            f"such as {str(path / DEFAULT_PATH)!r}"
        )
    database = database_of(path) or database_of(target)
    if database is not None:
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
        raise InputError(f"results: got {str(path)!r}, which is not a regular file; {allowed}")
    if mode == "r" and not path.exists():
        raise InputError(f"results: got {str(path)!r}, which does not exist; {allowed}")
    check_one_name(path, target)
    if path.exists() and path.stat().st_size > 0:
        with open(target, "rb") as f:
            head = f.read(65536)
        if head[:16] != SQLITE_HEADER:
            if header_page_size(head, target.stat().st_size) is not None:
                raise InputError(
                    f"results: {str(path)!r} is damaged (its header, the first 100 bytes, is "
                    "not SQLite's, though its pages are); allowed: an intact results file "
                    f"(`testbed salvage --results {path} --out NEW.db` rebuilds the header "
                    "in a copy and copies every row that can still be read)"
                )
            raise InputError(f"results: got {str(path)!r}, which is not a SQLite file; {allowed}")


def check_one_name(path: Path, target: Path) -> None:
    """An InputError when the results file `target` (`path` as given) has more than one
    name (hard links, as `cp -l` or a backup tool makes), to write or to read.

    SQLite names a database's `-wal` and `-shm` after the name it is opened by, so each
    name gets its own log: two sweeps through two names run every job twice, and a
    checkpoint through one name loses the rows committed to the other's log. A reader is
    refused too: through one name it cannot see the rows committed to another name's log,
    and it cannot even look for that log (a file's other names cannot be listed), so it
    would show a subset of the results without a word."""
    try:
        names = target.stat().st_nlink
    except OSError:  # missing: nothing to compare (a sweep makes it)
        return
    if names > 1:
        raise InputError(
            f"results: got {str(path)!r}, a file with {names} names (hard links), each of "
            "which SQLite gives its own WAL, so rows committed through one are missed or "
            "lost through another; allowed: a results file with one name (copy it with "
            "`cp` without -l, or remove the other link)"
        )


def meta_value(conn: sqlite3.Connection, name: str) -> str | None:
    """The value of meta row `name`, or None."""
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return None if row is None else as_text(row[0])


def _store_ids(uri: str) -> tuple[str | None, str | None] | str:
    """(the store id, the store its WAL stamp names) as SQLite shows the file at `uri`;
    (None, None) when it has no meta table; SQLite's error when it cannot be read."""
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as e:
        return str(e) or type(e).__name__
    try:
        conn.text_factory = as_text
        stamp = meta_value(conn, WAL_STAMP)
        return meta_value(conn, STORE_ID), stamp.split(" ")[0] if stamp else None
    except sqlite3.OperationalError as e:
        return (None, None) if "no such table" in str(e) else str(e)
    except (sqlite3.Error, UnicodeDecodeError) as e:
        return str(e) or type(e).__name__
    finally:
        conn.close()


def foreign_wal(database: str | os.PathLike) -> str | None:
    """Why the WAL beside `database` (a resolved path) is another store's, or None.

    SQLite replays any WAL whose checksums hold, whichever database wrote it. A store names
    itself in its meta table when it is made (`STORE_ID`), and every write rewrites a meta
    row naming it (`WAL_STAMP`), so a WAL that holds rows holds the meta page too: read
    with its WAL, the file must name the store its main file alone names (read as
    immutable, which ignores the WAL). A main file of an earlier version names no store:
    nothing to compare it with. A copy of a store (`cp`) has the store's id."""
    database = Path(database)
    log_file = wal.wal_path(database)
    try:
        if log_file.stat().st_size <= wal.HEADER:
            return None
    except OSError:
        return None
    uri = "file:" + urllib.parse.quote(str(database))
    alone = _store_ids(f"{uri}?immutable=1")
    if isinstance(alone, str) or alone[0] is None:
        return None
    shown = _store_ids(f"{uri}?mode=ro")
    if isinstance(shown, str):  # e.g. a read-only folder without the -shm file: a copy
        with tempfile.TemporaryDirectory(prefix="testbed-wal-") as folder:
            copy = Path(folder) / database.name
            try:
                shutil.copyfile(database, copy)
                shutil.copyfile(log_file, wal.wal_path(copy))
            except OSError:
                return None
            shown = _store_ids("file:" + urllib.parse.quote(str(copy)))
    ours = alone[0]
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


def check_wal(file: Path, path: Path) -> None:
    """An InputError, before anything reads or writes the file, when its WAL would
    show other rows than the ones committed to it: committed transactions after a
    damaged frame, a file that holds bytes but no log (zeroed), or the log of another
    store. `file`: the resolved file (`resolved`); `path`: as given, named in messages."""
    log_file, shown_path = wal.wal_path(file), str(path)
    damage = wal.damage(file)
    if damage is not None:
        raise InputError(
            f"results: {shown_path!r} is damaged ({damage}); allowed: an intact "
            f"results file (`testbed salvage --results {path} --out NEW.db` copies "
            "every row that can still be read, those transactions' too)"
        )
    unreadable = wal.unreadable(file)
    if unreadable is not None:
        raise InputError(
            f"results: the WAL file {str(log_file)!r} of {shown_path!r} {unreadable} "
            "(zeroed or overwritten): rows committed to it, if any, cannot be read, and "
            "a write would replace it; nothing was written; allowed: move it aside to "
            f"use {shown_path!r} as its main file holds it (`testbed salvage --results "
            f"{path} --out NEW.db --wal ignore` copies those rows)"
        )
    foreign = foreign_wal(file)
    if foreign is not None:
        raise InputError(
            f"results: {str(log_file)!r} is not the WAL of {shown_path!r} ({foreign}); "
            "SQLite would show that store's rows as these, and a write would mix them; "
            "nothing was written; allowed: move the WAL file aside to use "
            f"{shown_path!r} as its main file holds it, or `testbed salvage --results "
            f"{path} --out NEW.db --wal ignore` (its main file's rows) or "
            "`--wal use` (the rows the other store's WAL shows)"
        )


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


def remove_store(path: Path) -> None:
    """Deletes a results file this process made (salvage's, or one an open left empty)
    and its side files."""
    for name in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(OSError):
            name.unlink()
