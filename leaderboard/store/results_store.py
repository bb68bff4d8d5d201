"""`ResultsStore`: one SQLite file (WAL mode), written only by sweep drivers.

One row per finished job (its key is the primary key), committed as the job finishes,
so a crash loses at most the jobs in flight and a re-run skips what is there (resume).
An `ok` row is never overwritten; a `failed` one is replaced only by `--retry-failed`.
A driver takes a lease on a job before running it (`claim`), so two sweeps on one file
share the work. Nothing here changes a file `checks.check_file` refuses, nor one that
SQLite's quick check finds damaged; a full disk or an I/O error is an EnvironmentFault.
Closing a written file moves the WAL's rows into the main file.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import sqlite3
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from leaderboard import rows as layout  # a row's layout
from leaderboard.provenance import versions
from leaderboard.rows import READABLE
from leaderboard.store.checks import (
    STORE_ID,
    WAL_STAMP,
    check_file,
    meta_value,
    private_copy,
    remove_store,
)
from leaderboard.store.leases import Owner
from leaderboard.store.wal import wal_path
from testbed.errors import EnvironmentFault, InputError

log = logging.getLogger("testbed.results")

SCHEMA_VERSION = 1
BUSY_SECONDS = 30.0  # how long an open or a write waits for another writer
CHECKPOINT_BUSY_MS = 1000  # how long one checkpoint waits for the file's readers
CHECKPOINT_SECONDS = 10.0  # how long closing tries to move the whole WAL into the main file
# SQLite's primary result codes that say the machine failed, not the input
SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL = 7, 10, 13

_META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
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
_JOB = ("key", "agent", "config_key", "problem_id", "seed")  # what the key is made of
# A row whose metrics cannot be read counts as not finished: a re-run replaces it.
_UPSERT = (
    f"INSERT INTO results ({', '.join(layout.WRITTEN)}) "
    f"VALUES ({', '.join(':' + n for n in layout.WRITTEN)}) ON CONFLICT (key) DO UPDATE SET "
    + ", ".join(f"{n} = excluded.{n}" for n in layout.WRITTEN if n not in _JOB)
    + f", attempts = results.attempts + 1 WHERE results.status != 'ok' OR NOT {READABLE}"
)
CLAIMED, DONE = "claimed", "done"  # outcomes of `claim`


def _busy(e: sqlite3.OperationalError) -> bool:
    return any(word in str(e).lower() for word in ("locked", "busy"))


def _retry_busy(fn, seconds: float = BUSY_SECONDS):
    """Calls `fn()` again while SQLite says the database is busy (up to `seconds`)."""
    deadline, delay = time.monotonic() + seconds, 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


class ResultsStore:
    """A results file. `mode='w'` creates or opens it for a sweep; `'r'` only reads."""

    def __init__(self, path: str | os.PathLike = layout.DEFAULT_PATH, mode: str = "w"):
        if mode not in ("r", "w"):
            raise InputError(f"mode: got {mode!r}; allowed: 'r' or 'w'")
        self.path = Path(path)  # as given: messages name it
        self.mode, self.owner = mode, Owner.me()
        self.store_id: str | None = None
        self.skipped_rows: list[str] = []  # keys of rows that could not be read
        self._snapshot: tempfile.TemporaryDirectory | None = None
        self._conn: sqlite3.Connection | None = None
        self.file = check_file(self.path, mode)  # before SQLite replays the WAL or writes
        existed = self.file.exists()
        try:
            self._conn = self._open_read() if mode == "r" else self._open_write()
        except BaseException as e:  # also Ctrl-C between making the file and its schema
            self.close()
            with contextlib.suppress(OSError):  # a full disk or a Ctrl-C left an empty
                if not existed and self.file.stat().st_size == 0:  # file that every later
                    remove_store(self.file)  # command would refuse as empty
            if isinstance(e, sqlite3.DatabaseError | UnicodeDecodeError):
                raise self._error(e) from None
            raise

    def _error(self, e: Exception) -> InputError | EnvironmentFault:
        """A one-line error for a SQLite failure on this file: an EnvironmentFault when
        the machine failed (a full disk, an I/O error, no memory), else an InputError."""
        text, path = " ".join(str(e).split())[:300], str(self.path)
        code = getattr(e, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (SQLITE_NOMEM, SQLITE_IOERR, SQLITE_FULL):
            return EnvironmentFault(
                f"results: cannot {'write' if self.mode == 'w' else 'read'} {path!r} ({text}); "
                "the machine's fault, not the file's: free some space or fix the disk, then "
                "run the command again (every row committed before is kept)"
            )
        if isinstance(e, sqlite3.OperationalError) and _busy(e):
            return InputError(
                f"results: {path!r} stayed locked by another process for {BUSY_SECONDS:g} s "
                f"({text}); allowed: try again when it is free"
            )
        if isinstance(e, sqlite3.OperationalError) and self.mode == "w":
            return InputError(f"results: cannot write {path!r} ({text})")
        return InputError(
            f"results: {path!r} is damaged ({text}); allowed: an intact results file "
            f"(`testbed salvage --results {path} --out NEW.db` copies every row that can "
            "still be read)"
        )

    # Opening.

    @staticmethod
    def _connect(target: str | Path, **kwargs: Any) -> sqlite3.Connection:
        """A connection that reads any text (bad UTF-8 is replaced), with `row_ok`, after
        SQLite's quick check of the whole file (a damaged file fails here, unchanged)."""
        conn = sqlite3.connect(target, isolation_level=None, **kwargs)
        try:
            conn.text_factory = layout.as_text
            conn.create_function("row_ok", 2, layout.row_ok, deterministic=True)
            row = next(iter(conn.execute("PRAGMA quick_check").fetchall()), None)  # all: done
            if row is None or row[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check: {row[0] if row else 'no answer'}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read(self) -> sqlite3.Connection:
        """Read-only; a WAL in a folder we cannot write, without its `-shm`, is read from
        a private copy (SQLite opens it only as immutable, which ignores the WAL)."""
        uri = "file:" + urllib.parse.quote(str(self.file))
        try:
            conn = self._connect(uri + "?mode=ro", uri=True)
        except sqlite3.OperationalError:
            log_file = wal_path(self.file)
            if not log_file.exists() or log_file.stat().st_size == 0:  # all in the main file
                conn = self._connect(uri + "?immutable=1", uri=True)
            else:
                conn = self._connect(self._private_copy())
        try:
            self._check_results_file(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _private_copy(self) -> Path:
        try:
            self._snapshot, copy = private_copy(self.file)
        except OSError as e:
            raise InputError(
                f"results: {str(self.path)!r} has committed rows in its WAL file, which cannot "
                f"be read here without a writable folder or a copy ({e.strerror}); allowed: "
                "copy the folder somewhere writable, or open the file once where it can be "
                "written (that moves every row into the main file)"
            ) from None
        return copy

    def _open_write(self) -> sqlite3.Connection:
        """Makes the schema in one transaction, or checks an existing file, before any
        change (a foreign file is refused untouched); then switches to WAL."""
        conn = self._connect(self.file, timeout=BUSY_SECONDS)
        try:
            _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                named = self._make_or_check(conn)
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

    def _make_or_check(self, conn: sqlite3.Connection) -> bool:
        """The schema of a new file, or the check of an existing one (metrics that earlier
        versions stored as NaN / Infinity literals rewritten as strict JSON); the store's
        id. True when an earlier version's file got its id."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            for statement in (_META + layout.RESULTS_TABLE + _LEASES).split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                (str(SCHEMA_VERSION), json.dumps(versions())),
            )
        else:
            self._check_results_file(conn)
            conn.execute(_LEASES)
            layout.strict_json_metrics(conn)
        if self.store_id is not None:
            return False
        self.store_id = uuid.uuid4().hex
        conn.execute("INSERT INTO meta VALUES (?, ?)", (STORE_ID, self.store_id))
        self._stamp(conn)
        return bool(tables)

    def _stamp(self, conn: sqlite3.Connection) -> None:
        """Rewrites the meta row that names this store (inside a write transaction): the
        WAL generation that holds the write holds the meta page too (`checks.foreign_wal`)."""
        if self.store_id is not None:
            stamp = f"{self.store_id} {time.time_ns()}"
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (WAL_STAMP, stamp))

    def _check_results_file(self, conn: sqlite3.Connection) -> None:
        """An InputError unless `conn` holds testbed results of this schema version."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        path, allowed = str(self.path), "allowed: a results file written by 'testbed sweep'"
        if not tables:
            raise InputError(f"results: got {path!r}, an empty file (no results yet); {allowed}")
        if "meta" not in tables:
            raise InputError(
                f"results: got {path!r}, a SQLite file without testbed results (no 'meta' "
                f"table); {allowed}"
            )
        row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
        if (found := row[0] if row else None) != str(SCHEMA_VERSION):
            raise InputError(
                f"results: {path!r} has results schema version {found}; allowed: version "
                f"{SCHEMA_VERSION} (written by this testbed; re-run the sweep into a new file)"
            )
        self.store_id = meta_value(conn, STORE_ID)

    # Closing.

    def close(self) -> None:
        """Closes the file. The driver that wrote it first moves the WAL's rows into the
        main file (tried again while another program reads the file, for up to
        CHECKPOINT_SECONDS), else a warning says the newest rows stay in the WAL."""
        if self._conn is not None:
            if self.mode == "w" and not self._checkpoint_until_empty():
                log.warning(
                    "results: another program kept %s open for %g s after the sweep, so its "
                    "newest rows stay in %s (they are committed; the next sweep or reader "
                    "that writes the file moves them): copy both files together",
                    self.path,
                    CHECKPOINT_SECONDS,
                    wal_path(self.file),
                )
            self._conn.close()
            self._conn = None
        if self._snapshot is not None:
            self._snapshot.cleanup()
            self._snapshot = None

    def _checkpoint_until_empty(self) -> bool:
        """`checkpoint` again until the WAL is empty (True) or CHECKPOINT_SECONDS passed
        (False). Another driver still writing the file (a lease of another owner) is no
        reason to wait: it checkpoints when it closes."""
        deadline, delay = time.monotonic() + CHECKPOINT_SECONDS, 0.05
        while not self.checkpoint():
            try:
                others = self._conn.execute(
                    "SELECT COUNT(*) FROM leases WHERE owner != ?", (self.owner.id,)
                ).fetchone()[0]
            except sqlite3.Error:
                others = 0
            if others or time.monotonic() >= deadline:
                return bool(others)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        return True

    def checkpoint(self) -> bool:
        """Copies every committed row from the WAL into the main file and empties the WAL;
        False when another connection still reads or writes it (then what it can, and the
        last driver to close finishes). Never raises: the rows are committed either way."""
        if self._conn is None or self.mode != "w":
            return False
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_MS}")
            return self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
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
        stored = [layout.stored_row(r) for r in results]
        changed = 0
        with self._transaction() as conn:
            self._stamp(conn)
            for row in stored:
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
            stored = conn.execute(  # unreadable rows count as not stored
                f"SELECT status, attempts FROM results WHERE key = ? AND {READABLE}", (key,)
            ).fetchone()
            if stored and (stored[0] == "ok" or rerun_failed is None or stored[1] > rerun_failed):
                return DONE
            lease = conn.execute(
                "SELECT owner, host, pid, start, expires_at FROM leases WHERE key = ?", (key,)
            ).fetchone()
            if lease is not None and lease[0] != self.owner.id:
                holder = Owner(lease[1], int(lease[2]), lease[3], lease[0].rsplit(":", 1)[-1])
                if holder.holds(lease[4], now):
                    return f"{holder.describe()}, {_until(lease[4])}"
            self._stamp(conn)
            me, expires = self.owner, None if seconds is None else now + seconds
            conn.execute(
                "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?)",
                (key, me.id, me.host, me.pid, me.start, expires),
            )
        return CLAIMED

    def release(self) -> None:
        """Drops every lease this store's driver holds (jobs it will not finish)."""
        with self._transaction() as conn:
            self._stamp(conn)
            conn.execute("DELETE FROM leases WHERE owner = ?", (self.owner.id,))

    # Reading. A row whose metrics or config cannot be read counts as not stored: a
    # re-run replaces it.

    def _select(self, query: str, args: tuple = ()) -> list[tuple]:
        with self._guard() as conn:
            return conn.execute(query, args).fetchall()

    def keys(self, status: str | None = None) -> set[str]:
        """Keys of the stored jobs (all, or only `ok` / `failed` ones)."""
        where, args = (
            (READABLE, ()) if status is None else (f"{READABLE} AND status = ?", (status,))
        )
        return {r[0] for r in self._select(f"SELECT key FROM results WHERE {where}", args)}

    def attempts(self, status: str = "failed") -> dict[str, int]:
        """key -> attempts so far, for the jobs stored with `status`."""
        query = f"SELECT key, attempts FROM results WHERE status = ? AND {READABLE}"
        return dict(self._select(query, (status,)))

    def failures(self) -> dict[str, str]:
        """key -> stored reason, for every job stored as failed."""
        query = f"SELECT key, error FROM results WHERE status = 'failed' AND {READABLE}"
        return {key: str(error) for key, error in self._select(query)}

    def count(self) -> dict[str, int]:
        query = f"SELECT status, COUNT(*) FROM results WHERE {READABLE} GROUP BY status"
        return {"ok": 0, "failed": 0, **dict(self._select(query))}

    def rows(self, tracebacks: bool = False) -> list[dict[str, Any]]:
        """Every stored row as a dict (`layout.read_row`: metrics parsed, NaN/inf kept; the
        job's seed as `agent_seed`; config and versions JSON text). A row whose metrics or
        config cannot be read is skipped with a warning naming its key (once per process;
        its key goes to `skipped_rows`)."""
        self.skipped_rows, out = [], []
        for values in self._select(f"SELECT {layout.SELECTED} FROM results ORDER BY rowid"):
            row = dict(zip(layout.NAMES, values))
            problem = layout.row_problem(row["metrics"], row["config"])
            if problem is None:
                out.append(layout.read_row(values, tracebacks))
                continue
            self.skipped_rows.append(row["key"])
            if (said := (str(self.path.resolve()), row["key"])) not in _WARNED:
                _WARNED.add(said)
                log.warning(
                    "results: row %s of %s has %s; skipped (a re-run of its sweep replaces it)",
                    row["key"],
                    self.path,
                    problem,
                )
        return out

    def dataframe(self, problem_ids: Iterable[str] | None = None):
        """All rows as a DataFrame: one column per metric; a failed job's `error` (one
        line) and `traceback` (its last 4,000 characters, or None when the job did not
        raise: a timeout or a dead worker) included. `leaderboard.load` joins the
        problem settings to it."""
        return layout.to_dataframe(self.rows(tracebacks=True), problem_ids)


_WARNED: set[tuple[str, str]] = set()  # (store, key) of the skipped rows already reported


def _until(expires_at: float | None) -> str:
    if expires_at is None:
        return "with no time limit"
    when = datetime.datetime.fromtimestamp(expires_at, datetime.UTC)
    return "its lease ends " + when.strftime("%Y-%m-%d %H:%M UTC")
