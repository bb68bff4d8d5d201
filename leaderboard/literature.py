"""Published results beside ours: the SBI benchmark paper's runs, shown, never mixed in.

`published("sbibm")` gives the paper's per-run results (package data, see
leaderboard/data/sbibm.csv for the provenance). `beside(c2st_table, observed)` adds, to
each row of our C2ST ranking whose agent the paper ran, the paper's mean C2ST and range
over the same observations as ours (`paper_cells`); `per_observation(df)` pairs each of
our runs with the paper's run at the same task, budget and observation.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from testbed.errors import bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {
    "sbibm": DATA / "sbibm.csv",
    "neural_testbed_2021": DATA / "neural_testbed_2021.csv",
}
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
AGENTS = {paper: ours for ours, paper in SBIBM_ALGORITHMS.items()}  # the paper's -> ours


@functools.cache
def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(SOURCES[name], comment="#")


def published(name: str = "sbibm") -> pd.DataFrame:
    """A copy of the published results called `name`: a paper's (`sbibm`: the SBI
    benchmark's runs; `neural_testbed_2021`: the bars of the Neural Testbed's figure) or
    our own runs shipped with the package (`neural_testbed`: the Neural Testbed's
    reference agents on its sweeps; `sbibm_ours`: newer SBI methods; see
    `leaderboard.shipped`), one row per run."""
    from leaderboard import shipped

    if name in shipped.SOURCES:
        return shipped.shipped(name)
    if name not in SOURCES:
        raise bad_value("published results", name, [*SOURCES, *shipped.SOURCES])
    return _read(name).copy()


def paper_cells(observed: pd.DataFrame) -> pd.DataFrame:
    """The paper per agent x task x budget over the observations in `observed` (columns
    agent, task, budget, observation: the runs we have), so both sides average the same
    observations: paper_c2st (mean), paper_min, paper_max, paper_minutes_per_run."""
    keys = ["agent", "task", "budget", "observation"]
    ours = observed[keys].dropna().drop_duplicates()
    ours = ours.astype({"budget": int, "observation": int})
    paper = published("sbibm").rename(
        columns={"num_simulations": "budget", "num_observation": "observation"}
    )
    paper["agent"] = paper["algorithm"].map(AGENTS)
    matched = paper.merge(ours, on=keys)
    return (
        matched.groupby(["agent", "task", "budget"])
        .agg(
            paper_c2st=("c2st", "mean"),
            paper_min=("c2st", "min"),
            paper_max=("c2st", "max"),
            paper_minutes_per_run=("runtime_minutes", "mean"),
        )
        .reset_index()
    )


def beside(table: pd.DataFrame, observed: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """`table` (a ranking over observations: agent, task, budget, ...) with the published
    mean, min and max of `source` over the observations of `observed` (see `paper_cells`)
    where `source` ran that agent on that task and budget; `table` as it is for None or a
    source that publishes no such cells."""
    if source != "sbibm" or not len(table):
        return table
    cells = paper_cells(observed).drop(columns=["paper_minutes_per_run"])
    return table.merge(cells, on=["agent", "task", "budget"], how="left")


def per_observation(df: pd.DataFrame, source: str | None = "sbibm") -> pd.DataFrame:
    """Our rows (columns agent, task, budget, observation, ...) beside the published score
    of `source` at the same task, budget and observation (paper_c2st for sbibm); `df` as it
    is for None."""
    if source != "sbibm":
        return df
    paper = published("sbibm")
    right = pd.DataFrame(
        {
            "agent": paper["algorithm"].map(AGENTS),
            "task": paper["task"],
            "budget": paper["num_simulations"],
            "observation": paper["num_observation"],
            "paper_c2st": paper["c2st"],
        }
    )
    return df.merge(right, on=["agent", "task", "budget", "observation"], how="left")
