"""A job's result as the results table's row, and the checks that a stored row reads.

The JSON columns are strict JSON that any SQL tool reads (`json_extract`): an infinite
metric is stored as the number 1e999 (SQLite and Python read it back as inf, -1e999 as
-inf) and a NaN as null. A row whose metrics or config cannot be read counts as not
stored (`row_problem`): a re-run replaces it.
"""

from __future__ import annotations

import datetime
import json
import math
import sqlite3
from collections.abc import Mapping
from typing import Any

from leaderboard.rows import parse_metrics


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


def as_text(value: Any) -> str:
    """A column's value as text; bytes that are not UTF-8 are replaced (never an error)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def strict_text(value: Any) -> str:
    """JSON columns: bytes must be UTF-8 (a replaced byte could pass as a metric name)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
    return "" if value is None else str(value)


def parse_config(text: Any) -> str:
    """A row's config JSON, checked to be a JSON object; ValueError when it is not."""
    text = strict_text(text)
    if not isinstance(json.loads(text), dict):
        raise ValueError("not a JSON object")
    return text


def row_problem(metrics: Any, config: Any) -> str | None:
    """Why a stored row cannot be read (its metrics or config JSON), or None."""
    for name, parse in (("metrics", parse_metrics), ("config", parse_config)):
        try:
            parse(strict_text(metrics if name == "metrics" else config))
        except (TypeError, ValueError) as e:
            return f"unreadable {name} ({' '.join(str(e).split())[:200]})"
    return None


def row_ok(metrics: Any, config: Any) -> int:
    """1 when a stored row reads (`row_problem`), else 0: the SQL function `row_ok`."""
    return int(row_problem(metrics, config) is None)


_LITERALS = ("NaN", "Infinity")  # what json.dumps writes for non-finite floats


def strict_json_metrics(conn: sqlite3.Connection) -> int:
    """Rewrites metrics that hold NaN / Infinity literals (not JSON; stored by earlier
    versions) as strict JSON with the same values; returns the rows rewritten."""
    where = " OR ".join(f"instr(CAST(metrics AS BLOB), CAST('{t}' AS BLOB)) > 0" for t in _LITERALS)
    changed = 0
    for key, text in conn.execute(f"SELECT key, metrics FROM results WHERE {where}").fetchall():
        try:
            strict = metrics_json(parse_metrics(strict_text(text)))
        except (TypeError, ValueError):
            continue  # unreadable: a re-run replaces it
        if strict != text:
            conn.execute("UPDATE results SET metrics = ? WHERE key = ?", (strict, key))
            changed += 1
    return changed


# SQL: whether a row can be read (its JSON as bytes: text that is not UTF-8 counts as bad).
READABLE = "row_ok(CAST(metrics AS BLOB), CAST(config AS BLOB))"


def stored_row(result: Mapping[str, Any]) -> dict[str, Any]:
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


def now_iso() -> str:
    """The time now in UTC as ISO seconds (the form of `finished_at`)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
