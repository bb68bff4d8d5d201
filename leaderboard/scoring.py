"""Scoring and ranking, as the papers do it.

Neural Testbed (`kl_estimate`): per agent config and problem, negative KL is clipped to
0 (only below -1e-4 counts against health), missing or non-finite KL becomes 1e6; the
mean per tau is normalised by the `uniform` agent (or a chosen one); the standard error
is over seed groups (problem seed % 10: group means, then std / sqrt(#groups)). Accuracy,
ECE and timings are averaged alongside. Best config per agent = lowest mean cleaned KL
over all problems (taus mixed), as the Neural Testbed selects hyper-parameters.

SBI benchmark (`c2st`): mean C2ST over observations per task x simulation budget, with a
95% bootstrap confidence interval over observations (none below MIN_CI_OBSERVATIONS: the
bootstrap of a few values gives about their range, not a 95% interval).

Problems of different families are never pooled: the leaderboard cleans and ranks each
family's problems apart (`leaderboard.board`), and a C2ST task of one family is never
averaged with, or ranked against, a task of another (`family_of`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from testbed.errors import InputError, bad_value

KL_FILL = 1e6
NEGATIVE_TOLERANCE = -1e-4
NUM_SEED_GROUPS = 10
ENTRY = ["agent", "config_key"]
MEAN_METRICS = ("test_acc", "test_ece", "train_seconds", "evaluation_seconds")
TASK_COLUMNS = ("task", "task_name")
BUDGET_COLUMNS = ("num_simulations", "budget", "simulation_budget")
OBSERVATION_COLUMNS = ("num_observation", "observation")
# Below this many observations a C2ST cell gets no bootstrap interval: resampling n values
# gives at most C(2n - 1, n) means (3 for n = 2: the interval is just the two values), so
# its percentiles are about the range of the values, not a 95% interval.
MIN_CI_OBSERVATIONS = 5
SBI_FAMILY = "sbi"  # the SBI benchmark's problems (the paper's C2ST is beside these only)


def family_of(problem_ids: pd.Series) -> pd.Series:
    """The problem family of each id: the part before the first '/' (`coin/3` -> `coin`),
    as `generative.split_id` reads it."""
    return problem_ids.astype(str).str.split("/", n=1).str[0]


def entry_labels(df: pd.DataFrame) -> dict[str, str]:
    """config_key -> display label: the agent name, plus the config fields that vary
    between that agent's configs present in `df` (e.g. `ensemble[num_ensemble=30]`)."""
    labels: dict[str, str] = {}
    for agent, group in df.groupby("agent", sort=True):
        configs = {
            k: json.loads(c) if isinstance(c, str) else dict(c)
            for k, c in group.drop_duplicates("config_key")[["config_key", "config"]].values
        }
        if len(configs) == 1:
            labels[next(iter(configs))] = str(agent)
            continue
        fields = sorted({f for c in configs.values() for f in c})
        varying = [f for f in fields if len({json.dumps(c.get(f)) for c in configs.values()}) > 1]
        for key, c in configs.items():
            body = ",".join(f"{f}={json.dumps(c.get(f))}" for f in varying)
            labels[key] = f"{agent}[{body}]"
    return labels


def _settings_for(df: pd.DataFrame, problem_ids: Sequence[str]) -> pd.DataFrame:
    """One row of problem settings per id (taken from `df` where present)."""
    from leaderboard.store import settings_table

    table = settings_table(problem_ids)
    out = pd.DataFrame([{"problem_id": p, **table[p]} for p in problem_ids])
    return out if len(out) else pd.DataFrame({"problem_id": []})


