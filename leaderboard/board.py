"""The leaderboard: results -> the ranking tables of every kind of problem present.

Problems of different families are never pooled: each family (the part of a problem id
before its first '/') is cleaned and ranked on its own, one table per family and tau, as
the Neural Testbed ranks each of its sweeps (`classification_2d` and `classification`
included) on its own. With a sweep, only its problems count.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

import pandas as pd

from leaderboard import literature, scoring
from leaderboard.store import DEFAULT_PATH, load
from testbed.errors import InputError, bad_value

KL_COLUMNS = [  # the columns a ranking table shows (csv/json output: every column)
    "rank",
    "label",
    "normalized_kl",
    "normalized_stderr",
    "mean_kl",
    "mean_test_acc",
    "mean_test_ece",
    "median_train_seconds",
    "median_evaluation_seconds",
    "pct_health",
    "num_problems",
]
# Real data have no true likelihood: their tables hold a joint NLL, shown under its name.
NLL_NAMES = {
    "normalized_kl": "normalized_nll",
    "mean_kl": "mean_nll",
    "stderr_kl": "stderr_nll",
}
SHORT_NAMES = {  # terminal and report headers
    "rank": "rank",
    "label": "agent",
    "normalized_kl": "KL/norm",
    "normalized_stderr": "stderr",
    "mean_kl": "KL",
    "normalized_nll": "NLL/norm",
    "mean_nll": "NLL",
    "mean_test_acc": "test acc",
    "mean_test_ece": "test ECE",
    "median_train_seconds": "train s (median)",
    "median_evaluation_seconds": "eval s (median)",
    "pct_health": "health",
    "num_problems": "n",
    "mean_c2st": "C2ST",
    "ci_low": "CI low",
    "ci_high": "CI high",
    "num_observations": "obs",
    "paper_c2st": "paper C2ST",
    "paper_min": "paper min",
    "paper_max": "paper max",
    "observation": "obs",
    "c2st": "C2ST",
    "jobs": "jobs",
    "mean_train_seconds": "train s (mean)",
    "mean_evaluation_seconds": "eval s (mean)",
    "median_wall_seconds": "wall s (median)",
    "mean_wall_seconds": "wall s (mean)",
    "agent_seed": "seed",
}
COMPILE_NOTE = (
    "the first jobs in each worker process also compile JAX code that later jobs reuse, "
    "which a mean carries and a median mostly does not"
)
MEDIAN_NOTE = "a median: robust to the first jobs' compilation in each worker"
MEAN_NOTE = "a mean: includes the first jobs' compilation in each worker"
HEALTH_HELP = (
    "share of the agent config's jobs (the family's problems x its seeds) that gave a "
    "usable score; a missing or failed job, a non-finite score, or a score below -1e-4 "
    "(negative beyond rounding) counts against it (the Neural Testbed's rule; 100% = all "
    "usable)"
)
COLUMN_HELP = {  # what a header means: the report's tooltips and legends
    "rank": "position in this table: 1 = best (lowest score); ties share a rank",
    "label": "agent, with the config fields that differ between its configs",
    "agent": "agent name",
    "normalized_kl": "mean KL divided by the normalising agent's (named above the table); "
    "lower is better: 0 = the true predictive, 1 = as good as the normalising agent",
    "normalized_stderr": "standard error of the normalised score over problem-seed groups "
    "(seed % 10)",
    "mean_kl": "mean KL from the true predictive to the agent's over the problems (negative "
    "clipped to 0, missing or non-finite counts 1e6); lower is better",
    "normalized_nll": "mean joint NLL divided by the normalising agent's (named above the "
    "table); lower is better, 1 = as good as the normalising agent",
    "mean_nll": "mean joint negative log-likelihood (nats) of tau test labels over the "
    "problems (a uniform predictive gives tau * log C); lower is better",
    "mean_test_acc": "mean test accuracy of the agent's mean predictive (higher is better)",
    "mean_test_ece": "mean expected calibration error of the agent's mean predictive, 10 "
    "bins (lower is better)",
    "median_train_seconds": f"median seconds of training per job ({MEDIAN_NOTE})",
    "median_evaluation_seconds": f"median seconds of scoring per job ({MEDIAN_NOTE})",
    "pct_health": HEALTH_HELP,
    "num_problems": "problems scored in this table (a missing one counts 1e6)",
    "task": "simulator task",
    "budget": "simulation budget: simulations the agent may run",
    "mean_c2st": "mean C2ST over observations: accuracy of a classifier telling the agent's "
    "posterior samples from the reference posterior's; 0.5 = indistinguishable (perfect), "
    "1 = fully apart; lower is better",
    "ci_low": "lower end of the 95% bootstrap interval of the mean C2ST over observations; "
    f"blank below {scoring.MIN_CI_OBSERVATIONS} observations (a bootstrap of so few values "
    "gives about their range, not a 95% interval)",
    "ci_high": "upper end of the 95% bootstrap interval of the mean C2ST over observations; "
    f"blank below {scoring.MIN_CI_OBSERVATIONS} observations",
    "num_observations": "observations averaged (the interval needs at least "
    f"{scoring.MIN_CI_OBSERVATIONS})",
    "paper_c2st": "the SBI benchmark paper's C2ST for this agent (mean over the same "
    "observations where this row is a mean)",
    "paper_min": "the paper's lowest C2ST over those observations",
    "paper_max": "the paper's highest C2ST over those observations",
    "observation": "the SBI benchmark's observation number",
    "c2st": "C2ST at this observation (0.5 is perfect; lower is better)",
    "jobs": "finished (ok) jobs",
    "mean_train_seconds": f"mean seconds of training per job ({MEAN_NOTE})",
    "mean_evaluation_seconds": f"mean seconds of scoring per job ({MEAN_NOTE})",
    "median_wall_seconds": f"median seconds per job, start to stored result ({MEDIAN_NOTE})",
    "mean_wall_seconds": f"mean seconds per job, start to stored result ({MEAN_NOTE})",
    "key": "the job's key: a hash of agent, config, problem id and seed",
    "config_key": "a hash of the agent and its config",
    "config": "the agent's config (JSON)",
    "problem_id": "problem id",
    "family": "problem family: the part of the problem id before its first '/'",
    "agent_seed": "the job's seed",
    "error": "the stored reason, in one line",
    "traceback": "the end of the Python traceback (none for a timeout or a dead worker)",
    "attempts": "times the job ran (--retry-failed runs a failed job again)",
    "finished_at": "when the job's result was stored (UTC)",
}
REAL_FAMILY = "real"  # real-data problems: ranked on their joint NLL
REGRESSION_FAMILIES = ("regression", "regression_test")  # GP regression: tables of their own
REAL_PREFIX = f"{REAL_FAMILY}/"
REGRESSION_PREFIXES = tuple(f"{f}/" for f in REGRESSION_FAMILIES)
C2ST_COLUMNS = [
    "task",
    "budget",
    "rank",
    "label",
    "mean_c2st",
    "ci_low",
    "ci_high",
    "num_observations",
    "paper_c2st",
    "paper_min",
    "paper_max",
]
PER_OBSERVATION_COLUMNS = ["label", "task", "budget", "observation", "c2st", "paper_c2st"]


def kind_of(family: str) -> str:
    """How a family's problems are ranked: 'nll' (real data), 'regression' or 'kl'."""
    if family == REAL_FAMILY:
        return "nll"
    return "regression" if family in REGRESSION_FAMILIES else "kl"


