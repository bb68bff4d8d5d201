"""Published results beside ours: the SBI benchmark paper's runs, shown, never mixed in.

`published("sbibm")` gives the paper's per-run results (package data, see
leaderboard/data/sbibm.csv for the provenance). `beside(c2st_table)` adds, to each row of
our C2ST ranking whose agent the paper ran, the paper's mean C2ST over its 10 published
observations and their range; `per_observation(df)` pairs each of our runs with the
paper's run at the same task, budget and observation.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from testbed.errors import bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {"sbibm": DATA / "sbibm.csv"}
# our agent names -> the paper's algorithm names
SBIBM_ALGORITHMS = {
    "npe": "NPE",
    "snpe": "SNPE",
    "nle": "NLE",
    "snle": "SNLE",
    "nre": "NRE",
    "snre": "SNRE",
    "rej_abc": "REJ-ABC",
    "smc_abc": "SMC-ABC",
}


@functools.cache
def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(SOURCES[name], comment="#")


def published(name: str = "sbibm") -> pd.DataFrame:
    """A copy of the published per-run results called `name` (one row per run)."""
    if name not in SOURCES:
        raise bad_value("published results", name, list(SOURCES))
    return _read(name).copy()


def _paper_summary() -> pd.DataFrame:
    """Per (algorithm, task, budget): the paper's mean C2ST over observations and range."""
    df = published("sbibm")
    keys = ["algorithm", "task", "num_simulations"]
    return (
        df.groupby(keys)["c2st"]
        .agg(paper_c2st="mean", paper_min="min", paper_max="max")
        .reset_index()
    )


def beside(table: pd.DataFrame) -> pd.DataFrame:
    """`table` (a C2ST ranking: agent, task, budget, ...) with the paper's paper_c2st,
    paper_min and paper_max where the paper ran that agent on that task and budget."""
    out = table.copy()
    out["algorithm"] = out["agent"].map(SBIBM_ALGORITHMS)
    summary = _paper_summary().rename(columns={"num_simulations": "budget"})
    merged = out.merge(summary, on=["algorithm", "task", "budget"], how="left")
    return merged.drop(columns=["algorithm"])


def per_observation(df: pd.DataFrame, task: str, budget: str, observation: str) -> pd.DataFrame:
    """Our C2ST rows (columns agent, label, `task`, `budget`, `observation`, c2st) beside
    the paper's C2ST at the same task, budget and observation (paper_c2st)."""
    paper = published("sbibm")[["algorithm", "task", "num_simulations", "num_observation"]]
    paper = paper.assign(paper_c2st=published("sbibm")["c2st"])
    ours = df.assign(algorithm=df["agent"].map(SBIBM_ALGORITHMS))
    right = paper.rename(
        columns={"task": task, "num_simulations": budget, "num_observation": observation}
    )
    merged = ours.merge(right, on=["algorithm", task, budget, observation], how="left")
    return merged.drop(columns=["algorithm"])
