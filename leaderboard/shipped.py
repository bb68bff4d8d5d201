"""Our own runs, shipped with the package and shown beside a user's: labelled as ours.

The SBI benchmark paper published results for its 2021 algorithms only
(`leaderboard.literature`). Our runs of other agents at its published observations (sbi
0.27's newer methods: fmpe, npse, nre_c, bnre) ship as package data, one row per run, so
that a user's new method is ranked beside them without recomputing them:

- `leaderboard/data/sbibm_ours.csv` (`SOURCES`), written by
  `python -m experiments.reproduce_sbibm ... --ship leaderboard/data/sbibm_ours.csv`
  from a finished run's results store (`from_results`, `write`); `#` lines at its top say
  when, where and with what it was made;
- `shipped(name)` reads it; `beside_ours(table, observed)` adds to a C2ST ranking (one row
  per agent config x task x budget) one row per shipped agent and cell of the SBI
  benchmark (family `sbi`) that the ranking holds, averaged over the same observations as
  the user's runs of that cell, labelled `<agent> (ours, shipped)`: never mixed into the
  user's results, never a cell the user did not run.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import platform
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.errors import InputError, bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {"sbibm_ours": DATA / "sbibm_ours.csv"}
COLUMNS = [
    "agent",
    "task",
    "budget",
    "observation",
    "c2st",
    "train_seconds",
    "sampling_seconds",
    "config_key",
    "config",
]
SBI_FAMILY = "sbi"
LABEL = "{agent} (ours, shipped)"


@functools.cache
def _read(path: str, mtime: float) -> pd.DataFrame:
    df = pd.read_csv(path, comment="#")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"shipped results: {path} lacks the columns {', '.join(missing)}; allowed: a CSV "
            f"with columns {', '.join(COLUMNS)} (leaderboard.shipped.write)"
        )
    return df.astype({"budget": int, "observation": int})


def shipped(name: str = "sbibm_ours", path: str | os.PathLike | None = None) -> pd.DataFrame:
    """A copy of our shipped runs called `name` (or those in the file at `path`), one row
    per run; an empty table when the file holds no runs yet."""
    if path is None:
        if name not in SOURCES:
            raise bad_value("shipped results", name, list(SOURCES))
        path = SOURCES[name]
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    return _read(str(path), path.stat().st_mtime).copy()


def from_results(results: str | os.PathLike, keys: Iterable[str] | None = None) -> pd.DataFrame:
    """The finished runs of the SBI benchmark's published observations in a results store
    (of the jobs `keys` when given) in the shipped format, one row per run."""
    from leaderboard import store

    df = store.load(results)
    df = df[(df["status"] == "ok") & df["problem_id"].astype(str).str.startswith("sbi/")]
    if keys is not None:
        df = df[df["key"].isin(set(keys))]
    if "observation_source" in df.columns:
        df = df[df["observation_source"].fillna("sbibm") == "sbibm"]
    if "num_iid" in df.columns:  # an i.i.d. set is another posterior than observation k's
        df = df[pd.to_numeric(df["num_iid"], errors="coerce").fillna(1) == 1]
    if not len(df):
        raise InputError(
            f"results: {str(results)!r} has no finished runs at the SBI benchmark's published "
            "observations to ship"
        )
    sampling = df["sampling_seconds"] if "sampling_seconds" in df.columns else math.nan
    out = pd.DataFrame(
        {
            "agent": df["agent"],
            "task": df["task"],
            "budget": df["num_simulations"].astype(int),
            "observation": df["num_observation"].astype(int),
            "c2st": df["c2st"].astype(float),
            "train_seconds": df["train_seconds"].astype(float),
            "sampling_seconds": pd.to_numeric(sampling, errors="coerce"),
            "config_key": df["config_key"],
            "config": df["config"].map(_config_json),
        }
    )
    return out.sort_values(["agent", "task", "budget", "observation"]).reset_index(drop=True)


def _config_json(config) -> str:
    return config if isinstance(config, str) else json.dumps(config, sort_keys=True)


def provenance() -> list[str]:
    """The `#` lines a shipped file starts with: date, commit, machine, sbi version."""
    import subprocess

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = ""
    try:
        from importlib.metadata import version

        sbi = version("sbi")
    except Exception:
        sbi = "?"
    return [
        "Our runs at the SBI benchmark's published observations (labelled as ours; not the "
        "paper's), one row per run, shipped so a new agent is ranked beside them.",
        f"Made {datetime.date.today().isoformat()} at commit {commit or '?'} on "
        f"{platform.machine()} ({os.cpu_count()} cores), sbi {sbi}, by "
        "python -m experiments.reproduce_sbibm ... --ship.",
    ]


def write(rows: pd.DataFrame, path: str | os.PathLike, notes: Iterable[str] | None = None) -> None:
    """Writes `rows` (the shipped format, `from_results`) to `path` as CSV, with `notes`
    (default: `provenance()`) as its leading `#` lines; written atomically."""
    missing = [c for c in COLUMNS if c not in rows.columns]
    if missing:
        raise InputError(f"shipped rows: missing columns {', '.join(missing)}")
    path = Path(path)
    lines = ["# " + n for n in (provenance() if notes is None else notes)]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n" + rows[COLUMNS].to_csv(index=False))
    tmp.replace(path)


def beside_ours(
    table: pd.DataFrame,
    observed: pd.DataFrame,
    *,
    name: str = "sbibm_ours",
    path: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """`table` (a C2ST ranking: agent, label, config_key, family, task, budget, the mean
    score as `mean_score` or `mean_c2st`, ...) with our shipped runs added beside it: per
    shipped agent config and cell (task, budget) of the family `sbi` in `table`, the mean
    over the observations the user's runs of that cell hold (`observed`: rows with task,
    budget, observation and family), with a bootstrap interval as the user's rows have.

    Shipped rows are labelled `<agent> (ours, shipped)`, their config_key is
    `shipped:<key>` and their `shipped` column True (False on the user's rows)."""
    if not len(table):
        return table
    ours = shipped(name, path)
    table = table.assign(shipped=False)
    if not len(ours) or not len(observed):
        return table
    from leaderboard.scoring import MIN_CI_OBSERVATIONS, bootstrap_ci

    score = "mean_score" if "mean_score" in table.columns else "mean_c2st"
    cells = observed
    if "family" in cells.columns:
        cells = cells[cells["family"] == SBI_FAMILY]
    cells = cells[["task", "budget", "observation"]].dropna().drop_duplicates()
    cells = cells.astype({"budget": int, "observation": int})
    matched = ours.merge(cells, on=["task", "budget", "observation"])
    rows = []
    for (agent, key, task, budget), g in matched.groupby(
        ["agent", "config_key", "task", "budget"], sort=True
    ):
        per_obs = g.groupby("observation")["c2st"].mean().to_numpy()
        per_obs = per_obs[np.isfinite(per_obs)]
        lo, hi = bootstrap_ci(per_obs, min_observations=MIN_CI_OBSERVATIONS)
        rows.append(
            {
                "agent": agent,
                "label": LABEL.format(agent=agent),
                "config_key": f"shipped:{key}",
                "family": SBI_FAMILY,
                "task": task,
                "budget": int(budget),
                score: float(per_obs.mean()) if len(per_obs) else math.nan,
                "ci_low": lo,
                "ci_high": hi,
                "num_observations": len(per_obs),
                "num_failed": int(len(g) - len(per_obs)),
                "shipped": True,
            }
        )
    if not rows:
        return table
    out = pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
    order = [c for c in ("family", "task", "budget", score) if c in out.columns]
    return out.sort_values(order, kind="stable").reset_index(drop=True)
