"""Scoring and ranking under the rules a family declares (`testbed.ranking.RankedBy`).

The Neural Testbed's rule (`NEURAL_TESTBED`): per agent config and problem, a negative score is
clipped to 0 where the family says it is estimation noise (a KL; only below -1e-4 counts
against health); a missing, failed or non-finite score, or one whose share of finite test
batches is below 1, becomes 1e6; the mean per tau is normalised by the family's
normalising agent (or a chosen one); the standard error is over seed groups (problem seed
% 10: group means, then std / sqrt(#groups)). Accuracy, ECE and timings are averaged
alongside. Best config per agent = best mean cleaned score over all problems (taus mixed),
as the Neural Testbed selects hyper-parameters. Like with like: a table ranks the configs
that ran every problem of it (a failed job counts 1e6; a problem never run is not
counted), and scores a config that ran part of them apart, over those it ran; the
normalising agent is the run of it that covers the problems (our shipped one when the
user's is partial).

The SBI benchmark's rule (`OBSERVATIONS`): the mean score over observations per cell (task
x simulation budget), with a 95% bootstrap confidence interval over observations (none
below MIN_CI_OBSERVATIONS: the bootstrap of a few values gives about their range).

Problems of different families are never pooled: the leaderboard cleans and ranks each
family's problems apart (`leaderboard.board`), and a task of one family is never averaged
with, or ranked against, a task of another.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.rules import rule_of
from testbed.errors import InputError, bad_value
from testbed.ranking import FILL, JOINT_KL, RankedBy

SHIPPED_LABEL = "{agent} (ours, shipped)"  # leaderboard.shipped.LABEL

KL_FILL = FILL
NEGATIVE_TOLERANCE = -1e-4
NUM_SEED_GROUPS = 10
ENTRY = ["agent", "config_key"]
MEAN_METRICS = ("test_acc", "test_ece", "train_seconds", "evaluation_seconds")
# Below this many observations a cell gets no bootstrap interval: resampling n values
# gives at most C(2n - 1, n) means (3 for n = 2: the interval is just the two values), so
# its percentiles are about the range of the values, not a 95% interval.
MIN_CI_OBSERVATIONS = 5


def family_of(problem_ids: pd.Series) -> pd.Series:
    """The problem family of each id: the part before the first '/' (`coin/3` -> `coin`),
    as `generative.split_id` reads it."""
    return problem_ids.astype(str).str.split("/", n=1).str[0]


def ranked_by(families: Sequence[str]) -> dict[str, RankedBy]:
    """family -> how it is ranked, for the registered families among `families` that are
    ranked (a family no longer registered is ranked by the default, the joint KL)."""
    import generative

    out = {}
    for name in families:
        spec = generative.FAMILIES.get(name).ranked_by if name in generative.FAMILIES else JOINT_KL
        if spec is not None:
            out[name] = spec
    return out


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
    from leaderboard.problem_settings import settings_table

    table = settings_table(problem_ids)
    out = pd.DataFrame([{"problem_id": p, **table[p]} for p in problem_ids])
    return out if len(out) else pd.DataFrame({"problem_id": []})


def _clean_entry(rows: pd.DataFrame, universe: list[str], spec: RankedBy) -> pd.DataFrame:
    """One agent config's rows cleaned under `spec`'s rule: one row per problem of
    `universe` with `score` (cleaned), `raw_score`, the MEAN_METRICS and `pct_health`."""
    inside = set(universe)
    fill = FILL if spec.lower_is_better else -FILL
    metrics = [m for m in MEAN_METRICS if m in rows.columns]
    extra = int((~rows["problem_id"].isin(inside)).sum())
    rows = rows[rows["problem_id"].isin(inside)]
    raw = pd.to_numeric(rows[spec.score], errors="coerce") if spec.score in rows else None
    raw = raw if raw is not None else pd.Series(math.nan, index=rows.index)
    score, bad_negative = raw, 0
    if spec.clip_negative:  # clip negatives first (-inf included), as the paper
        score = raw.where(~(raw < 0), 0.0)
        bad_negative = int((raw < NEGATIVE_TOLERANCE).sum())
    non_finite = ~np.isfinite(score)
    if spec.finite_share and spec.finite_share in rows:  # an infinitely wrong batch
        share = pd.to_numeric(rows[spec.finite_share], errors="coerce").fillna(1.0)
        non_finite |= share < 1.0
    score = score.where(~non_finite, fill)
    cleaned = rows[["problem_id", *metrics]].assign(score=score, raw_score=raw)
    cleaned["non_finite"] = non_finite.astype(float)
    per_problem = cleaned.groupby("problem_id", sort=False).mean()
    per_problem["has_job"] = 1.0  # a stored job, ok or failed: the problem is covered
    missing = [p for p in universe if p not in per_problem.index]
    if missing:
        absent = pd.DataFrame(
            {"score": fill, "raw_score": math.nan, "has_job": 0.0}, index=pd.Index(missing)
        )
        per_problem = pd.concat([per_problem, absent])
    per_problem = per_problem.reindex(universe).rename_axis("problem_id").reset_index()
    # health counts jobs: each problem it ran once per agent seed this config ran (a
    # problem it never ran is coverage, which the ranking shows apart, not health)
    seeds = rows["agent_seed"].nunique() if "agent_seed" in rows and len(rows) else 1
    ran = len(universe) - len(missing)
    absent_jobs = max(0, ran * max(seeds, 1) - len(rows))
    total = len(rows) + absent_jobs  # as the paper: extras count as bad, not in total
    bad = int(non_finite.sum()) + bad_negative + extra + absent_jobs
    per_problem["pct_health"] = 1.0 - bad / total if total else 0.0
    return per_problem


def clean_scores(
    df: pd.DataFrame, problem_ids: Sequence[str] | None = None, spec: RankedBy = JOINT_KL
) -> pd.DataFrame:
    """One cleaned row per (agent, config_key, problem_id) under `spec`'s Neural Testbed
    rule (see the module doc).

    `problem_ids` is the leaderboard's sweep (default: every problem any agent ran):
    rows of other problems are dropped (and count against health); an agent config
    missing a problem gets the fill value (and `has_job` 0: the ranking scores it over the
    problems it has, apart from the configs that have them all). Several agent seeds of one
    problem are averaged after cleaning. Columns: agent, config_key, label, problem_id,
    score (clean), raw_score, non_finite, the MEAN_METRICS present, has_job, pct_health,
    then the problem settings.
    """
    if spec.score not in df.columns:
        raise InputError(f"results: no {spec.score!r} metric; allowed: results of problems "
                         f"ranked on it")  # fmt: skip
    universe = list(dict.fromkeys(problem_ids if problem_ids is not None else df["problem_id"]))
    labels = entry_labels(df)
    parts = []
    for (agent, ckey), rows in df.groupby(ENTRY, sort=True):
        part = _clean_entry(rows, universe, spec)
        part.insert(0, "config_key", ckey)
        part.insert(0, "agent", agent)
        part.insert(2, "label", labels[ckey])
        parts.append(part)
    if not parts:
        raise InputError("results: no rows to score; allowed: a results file with finished jobs")
    out = pd.concat(parts, ignore_index=True)
    return out.merge(_settings_for(df, universe), on="problem_id", how="left")


def best_configs(clean: pd.DataFrame, lower_is_better: bool = True) -> dict[str, str]:
    """agent -> config_key of its best config (best mean `score`; ties: first key)."""
    means = clean.groupby(ENTRY, sort=True)["score"].mean().reset_index()
    means["order"] = means["score"] if lower_is_better else -means["score"]
    means = means.sort_values(["agent", "order", "config_key"], kind="stable")
    return dict(means.drop_duplicates("agent")[["agent", "config_key"]].values)


def _stderr(values: np.ndarray) -> float:
    """np.std (ddof 0) / sqrt(n), as the Neural Testbed's ranking; NaN (unknown, shown
    blank) from fewer than two values, where it would read as a perfect 0."""
    return float(np.std(values) / np.sqrt(len(values))) if len(values) > 1 else math.nan


def seed_group_stderr(kl: pd.Series, seeds: pd.Series, groups: int = NUM_SEED_GROUPS) -> float:
    """Standard error over seed groups: mean score within each `seed % groups`, then stderr."""
    known = seeds.notna()
    if not known.any():
        return math.nan
    means = kl[known].groupby(seeds[known].astype(int) % groups).mean()
    return _stderr(means.to_numpy())


def num_seed_groups(seeds: pd.Series, groups: int = NUM_SEED_GROUPS) -> int:
    """How many seed groups (`seed % groups`) `seeds` fall in: below 2, no standard error."""
    known = seeds.dropna()
    return int((known.astype(int) % groups).nunique()) if len(known) else 0


def _entry_rows(df: pd.DataFrame, spec: RankedBy, groups: int) -> pd.DataFrame:
    """Per agent config: mean and seed-group stderr of the score (and the seed groups it
    is over), the means of MEAN_METRICS, health, problems and non-finite problems."""
    seeds = df["seed"] if "seed" in df.columns else pd.Series(np.nan, index=df.index)
    rows = []
    for (agent, ckey, label), g in df.groupby(ENTRY + ["label"], sort=True):
        row: dict[str, Any] = {
            "agent": agent,
            "label": label,
            "config_key": ckey,
            f"mean_{spec.short}": float(g["score"].mean()),
            f"stderr_{spec.short}": seed_group_stderr(g["score"], seeds[g.index], groups),
            "num_seed_groups": num_seed_groups(seeds[g.index], groups),
        }
        for m in MEAN_METRICS:
            row[f"mean_{m}"] = float(g[m].mean()) if m in g.columns else math.nan
        row["pct_health"] = float(g["pct_health"].iloc[0])
        row["num_problems"] = len(g)
        row["num_non_finite"] = int((g["non_finite"] > 0).sum()) if "non_finite" in g else 0
        rows.append(row)
    return pd.DataFrame(rows)


def coverage(clean: pd.DataFrame) -> dict[str, frozenset[str]]:
    """config_key -> the problems of `clean` it has a stored job of (ok or failed): a
    problem it never ran is not covered (every problem, for rows without `has_job`)."""
    rows = clean[clean["has_job"] > 0] if "has_job" in clean.columns else clean
    covered = {k: frozenset(g) for k, g in rows.groupby("config_key")["problem_id"]}
    return {k: covered.get(k, frozenset()) for k in dict.fromkeys(clean["config_key"])}


def _normalizer_key(
    entries: pd.DataFrame, cover: Mapping[str, frozenset[str]], name: str
) -> str | None:
    """The config that normalises: of agent `name` or our shipped run of it, the one
    with the most problems (all of them when any has), the user's on a tie, then by
    label; None when neither ran a problem here."""
    shipped = SHIPPED_LABEL.format(agent=name)
    candidates = [
        (-len(cover[k]), agent != name, label, k)
        for agent, label, k in entries[["agent", "label", "config_key"]].values
        if agent in (name, shipped) and cover[k]
    ]
    return min(candidates)[3] if candidates else None


def _ranked_set(
    entries: pd.DataFrame,
    cover: Mapping[str, frozenset[str]],
    universe: frozenset[str],
    norm_key: str | None,
) -> frozenset[str]:
    """The problems a table ranks over: the normaliser's, else all of them when a config
    ran them all, else those of the config that ran the most (ties: by label)."""
    if norm_key is not None:
        return cover[norm_key]
    if any(c == universe for c in cover.values()):
        return universe
    ordered = sorted(entries[["label", "config_key"]].values, key=lambda e: (-len(cover[e[1]]),
                     str(e[0])))  # fmt: skip
    return cover[ordered[0][1]] if ordered else frozenset()


def _partial_table(
    rows: pd.DataFrame,
    df: pd.DataFrame,
    cover: Mapping[str, frozenset[str]],
    norm_key: str | None,
    num_problems: int,
    spec: RankedBy,
    groups: int,
) -> pd.DataFrame:
    """The configs that ran part of the ranked problems (`rows`: the ones they ran), each
    scored over those, normalised by the normaliser's mean on the same problems, with
    `num_covered` and `coverage`."""
    scales: float | pd.Series = 1.0
    if norm_key is not None and len(rows):
        base = df[df["config_key"] == norm_key].set_index("problem_id")["score"]
        scales = rows.groupby("config_key")["problem_id"].agg(
            lambda ids: float(base.reindex(ids).mean())
        )
    partial = _ordered(_scored(rows, spec, groups, scales), spec)
    if len(partial):
        partial["num_covered"] = [len(cover[k]) for k in partial["config_key"]]
        partial["coverage"] = [f"{n} of {num_problems}" for n in partial["num_covered"]]
    return partial


def _scored(
    rows: pd.DataFrame, spec: RankedBy, groups: int, scale: float | pd.Series
) -> pd.DataFrame:
    """`_entry_rows` of `rows` with the normalised score and stderr (`scale`: one value,
    or one per config key)."""
    table = _entry_rows(rows, spec, groups)
    if not len(table):
        return table
    mean, stderr = f"mean_{spec.short}", f"stderr_{spec.short}"
    if isinstance(scale, pd.Series):
        scale = table["config_key"].map(scale).astype(float)
    table[f"normalized_{spec.short}"] = table[mean] / scale
    table["normalized_stderr"] = table[stderr] / scale
    return table


def _ordered(table: pd.DataFrame, spec: RankedBy) -> pd.DataFrame:
    """Best first (ties by label), rows at the fill value dropped (as the paper), the
    score's columns first."""
    if not len(table):
        return table
    mean, stderr, norm = f"mean_{spec.short}", f"stderr_{spec.short}", f"normalized_{spec.short}"
    order = table[norm] if spec.lower_is_better else -table[norm]
    table = table.assign(_o=order).sort_values(["_o", "label"], kind="stable")
    table = table[table[mean].abs() < FILL].drop(columns="_o").reset_index(drop=True)
    front = ["agent", "label", norm, "normalized_stderr", mean, stderr]
    return table[front + [c for c in table.columns if c not in front]]