@dataclasses.dataclass
class Ranking:
    """One ranking table: the problems of one family at one tau (None: no tau)."""

    kind: str  # 'kl', 'nll' (real data) or 'regression'
    family: str
    tau: int | None
    table: pd.DataFrame


@dataclasses.dataclass
class Board:
    """The loaded results and the tables derived from them: joint KL per family and tau
    (synthetic problems), joint NLL per tau (real data: no true likelihood), regression
    KL per family and tau, C2ST (posteriors; tasks of different families kept apart)."""

    df: pd.DataFrame  # the rows that count: all of the results, or the sweep's problems
    problem_ids: list[str] | None  # the sweep's problem ids (None: whatever ran)
    rankings: list[Ranking]
    clean: dict[tuple[str, str], pd.DataFrame]  # (kind, family) -> cleaned rows
    c2st: pd.DataFrame | None
    results: str | None = None  # the results file they came from
    c2st_per_observation: pd.DataFrame | None = None  # ours beside the paper's, per run
    sweep: str | None = None

    def ranked(self, kind: str) -> list[Ranking]:
        return [r for r in self.rankings if r.kind == kind]

    def families(self, kind: str) -> list[str]:
        """The families ranked as `kind`, in display order."""
        return list(dict.fromkeys(r.family for r in self.ranked(kind)))

    def _view(self, kind: str) -> dict[Any, pd.DataFrame]:
        """The tables of `kind` by tau, or by (family, tau) when several families are ranked
        as that kind (a convenience view of `rankings`)."""
        one = len(self.families(kind)) <= 1
        return {(r.tau if one else (r.family, r.tau)): r.table for r in self.ranked(kind)}

    def _clean(self, kind: str) -> pd.DataFrame | None:
        parts = [c for (k, _), c in self.clean.items() if k == kind]
        return pd.concat(parts, ignore_index=True) if parts else None

    kl = property(lambda self: self._view("kl"))
    nll = property(lambda self: self._view("nll"))
    regression = property(lambda self: self._view("regression"))
    clean_kl = property(lambda self: self._clean("kl"))
    clean_nll = property(lambda self: self._clean("nll"))
    clean_regression = property(lambda self: self._clean("regression"))

    @property
    def normalizer(self) -> str | None:
        return next((r.table.attrs.get("normalizer") for r in self.ranked("kl")), None)

    @property
    def num_failed(self) -> int:
        """Failed jobs among the rows that count."""
        return int((self.df["status"] == "failed").sum())


