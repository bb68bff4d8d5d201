"""The Neural Testbed's scoring (`NEURAL_TESTBED`): per agent config and problem, a
negative score is clipped to 0 where the family says it is estimation noise (a KL; only
below -1e-4 counts against health); a missing, failed or non-finite score, or one whose
share of finite test batches is below 1, becomes 1e6; the mean per tau is normalised by the
family's normalising agent (or a chosen one); the standard error is over seed groups
(problem seed % 10: group means, then std / sqrt(#groups)). Accuracy, ECE and timings are
averaged alongside. Best config per agent = best mean cleaned score over all problems (taus
mixed), as the Neural Testbed selects hyper-parameters. Like with like: a table ranks the
configs that ran every problem of it (a failed job counts 1e6; a problem never run is not
counted), and scores a config that ran part of them apart, over those it ran; the
normalising agent is the run of it that covers the problems (our shipped one when the
user's is partial).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.ranking.scoring import ENTRY, SHIPPED_LABEL, entry_labels
from testbed.errors import InputError, bad_value
from testbed.ranking import FILL, JOINT_KL, RankedBy

KL_FILL = FILL
NEGATIVE_TOLERANCE = -1e-4
NUM_SEED_GROUPS = 10
MEAN_METRICS = ("test_acc", "test_ece", "train_seconds", "evaluation_seconds")


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
    score, bad_negative, settings = raw, 0, spec.settings
    if settings.clip_negative:  # clip negatives first (-inf included), as the paper
        score = raw.where(~(raw < 0), 0.0)
        bad_negative = int((raw < NEGATIVE_TOLERANCE).sum())
    non_finite = ~np.isfinite(score)
    if settings.finite_share and settings.finite_share in rows:  # an infinitely wrong batch
        share = pd.to_numeric(rows[settings.finite_share], errors="coerce").fillna(1.0)
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
    name = spec.settings.normalizer if normalize == "default" else normalize
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
