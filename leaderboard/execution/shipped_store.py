"""Our shipped runs and a results store: a finished store's rows in the shipped form
(`from_results`, which `leaderboard.ranking.shipped.write` writes), and shipped runs
recorded in a store (`restore`), so a sweep whose runs ship computes only the rest.

The execution side of shipped runs; ranking reads them through
`leaderboard.ranking.shipped`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from leaderboard.execution.results import load
from leaderboard.problem_settings import settings_table
from leaderboard.rows import FRAME_COLUMNS
from leaderboard.shipped_files import COLUMNS, PROVENANCE, metric_columns, shipped
from leaderboard.store import ResultsStore
from testbed.errors import InputError


def from_results(results: str | os.PathLike, keys: Iterable[str] | None = None) -> pd.DataFrame:
    """The finished (ok) jobs of a results store (those of `keys` when given) in the
    shipped form, one row per job: the store's columns and every metric."""
    df = load(results)
    df = df[df["status"] == "ok"]
    if keys is not None:
        df = df[df["key"].isin(set(keys))]
    if not len(df):
        raise InputError(f"results: {str(results)!r} has no finished jobs to ship")
    base = set(FRAME_COLUMNS) | {"problem_options"}
    settings = set(settings_table(sorted(set(df["problem_id"]))).get(
        df["problem_id"].iloc[0], {}))  # fmt: skip
    metrics = sorted(c for c in df.columns if c not in base and c not in settings)
    out = df[COLUMNS + PROVENANCE + metrics].copy()
    out["config"] = out["config"].map(lambda c: c if isinstance(c, str) else json.dumps(c))
    return out.sort_values(["agent", "config_key", "problem_id", "agent_seed"]).reset_index(
        drop=True
    )


# The shipped sources of testbed jobs that reproductions share: the tuning's selection
# stage is the real-data run's synthetic side, and both hold the shipped defaults.
RUN_SOURCES = ("neural_testbed", "real_data_ours", "tuned_references")


def restore_shipped(results: str | os.PathLike, keys: Iterable[str]) -> int:
    """`restore` from every source of `RUN_SOURCES`: a job shipped by one reproduction is
    never run again by another that shares it, on any machine. Returns how many."""
    keys = set(keys)
    return sum(restore(name, results, keys) for name in RUN_SOURCES)


def restore(name: str, results: str | os.PathLike, keys: Iterable[str]) -> int:
    """Records in the results store at `results` the shipped runs of source `name` whose
    key is among `keys` and which the store lacks; returns how many.

    A sweep whose runs ship resumes where they end, on any machine: the reproduction of
    the Neural Testbed's figure computes only what the package does not hold.
    """
    rows = shipped(name)
    rows = rows[rows["key"].isin(set(keys)) & (rows["status"] == "ok")]
    if len(rows) and Path(results).exists():  # read first: a store holding them stays untouched
        with ResultsStore(results, mode="r") as store:
            rows = rows[~rows["key"].isin(store.keys(status="ok"))]
    if not len(rows):
        return 0
    metrics = metric_columns(rows)
    runs = []
    for row in rows.to_dict("records"):  # all read before any is written
        try:
            config = json.loads(row["config"])
            versions = row.get("versions")
            versions = json.loads(versions) if isinstance(versions, str) else {}
        except ValueError:
            raise InputError(
                f"shipped results {name!r}: the run {row['key']} has a config or versions "
                "that is not JSON; allowed: a file written by leaderboard.ranking.shipped.write"
            ) from None
        runs.append({
            **{c: row[c] for c in ("key", "agent", "config_key", "problem_id", "status")},
            "config": config,
            "seed": int(row["agent_seed"]),
            "metrics": {m: row[m] for m in metrics if not pd.isna(row[m])},
            "wall_seconds": row["wall_seconds"],
            "versions": versions,
            "host": row.get("host") if isinstance(row.get("host"), str) else "shipped",
            "finished_at": row.get("finished_at") if isinstance(
                row.get("finished_at"), str) else None,
        })  # fmt: skip
    with ResultsStore(results, mode="w") as store:
        store.record_many(runs)  # one transaction: all of them or none
    return len(runs)
