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
them, never mixed into the user's results. `write` writes a source, made from a finished
results store by `leaderboard.execution.shipped_store.from_results`. The files' form and
their reading are `leaderboard.shipped_files`'; this module reads no store.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from leaderboard.shipped_files import (  # the files' form, read by both sides
    COLUMNS,
    DATA,
    PROVENANCE,
    SOURCES,
    metric_columns,
    shipped,
)
from testbed.errors import InputError

__all__ = [  # the shipped runs as ranking reads them, their files' form included
    "COLUMNS", "COMPANIONS", "DATA", "KEY_PREFIX", "LABEL", "LABELS", "PROVENANCE", "SOURCES",
    "beside", "families", "metric_columns", "provenance", "shipped", "wholly_held", "write",
]  # fmt: skip
LABEL = "{agent} (ours, shipped)"
KEY_PREFIX = "shipped:"
# sources labelled apart from the defaults: (label, key prefix); each ends in " (ours, shipped)"
LABELS = {"tuned_references": ("{agent} tuned (ours, shipped)", "shipped-tuned:")}
# sources ranked wherever another is: the tuned references beside the defaults they tune
COMPANIONS = {"neural_testbed": ("tuned_references",)}


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
    """The shipped runs of source `name` and of its `COMPANIONS` on `problem_ids`,
    labelled as ours (agent `<agent> (ours, shipped)`, config key `shipped:<key>`; a
    source of `LABELS` its own way, e.g. `mlp tuned (ours, shipped)`) and with the
    problems' settings joined, ready to be ranked beside a user's rows; without the agent
    configs whose every job there the user's results hold (`held` keys: `wholly_held`)."""
    from leaderboard.problem_settings import settings_table

    wanted, held = set(problem_ids), set(held)
    parts = []
    for source in (name, *COMPANIONS.get(name, ())):
        rows = shipped(source)
        rows = rows[rows["problem_id"].isin(wanted)]
        rows = rows[~wholly_held(rows, held)].copy()
        label, prefix = LABELS.get(source, (LABEL, KEY_PREFIX))
        rows["agent"] = rows["agent"].map(lambda a, label=label: label.format(agent=a))
        rows["config_key"] = prefix + rows["config_key"].astype(str)
        rows["key"] = prefix + rows["key"].astype(str)
        parts.append(rows)
    rows = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    if not len(rows):
        return rows
    settings = settings_table(sorted(set(rows["problem_id"])))
    for column in sorted({k for s in settings.values() for k in s}):
        if column not in rows.columns:
            rows[column] = [settings[p].get(column) for p in rows["problem_id"]]
    return rows.reset_index(drop=True)


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
