"""Our shipped runs' files: where each source is, its columns, and reading one.

Each source is package data, one row per job in the results store's own form (key,
agent, config, problem id, seed, status, metrics), with `#` lines at its top that say
when, where and with what it was made. Both sides read them: ranking shows them beside
a user's rows (`leaderboard.ranking.shipped`), a sweep records them in its store instead of
computing them (`leaderboard.execution.shipped_store.restore`). Imports neither side.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pandas as pd

from leaderboard.rows import JOB_COLUMNS
from testbed.errors import InputError, bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {
    "neural_testbed": DATA / "neural_testbed.csv.gz",
    "sbibm_ours": DATA / "sbibm_ours.csv",
    "decisions_ours": DATA / "decisions_ours.csv.gz",
    "real_data_ours": DATA / "real_data_ours.csv.gz",
    "tuned_references": DATA / "tuned_references.csv.gz",
}
COLUMNS = [*JOB_COLUMNS, "wall_seconds"]  # before the metric columns
PROVENANCE = ["versions", "host", "finished_at"]  # each run's own, where a file has them


@functools.cache
def _read(path: str, mtime: float) -> pd.DataFrame:
    df = pd.read_csv(path, comment="#")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"shipped results: {path} lacks the columns {', '.join(missing)}; allowed: a file "
            f"with columns {', '.join(COLUMNS)} and metrics (leaderboard.ranking.shipped.write)"
        )
    return df


def shipped(name: str = "neural_testbed", path: str | os.PathLike | None = None) -> pd.DataFrame:
    """A copy of our shipped runs called `name` (or those in the file at `path`), one row
    per job; an empty table when the source holds no runs yet."""
    if path is None:
        if name not in SOURCES:
            raise bad_value("shipped results", name, list(SOURCES))
        path = SOURCES[name]
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    return _read(str(path), path.stat().st_mtime).copy()


def metric_columns(rows: pd.DataFrame) -> list[str]:
    """The metric columns of shipped rows: all but the job's and the provenance's."""
    return [c for c in rows.columns if c not in COLUMNS and c not in PROVENANCE]
