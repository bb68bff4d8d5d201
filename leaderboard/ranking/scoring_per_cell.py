"""The SBI benchmark's scoring (`OBSERVATIONS`): the mean score over observations per cell
(task x simulation budget, as the family declares its cell), with a 95% bootstrap
confidence interval over observations (none below MIN_CI_OBSERVATIONS: the bootstrap of a
few values gives about their range); best config per agent over its cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.ranking.rules import rule_of
from leaderboard.ranking.scoring import (
    ENTRY,
    MIN_CI_OBSERVATIONS,
    bootstrap_ci,
    entry_labels,
    family_of,
    ranked_by,
)
from testbed.errors import InputError
from testbed.ranking import RankedBy


def _apart(rows: pd.DataFrame, spec: RankedBy) -> pd.DataFrame:
    """Rows whose `apart` columns (of `spec.settings`) differ from their defaults as tasks of
    their own (`<task> (seeded)`, `<task> (iid10)`): never pooled with, or set beside, the
    others."""
    for column, default, form in spec.settings.apart:
        if column not in rows.columns:
            continue
        values = rows[column]
        other = values.notna() & (values.astype(str) != str(default))
        if not other.any():
            continue
        rows = rows.copy()
        rows["task"] = rows["task"].astype(object)
        shown = values[other].map(lambda v, form=form: form.format(_plain(v)))
        rows.loc[other, "task"] = rows.loc[other, "task"].astype(str) + " (" + shown + ")"
    return rows


def _plain(value: Any) -> Any:
    """A whole float as an int (a settings column read back as float: 10.0 -> 10)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def observation_rows(df: pd.DataFrame, specs: Mapping[str, RankedBy]) -> pd.DataFrame:
    """The rows of the families ranked by observations, with `family`, `task`, `budget`
    and `observation` columns from each family's declared cell and replicate; a family's
    task is named `<task> (<family>)` when several families are present, except the one
    whose published results are matched by task name. Rows with no cell are left out."""
    family = family_of(df["problem_id"])
    chosen = {f: spec for f, spec in specs.items() if rule_of(spec).over_observations}
    parts = []
    for fam, spec in chosen.items():
        rows = df[family == fam]
        if not len(rows) or spec.score not in rows:
            continue
        cell, replicate = spec.settings.cell, spec.settings.replicate
        cells = [rows[c] if c in rows else pd.Series(math.nan, index=rows.index) for c in cell]
        rows = rows.assign(
            family=fam,
            task=cells[0],
            budget=cells[1] if len(cells) > 1 else 0,
            observation=rows[replicate] if replicate in rows else 1,
            score=pd.to_numeric(rows[spec.score], errors="coerce"),
        )
        rows = rows[rows["task"].notna() & rows["budget"].notna() & rows["observation"].notna()]
        parts.append(_apart(rows, spec))
    if not parts:
        return pd.DataFrame(columns=["family", "task", "budget", "observation", "score"])
    out = pd.concat(parts, ignore_index=True)
    if out["family"].nunique() > 1:
        renamed = ~out["family"].map(lambda f: bool(chosen[f].settings.published))
        out["task"] = out["task"].astype(object)
        out.loc[renamed, "task"] = (
            out.loc[renamed, "task"].astype(str) + " (" + out.loc[renamed, "family"] + ")"
        )
    return out


def observation_table(
    rows: pd.DataFrame,
    labels: Mapping[str, str],
    *,
    best_only: bool = True,
    num_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    min_ci_observations: int = MIN_CI_OBSERVATIONS,
    lower_is_better: bool = True,
) -> pd.DataFrame:
    """Mean score per agent config x family x task x budget over observations, with a
    bootstrap CI (nan below `min_ci_observations` observations), from `observation_rows`.

    Agent seeds of one observation are averaged first; a non-finite score is left out of
    the mean and counted in `num_failed`. Best config per agent and family: best score
    averaged over its (task, budget) cells of that family.
    """
    out = []
    for (agent, ckey, fam, t, b), g in rows.groupby(ENTRY + ["family", "task", "budget"]):
        finite = g[np.isfinite(g["score"].astype(float))]
        per_obs = finite.groupby("observation")["score"].mean().to_numpy()
        lo, hi = bootstrap_ci(
            per_obs, num_bootstrap=num_bootstrap, level=level, seed=seed,
            min_observations=min_ci_observations,
        )  # fmt: skip
        out.append(
            {
                "agent": agent,
                "label": labels[ckey],
                "config_key": ckey,
                "family": fam,
                "task": t,
                "budget": int(b) if float(b).is_integer() else b,
                "mean_score": float(per_obs.mean()) if len(per_obs) else math.nan,
                "ci_low": lo,
                "ci_high": hi,
                "num_observations": len(per_obs),
                "num_failed": int(len(g) - len(finite)),
            }  # fmt: skip
        )
    table = pd.DataFrame(out)
    if best_only and len(table):
        means = table.groupby([*ENTRY, "family"])["mean_score"].mean().reset_index()
        means["order"] = means["mean_score"] * (1 if lower_is_better else -1)
        means = means.sort_values(["agent", "family", "order", "config_key"], kind="stable")
        best = means.drop_duplicates(["agent", "family"])[[*ENTRY, "family"]]
        table = table.merge(best, on=[*ENTRY, "family"])
    order = ["family", "task", "budget", "mean_score"]
    return table.sort_values(order, kind="stable").reset_index(drop=True) if len(table) else table


def rank_observations(
    df: pd.DataFrame, specs: Mapping[str, RankedBy] | None = None, **kwargs: Any
) -> pd.DataFrame:
    """The observation rankings of the families in `df` (default: as they are registered)
    in one table, the score under `mean_<short>` (`observation_table`'s keywords)."""
    specs = specs if specs is not None else ranked_by(sorted(set(family_of(df["problem_id"]))))
    rows = observation_rows(df, specs)
    if not len(rows):
        raise InputError("results: no family ranked over observations; allowed: results of "
                         "such problems (simulator posteriors)")  # fmt: skip
    parts = []
    for fam, g in rows.groupby("family", sort=False):
        spec = specs[fam]
        table = observation_table(g, entry_labels(df), lower_is_better=spec.lower_is_better,
                                  **kwargs)  # fmt: skip
        parts.append(table.rename(columns={"mean_score": f"mean_{spec.short}"}))
    return pd.concat(parts, ignore_index=True)


def per_observation(
    rows: pd.DataFrame, labels: Mapping[str, str], best: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The score per agent config x family x task x budget x observation (agent seeds
    averaged), of the configs in `best` (agent, config_key, family) when given."""
    rows = rows[np.isfinite(rows["score"].astype(float))]
    if best is not None:
        rows = rows.merge(best[[*ENTRY, "family"]].drop_duplicates(), on=[*ENTRY, "family"])
    keys = [*ENTRY, "family", "task", "budget", "observation"]
    out = rows.groupby(keys, sort=True)["score"].mean().reset_index()
    out.insert(1, "label", [labels[k] for k in out["config_key"]])
    return out
