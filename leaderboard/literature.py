"""Published results beside ours: the SBI benchmark paper's runs, shown, never mixed in.

`published("sbibm")` gives the paper's per-run results (package data, see
leaderboard/data/sbibm.csv for the provenance); `published("sbi_new_methods")` the
published C2ST of newer methods at the benchmark's tasks and budgets where a paper reports
them (leaderboard/data/sbi_new_methods_published.csv, each row with its citation).
`beside(c2st_table, observed)` adds, to each row of our C2ST ranking whose agent a paper
ran (our shipped `<agent> (ours, shipped)` too), the published mean C2ST (for the SBI
benchmark: and its range over the same observations as ours, `paper_cells`) and whose it
is (`paper_source`); `paper_rows(observed)` gives the SBI benchmark's algorithms as rows
of their own, `<ALGORITHM> (sbibm paper)`, over the same observations, to be ranked
beside ours; `per_observation(df)` pairs each of our runs with the paper's run at the
same task, budget and observation.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from leaderboard.scoring import MIN_CI_OBSERVATIONS, SHIPPED_LABEL, bootstrap_ci
from testbed.errors import bad_value

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {
    "sbibm": DATA / "sbibm.csv",
    "neural_testbed_2021": DATA / "neural_testbed_2021.csv",
    "sbi_new_methods": DATA / "sbi_new_methods_published.csv",
}
SBIBM_SOURCE = "Lueckmann 2021"  # the `paper_source` of the SBI benchmark's numbers
PAPER_LABEL = "{algorithm} (sbibm paper)"  # a published row of the SBI benchmark
PAPER_SUFFIX = " paper)"  # how a published row's label ends
PAPER_KEY = "published:sbibm:"  # its config key
SHIPPED_SUFFIX = SHIPPED_LABEL.format(agent="")
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
    benchmark's runs; `neural_testbed_2021`: the bars of the Neural Testbed's figure;
    `sbi_new_methods`: newer methods' published C2ST, each row with its citation) or
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


def agent_name(agent: str) -> str:
    """The agent a row ran: `npe` for `npe` and for our shipped `npe (ours, shipped)`."""
    agent = str(agent)
    return agent[: -len(SHIPPED_SUFFIX)] if agent.endswith(SHIPPED_SUFFIX) else agent


def newer_cells() -> pd.DataFrame:
    """The published C2ST of newer methods (`sbi_new_methods`) per our agent, task and
    budget: paper_c2st and paper_source (no range: a mean is what the papers give)."""
    new = published("sbi_new_methods")
    return pd.DataFrame(
        {
            "_agent": new["agent"],
            "task": new["task"],
            "budget": new["num_simulations"].astype(int),
            "paper_c2st": new["c2st"].astype(float),
            "paper_source": new["source"],
        }
    )


def beside(table: pd.DataFrame, observed: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """`table` (a ranking over observations: agent, task, budget, ...) with the published
    mean, min and max of `source` over the observations of `observed` (see `paper_cells`)
    where `source` ran that agent (or the agent our shipped row ran) on that task and
    budget, and, for a newer method no such source ran, the published mean of a paper that
    reports the same task and budget (`newer_cells`); `paper_source` says whose. `table` as
    it is for None or a source that publishes no such cells."""
    if source != "sbibm" or not len(table):
        return table
    keys = ["_agent", "task", "budget"]
    ours = observed.assign(agent=observed["agent"].map(agent_name))
    cells = paper_cells(ours).drop(columns=["paper_minutes_per_run"])
    cells = cells.rename(columns={"agent": "_agent"}).assign(paper_source=SBIBM_SOURCE)
    out = table.assign(_agent=table["agent"].map(agent_name))
    out = out.merge(cells, on=keys, how="left")
    newer = out[keys].merge(newer_cells(), on=keys, how="left")
    fill = out["paper_c2st"].isna() & newer["paper_c2st"].notna()
    for column in ("paper_c2st", "paper_source"):
        out[column] = out[column].astype(object if column == "paper_source" else float)
        out.loc[fill, column] = newer.loc[fill, column]
    return out.drop(columns="_agent")


def paper_rows(observed: pd.DataFrame, source: str | None, family: str) -> pd.DataFrame:
    """The SBI benchmark paper's algorithms as ranking rows of their own, labelled
    `<ALGORITHM> (sbibm paper)`, per task x budget of `observed` (columns task, budget,
    observation) over the same observations: mean C2ST, its 95% bootstrap interval (as
    ours: none below MIN_CI_OBSERVATIONS), observations. Empty for another source."""
    keys = ["task", "budget", "observation"]
    if source != "sbibm" or not len(observed):
        return pd.DataFrame()
    cells = observed[keys].dropna().drop_duplicates()
    cells = cells[cells["budget"].map(lambda b: float(b).is_integer())]
    cells = cells.astype({"budget": int, "observation": int})
    paper = published("sbibm").rename(
        columns={"num_simulations": "budget", "num_observation": "observation"}
    )
    matched = paper.merge(cells, on=keys)
    matched = matched[np.isfinite(matched["c2st"].astype(float))]
    rows = []
    for (algorithm, task, budget), g in matched.groupby(["algorithm", "task", "budget"]):
        values = g.groupby("observation")["c2st"].mean().to_numpy(float)
        low, high = bootstrap_ci(values, min_observations=MIN_CI_OBSERVATIONS)
        label = PAPER_LABEL.format(algorithm=algorithm)
        rows.append(
            {
                "agent": label,
                "label": label,
                "config_key": PAPER_KEY + algorithm,
                "family": family,
                "task": task,
                "budget": int(budget),
                "mean_score": float(values.mean()),
                "ci_low": low,
                "ci_high": high,
                "num_observations": len(values),
                "num_failed": 0,
            }
        )
    return pd.DataFrame(rows)


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