def score_ranking(
    clean: pd.DataFrame,
    tau: int | None = None,
    *,
    spec: RankedBy = JOINT_KL,
    normalize: str | None = "default",
    best_only: bool = True,
    num_seed_groups: int = NUM_SEED_GROUPS,
) -> pd.DataFrame:
    """The Neural Testbed's ranking table for one tau (None: all rows).

    Columns (s = spec.short): agent, label, config_key, normalized_<s>, normalized_stderr,
    mean_<s>, stderr_<s>, num_seed_groups, mean_test_acc, mean_test_ece,
    mean_train_seconds, mean_evaluation_seconds, pct_health, num_problems, num_non_finite;
    best first, rows at the fill value dropped. `normalize` names the agent whose mean is 1
    (its best config; our shipped run of it, `<agent> (ours, shipped)`, when that has more
    of the problems: a user's partial run never normalises complete ones); 'default' is
    the family's normaliser, skipped when absent (attrs['normalizer'] gives the label
    used); any other absent name is an error; None or 'none': no normaliser.

    Like with like: the table ranks the configs that ran every problem of the ranked set
    (attrs['ranked_problems'] of attrs['num_problems'] at this tau): all of them, or,
    when the normaliser ran part, the normaliser's (when no config ran them all and none
    normalises: those of the config that ran most). A config that ran part of them is
    never scored with 1e6 fills beside them: attrs['partial'] holds it, scored over the
    ranked problems it ran, normalised by the normaliser's mean over the same problems,
    with `num_covered` (problems it ran of the tau's) and `coverage` ('14 of 210'); not
    ranked. A missing problem is one with no stored job; a failed job still counts 1e6.
    """
    df = clean
    if tau is not None:
        if "tau" not in df.columns or tau not in set(df["tau"].dropna().astype(int)):
            present = sorted(set(df["tau"].dropna().astype(int))) if "tau" in df.columns else []
            raise bad_value("tau", tau, present or ["(none: the problems have no tau)"])
        df = df[df["tau"] == tau]
    if best_only:
        best = best_configs(clean, spec.lower_is_better)
        df = df[[best.get(a) == k for a, k in zip(df["agent"], df["config_key"])]]
    universe = frozenset(df["problem_id"])
    cover = coverage(df)
    entries = df.drop_duplicates("config_key")
    name = spec.normalizer if normalize == "default" else normalize
    norm_key = None
    if name and name != "none":
        norm_key = _normalizer_key(entries, cover, name)
        known = {name, SHIPPED_LABEL.format(agent=name)} & set(clean["agent"])
        if normalize != "default" and not known:
            raise bad_value("normalize", normalize, sorted(set(df["agent"])) + ["none"])
    ranked = _ranked_set(entries, cover, universe, norm_key)
    whole = [k for k, c in cover.items() if ranked and c >= ranked]
    part = [k for k, c in cover.items() if c and k not in whole]
    in_ranked = df["problem_id"].isin(ranked)
    main_rows = df[df["config_key"].isin(set(whole)) & in_ranked]
    normalizer, scale = None, 1.0
    if norm_key is not None:
        base = main_rows[main_rows["config_key"] == norm_key]
        scale, normalizer = float(base["score"].mean()), str(base["label"].iloc[0])
    table = _ordered(_scored(main_rows, spec, num_seed_groups, scale), spec)
    part_rows = df[df["config_key"].isin(set(part)) & in_ranked & (df.get("has_job", 1) > 0)]
    partial = _partial_table(part_rows, df, cover, norm_key, len(universe), spec, num_seed_groups)
    labels = dict(entries[["config_key", "label"]].values)
    table.attrs.update(
        normalizer=normalizer,
        tau=tau,
        spec=spec,
        num_problems=len(universe),
        ranked_problems=len(ranked),
        partial=partial,
        # every config that ran part, shown or not (a table can drop one: all failed)
        partial_coverage={labels[k]: len(cover[k]) for k in cover if k not in whole},
    )
    return table