def problem_universe(sweep: str | None) -> list[str] | None:
    """The problem ids of `sweep` (None: whatever problems the results hold)."""
    if sweep is None:
        return None
    import generative

    return generative.sweep_ids(sweep)


def build(
    results: str | os.PathLike = DEFAULT_PATH,
    *,
    sweep: str | None = None,
    tau: int | None = None,
    normalize: str | None = "uniform",
    best_only: bool = True,
    metric: str = "auto",
    per_observation: bool = False,
    unranked_ok: bool = False,
) -> Board:
    """Loads `results` and ranks: Neural Testbed tables per family and tau (classification
    KL, real-data NLL, GP regression KL), SBI C2ST table (with the SBI benchmark paper's
    C2ST beside ours; per observation too with `per_observation`). Regression is
    normalised as the reference does it too: by `uniform`, which on regression is the
    function f = 0 (the reference's uniform-class-probabilities agent with one output).

    Problems of different families are never pooled: each family is cleaned and ranked
    apart (its own health, best config per agent and normaliser). With `sweep`, only the
    sweep's problems count (rows of other problems are left out, not held against
    anyone's health).

    Each ranking gets a `rank` column (1 = best; ties share one; per task x budget for
    C2ST) and the median train / evaluation seconds per problem beside the means. With
    `unranked_ok`, results with nothing to rank (every job failed, or no rankable
    metric) give a board without rankings instead of an error (the report shows its
    failures)."""
    if metric not in ("auto", "kl", "c2st"):
        raise bad_value("metric", metric, ["auto", "kl", "c2st"])
    if tau is not None and (isinstance(tau, bool) or not isinstance(tau, int) or tau < 1):
        raise InputError(f"tau: got {tau!r}; allowed: an integer >= 1, or None (every tau)")
    ids = problem_universe(sweep)
    df = load(results)
    if not len(df):
        raise InputError(f"results: {str(results)!r} holds no finished jobs yet")
    if ids is not None:
        df = df[df["problem_id"].isin(set(ids))].reset_index(drop=True)
        if not len(df):
            raise InputError(
                f"results: {str(results)!r} holds no jobs of sweep {sweep!r} yet; allowed: a "
                f"sweep with stored jobs (testbed sweep --sweep {sweep} --results {results} "
                "runs it)"
            )
    rankings: list[Ranking] = []
    clean: dict[tuple[str, str], pd.DataFrame] = {}
    if metric in ("auto", "kl"):
        rank = dict(normalize=normalize, best_only=best_only)
        rankings, clean = _rank_families(df, ids, tau, rank)
    c2st = c2st_obs = None
    has_c2st = scoring.has_posterior_c2st(df)  # an exact conjugate agent's has no budget
    if metric == "c2st" and not has_c2st:
        raise InputError(
            f"results: {str(results)!r} has no c2st metric to rank (--metric c2st); allowed: "
            "results of simulator problems (sbi/..., conjugate_sbi/...), or --metric auto"
        )
    if metric in ("auto", "c2st") and has_c2st:
        per_obs = scoring.c2st_per_observation(df, best_only=best_only)
        c2st = _beside_paper(scoring.c2st_table(df, best_only=best_only), per_obs)
        if per_observation:
            c2st_obs = _per_observation_beside_paper(per_obs)
    if not rankings and normalize not in (None, "uniform"):  # else checked by the ranking
        raise InputError(
            f"normalize: got {normalize!r}, but these results have no KL or NLL ranking to "
            "normalise (C2ST is not normalised); allowed: the default, or none"
        )
    for r in rankings:
        _add_rank_and_medians(r.table, clean[(r.kind, r.family)], r.tau)
    if c2st is not None and len(c2st):
        by_cell = c2st.groupby(["family", "task", "budget"], sort=False)["mean_c2st"]
        c2st["rank"] = by_cell.rank(method="min", na_option="bottom").astype(int)
    if not rankings and c2st is None and not unranked_ok:
        failed = int((df["status"] == "failed").sum())
        if failed == len(df):
            where = f"{str(results)!r}" + (f" (sweep {sweep})" if sweep else "")
            raise InputError(
                f"results: all {failed} jobs in {where} failed, so there is nothing "
                f"to rank; allowed: results with finished jobs ({failures_command(results, sweep)}"
                " lists the failures and their reasons)"
            )
        raise InputError(
            f"results: {str(results)!r} has no kl_estimate, joint_nll or simulator-problem "
            "c2st to rank"
            + ("" if metric == "auto" else f" (--metric {metric})")
            + "; allowed: results of joint-KL, real-data or simulator (sbi/..., "
            "conjugate_sbi/...) problems (an exact conjugate agent's scores are in its rows: "
            "leaderboard.load)"
        )
    board = Board(df, ids, rankings, clean, c2st, os.fspath(results), c2st_obs, sweep)
    return board


