"""A stored row's layout, defined once: its columns, their SQL types, which hold JSON, how
a job's result is written into them and how they read back (as dicts and DataFrames).

The results store writes and reads rows by `COLUMNS`; salvage copies them; `leaderboard
--export` and the shipped runs' files use the DataFrame's columns derived from them. The
JSON columns are strict JSON that any SQL tool reads (`json_extract`): an infinite metric
is stored as 1e999 (read back as inf), a NaN as null. A row whose metrics or config
cannot be read counts as not stored (`row_problem`): a re-run replaces it. This module
imports neither side of the leaderboard (both read it).
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from testbed.errors import InputError

DEFAULT_PATH = "testbed-results.db"  # the results file a command reads or writes by default


class Column(NamedTuple):
    name: str
    sql: str  # its SQL type and constraints
    kind: str  # how a result's value is stored (`_WRITE`); `?`: it may be missing


COLUMNS = (  # the `results` table, in its order
    Column("key", "TEXT PRIMARY KEY", "text"),
    Column("agent", "TEXT NOT NULL", "text"),
    Column("config_key", "TEXT NOT NULL", "text"),
    Column("config", "TEXT NOT NULL", "object"),  # JSON, checked when read
    Column("problem_id", "TEXT NOT NULL", "text"),
    Column("seed", "INTEGER NOT NULL", "int"),  # `agent_seed` when read
    Column("status", "TEXT NOT NULL CHECK (status IN ('ok', 'failed'))", "text"),
    Column("error", "TEXT", "text?"),
    Column("traceback", "TEXT", "text?"),
    Column("metrics", "TEXT NOT NULL", "metrics"),  # JSON, checked when read
    Column("wall_seconds", "REAL", "real?"),
    Column("versions", "TEXT", "json?"),
    Column("host", "TEXT", "text?"),
    Column("finished_at", "TEXT NOT NULL", "time"),
    Column("attempts", "INTEGER NOT NULL DEFAULT 1", "count"),  # counted by the store
)
NAMES = [c.name for c in COLUMNS]
WRITTEN = [c.name for c in COLUMNS if c.kind != "count"]  # what a result gives
CHECKED = [c.name for c in COLUMNS if c.kind in ("object", "metrics")]  # a row needs both
RESULTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS results (\n"
    + ",\n".join(f"    {c.name} {c.sql}" for c in COLUMNS)
    + "\n);\nCREATE INDEX IF NOT EXISTS results_agent ON results (agent, config_key);\n"
)
# The DataFrame's (and `ResultsStore.rows`') names: every column but metrics (one column
# per metric instead), the job's seed as `agent_seed` (the problem's seed is a setting).
FRAME_COLUMNS = ["agent_seed" if n == "seed" else n for n in NAMES if n != "metrics"]
JOB_COLUMNS = FRAME_COLUMNS[: FRAME_COLUMNS.index("status") + 1]  # what names a job
BASE_COLUMNS = [n for n in FRAME_COLUMNS if n != "traceback"]  # a row's fields before metrics


def now_iso() -> str:
    """The time now in UTC as ISO seconds (the form of `finished_at`)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _json_number(value: float) -> str:
    if math.isnan(value):
        return "null"
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    return json.dumps(value)


def metrics_json(metrics: Mapping[str, Any]) -> str:
    """Metrics as a strict JSON object (no NaN / Infinity literals, which SQL tools refuse)."""
    items = (f"{json.dumps(str(k))}: {_json_number(float(v))}" for k, v in metrics.items())
    return "{" + ", ".join(items) + "}"


_WRITE = {  # kind -> (the result, the column's name) -> the stored value
    "text": lambda r, n: r[n],
    "text?": lambda r, n: r.get(n),
    "int": lambda r, n: int(r[n]),
    "real?": lambda r, n: _finite_or_none(r.get(n)),
    "object": lambda r, n: json.dumps(r[n], sort_keys=True),
    "json?": lambda r, n: json.dumps(r.get(n) or {}, sort_keys=True),
    "metrics": lambda r, n: metrics_json(r.get(n, {})),
    "time": lambda r, n: r.get(n) or now_iso(),  # given when restored
}


