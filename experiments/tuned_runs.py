"""Our shipped tuned runs (`tuned_references`): the store's finished runs of the tuned
configs merged into the shipped file, by agent and sweep. Both `tune_references --ship`
(the tuning's sweep) and `reproduce_neural_testbed --ship` (the figure's problems) write
through here, so neither imports the other's command."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_tuned(new: pd.DataFrame, results: str, path: Path) -> str:
    """The store's finished tuned runs `new` (shipped rows) merged into ours at `path`, by
    cell (agent, sweep family): a cell `new` holds replaces its shipped rows, every other
    is kept, except an agent's rows at another config than the one `new` ships for it (a
    new choice makes them stale: the figure's runs of the old one go with it). A cell's
    shipped runs of the same config that `new` lacks (another tau's problems) stay in it.
    Says what it wrote."""
    from experiments.reproduction import merged_cells
    from leaderboard.ranking import shipped
    from leaderboard.shipped_files import shipped as shipped_rows

    new = pd.concat([new, _not_rerun(new, path)], ignore_index=True)
    chosen = new.groupby("agent")["config_key"].agg(set)
    stale = []

    def kept(old: pd.DataFrame) -> pd.DataFrame:  # the shipped rows, those of a stale choice out
        out = [a in chosen and k not in chosen[a] for a, k in zip(old["agent"], old["config_key"])]
        stale.extend(k for k, o in zip(old["key"], out) if o)
        return by_family(old.loc[[not o for o in out]])

    def by_family(rows: pd.DataFrame) -> pd.DataFrame:
        return rows.assign(family=rows["problem_id"].str.split("/").str[0])

    rows, said = merged_cells(by_family(new), ["agent", "family"], path, results,
                              read=lambda p: kept(shipped_rows(path=p)))  # fmt: skip
    rows = rows.drop(columns="family")
    rows = rows.sort_values(["agent", "config_key", "problem_id", "agent_seed"], kind="stable")
    shipped.write(rows.reset_index(drop=True), path, shipped.provenance(
        "Tuned reference agents: each agent's config chosen on seed group 0 of "
        "classification_2d (experiments.tune_references), run on all 420 problems, and on the "
        "Neural Testbed figure's problems where given (experiments.reproduce_neural_testbed "
        "--tuned)"))  # fmt: skip
    return said + (f"; {len(stale)} rows of an earlier choice dropped" if stale else "")


def _not_rerun(new: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The rows shipped at `path` of a cell `new` ships (agent, sweep) at the config it
    ships there, of jobs `new` lacks: a run of part of a sweep (one tau of the figure) adds
    to its cell, never drops the rest of it."""
    from leaderboard.shipped_files import shipped as shipped_rows

    if not Path(path).exists() or not len(new):
        return new.iloc[:0]
    old = shipped_rows(path=path)

    def cells(rows: pd.DataFrame) -> list[tuple]:
        sweep = rows["problem_id"].str.split("/").str[0]
        return list(zip(rows["agent"], rows["config_key"], sweep))

    ships = set(cells(new))
    same = pd.Series([c in ships for c in cells(old)], index=old.index, dtype=bool)
    return old[same & ~old["key"].isin(set(new["key"]))]
