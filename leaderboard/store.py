"""The results store: one SQLite file (WAL mode), written only by the sweep's driver.

One row per finished job (its key is the primary key), committed as the job finishes,
so a crash loses at most the jobs in flight and a re-run skips what is there (resume).
A finished (`ok`) row is never overwritten; a `failed` row is replaced only when the
job is run again with `--retry-failed`. Rows load as a pandas DataFrame with the
problem settings joined, or export to CSV / Parquet.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import sqlite3
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.errors import InputError

SCHEMA_VERSION = 1
DEFAULT_PATH = "testbed-results.db"
_SQLITE_HEADER = b"SQLite format 3\x00"

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

_UPSERT = """
INSERT INTO results (key, agent, config_key, config, problem_id, seed, status, error,
                     traceback, metrics, wall_seconds, versions, host, finished_at)
VALUES (:key, :agent, :config_key, :config, :problem_id, :seed, :status, :error,
        :traceback, :metrics, :wall_seconds, :versions, :host, :finished_at)
ON CONFLICT (key) DO UPDATE SET
    status = excluded.status, error = excluded.error, traceback = excluded.traceback,
    metrics = excluded.metrics, wall_seconds = excluded.wall_seconds,
    versions = excluded.versions, host = excluded.host, finished_at = excluded.finished_at,
    attempts = results.attempts + 1