def _rank_families(
    df: pd.DataFrame, ids: Sequence[str] | None, tau: int | None, rank: dict[str, Any]
) -> tuple[list[Ranking], dict[tuple[str, str], pd.DataFrame]]:
    """The KL-type rankings of `df`, one family at a time (a family with no score in any
    row has none); with `tau`, only that tau's tables (an error when no family has it)."""
    family = scoring.family_of(df["problem_id"])
    rankings: list[Ranking] = []
    clean: dict[tuple[str, str], pd.DataFrame] = {}
    present: set[int] = set()
    for fam in sorted(set(family)):
        kind = kind_of(fam)
        rows = df[family == fam]
        if kind == "nll":  # the scoring rules read the score from `kl_estimate`: the NLL
            rows = rows.assign(kl_estimate=rows["joint_nll"] if "joint_nll" in rows else math.nan)
        if "kl_estimate" not in rows.columns or not rows["kl_estimate"].notna().any():
            continue
        fam_ids = None if ids is None else [i for i in ids if i.split("/", 1)[0] == fam]
        # every problem of the family counts, also one where every job failed (leaving it
        # out made an agent that failed there look fully healthy)
        cleaned = scoring.clean_kl(rows, fam_ids)
        tables = scoring.kl_rankings(cleaned, **rank)
        present |= {t for t in tables if t is not None}
        picked = {t: table for t, table in tables.items() if tau is None or t == tau}
        if picked:
            clean[(kind, fam)] = cleaned
            rankings += [Ranking(kind, fam, t, table) for t, table in picked.items()]
    if tau is not None and not rankings and present:
        raise bad_value("tau", tau, sorted(present))
    order = [kind for kind, _, _ in KINDS]
    rankings.sort(key=lambda r: order.index(r.kind))  # stable: families, then taus, kept
    return rankings, clean


