"""A results file as a DataFrame, problem settings joined: what `leaderboard.load`, the
board, the command line and `testbed export` read.

The store gives the rows (`ResultsStore.dataframe`); the settings of each row's problem
are joined here (`leaderboard.problem_settings`), so the store knows nothing of problems.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from leaderboard import rows as result_rows
from leaderboard.outputs import check_output_path, write_atomically
from leaderboard.problem_settings import join_settings
from leaderboard.rows import DEFAULT_PATH
from leaderboard.store import ResultsStore
from testbed.errors import InputError


def to_dataframe(rows: list[dict[str, Any]], problem_ids: Iterable[str] | None = None):
    """Rows -> DataFrame: base columns (and `traceback`, None when a row has none), one
    column per metric, then problem settings.

    A setting whose name clashes with a base or metric column is joined as
    `setting_<name>`. With `problem_ids`, only rows of those problems are kept.
    """
    return join_settings(result_rows.to_dataframe(rows, problem_ids))


def load(path: str | os.PathLike = DEFAULT_PATH, problem_ids: Iterable[str] | None = None):
    """The results at `path` as a DataFrame (read-only; problem settings joined). Failed
    jobs carry their stored `error` and `traceback` (see `ResultsStore.dataframe`)."""
    with ResultsStore(path, mode="r") as store:
        return join_settings(store.dataframe(problem_ids))


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