def stored_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A finished job's result as the `results` table's row (every column but attempts)."""
    return {c.name: _WRITE[c.kind](result, c.name) for c in COLUMNS if c.kind != "count"}


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


def parse_metrics(text: str) -> dict[str, float]:
    """A row's metrics JSON as {name: float}; ValueError when it is not that. null is NaN;
    rows of earlier versions may hold NaN / Infinity literals."""
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


def _parse_config(text: str) -> str:
    if not isinstance(json.loads(text), dict):
        raise ValueError("not a JSON object")
    return text


def row_problem(metrics: Any, config: Any) -> str | None:
    """Why a stored row cannot be read (its metrics or config JSON), or None."""
    for name, parse in (("metrics", parse_metrics), ("config", _parse_config)):
        try:
            parse(strict_text(metrics if name == "metrics" else config))
        except (TypeError, ValueError) as e:
            return f"unreadable {name} ({' '.join(str(e).split())[:200]})"
    return None


def strict_json_metrics(conn: Any) -> None:
    """Rewrites the metrics that earlier versions stored with NaN / Infinity literals (not
    JSON) as strict JSON with the same values (`conn`: a results file's connection)."""
    literals = ("NaN", "Infinity")  # what json.dumps writes for non-finite floats
    where = " OR ".join(f"instr(CAST(metrics AS BLOB), CAST('{t}' AS BLOB)) > 0" for t in literals)
    for key, text in conn.execute(f"SELECT key, metrics FROM results WHERE {where}").fetchall():
        try:
            strict = metrics_json(parse_metrics(strict_text(text)))
        except (TypeError, ValueError):
            continue  # unreadable: a re-run replaces it
        if strict != text:
            conn.execute("UPDATE results SET metrics = ? WHERE key = ?", (strict, key))


def row_ok(metrics: Any, config: Any) -> int:
    """1 when a stored row reads (`row_problem`), else 0: the SQL function `row_ok`."""
    return int(row_problem(metrics, config) is None)


# SQL: whether a row can be read (its JSON as bytes: text that is not UTF-8 counts as bad).
READABLE = "row_ok(CAST(metrics AS BLOB), CAST(config AS BLOB))"
# SQL: every column as `read_row` takes it (the checked ones as bytes, read strictly).
SELECTED = ", ".join(f"CAST({n} AS BLOB)" if n in CHECKED else n for n in NAMES)


def read_row(values: Iterable[Any], tracebacks: bool) -> dict[str, Any]:
    """A row selected as `SELECTED` (checked first: `row_problem`) as a dict: the base
    columns, metrics parsed (NaN/inf kept), then its traceback when asked."""
    row = dict(zip(NAMES, values))
    out = {n: row["seed" if n == "agent_seed" else n] for n in BASE_COLUMNS}
    out["config"] = strict_text(row["config"])
    out["metrics"] = parse_metrics(strict_text(row["metrics"]))
    if out["wall_seconds"] is None:
        out["wall_seconds"] = math.nan
    if tracebacks:
        out["traceback"] = row["traceback"]
    return out


def to_dataframe(rows: list[dict[str, Any]], problem_ids: Iterable[str] | None = None):
    """Rows -> DataFrame: `FRAME_COLUMNS` (`traceback` None when a row has none), one
    column per metric, and `problem_options` when some job was loaded with options.

    With `problem_ids`, only rows of those problems are kept. Problem settings are not
    joined here (`leaderboard.problem_settings.join_settings`).
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
    options = [problem_options(r.get("versions")) for r in rows]
    if any(o is not None for o in options):  # jobs loaded with options (--option)
        df["problem_options"] = options
    return df


def problem_options(versions: Any) -> dict[str, Any] | None:
    """The problem options a row's job was loaded with (kept with its versions), or None."""
    try:
        made_with = json.loads(versions) if isinstance(versions, str) else versions
    except ValueError:
        return None
    return made_with.get("problem_options") if isinstance(made_with, dict) else None


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
