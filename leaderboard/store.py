"""The results store: one SQLite file (WAL mode), written only by sweep drivers.

One row per finished job (its key is the primary key), committed as the job finishes,
so a crash loses at most the jobs in flight and a re-run skips what is there (resume).
A finished (`ok`) row is never overwritten; a `failed` row is replaced only when the
job is run again with `--retry-failed`. A driver takes a lease on a job before running
it (`claim`), so two sweeps on one file share the work. Rows load as a pandas DataFrame
with the problem settings joined, or export to CSV / Parquet.

Nothing here changes a file it refuses: a foreign SQLite file, another schema version
or a damaged file (its WAL too: see `leaderboard.wal`) gives an `InputError` before any
write. A full disk or an I/O error is an `EnvironmentFault`. The JSON columns are strict
JSON that any SQL tool reads (`json_extract`): an infinite metric is stored as the number
1e999 (SQLite and Python read it back as inf, -1e999 as -inf) and a NaN as null. The
driver that wrote the file moves the WAL's rows into the main file when it closes it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
import os
import shutil
import sqlite3
import stat
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from leaderboard import wal
from leaderboard.leases import Owner, lease_live
from leaderboard.outputs import (
    SQLITE_HEADER,
    check_output_path,
    check_path_name,
    database_of,
    is_sqlite_file,
    write_atomically,
)
from testbed.errors import EnvironmentFault, InputError

log = logging.getLogger("testbed.results")

SCHEMA_VERSION = 1
DEFAULT_PATH = "testbed-results.db"
# meta rows: the store's own id (written when it is made), and a stamp of it that every
# write rewrites, so that each WAL generation holds the meta page (see `foreign_wal`)
STORE_ID, WAL_STAMP = "store_id", "wal_stamp"
BUSY_SECONDS = 30.0  # how long an open or a write waits for another writer
CHECKPOINT_BUSY_MS = 1000  # how long one checkpoint waits for the file's readers
CHECKPOINT_SECONDS = 10.0  # how long closing tries to move the whole WAL into the main file
# SQLite's primary result codes that say the machine failed, not the input
SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL = 7, 10, 13

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    config_key TEXT NOT NULL,
    config TEXT NOT NULL,
    problem_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    traceback TEXT,
    metrics TEXT NOT NULL,
    wall_seconds REAL,
    versions TEXT,
    host TEXT,
    finished_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS results_agent ON results (agent, config_key);
"""
# Added to version-1 files when a driver opens them (older readers ignore it).
_LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start TEXT,
    expires_at REAL
);
"""

# A row whose metrics cannot be read counts as not finished: a re-run replaces it.
_UPSERT = """
INSERT INTO results (key, agent, config_key, config, problem_id, seed, status, error,
                     traceback, metrics, wall_seconds, versions, host, finished_at)
VALUES (:key, :agent, :config_key, :config, :problem_id, :seed, :status, :error,
        :traceback, :metrics, :wall_seconds, :versions, :host, :finished_at)
ON CONFLICT (key) DO UPDATE SET
    config = excluded.config,
    status = excluded.status, error = excluded.error, traceback = excluded.traceback,
    metrics = excluded.metrics, wall_seconds = excluded.wall_seconds,
    versions = excluded.versions, host = excluded.host, finished_at = excluded.finished_at,
    attempts = results.attempts + 1
WHERE results.status != 'ok'
    OR NOT row_ok(CAST(results.metrics AS BLOB), CAST(results.config AS BLOB))
"""

JOB_COLUMNS = ["key", "agent", "config_key", "config", "problem_id", "agent_seed", "status"]
BASE_COLUMNS = [  # a row's fields before its metrics, in the order rows() and frames give them
    *JOB_COLUMNS,
    "error",
    "wall_seconds",
    "versions",
    "host",
    "finished_at",
    "attempts",
]

# Outcomes of `claim`.
CLAIMED = "claimed"
DONE = "done"


def parse_metrics(text: str) -> dict[str, float]:
    """A row's metrics JSON as {name: float}; ValueError when it is not that. null is NaN
    (see `metrics_json`); rows of earlier versions may hold NaN / Infinity literals."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    out = {}
    for k, v in value.items():
        if v is None:
            v = math.nan
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"metric {k!r} is {v!r}, not a number")
        out[str(k)] = float(v)
    return out