def clean_kl(df: pd.DataFrame, problem_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One cleaned row per (agent, config_key, problem_id) under the Neural Testbed's rules.

    `problem_ids` is the leaderboard's sweep (default: every problem any agent ran):
    rows of other problems are dropped (and count against health); an agent config
    missing a problem gets KL 1e6. Several agent seeds of one problem are averaged after
    cleaning. Columns: agent, config_key, label, problem_id, kl_estimate (clean),
    raw_kl_estimate, the MEAN_METRICS present, pct_health, then the problem settings.
    """
    if "kl_estimate" not in df.columns:
        raise InputError("results: no 'kl_estimate' metric; allowed: joint-KL problems")
    universe = list(dict.fromkeys(problem_ids if problem_ids is not None else df["problem_id"]))
    inside = set(universe)
    labels = entry_labels(df)
    metrics = [m for m in MEAN_METRICS if m in df.columns]
    parts = []
    for (agent, ckey), rows in df.groupby(ENTRY, sort=True):
        extra = int((~rows["problem_id"].isin(inside)).sum())
        rows = rows[rows["problem_id"].isin(inside)]
        raw = rows["kl_estimate"].astype(float)
        kl = raw.where(~(raw < 0), 0.0)  # clip negatives first (-inf included), as the paper
        bad_negative = int((raw < NEGATIVE_TOLERANCE).sum())
        non_finite = ~np.isfinite(kl)
        kl = kl.where(~non_finite, KL_FILL)
        cleaned = rows[["problem_id", *metrics]].assign(kl_estimate=kl, raw_kl_estimate=raw)
        per_problem = cleaned.groupby("problem_id", sort=False).mean()
        missing = [p for p in universe if p not in per_problem.index]
        fill = pd.DataFrame(
            {"kl_estimate": KL_FILL, "raw_kl_estimate": math.nan}, index=pd.Index(missing)
        )
        per_problem = pd.concat([per_problem, fill]) if missing else per_problem
        per_problem = per_problem.reindex(universe)
        # health counts jobs: each problem once per agent seed this config ran (a missing
        # problem counted once for all seeds made 2 ok jobs of 2 seeds x 4 problems 40%)
        seeds = rows["agent_seed"].nunique() if "agent_seed" in rows and len(rows) else 1
        absent = max(0, len(universe) * max(seeds, 1) - len(rows))
        total = len(rows) + absent  # as the paper: extras count as bad, not in total
        bad = int(non_finite.sum()) + bad_negative + extra + absent
        part = per_problem.rename_axis("problem_id").reset_index()
        part.insert(0, "config_key", ckey)
        part.insert(0, "agent", agent)
        part.insert(2, "label", labels[ckey])
        part["pct_health"] = 1.0 - bad / total if total else 0.0
        parts.append(part)
    if not parts:
        raise InputError("results: no rows to score; allowed: a results file with finished jobs")
    out = pd.concat(parts, ignore_index=True)
    return out.merge(_settings_for(df, universe), on="problem_id", how="left")


def best_configs(clean: pd.DataFrame, score: str = "kl_estimate") -> dict[str, str]:
    """agent -> config_key of its best config (lowest mean `score`; ties: first key)."""
    means = clean.groupby(ENTRY, sort=True)[score].mean().reset_index()
    means = means.sort_values(["agent", score, "config_key"], kind="stable")
    return dict(means.drop_duplicates("agent")[["agent", "config_key"]].values)


def _stderr(values: np.ndarray) -> float:
    """np.std (ddof 0) / sqrt(n), as the Neural Testbed's ranking."""
    return float(np.std(values) / np.sqrt(len(values))) if len(values) else math.nan


def seed_group_stderr(kl: pd.Series, seeds: pd.Series, groups: int = NUM_SEED_GROUPS) -> float:
    """Standard error over seed groups: mean KL within each `seed % groups`, then stderr."""
    known = seeds.notna()
    if not known.any():
        return math.nan
    means = kl[known].groupby(seeds[known].astype(int) % groups).mean()
    return _stderr(means.to_numpy())


def kl_ranking(
    clean: pd.DataFrame,
    tau: int | None = None,
    *,
    normalize: str | None = "uniform",
    best_only: bool = True,
    num_seed_groups: int = NUM_SEED_GROUPS,
) -> pd.DataFrame:
    """The Neural Testbed's ranking table for one tau (None: all rows).

    Columns: agent, label, config_key, mean_kl, stderr_kl, normalized_kl,
    normalized_stderr, mean_test_acc, mean_test_ece, mean_train_seconds,
    mean_evaluation_seconds, pct_health, num_problems; sorted by normalized_kl, rows with
    normalized_kl >= 1e6 dropped. `normalize` names the agent whose mean KL is 1 (its
    best config); the default `uniform` is skipped when absent (attrs['normalizer'] says
    what was used); any other absent name is an error.
    """
    df = clean
    if tau is not None:
        if "tau" not in df.columns or tau not in set(df["tau"].dropna().astype(int)):
            present = sorted(set(df["tau"].dropna().astype(int))) if "tau" in df.columns else []
            raise bad_value("tau", tau, present or ["(none: the problems have no tau)"])
        df = df[df["tau"] == tau]
    if best_only:
        best = best_configs(clean)
        df = df[[best.get(a) == k for a, k in zip(df["agent"], df["config_key"])]]
    seeds = df["seed"] if "seed" in df.columns else pd.Series(np.nan, index=df.index)
    rows = []
    for (agent, ckey, label), g in df.groupby(ENTRY + ["label"], sort=True):
        row: dict[str, Any] = {
            "agent": agent,
            "label": label,
            "config_key": ckey,
            "mean_kl": float(g["kl_estimate"].mean()),
            "stderr_kl": seed_group_stderr(g["kl_estimate"], seeds[g.index], num_seed_groups),
        }
        for m in MEAN_METRICS:
            row[f"mean_{m}"] = float(g[m].mean()) if m in g.columns else math.nan
        row["pct_health"] = float(g["pct_health"].iloc[0])
        row["num_problems"] = len(g)
        rows.append(row)
    table = pd.DataFrame(rows)
    normalizer = None
    scale = 1.0
    if normalize and normalize != "none":
        base = table[table["agent"] == normalize] if len(table) else table
        if len(base):
            scale = float(base["mean_kl"].iloc[0])
            normalizer = normalize
        elif normalize != "uniform":
            agents_present = sorted(set(table["agent"])) if len(table) else []
            raise bad_value("normalize", normalize, agents_present + ["none"])
    if len(table):
        table["normalized_kl"] = table["mean_kl"] / scale
        table["normalized_stderr"] = table["stderr_kl"] / scale
        table = table.sort_values(["normalized_kl", "label"], kind="stable")
        table = table[table["normalized_kl"] < KL_FILL].reset_index(drop=True)
        front = ["agent", "label", "normalized_kl", "normalized_stderr", "mean_kl", "stderr_kl"]
        table = table[front + [c for c in table.columns if c not in front]]
    table.attrs["normalizer"] = normalizer
    table.attrs["tau"] = tau
    return table


def kl_rankings(clean: pd.DataFrame, **kwargs: Any) -> dict[int | None, pd.DataFrame]:
    """`kl_ranking` for each tau present (one table for None when there is no tau)."""
    if "tau" not in clean.columns or clean["tau"].isna().all():
        return {None: kl_ranking(clean, None, **kwargs)}
    return {int(t): kl_ranking(clean, int(t), **kwargs) for t in sorted(clean["tau"].dropna())}


def _first(df: pd.DataFrame, names: Sequence[str]) -> pd.Series:
    """The first of the columns `names` that `df` has (NaN where it has none)."""
    for name in names:
        if name in df.columns:
            return df[name]
    return pd.Series(math.nan, index=df.index, dtype=object)


def bootstrap_ci(
    values: np.ndarray,
    *,
    num_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    min_observations: int = 1,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (resampled with replacement);
    (nan, nan) with fewer than `min_observations` values (or none)."""
    values = np.asarray(values, float)
    if len(values) == 0 or len(values) < min_observations:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(num_bootstrap, len(values)))
    means = values[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _seeded_apart(rows: pd.DataFrame, task: str) -> pd.DataFrame:
    """Runs at our seeded observations (`sbi/.../<k>/seeded`) as a task of their own,
    `<task> (seeded)`: never pooled with, or set beside, the benchmark's observations."""
    if "observation_source" not in rows.columns:
        return rows
    seeded = rows["observation_source"] == "seeded"
    if not seeded.any():
        return rows
    rows = rows.copy()
    rows[task] = rows[task].astype(object)
    rows.loc[seeded, task] = rows.loc[seeded, task].astype(str) + " (seeded)"
    return rows


def _iid_apart(rows: pd.DataFrame, task: str) -> pd.DataFrame:
    """Runs at i.i.d. sets of n > 1 draws (`sbi/.../<k>/iid<n>`) as a task of their own,
    `<task> (iid<n>)`: another posterior than observation k's, never pooled with it or set
    beside the paper's."""
    if "num_iid" not in rows.columns:
        return rows
    n = pd.to_numeric(rows["num_iid"], errors="coerce")
    sets = n > 1
    if not sets.any():
        return rows
    rows = rows.copy()
    rows[task] = rows[task].astype(object)
    suffix = " (iid" + n[sets].astype(int).astype(str) + ")"
    rows.loc[sets, task] = rows.loc[sets, task].astype(str) + suffix
    return rows


def _families_apart(rows: pd.DataFrame, task: str) -> pd.DataFrame:
    """`rows` with a `family` column; when they hold posterior problems of more than one
    family, each task of a family other than the SBI benchmark's is named
    `<task> (<family>)`, so a task name two families share is never pooled, ranked
    together or set beside the paper."""
    rows = rows.assign(family=family_of(rows["problem_id"]))
    if rows["family"].nunique() < 2:
        return rows
    other = rows["family"] != SBI_FAMILY
    rows[task] = rows[task].astype(object)
    rows.loc[other, task] = (
        rows.loc[other, task].astype(str) + " (" + rows.loc[other, "family"] + ")"
    )
    return rows


def _posterior_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, str, str, str]:
    """The rows of posterior problems (task, budget and observation known), each task
    kept apart by family and observation source; and the names of those three columns.

    A conjugate model run as a simulator (`conjugate_sbi/<model>/<name>/<budget>`) has no
    task setting: its problem name is its task, and its one observation is observation 1.
    Rows with no budget (exact conjugate agents) are left out: they are scored exactly."""
    task, budget, obs = TASK_COLUMNS[0], BUDGET_COLUMNS[0], OBSERVATION_COLUMNS[0]
    tasks = _first(df, TASK_COLUMNS)
    named = tasks.isna() & df["problem"].notna() if "problem" in df.columns else None
    rows = df.assign(**{task: tasks, budget: _first(df, BUDGET_COLUMNS)})
    rows[obs] = _first(df, OBSERVATION_COLUMNS)
    if named is not None and named.any():
        rows[task] = rows[task].astype(object)
        rows.loc[named, task] = df.loc[named, "problem"]
        rows.loc[named & rows[obs].isna(), obs] = 1
    rows = rows[rows[task].notna() & rows[budget].notna() & rows[obs].notna()]
    rows = _iid_apart(_seeded_apart(rows, task), task)
    return _families_apart(rows, task), task, budget, obs


def has_posterior_c2st(df: pd.DataFrame) -> bool:
    """Whether `df` holds a C2ST of a posterior problem with a task, budget and
    observation (what `c2st_table` ranks; an exact conjugate agent's C2ST has no budget)."""
    if "c2st" not in df.columns or not df["c2st"].notna().any():
        return False
    return bool(_posterior_rows(df)[0]["c2st"].notna().any())


def c2st_table(
    df: pd.DataFrame,
    *,
    best_only: bool = True,
    num_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    min_ci_observations: int = MIN_CI_OBSERVATIONS,
) -> pd.DataFrame:
    """Mean C2ST per agent config x family x task x budget over observations, with a
    bootstrap CI (nan below `min_ci_observations` observations).

    Agent seeds of one observation are averaged first; a non-finite C2ST is left out of
    the mean and counted in `num_failed`. Best config per agent and family: lowest C2ST
    averaged over its (task, budget) cells of that family.
    """
    if not has_posterior_c2st(df):
        raise InputError(
            "results: no 'c2st' metric of a simulator problem (task x budget x observation); "
            "allowed: results of sbi/... or conjugate_sbi/... problems"
        )
    rows, task, budget, obs = _posterior_rows(df)
    labels = entry_labels(df)
    out = []
    for (agent, ckey, fam, t, b), g in rows.groupby(ENTRY + ["family", task, budget], sort=True):
        finite = g[np.isfinite(g["c2st"].astype(float))]
        per_obs = finite.groupby(obs)["c2st"].mean().to_numpy()
        lo, hi = bootstrap_ci(
            per_obs,
            num_bootstrap=num_bootstrap,
            level=level,
            seed=seed,
            min_observations=min_ci_observations,
        )
        out.append(
            {
                "agent": agent,
                "label": labels[ckey],
                "config_key": ckey,
                "family": fam,
                "task": t,
                "budget": int(b) if float(b).is_integer() else b,  # NaN elsewhere: a float
                "mean_c2st": float(per_obs.mean()) if len(per_obs) else math.nan,
                "ci_low": lo,
                "ci_high": hi,
                "num_observations": len(per_obs),
                "num_failed": int(len(g) - len(finite)),
            }
        )
    table = pd.DataFrame(out)
    if best_only and len(table):
        means = table.groupby([*ENTRY, "family"])["mean_c2st"].mean().reset_index()
        means = means.sort_values(["agent", "family", "mean_c2st", "config_key"], kind="stable")
        best = means.drop_duplicates(["agent", "family"])[[*ENTRY, "family"]]
        table = table.merge(best, on=[*ENTRY, "family"])
    order = ["family", "task", "budget", "mean_c2st"]
    return table.sort_values(order, kind="stable").reset_index(drop=True) if len(table) else table


def c2st_per_observation(df: pd.DataFrame, *, best_only: bool = True) -> pd.DataFrame:
    """C2ST per agent config x family x task x budget x observation (agent seeds averaged),
    of the best config per agent and family (as `c2st_table` picks it) unless `best_only`
    is False."""
    rows, task, budget, obs = _posterior_rows(df)
    rows = rows[np.isfinite(rows["c2st"].astype(float))]
    if best_only:
        best = c2st_table(df, best_only=True)[[*ENTRY, "family"]].drop_duplicates()
        rows = rows.merge(best, on=[*ENTRY, "family"])
    keys = [*ENTRY, "family", task, budget, obs]
    out = rows.groupby(keys, sort=True)["c2st"].mean().reset_index()
    out = out.rename(columns={task: "task", budget: "budget", obs: "observation"})
    labels = entry_labels(df)
    out.insert(1, "label", [labels[k] for k in out["config_key"]])
    return out


def timings(df: pd.DataFrame) -> pd.DataFrame:
    """Mean train / evaluation / wall seconds per agent config over its finished jobs."""
    ok = df[df["status"] == "ok"]
    cols = [c for c in ("train_seconds", "evaluation_seconds", "wall_seconds") if c in ok]
    labels = entry_labels(df)
    out = ok.groupby(ENTRY, sort=True)[cols].mean().reset_index()
    out.insert(1, "label", [labels[k] for k in out["config_key"]])
    out["jobs"] = ok.groupby(ENTRY, sort=True).size().to_numpy()
    return out


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """The failed jobs with their reasons."""
    cols = ["agent", "problem_id", "agent_seed", "error", "attempts"]
    return df.loc[df["status"] == "failed", cols].reset_index(drop=True)