def _beside_paper(table: pd.DataFrame, per_obs: pd.DataFrame) -> pd.DataFrame:
    """The C2ST ranking with the SBI benchmark paper's mean and range beside the rows of
    its own problems (family `sbi`) only: another family's task of the same name is not
    the paper's."""
    sbi = per_obs[per_obs["family"] == scoring.SBI_FAMILY] if len(per_obs) else per_obs
    out = literature.beside(table, sbi)
    if len(out):
        other = out["family"] != scoring.SBI_FAMILY
        out.loc[other, ["paper_c2st", "paper_min", "paper_max"]] = math.nan
    return out


def _per_observation_beside_paper(per_obs: pd.DataFrame) -> pd.DataFrame:
    """Per observation, the paper's C2ST beside our runs of its own problems only."""
    out = literature.per_observation(per_obs)
    if len(out):
        out.loc[out["family"] != scoring.SBI_FAMILY, "paper_c2st"] = math.nan
    return out


def failures_command(results: str | os.PathLike, sweep: str | None = None) -> str:
    """The command that lists the failed jobs of `results` (of `sweep` when given)."""
    command = f"testbed leaderboard --failures --results {shlex.quote(os.fspath(results))}"
    return command + (f" --sweep {shlex.quote(sweep)}" if sweep else "")


def failures_note(board: Board) -> str | None:
    """One line saying how many of the counted jobs failed and how to see why (None when
    none failed): the rankings count a failed job as missing."""
    n = board.num_failed
    if not n or board.results is None:
        return None
    jobs = "1 job" if n == 1 else f"{n} jobs"
    return f"{jobs} failed (their reasons: {failures_command(board.results, board.sweep)})"


def missing_note(board: Board) -> str | None:
    """One line saying how many of the sweep's problems have no stored job at all (None
    without a sweep or when none is missing): the C2ST table shows only what ran."""
    if board.problem_ids is None or board.sweep is None:
        return None
    ran = set(board.df["problem_id"])
    missing = [p for p in board.problem_ids if p not in ran]
    if not missing:
        return None
    return (
        f"{len(missing)} of sweep {board.sweep}'s {len(board.problem_ids)} problems have no "
        f"stored job yet (first: {missing[0]}); testbed sweep --sweep {board.sweep} --results "
        f"{shlex.quote(str(board.results))} runs them"
    )


def _add_rank_and_medians(table: pd.DataFrame, clean: pd.DataFrame, tau: int | None) -> None:
    """Adds `rank` (by the normalised score, ties share the best rank) and the median
    train / evaluation seconds over the table's problems to a ranking table, in place."""
    if not len(table):
        return
    table["rank"] = table["normalized_kl"].rank(method="min").astype(int)
    rows = clean if tau is None or "tau" not in clean.columns else clean[clean["tau"] == tau]
    for metric in ("train_seconds", "evaluation_seconds"):
        medians = rows.groupby(scoring.ENTRY)[metric].median() if metric in rows else {}
        entries = zip(table["agent"], table["config_key"])
        table[f"median_{metric}"] = [float(medians.get(e, math.nan)) for e in entries]


KINDS = (  # (kind, attribute of Board, title) of the KL-type rankings, in display order
    ("kl", "kl", "joint KL"),
    ("nll", "nll", "joint NLL (real data)"),
    ("regression", "regression", "regression KL (GP environments)"),
)


def shown_columns(kind: str) -> list[str]:
    """The columns a ranking table of `kind` ('kl', 'nll', 'regression') shows."""
    columns = KL_COLUMNS
    if kind == "regression":  # no accuracy or ECE for regression
        columns = [c for c in columns if c not in ("mean_test_acc", "mean_test_ece")]
    if kind == "nll":
        columns = [NLL_NAMES.get(c, c) for c in columns]
    return columns