def _json_number(value: float) -> str:
    """A float as a strict JSON number: inf as 1e999 (read back as inf by SQLite's JSON
    functions and by Python), -inf as -1e999, NaN as null."""
    if math.isnan(value):
        return "null"
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    return json.dumps(value)


def metrics_json(metrics: Mapping[str, Any]) -> str:
    """Metrics as a strict JSON object (no NaN / Infinity literals, which SQL tools refuse)."""
    items = (f"{json.dumps(str(k))}: {_json_number(float(v))}" for k, v in metrics.items())
    return "{" + ", ".join(items) + "}"


def _text(value: Any) -> str:
    """A column's value as text; bytes that are not UTF-8 are replaced (never an error)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _strict_text(value: Any) -> str:
    """JSON columns: bytes must be UTF-8 (a replaced byte could pass as a metric name)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
    return "" if value is None else str(value)


def parse_config(text: Any) -> str:
    """A row's config JSON, checked to be a JSON object; ValueError when it is not."""
    text = _strict_text(text)
    if not isinstance(json.loads(text), dict):
        raise ValueError("not a JSON object")
    return text


def row_problem(metrics: Any, config: Any) -> str | None:
    """Why a stored row cannot be read (its metrics or config JSON), or None."""
    for name, parse in (("metrics", parse_metrics), ("config", parse_config)):
        try:
            parse(_strict_text(metrics if name == "metrics" else config))
        except (TypeError, ValueError) as e:
            return f"unreadable {name} ({' '.join(str(e).split())[:200]})"
    return None


def _row_ok(metrics: Any, config: Any) -> int:
    return int(row_problem(metrics, config) is None)


_LITERALS = ("NaN", "Infinity")  # what json.dumps writes for non-finite floats


def _strict_json_metrics(conn: sqlite3.Connection) -> int:
    """Rewrites metrics that hold NaN / Infinity literals (not JSON; stored by earlier
    versions) as strict JSON with the same values; returns the rows rewritten."""
    where = " OR ".join(f"instr(CAST(metrics AS BLOB), CAST('{t}' AS BLOB)) > 0" for t in _LITERALS)
    changed = 0
    for key, text in conn.execute(f"SELECT key, metrics FROM results WHERE {where}").fetchall():
        try:
            strict = metrics_json(parse_metrics(_strict_text(text)))
        except (TypeError, ValueError):
            continue  # unreadable: a re-run replaces it
        if strict != text:
            conn.execute("UPDATE results SET metrics = ? WHERE key = ?", (strict, key))
            changed += 1
    return changed


# SQL: whether a row can be read (its JSON as bytes: text that is not UTF-8 counts as bad).
READABLE = "row_ok(CAST(metrics AS BLOB), CAST(config AS BLOB))"


def _read_only_reason(path: Path) -> str | None:
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


def _check_path(path: Path, mode: str, target: Path | None = None) -> None:
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
    if path.exists() and not path.is_file():
        raise InputError(f"results: got {str(path)!r}, which is not a regular file; {allowed}")
    if mode == "r" and not path.exists():
        raise InputError(f"results: got {str(path)!r}, which does not exist; {allowed}")
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


def _meta(conn: sqlite3.Connection, name: str) -> str | None:
    """The value of meta row `name`, or None."""
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return None if row is None else _text(row[0])


def _store_ids(uri: str) -> tuple[str | None, str | None] | str:
    """(the store id, the store its WAL stamp names) as SQLite shows the file at `uri`;
    (None, None) when it has no meta table; SQLite's error when it cannot be read."""
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as e:
        return str(e) or type(e).__name__
    try:
        conn.text_factory = _text
        stamp = _meta(conn, WAL_STAMP)
        return _meta(conn, STORE_ID), stamp.split(" ")[0] if stamp else None
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


