"""The form of stored results that both sides read: the columns of a job's row, its
metrics as numbers, and rows as a DataFrame.

The results store (execution) writes and reads rows in this form; scoring, the board and
shipped runs (ranking) read DataFrames in it. This module imports neither side.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from testbed.errors import InputError

DEFAULT_PATH = "testbed-results.db"  # the results file a command reads or writes by default
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
# The DataFrame's columns before its metrics: the base columns, `traceback` after `error`.
FRAME_COLUMNS = [*BASE_COLUMNS[: BASE_COLUMNS.index("error") + 1], "traceback"]
FRAME_COLUMNS += BASE_COLUMNS[len(FRAME_COLUMNS) - 1 :]


def parse_metrics(text: str) -> dict[str, float]:
    """A row's metrics JSON as {name: float}; ValueError when it is not that. null is NaN
    (`leaderboard.stored_rows.metrics_json`); rows of earlier versions may hold NaN /
    Infinity literals."""
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


def to_dataframe(rows: list[dict[str, Any]], problem_ids: Iterable[str] | None = None):
    """Rows -> DataFrame: base columns (and `traceback`, None when a row has none), one
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