def named(kind: str, table: pd.DataFrame) -> pd.DataFrame:
    """A ranking table with its score columns under their name: a real-data table holds a
    joint NLL (scored by the KL rules, in the `*_kl` columns), so they become `*_nll`."""
    return table.rename(columns=NLL_NAMES) if kind == "nll" else table


def title(board: Board, ranking: Ranking) -> str:
    """A ranking table's title: what it scores, its family when several families are
    ranked as the same kind (`marginal KL on coin, tau=1`), its tau and normaliser."""
    name = dict((kind, name) for kind, _, name in KINDS)[ranking.kind]
    # one test input is a marginal prediction, not a joint one
    said = name.replace("joint ", "marginal ") if ranking.tau == 1 else name
    if len(board.families(ranking.kind)) > 1:
        said += f" on {ranking.family}"
    text = f"{said}, tau={ranking.tau}" if ranking.tau is not None else said
    norm = ranking.table.attrs.get("normalizer")
    return text + (f" (normalised by {norm})" if norm else " (not normalised)")


C2ST_TITLE = (
    "C2ST per task x budget (mean over observations, 95% bootstrap CI, none below "
    f"{scoring.MIN_CI_OBSERVATIONS} observations; paper: SBI benchmark's mean and range over "
    "the same observations)"
)


def tables(board: Board, full: bool = False) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for display; `full` keeps every column and adds the table's
    family and tau (csv/json output)."""
    out = []
    for kind, _, _ in KINDS:
        for ranking in board.ranked(kind):
            shown = named(kind, ranking.table)
            if not full:
                shown = shown[[c for c in shown_columns(kind) if c in shown.columns]]
            else:
                shown = shown.assign(family=ranking.family, tau=ranking.tau)
            out.append((title(board, ranking), shown))
    if board.c2st is not None:
        shown = board.c2st if full else board.c2st[[c for c in C2ST_COLUMNS if c in board.c2st]]
        out.append((C2ST_TITLE, shown))
    if board.c2st_per_observation is not None:
        obs = board.c2st_per_observation
        shown = obs if full else obs[[c for c in PER_OBSERVATION_COLUMNS if c in obs.columns]]
        out.append(("C2ST per observation, ours beside the SBI benchmark paper's", shown))
    return out


TERMINAL_LEGEND = (  # the headers explained under the terminal's tables (the report: all)
    "rank",
    "normalized_kl",
    "mean_kl",
    "normalized_nll",
    "mean_nll",
    "mean_c2st",
    "c2st",
    "ci_low",
    "num_observations",
    "paper_c2st",
    "paper_min",
    "median_train_seconds",
    "pct_health",
    "num_problems",
)


def legend(board: Board) -> list[str]:
    """What the shown tables' less obvious headers mean, one line each (printed under the
    terminal's tables)."""
    shown = {c for _, table in tables(board) for c in table.columns}
    lines = ["Lower is better for every ranked score (KL, NLL, C2ST); rank 1 is the best."]
    for column in TERMINAL_LEGEND:
        if column in shown:
            name = SHORT_NAMES.get(column, column)
            if column == "c2st":  # its short name is mean_c2st's too
                name = "C2ST (per observation table)"
            lines.append(f"{name}: {COLUMN_HELP[column]}")
    return lines


def runtimes(df: pd.DataFrame) -> pd.DataFrame:
    """Per agent config over its finished jobs: jobs, then the median and the mean train,
    evaluation and wall seconds per job (the first jobs in a worker also compile, which
    the mean includes: the median is the typical job)."""
    ok = df[df["status"] == "ok"]
    labels = scoring.entry_labels(df)
    columns = ["agent", "config_key", "label", "jobs"]
    metrics = [m for m in ("train_seconds", "evaluation_seconds", "wall_seconds") if m in ok]
    for m in metrics:
        columns += [f"median_{m}", f"mean_{m}"]
    rows = []
    for (agent, ckey), g in ok.groupby(scoring.ENTRY, sort=True):
        row = {"agent": agent, "config_key": ckey, "label": labels[ckey], "jobs": len(g)}
        for m in metrics:
            values = g[m].astype(float)
            row[f"median_{m}"], row[f"mean_{m}"] = float(values.median()), float(values.mean())
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