PAGE_SIZES = tuple(2**k for k in range(9, 17))


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


def _busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _retry_busy(fn, seconds: float = BUSY_SECONDS):
    """Calls `fn()` again while SQLite says the database is busy (up to `seconds`)."""
    deadline = time.monotonic() + seconds
    delay = 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def _stored_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A finished job's result as the `results` table's row."""
    return {
        "key": result["key"],
        "agent": result["agent"],
        "config_key": result["config_key"],
        "config": json.dumps(result["config"], sort_keys=True),
        "problem_id": result["problem_id"],
        "seed": int(result["seed"]),
        "status": result["status"],
        "error": result.get("error"),
        "traceback": result.get("traceback"),
        "metrics": metrics_json(result.get("metrics", {})),
        "wall_seconds": _finite_or_none(result.get("wall_seconds")),
        "versions": json.dumps(result.get("versions") or {}, sort_keys=True),
        "host": result.get("host"),
        "finished_at": result.get("finished_at") or now_iso(),  # given when restored
    }


class ResultsStore:
    """A results file. `mode='w'` creates or opens it for a sweep; `'r'` only reads."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH, mode: str = "w"):
        if mode not in ("r", "w"):
            raise InputError(f"mode: got {mode!r}; allowed: 'r' or 'w'")
        self.path = Path(path)  # as given: messages name it
        self.file = resolved(self.path)  # the file itself: every check, open and WAL look-up
        self.mode = mode
        self.owner = Owner.me()
        self.store_id: str | None = None
        self.skipped_rows: list[str] = []  # keys of rows that could not be read
        self._snapshot: tempfile.TemporaryDirectory | None = None
        _check_path(self.path, mode, self.file)
        if mode == "w":
            reason = _read_only_reason(self.file)
            if reason is None and not self.file.parent.exists():
                try:
                    self.file.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    reason = f"its folder cannot be created ({e.strerror})"
            if reason:
                raise InputError(
                    f"results: got {str(path)!r}, which cannot be written: {reason}; "
                    "allowed: a writable path"
                )
        self._conn: sqlite3.Connection | None = None
        existed = self.file.exists()
        if existed:  # before SQLite replays the WAL, or a write overwrites it
            self._check_wal()
        try:
            self._conn = self._open_read() if mode == "r" else self._open_write()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            self.close()
            self._remove_if_made_empty(existed)
            raise self._error(e) from None
        except InputError:
            self.close()
            self._remove_if_made_empty(existed)
            raise

    def _remove_if_made_empty(self, existed: bool) -> None:
        """Removes the file this open made when it holds nothing (a full disk at creation
        left a 0-byte results file that every later command refused as empty)."""
        if existed:
            return
        with contextlib.suppress(OSError):
            if self.file.stat().st_size == 0:
                _remove_store(self.file)

    # Opening.

    def _check_wal(self) -> None:
        """An InputError, before anything reads or writes the file, when its WAL would
        show other rows than the ones committed to it: committed transactions after a
        damaged frame, a file that holds bytes but no log (zeroed), or the log of another
        store."""
        log_file, shown_path = wal.wal_path(self.file), str(self.path)
        damage = wal.damage(self.file)
        if damage is not None:
            raise InputError(
                f"results: {shown_path!r} is damaged ({damage}); allowed: an intact "
                f"results file (`testbed salvage --results {self.path} --out NEW.db` copies "
                "every row that can still be read, those transactions' too)"
            )
        unreadable = wal.unreadable(self.file)
        if unreadable is not None:
            raise InputError(
                f"results: the WAL file {str(log_file)!r} of {shown_path!r} {unreadable} "
                "(zeroed or overwritten): rows committed to it, if any, cannot be read, and "
                "a write would replace it; nothing was written; allowed: move it aside to "
                f"use {shown_path!r} as its main file holds it (`testbed salvage --results "
                f"{self.path} --out NEW.db --wal ignore` copies those rows)"
            )
        foreign = foreign_wal(self.file)
        if foreign is not None:
            raise InputError(
                f"results: {str(log_file)!r} is not the WAL of {shown_path!r} ({foreign}); "
                "SQLite would show that store's rows as these, and a write would mix them; "
                "nothing was written; allowed: move the WAL file aside to use "
                f"{shown_path!r} as its main file holds it, or `testbed salvage --results "
                f"{self.path} --out NEW.db --wal ignore` (its main file's rows) or "
                "`--wal use` (the rows the other store's WAL shows)"
            )

    def _error(self, e: Exception) -> InputError | EnvironmentFault:
        """A one-line error for a SQLite failure on this file: an EnvironmentFault when
        the machine failed (a full disk, an I/O error, no memory), else an InputError."""
        text = " ".join(str(e).split())[:300]
        code = getattr(e, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL):
            return EnvironmentFault(
                f"results: cannot {'write' if self.mode == 'w' else 'read'} "
                f"{str(self.path)!r} ({text}); the machine's fault, not the file's: free some "
                "space or fix the disk, then run the command again (every row committed "
                "before is kept)"
            )
        if isinstance(e, sqlite3.OperationalError) and _busy(e):
            return InputError(
                f"results: {str(self.path)!r} stayed locked by another process for "
                f"{BUSY_SECONDS:g} s ({text}); allowed: try again when it is free"
            )
        if isinstance(e, sqlite3.OperationalError) and self.mode == "w":
            return InputError(f"results: cannot write {str(self.path)!r} ({text})")
        return InputError(
            f"results: {str(self.path)!r} is damaged ({text}); allowed: an intact results "
            f"file (`testbed salvage --results {self.path} --out NEW.db` copies every row "
            "that can still be read)"
        )

    @staticmethod
    def _connect(target: str | Path, **kwargs: Any) -> sqlite3.Connection:
        """A connection that reads any text (bad UTF-8 is replaced), with `row_ok`, after
        SQLite's quick check of the whole file (a damaged file fails here, unchanged)."""
        conn = sqlite3.connect(target, isolation_level=None, **kwargs)
        try:
            conn.text_factory = _text
            conn.create_function("row_ok", 2, _row_ok, deterministic=True)
            row = next(iter(conn.execute("PRAGMA quick_check").fetchall()), None)  # all: done
            if row is None or row[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check: {row[0] if row else 'no answer'}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read(self) -> sqlite3.Connection:
        uri = "file:" + urllib.parse.quote(str(self.file))
        try:
            conn = self._connect(f"{uri}?mode=ro", uri=True)
        except sqlite3.OperationalError:
            # A WAL file in a folder we cannot write and without its `-shm`: SQLite can
            # open it only as immutable, which ignores the WAL's committed rows.
            conn = self._open_copy()
        try:
            self._check_results_file(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_copy(self) -> sqlite3.Connection:
        """Opens a private copy of the file and its WAL, which holds every committed row."""
        log_file = wal.wal_path(self.file)
        if not log_file.exists() or log_file.stat().st_size == 0:  # every row is in the main file
            uri = "file:" + urllib.parse.quote(str(self.file))
            return self._connect(f"{uri}?immutable=1", uri=True)
        self._snapshot = tempfile.TemporaryDirectory(prefix="testbed-results-")
        copy = Path(self._snapshot.name) / self.file.name
        try:
            shutil.copyfile(self.file, copy)
            shutil.copyfile(log_file, wal.wal_path(copy))
        except OSError as e:
            raise InputError(
                f"results: {str(self.path)!r} has committed rows in its WAL file, which cannot "
                f"be read here without a writable folder or a copy ({e.strerror}); allowed: "
                "copy the folder somewhere writable, or open the file once where it can be "
                "written (that moves every row into the main file)"
            ) from None
        return self._connect(copy)

    def _open_write(self) -> sqlite3.Connection:
        """Creates the schema in one transaction, or checks an existing file, before any
        change (a foreign file is refused untouched); then switches to WAL. Metrics that
        earlier versions stored as NaN / Infinity literals are rewritten as strict JSON."""
        conn = self._connect(self.file, timeout=BUSY_SECONDS)
        try:
            _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                tables = {
                    r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                if not tables:
                    from leaderboard.provenance import versions

                    for statement in (_SCHEMA + _LEASES).split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(
                        "INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                        (str(SCHEMA_VERSION), json.dumps(versions())),
                    )
                else:
                    self._check_results_file(conn)
                    conn.execute(_LEASES)
                    _strict_json_metrics(conn)
                self.store_id = _meta(conn, STORE_ID)
                named = self.store_id is None and bool(tables)  # by an earlier version
                if self.store_id is None:
                    self.store_id = uuid.uuid4().hex
                    conn.execute("INSERT INTO meta VALUES (?, ?)", (STORE_ID, self.store_id))
                    self._stamp(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone())
            conn.execute("PRAGMA synchronous=FULL")  # each commit survives a power loss
            if named:  # the id into the main file, which a WAL is checked against
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except BaseException:
            conn.close()
            raise
        return conn

    def _stamp(self, conn: sqlite3.Connection) -> None:
        """Rewrites the meta row that names this store (inside a write transaction): the
        WAL generation that holds the write then holds the meta page too, which
        `foreign_wal` compares with the main file's."""
        if self.store_id is not None:
            stamp = f"{self.store_id} {time.time_ns()}"
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (WAL_STAMP, stamp))

    def _check_results_file(self, conn: sqlite3.Connection) -> None:
        """An InputError unless `conn` holds testbed results of this schema version."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            raise InputError(
                f"results: got {str(self.path)!r}, an empty file (no results yet); "
                "allowed: a results file written by 'testbed sweep'"
            )
        if "meta" not in tables:
            raise InputError(
                f"results: got {str(self.path)!r}, a SQLite file without testbed results (no "
                "'meta' table); allowed: a results file written by 'testbed sweep'"
            )
        row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
        found = row[0] if row else None
        if found != str(SCHEMA_VERSION):
            raise InputError(
                f"results: {str(self.path)!r} has results schema version {found}; allowed: "
                f"version {SCHEMA_VERSION} (written by this testbed; re-run the sweep into a "
                "new file)"
            )
        self.store_id = _meta(conn, STORE_ID)

    def close(self) -> None:
        """Closes the file. The driver that wrote it first moves the WAL's rows into the
        main file (a checkpoint, tried again while another program reads the file, for up
        to CHECKPOINT_SECONDS): a finished sweep's rows do not depend on its WAL. When a
        reader holds the file longer, a warning says the newest rows stay in the WAL."""
        if self._conn is not None:
            if self.mode == "w" and not self._checkpoint_until_empty():
                log.warning(
                    "results: another program kept %s open for %g s after the sweep, so its "
                    "newest rows stay in %s (they are committed; the next sweep or reader "
                    "that writes the file moves them): copy both files together",
                    self.path,
                    CHECKPOINT_SECONDS,
                    wal.wal_path(self.file),
                )
            self._conn.close()
            self._conn = None
        if self._snapshot is not None:
            self._snapshot.cleanup()
            self._snapshot = None

    def _checkpoint_until_empty(self) -> bool:
        """`checkpoint` again until the WAL is empty (True) or CHECKPOINT_SECONDS passed
        (False). Another driver still writing the file is no reason to wait: it
        checkpoints when it closes."""
        deadline = time.monotonic() + CHECKPOINT_SECONDS
        delay = 0.05
        while not self.checkpoint():
            if self._other_writer() or time.monotonic() >= deadline:
                return self._other_writer()
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        return True

    def _other_writer(self) -> bool:
        """Whether another live driver holds a lease on this file (it writes on)."""
        try:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM leases WHERE owner != ?", (self.owner.id,)
            ).fetchone()
        except sqlite3.Error:
            return False
        return bool(row and row[0])

    def checkpoint(self) -> bool:
        """Copies every committed row from the WAL into the main file and empties the WAL;
        False when another connection still reads or writes it (then what it can, and the
        last driver to close finishes). Never raises: the rows are committed either way."""
        if self._conn is None or self.mode != "w":
            return False
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_MS}")
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return busy == 0
        except sqlite3.Error as e:
            log.debug("results: checkpoint of %s not done (%s)", self.path, e)
            return False

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """The connection, with SQLite's errors turned into one-line InputErrors (but a
        caller's misuse, such as a value SQLite cannot store, which says nothing of the file)."""
        try:
            yield self._conn
        except sqlite3.ProgrammingError:
            raise
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise self._error(e) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (waits for another writer), committed on success."""
        with self._guard() as conn:
            _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # Writing (sweep drivers only).

    def record(self, result: Mapping[str, Any]) -> bool:
        """Commits one finished job and drops its lease; False when an `ok` row for its key
        was already there (it is kept)."""
        return self.record_many([result]) == 1

    def record_many(self, results: Iterable[Mapping[str, Any]]) -> int:
        """Commits finished jobs in one transaction (all or none; one disk sync, not one a
        job, as when restoring shipped runs) and drops their leases; returns how many rows
        changed (an `ok` row already there is kept)."""
        rows = [_stored_row(r) for r in results]
        changed = 0
        with self._transaction() as conn:
            self._stamp(conn)
            for row in rows:
                changed += conn.execute(_UPSERT, row).rowcount == 1
                conn.execute("DELETE FROM leases WHERE key = ?", (row["key"],))
        return changed

    def claim(self, key: str, *, rerun_failed: int | None = None, seconds: float | None) -> str:
        """Takes the lease on job `key` before running it.

        Returns CLAIMED (run it), DONE (stored as ok, or as failed unless `rerun_failed`
        is the attempt count of a failed row the caller means to run again) or the
        description of the live owner of its lease (another sweep is running it). The
        lease expires after `seconds` (None: only when its owner is gone).
        """
        now = time.time()
        with self._transaction() as conn:
            stored = conn.execute(
                f"SELECT status, {READABLE}, attempts FROM results WHERE key = ?",
                (key,),
            ).fetchone()
            if stored is not None and stored[1]:  # unreadable rows count as not stored
                status, _, attempts = stored
                if status == "ok":
                    return DONE
                if rerun_failed is None or attempts > rerun_failed:
                    return DONE
            lease = conn.execute(
                "SELECT owner, host, pid, start, expires_at FROM leases WHERE key = ?", (key,)
            ).fetchone()
            if lease is not None and lease[0] != self.owner.id:
                holder = Owner(lease[1], int(lease[2]), lease[3], lease[0].rsplit(":", 1)[-1])
                if lease_live(holder, lease[4], now):
                    until = (
                        "with no time limit"
                        if lease[4] is None
                        else "its lease ends "
                        + datetime.datetime.fromtimestamp(lease[4], datetime.UTC).strftime(
                            "%Y-%m-%d %H:%M UTC"
                        )
                    )
                    return f"{holder.describe()}, {until}"
            self._stamp(conn)
            conn.execute(
                "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key,
                    self.owner.id,
                    self.owner.host,
                    self.owner.pid,
                    self.owner.start,
                    None if seconds is None else now + seconds,
                ),
            )
        return CLAIMED

    def release(self) -> None:
        """Drops every lease this store's driver holds (jobs it will not finish)."""
        with self._transaction() as conn:
            self._stamp(conn)
            conn.execute("DELETE FROM leases WHERE owner = ?", (self.owner.id,))

    # Reading.

    def keys(self, status: str | None = None) -> set[str]:
        """Keys of the stored jobs (all, or only `ok` / `failed` ones). A row whose metrics
        cannot be read counts as neither: a re-run replaces it."""
        query = f"SELECT key FROM results WHERE {READABLE}"
        args: tuple[str, ...] = ()
        if status is not None:
            query, args = query + " AND status = ?", (status,)
        with self._guard() as conn:
            return {r[0] for r in conn.execute(query, args)}

    def attempts(self, status: str = "failed") -> dict[str, int]:
        """key -> attempts so far, for the jobs stored with `status`."""
        query = f"SELECT key, attempts FROM results WHERE status = ? AND {READABLE}"
        with self._guard() as conn:
            return dict(conn.execute(query, (status,)).fetchall())

    def failures(self) -> dict[str, str]:
        """key -> stored reason, for every job stored as failed."""
        query = f"SELECT key, error FROM results WHERE status = 'failed' AND {READABLE}"
        with self._guard() as conn:
            return {key: str(error) for key, error in conn.execute(query)}

    def count(self) -> dict[str, int]:
        query = f"SELECT status, COUNT(*) FROM results WHERE {READABLE} GROUP BY status"
        with self._guard() as conn:
            return {"ok": 0, "failed": 0, **dict(conn.execute(query).fetchall())}

    def rows(self, tracebacks: bool = False) -> list[dict[str, Any]]:
        """Every stored row as a dict, metrics parsed (NaN/inf kept); the job's seed is
        `agent_seed` (the problem's own seed is a setting); config and versions stay JSON.

        A row whose metrics or config cannot be read is skipped with a warning naming its
        key (once per process; its key goes to `skipped_rows`); the others are returned.
        """
        names = [*BASE_COLUMNS, "metrics"] + (["traceback"] if tracebacks else [])
        blobs = {"agent_seed": "seed", "metrics": "CAST(metrics AS BLOB)"}
        blobs["config"] = "CAST(config AS BLOB)"  # JSON read as bytes: checked strictly
        columns = [blobs.get(c, c) for c in names]
        query = f"SELECT {', '.join(columns)} FROM results ORDER BY rowid"
        with self._guard() as conn:
            fetched = conn.execute(query).fetchall()
        out = []
        self.skipped_rows = []
        for values in fetched:
            row = dict(zip(names, values))
            problem = row_problem(row["metrics"], row["config"])
            if problem is not None:
                self._warn_skipped(row["key"], problem)
                continue
            row["metrics"] = parse_metrics(_strict_text(row["metrics"]))
            row["config"] = _strict_text(row["config"])
            if row["wall_seconds"] is None:
                row["wall_seconds"] = math.nan
            out.append(row)
        return out

    def _warn_skipped(self, key: str, problem: str) -> None:
        self.skipped_rows.append(key)
        said = (str(self.path.resolve()), key)
        if said not in _WARNED:
            _WARNED.add(said)
            log.warning(
                "results: row %s of %s has %s; skipped (a re-run of its sweep replaces it)",
                key,
                self.path,
                problem,
            )

    def dataframe(self, problem_ids: Iterable[str] | None = None):
        """All rows as a DataFrame: one column per metric, problem settings joined; a
        failed job's `error` (one line) and `traceback` (its last 4,000 characters, or
        None when the job did not raise: a timeout or a dead worker) included."""
        return to_dataframe(self.rows(tracebacks=True), problem_ids)


_WARNED: set[tuple[str, str]] = set()  # (store, key) of the skipped rows already reported


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
        conn.text_factory = _text
        try:
            try:
                with ResultsStore(target, mode="w") as store, store._transaction() as dest:
                    copied, lost = _copy_readable_rows(conn, dest)
            except BaseException:
                _remove_store(target)
                raise
        finally:
            conn.close()
    if copied == 0:
        _remove_store(target)
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


def _remove_store(path: Path) -> None:
    """Deletes a results file that salvage made and its side files."""
    for name in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(OSError):
            name.unlink()


def now_iso() -> str:
    """The time now in UTC as ISO seconds (the form of `finished_at`)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def settings_table(problem_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`generative.problem_settings` for each id; ids no longer registered get none."""
    import generative

    out = {}
    for pid in problem_ids:
        try:
            out[pid] = generative.problem_settings(pid)
        except InputError:
            out[pid] = {}
    return out


# The DataFrame's columns before its metrics: the base columns, `traceback` after `error`.
FRAME_COLUMNS = [*BASE_COLUMNS[: BASE_COLUMNS.index("error") + 1], "traceback"]
FRAME_COLUMNS += BASE_COLUMNS[len(FRAME_COLUMNS) - 1 :]


def to_dataframe(rows: list[dict[str, Any]], problem_ids: Iterable[str] | None = None):
    """Rows -> DataFrame: base columns (and `traceback`, None when a row has none), one
    column per metric, then problem settings.

    A setting whose name clashes with a base or metric column is joined as
    `setting_<name>`. With `problem_ids`, only rows of those problems are kept.
    """
    import pandas as pd

    if problem_ids is not None:
        wanted = set(problem_ids)
        rows = [r for r in rows if r["problem_id"] in wanted]
    metric_names = sorted({k for r in rows for k in r["metrics"]})
    records = []
    for r in rows:
        rec = {c: r.get(c) if c == "traceback" else r[c] for c in FRAME_COLUMNS}
        for m in metric_names:
            rec[m] = r["metrics"].get(m, math.nan)
        records.append(rec)
    df = pd.DataFrame.from_records(records, columns=FRAME_COLUMNS + metric_names)
    options = [_problem_options(r.get("versions")) for r in rows]
    if any(o is not None for o in options):  # jobs loaded with options (--option)
        df["problem_options"] = options
    settings = settings_table(sorted(set(df["problem_id"])))
    taken = set(df.columns)
    names = sorted({k for s in settings.values() for k in s})
    for name in names:
        column = f"setting_{name}" if name in taken else name
        df[column] = [settings[p].get(name) for p in df["problem_id"]]
    return df


def _problem_options(versions: Any) -> dict[str, Any] | None:
    """The problem options a row's job was loaded with (kept with its versions), or None."""
    try:
        made_with = json.loads(versions) if isinstance(versions, str) else versions
    except ValueError:
        return None
    return made_with.get("problem_options") if isinstance(made_with, dict) else None


def load(path: str | os.PathLike = DEFAULT_PATH, problem_ids: Iterable[str] | None = None):
    """The results at `path` as a DataFrame (read-only; problem settings joined). Failed
    jobs carry their stored `error` and `traceback` (see `ResultsStore.dataframe`)."""
    with ResultsStore(path, mode="r") as store:
        return store.dataframe(problem_ids)


def rows_to_summarise(df, results, keys: Iterable[str] | None, none: str, hint: str = ""):
    """The rows of jobs `keys` (default: all) in `df`, loaded from `results`; refused when
    there are none (`none` says what is missing) or an agent has several configs."""
    if keys is not None:
        df = df[df["key"].isin(keys)]
    if df.empty:
        raise InputError(f"results: {str(results)!r} has no {none}")
    several = df.groupby("agent")["config_key"].nunique()
    if (several > 1).any():
        raise InputError(
            f"results: {str(results)!r} holds several configs of "
            f"{', '.join(several[several > 1].index)}; allowed: one config per agent{hint}"
        )
    return df


def export(path: str | os.PathLike, out: str | os.PathLike) -> int:
    """Writes the results at `path` to `out` (.csv, .parquet or .pq); returns the row count.

    `out` may not be the results file, its side files or any SQLite file (refused before
    anything is written); it is written to a temporary file and renamed into place.
    """
    suffix = Path(out).suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise InputError(f"export: got {str(out)!r}; allowed: a path ending in .csv or .parquet")
    check_output_path("export", out, [path])
    df = load(path)

    def write(tmp: Path) -> None:
        if suffix == ".csv":
            df.to_csv(tmp, index=False)
        else:
            frame = df.copy()
            for column in frame.columns:  # parquet needs one type per column
                if frame[column].dtype == object:
                    frame[column] = frame[column].map(lambda v: None if v is None else str(v))
            frame.to_parquet(tmp, index=False)

    write_atomically("export", out, write)
    return len(df)