def score_rankings(clean: pd.DataFrame, **kwargs: Any) -> dict[int | None, pd.DataFrame]:
    """`score_ranking` for each tau present (one table for None when there is no tau)."""
    if "tau" not in clean.columns or clean["tau"].isna().all():
        return {None: score_ranking(clean, None, **kwargs)}
    taus = sorted({int(t) for t in clean["tau"].dropna()})  # each tau once, not once a row
    return {t: score_ranking(clean, t, **kwargs) for t in taus}


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


def _apart(rows: pd.DataFrame, spec: RankedBy) -> pd.DataFrame:
    """Rows whose `spec.apart` columns differ from their defaults as tasks of their own
    (`<task> (seeded)`, `<task> (iid10)`): never pooled with, or set beside, the others."""
    for column, default, form in spec.apart:
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
        cells = [rows[c] if c in rows else pd.Series(math.nan, index=rows.index) for c in spec.cell]
        rows = rows.assign(
            family=fam,
            task=cells[0],
            budget=cells[1] if len(cells) > 1 else 0,
            observation=rows[spec.replicate] if spec.replicate in rows else 1,
            score=pd.to_numeric(rows[spec.score], errors="coerce"),
        )
        rows = rows[rows["task"].notna() & rows["budget"].notna() & rows["observation"].notna()]
        parts.append(_apart(rows, spec))
    if not parts:
        return pd.DataFrame(columns=["family", "task", "budget", "observation", "score"])
    out = pd.concat(parts, ignore_index=True)
    if out["family"].nunique() > 1:
        renamed = ~out["family"].map(lambda f: bool(chosen[f].published))
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
