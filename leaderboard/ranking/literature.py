"""Published results beside ours: a paper's runs, shown, never mixed in.

`published(name)` gives a file of published runs (package data; each file says its
provenance in its `#` lines): `sbibm`, the SBI benchmark paper's runs; `sbi_new_methods`,
newer methods' published C2ST at the benchmark's tasks and budgets; `neural_testbed_2021`,
the bars of the Neural Testbed's figure. Which paper's runs a family is shown beside, and
how its algorithms map to our agents, the family declares (`testbed.ranking.Published`,
as `RankedBy.published`); nothing here names a paper or an agent.

`beside(table, observed, source)` adds, to each row of a ranking over observations whose
agent the paper ran (our shipped `<agent> (ours, shipped)` too), the published mean
(`paper_<score>`) and range over the same observations as ours (`paper_cells`) and whose
it is (`paper_source`); `paper_rows(observed, source, family)` gives the paper's
algorithms as rows of their own, `<ALGORITHM> (<name> paper)`, over the same
observations; `per_observation(df, source)` pairs each of our runs with the paper's run
at the same cell and observation.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from leaderboard.ranking.scoring import MIN_CI_OBSERVATIONS, bootstrap_ci
from leaderboard.ranking.standings import SHIPPED_SUFFIX
from testbed.errors import bad_value
from testbed.ranking import Published

DATA = Path(__file__).resolve().parents[1] / "data"  # leaderboard/data
SOURCES = {
    "sbibm": DATA / "sbibm.csv",
    "neural_testbed_2021": DATA / "neural_testbed_2021.csv",
    "sbi_new_methods": DATA / "sbi_new_methods_published.csv",
}
PAPER_LABEL = "{algorithm} ({name} paper)"  # a published row, e.g. `NPE (sbibm paper)`
PAPER_KEY = "published:{name}:"  # the config key of a published row, before its algorithm
KEYS = ["agent", "task", "budget", "observation"]  # a run's cell and observation


@functools.cache
def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(SOURCES[name], comment="#")


def published(name: str = "sbibm") -> pd.DataFrame:
    """A copy of the published results called `name`: a paper's (`sbibm`: the SBI
    benchmark's runs; `neural_testbed_2021`: the bars of the Neural Testbed's figure;
    `sbi_new_methods`: newer methods' published C2ST, each row with its citation) or
    our own runs shipped with the package (`neural_testbed`: the Neural Testbed's
    reference agents on its sweeps; `sbibm_ours`: newer SBI methods; see
    `leaderboard.ranking.shipped`), one row per run."""
    from leaderboard.ranking import shipped

    if name in shipped.SOURCES:
        return shipped.shipped(name)
    if name not in SOURCES:
        raise bad_value("published results", name, [*SOURCES, *shipped.SOURCES])
    return _read(name).copy()


def _runs(source: Published) -> pd.DataFrame:
    """The paper's runs under the ranking's column names, with our agent for each
    algorithm (none where we have no such agent)."""
    runs = published(source.name).rename(columns=dict(source.columns))
    return runs.assign(agent=runs["algorithm"].map(source.agent_of()))


def paper_cells(observed: pd.DataFrame, source: Published) -> pd.DataFrame:
    """The paper per agent x task x budget over the observations in `observed` (columns
    agent, task, budget, observation: the runs we have), so both sides average the same
    observations: paper_<score> (mean), paper_min, paper_max and, where the paper gives
    run times, paper_minutes_per_run."""
    ours = observed[KEYS].dropna().drop_duplicates()
    ours = ours.astype({"budget": int, "observation": int})
    matched = _runs(source).merge(ours, on=KEYS)
    score = source.score
    agg = dict(paper_min=(score, "min"), paper_max=(score, "max"))
    if "runtime_minutes" in matched:
        agg["paper_minutes_per_run"] = ("runtime_minutes", "mean")
    return (
        matched.groupby(["agent", "task", "budget"])
        .agg(**{f"paper_{score}": (score, "mean")}, **agg)
        .reset_index()
    )


def agent_name(agent: str) -> str:
    """The agent a row ran: `npe` for `npe` and for our shipped `npe (ours, shipped)`."""
    agent = str(agent)
    return agent[: -len(SHIPPED_SUFFIX)] if agent.endswith(SHIPPED_SUFFIX) else agent


def newer_cells(source: Published) -> pd.DataFrame:
    """The published means of newer methods (`source.newer`) per our agent, task and
    budget: paper_<score> and paper_source (no range: a mean is what the papers give)."""
    score = source.score
    if source.newer is None:
        return pd.DataFrame(columns=["_agent", "task", "budget", f"paper_{score}", "paper_source"])
    new = published(source.newer).rename(columns=dict(source.columns))
    return pd.DataFrame(
        {
            "_agent": new["agent"],
            "task": new["task"],
            "budget": new["budget"].astype(int),
            f"paper_{score}": new[score].astype(float),
            "paper_source": new["source"],
        }
    )


def beside(table: pd.DataFrame, observed: pd.DataFrame, source: Published | None) -> pd.DataFrame:
    """`table` (a ranking over observations: agent, task, budget, ...) with the published
    mean, min and max of `source` over the observations of `observed` (see `paper_cells`)
    where `source` ran that agent (or the agent our shipped row ran) on that task and
    budget, and, for a newer method `source` did not run, the published mean of a paper
    that reports the same task and budget (`newer_cells`); `paper_source` says whose.
    `table` as it is without a source."""
    if source is None or not len(table):
        return table
    keys, paper = ["_agent", "task", "budget"], f"paper_{source.score}"
    ours = observed.assign(agent=observed["agent"].map(agent_name))
    cells = paper_cells(ours, source).drop(columns=["paper_minutes_per_run"], errors="ignore")
    cells = cells.rename(columns={"agent": "_agent"}).assign(paper_source=source.citation)
    out = table.assign(_agent=table["agent"].map(agent_name))
    out = out.merge(cells, on=keys, how="left")
    newer = out[keys].merge(newer_cells(source), on=keys, how="left")
    fill = out[paper].isna() & newer[paper].notna()
    for column in (paper, "paper_source"):
        out[column] = out[column].astype(object if column == "paper_source" else float)
        out.loc[fill, column] = newer.loc[fill, column]
    return out.drop(columns="_agent")


def paper_rows(observed: pd.DataFrame, source: Published | None, family: str) -> pd.DataFrame:
    """The paper's algorithms as ranking rows of their own, labelled `<ALGORITHM> (<name>
    paper)`, per task x budget of `observed` (columns task, budget, observation) over the
    same observations: mean score, its 95% bootstrap interval (as ours: none below
    MIN_CI_OBSERVATIONS), observations. Empty without a source."""
    keys = KEYS[1:]
    if source is None or not len(observed):
        return pd.DataFrame()
    cells = observed[keys].dropna().drop_duplicates()
    cells = cells[cells["budget"].map(lambda b: float(b).is_integer())]
    cells = cells.astype({"budget": int, "observation": int})
    matched = _runs(source).merge(cells, on=keys)
    matched = matched[np.isfinite(matched[source.score].astype(float))]
    rows = []
    for (algorithm, task, budget), g in matched.groupby(["algorithm", "task", "budget"]):
        values = g.groupby("observation")[source.score].mean().to_numpy(float)
        low, high = bootstrap_ci(values, min_observations=MIN_CI_OBSERVATIONS)
        label = PAPER_LABEL.format(algorithm=algorithm, name=source.name)
        rows.append(
            {
                "agent": label,
                "label": label,
                "config_key": PAPER_KEY.format(name=source.name) + algorithm,
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


def per_observation(df: pd.DataFrame, source: Published | None) -> pd.DataFrame:
    """Our rows (columns agent, task, budget, observation, ...) beside the published score
    of `source` at the same task, budget and observation (`paper_<score>`); `df` as it is
    without a source."""
    if source is None:
        return df
    runs = _runs(source)
    right = runs[KEYS].assign(**{f"paper_{source.score}": runs[source.score]})
    return df.merge(right, on=KEYS, how="left")
