"""The results store: one SQLite file (WAL mode), written only by sweep drivers.

One row per finished job (its key is the primary key), committed as the job finishes,
so a crash loses at most the jobs in flight and a re-run skips what is there (resume).
A finished (`ok`) row is never overwritten; a `failed` row is replaced only when the
job is run again with `--retry-failed`. A driver takes a lease on a job before running
it (`claim`), so two sweeps on one file share the work. Rows read as dicts or as a
DataFrame (`leaderboard.results.load` joins the problem settings to it).

Nothing here changes a file it refuses: a foreign SQLite file, another schema version,
a damaged file (its WAL too: see `leaderboard.store_checks` and `leaderboard.wal`) or a
file with more than one name (hard links; to read too) gives an `InputError` before any
write. A full disk or an I/O error is an `EnvironmentFault`. Rows are stored in the form
`leaderboard.stored_rows` gives them.
The driver that wrote the file moves the WAL's rows into the main file when it closes it.
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
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from leaderboard import wal
from leaderboard.leases import Owner, lease_live
from leaderboard.provenance import versions
from leaderboard.rows import BASE_COLUMNS, DEFAULT_PATH, parse_metrics, to_dataframe
from leaderboard.store_checks import (
    STORE_ID,
    WAL_STAMP,
    check_path,
    check_wal,
    meta_value,
    read_only_reason,
    remove_store,
    resolved,
)
from leaderboard.stored_rows import (
    READABLE,
    as_text,
    row_ok,
    row_problem,
    stored_row,
    strict_json_metrics,
    strict_text,
)
from testbed.errors import EnvironmentFault, InputError

log = logging.getLogger("testbed.results")

SCHEMA_VERSION = 1

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


# Outcomes of `claim`.
CLAIMED = "claimed"
DONE = "done"


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
        check_path(self.path, mode, self.file)
        if mode == "w":
            reason = read_only_reason(self.file)
            if reason:
                raise InputError(
                    f"results: got {str(path)!r}, which cannot be written: {reason}; "
                    "allowed: a writable path"
                )
        self._conn: sqlite3.Connection | None = None
        existed = self.file.exists()
        if existed:  # before SQLite replays the WAL, or a write overwrites it
            check_wal(self.file, self.path)
        try:
            self._conn = self._open_read() if mode == "r" else self._open_write()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            self.close()
            self._remove_if_made_empty(existed)
            raise self._error(e) from None
        except BaseException:  # InputError, or Ctrl-C between creating the file and its schema
            self.close()
            self._remove_if_made_empty(existed)
            raise

    def _remove_if_made_empty(self, existed: bool) -> None:
        """Removes the file this open made when it holds nothing (a full disk or a Ctrl-C at
        creation left a 0-byte results file that every later command refused as empty)."""
        if existed:
            return
        with contextlib.suppress(OSError):
            if self.file.stat().st_size == 0:
                remove_store(self.file)

    # Opening.

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
            conn.text_factory = as_text
            conn.create_function("row_ok", 2, row_ok, deterministic=True)
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
                    strict_json_metrics(conn)
                self.store_id = meta_value(conn, STORE_ID)
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
        self.store_id = meta_value(conn, STORE_ID)

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
        rows = [stored_row(r) for r in results]
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
            row["metrics"] = parse_metrics(strict_text(row["metrics"]))
            row["config"] = strict_text(row["config"])
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
        """All rows as a DataFrame: one column per metric; a failed job's `error` (one
        line) and `traceback` (its last 4,000 characters, or None when the job did not
        raise: a timeout or a dead worker) included. `leaderboard.load` joins the
        problem settings to it."""
        return to_dataframe(self.rows(tracebacks=True), problem_ids)


_WARNED: set[tuple[str, str]] = set()  # (store, key) of the skipped rows already reported