WHERE results.status != 'ok'
"""

BASE_COLUMNS = [  # a row's fields before its metrics, in the order rows() and frames give them
    "key",
    "agent",
    "config_key",
    "config",
    "problem_id",
    "agent_seed",
    "status",
    "error",
    "wall_seconds",
    "versions",
    "host",
    "finished_at",
    "attempts",
]


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


def _check_is_sqlite(path: Path) -> None:
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as f:
            if f.read(16) != _SQLITE_HEADER:
                raise InputError(
                    f"results: got {str(path)!r}, which is not a SQLite file; allowed: a "
                    "results file written by 'testbed sweep'"
                )


class ResultsStore:
    """A results file. `mode='w'` creates or opens it for a sweep; `'r'` only reads."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH, mode: str = "w"):
        if mode not in ("r", "w"):
            raise InputError(f"mode: got {mode!r}; allowed: 'r' or 'w'")
        self.path = Path(path)
        self.mode = mode
        if self.path.is_dir():
            raise InputError(
                f"results: got {str(path)!r}, which is a folder; allowed: a results file path "
                f"such as {str(self.path / DEFAULT_PATH)!r}"
            )
        if mode == "r" and not self.path.is_file():
            raise InputError(
                f"results: got {str(path)!r}, which does not exist; allowed: a results file "
                "written by 'testbed sweep'"
            )
        _check_is_sqlite(self.path)
        if mode == "w":
            reason = _read_only_reason(self.path)
            if reason is None and not self.path.parent.exists():
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    reason = f"its folder cannot be created ({e.strerror})"
            if reason:
                raise InputError(
                    f"results: got {str(path)!r}, which cannot be written: {reason}; "
                    "allowed: a writable path"
                )
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"results: got {str(path)!r}, which cannot be opened ({e}); allowed: a "
                + ("writable path" if mode == "w" else "results file written by 'testbed sweep'")
            ) from None

    def _open(self) -> sqlite3.Connection:
        if self.mode == "r":
            base = f"file:{self.path.resolve()}"
            try:
                conn = sqlite3.connect(f"{base}?mode=ro", uri=True, isolation_level=None)
                conn.execute("SELECT 1 FROM sqlite_master").fetchone()
            except sqlite3.OperationalError:  # WAL in a read-only folder: no -shm possible
                conn = sqlite3.connect(f"{base}?immutable=1", uri=True, isolation_level=None)
            self._check_version(conn)
            return conn
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # each commit survives a crash or power loss
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" in tables:
            self._check_version(conn)
        elif tables:
            conn.close()
            raise InputError(
                f"results: got {str(self.path)!r}, a SQLite file without testbed results "
                "(no 'meta' table); allowed: a results file written by 'testbed sweep'"
            )
        else:
            from leaderboard.worker import versions

            conn.executescript("BEGIN;" + _SCHEMA + "COMMIT;")
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                (str(SCHEMA_VERSION), json.dumps(versions())),
            )
        return conn

    def _check_version(self, conn: sqlite3.Connection) -> None:
        try:
            row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
        except sqlite3.DatabaseError:
            row = None
        found = row[0] if row else None
        if found != str(SCHEMA_VERSION):
            conn.close()
            raise InputError(
                f"results: {str(self.path)!r} has results schema version {found}; allowed: "
                f"version {SCHEMA_VERSION} (written by this testbed; re-run the sweep into a "
                "new file)"
            )

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Writing (the driver only).

    def record(self, result: Mapping[str, Any]) -> bool:
        """Commits one finished job; False when an `ok` row for its key was already there."""
        row = {
            "key": result["key"],
            "agent": result["agent"],
            "config_key": result["config_key"],
            "config": json.dumps(result["config"], sort_keys=True),
            "problem_id": result["problem_id"],
            "seed": int(result["seed"]),
            "status": result["status"],
            "error": result.get("error"),
            "traceback": result.get("traceback"),
            "metrics": json.dumps({k: float(v) for k, v in result.get("metrics", {}).items()}),
            "wall_seconds": _finite_or_none(result.get("wall_seconds")),
            "versions": json.dumps(result.get("versions") or {}, sort_keys=True),
            "host": result.get("host"),
            "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        try:
            cursor = self._conn.execute(_UPSERT, row)
        except sqlite3.OperationalError as e:
            raise InputError(f"results: cannot write {str(self.path)!r} ({e})") from None
        return cursor.rowcount == 1

    # Reading.

    def keys(self, status: str | None = None) -> set[str]:
        """Keys of the stored jobs (all, or only `ok` / `failed` ones)."""
        if status is None:
            return {r[0] for r in self._conn.execute("SELECT key FROM results")}
        query = "SELECT key FROM results WHERE status = ?"
        return {r[0] for r in self._conn.execute(query, (status,))}

    def count(self) -> dict[str, int]:
        rows = self._conn.execute("SELECT status, COUNT(*) FROM results GROUP BY status")
        return {"ok": 0, "failed": 0, **dict(rows.fetchall())}

    def rows(self) -> list[dict[str, Any]]:
        """Every stored row as a dict, metrics parsed (NaN/inf kept); the job's seed is
        `agent_seed` (the problem's own seed is a setting); config and versions stay JSON."""
        # the table's `seed` column is the job's agent seed; the traceback stays in the file
        columns = ["seed" if c == "agent_seed" else c for c in BASE_COLUMNS] + ["metrics"]
        cursor = self._conn.execute(f"SELECT {', '.join(columns)} FROM results ORDER BY rowid")
        out = []
        for values in cursor.fetchall():
            row = dict(zip([*BASE_COLUMNS, "metrics"], values))
            row["metrics"] = json.loads(row["metrics"])
            if row["wall_seconds"] is None:
                row["wall_seconds"] = math.nan
            out.append(row)
        return out

    def dataframe(self, problem_ids: Iterable[str] | None = None):
        """All rows as a DataFrame: one column per metric, problem settings joined."""
        return to_dataframe(self.rows(), problem_ids)


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


def to_dataframe(rows: list[dict[str, Any]], problem_ids: Iterable[str] | None = None):
    """Rows -> DataFrame: base columns, one column per metric, then problem settings.

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
        rec = {c: r[c] for c in BASE_COLUMNS}
        for m in metric_names:
            rec[m] = r["metrics"].get(m, math.nan)
        records.append(rec)
    df = pd.DataFrame.from_records(records, columns=BASE_COLUMNS + metric_names)
    settings = settings_table(sorted(set(df["problem_id"])))
    taken = set(df.columns)
    names = sorted({k for s in settings.values() for k in s})
    for name in names:
        column = f"setting_{name}" if name in taken else name
        df[column] = [settings[p].get(name) for p in df["problem_id"]]
    return df


def load(path: str | os.PathLike = DEFAULT_PATH, problem_ids: Iterable[str] | None = None):
    """The results at `path` as a DataFrame (read-only; problem settings joined)."""
    with ResultsStore(path, mode="r") as store:
        return store.dataframe(problem_ids)


def export(path: str | os.PathLike, out: str | os.PathLike) -> int:
    """Writes the results at `path` to `out` (.csv, .parquet or .pq); returns the row count."""
    suffix = Path(out).suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise InputError(f"export: got {str(out)!r}; allowed: a path ending in .csv or .parquet")
    df = load(path)
    try:
        if suffix == ".csv":
            df.to_csv(out, index=False)
        else:
            for column in df.columns:  # parquet needs one type per column
                if df[column].dtype == object:
                    df[column] = df[column].map(lambda v: None if v is None else str(v))
            df.to_parquet(out, index=False)
    except OSError as e:
        raise InputError(f"export: cannot write {str(out)!r} ({e.strerror})") from None
    return len(df)
