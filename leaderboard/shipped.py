"""Our own runs, shipped with the package and ranked beside a user's: labelled as ours.

A family names the source of our shipped runs of its problems when it declares how it
is ranked (`RankedBy.shipped`): the Neural Testbed's reference agents on its sweeps
(`neural_testbed`), newer SBI methods at the SBI benchmark's observations
(`sbibm_ours`). Each source is package data, one row per job in the results store's
own form (key, agent, config, problem id, seed, status, metrics), with `#` lines at its
top that say when, where and with what it was made (`provenance`).

`testbed leaderboard` and the report add, to each family's ranking, the shipped rows of
the problems the user's results hold (or of the sweep asked for), under the label
`<agent> (ours, shipped)`: a user's new agent is ranked beside them without recomputing
them, never mixed into the user's results. `from_results` and `write` make a source from
a finished results store.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from leaderboard.store import JOB_COLUMNS
from testbed.errors import InputError, bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {
    "neural_testbed": DATA / "neural_testbed.csv.gz",
    "sbibm_ours": DATA / "sbibm_ours.csv",
}
COLUMNS = [*JOB_COLUMNS, "wall_seconds"]  # before the metric columns
PROVENANCE = ["versions", "host", "finished_at"]  # each run's own, where a file has them
LABEL = "{agent} (ours, shipped)"
KEY_PREFIX = "shipped:"


@functools.cache
def _read(path: str, mtime: float) -> pd.DataFrame:
    df = pd.read_csv(path, comment="#")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"shipped results: {path} lacks the columns {', '.join(missing)}; allowed: a "
            f"file with columns {', '.join(COLUMNS)} and metrics (leaderboard.shipped.write)"
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


def families(name: str) -> list[str]:
    """The problem families our shipped runs called `name` hold runs of, sorted."""
    return sorted({p.split("/", 1)[0] for p in shipped(name)["problem_id"]})


def wholly_held(rows: pd.DataFrame, held: Iterable[str]) -> pd.Series:
    """Per row of shipped `rows`: whether the user's results hold every job of its agent
    config among `rows` (job keys `held`): such a config is the user's run of it (e.g.
    taken from the package) and is shown once, as theirs. A config held in part stays
    whole: leaving out its held jobs would count them as missing."""
    inside = rows["key"].isin(set(held))
    return inside.groupby([rows["agent"], rows["config_key"]]).transform("all").astype(bool)


def beside(name: str, problem_ids: Iterable[str], held: Iterable[str] = ()) -> pd.DataFrame:
    """The shipped runs of source `name` on `problem_ids`, labelled as ours (agent
    `<agent> (ours, shipped)`, config key `shipped:<key>`) and with the problems'
    settings joined, ready to be ranked beside a user's rows; without the agent configs
    whose every job there the user's results hold (`held` keys: `wholly_held`)."""
    from leaderboard.store import settings_table

    wanted = set(problem_ids)
    rows = shipped(name)
    rows = rows[rows["problem_id"].isin(wanted)]
    rows = rows[~wholly_held(rows, held)].copy()
    if not len(rows):
        return rows
    rows["agent"] = rows["agent"].map(lambda a: LABEL.format(agent=a))
    rows["config_key"] = KEY_PREFIX + rows["config_key"].astype(str)
    rows["key"] = KEY_PREFIX + rows["key"].astype(str)
    settings = settings_table(sorted(set(rows["problem_id"])))
    for column in sorted({k for s in settings.values() for k in s}):
        if column not in rows.columns:
            rows[column] = [settings[p].get(column) for p in rows["problem_id"]]
    return rows.reset_index(drop=True)


def from_results(results: str | os.PathLike, keys: Iterable[str] | None = None) -> pd.DataFrame:
    """The finished (ok) jobs of a results store (those of `keys` when given) in the
    shipped form, one row per job: the store's columns and every metric."""
    from leaderboard import store

    df = store.load(results)
    df = df[df["status"] == "ok"]
    if keys is not None:
        df = df[df["key"].isin(set(keys))]
    if not len(df):
        raise InputError(f"results: {str(results)!r} has no finished jobs to ship")
    base = set(store.FRAME_COLUMNS) | {"problem_options"}
    settings = set(store.settings_table(sorted(set(df["problem_id"]))).get(
        df["problem_id"].iloc[0], {}))  # fmt: skip
    metrics = sorted(c for c in df.columns if c not in base and c not in settings)
    out = df[COLUMNS + PROVENANCE + metrics].copy()
    out["config"] = out["config"].map(lambda c: c if isinstance(c, str) else json.dumps(c))
    return out.sort_values(["agent", "config_key", "problem_id", "agent_seed"]).reset_index(
        drop=True
    )


def metric_columns(rows: pd.DataFrame) -> list[str]:
    """The metric columns of shipped rows: all but the job's and the provenance's."""
    return [c for c in rows.columns if c not in COLUMNS and c not in PROVENANCE]


def restore(name: str, results: str | os.PathLike, keys: Iterable[str]) -> int:
    """Records in the results store at `results` the shipped runs of source `name` whose
    key is among `keys` and which the store lacks; returns how many.

    A sweep whose runs ship resumes where they end, on any machine: the reproduction of
    the Neural Testbed's figure computes only what the package does not hold.
    """
    from leaderboard.store import ResultsStore

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
                "that is not JSON; allowed: a file written by leaderboard.shipped.write"
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


def provenance(what: str = "Our runs") -> list[str]:
    """The `#` lines a shipped file starts with: what, date, commit, machine, versions."""
    from leaderboard.provenance import source_commit, versions

    commit = source_commit()

    made_with = ", ".join(f"{k} {v}" for k, v in versions().items())
    return [
        f"{what}, made by this project (labelled as ours; not any paper's), one row per "
        "job, shipped so a new agent is ranked beside them.",
        f"Written {datetime.date.today().isoformat()} at commit {commit or '?'} on "
        f"{platform.machine()} ({os.cpu_count()} cores) with {made_with}; each row's "
        "versions, host and finished_at, where given, are those of its own run.",
    ]


def write(rows: pd.DataFrame, path: str | os.PathLike, notes: Iterable[str] | None = None) -> None:
    """Writes `rows` (the shipped form, `from_results`) to `path` (.csv, or .csv.gz
    compressed) with `notes` (default: `provenance()`) as its leading `#` lines; written
    to a temporary file and renamed into place."""
    import gzip

    missing = [c for c in COLUMNS if c not in rows.columns]
    if missing:
        raise InputError(f"shipped rows: missing columns {', '.join(missing)}")
    path = Path(path)
    lines = ["# " + n for n in (provenance() if notes is None else notes)]
    text = "\n".join(lines) + "\n" + rows.to_csv(index=False)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".gz":
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        tmp.write_text(text)
    tmp.replace(path)
