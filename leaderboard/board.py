"""The leaderboard: results -> the ranking tables of every kind of problem present."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import pandas as pd

from leaderboard import literature, scoring
from leaderboard.store import DEFAULT_PATH, load
from testbed.errors import InputError, bad_value

KL_COLUMNS = [
    "label",
    "normalized_kl",
    "normalized_stderr",
    "mean_kl",
    "mean_test_acc",
    "mean_test_ece",
    "mean_train_seconds",
    "mean_evaluation_seconds",
    "pct_health",
    "num_problems",
]
SHORT_NAMES = {  # terminal headers
    "label": "agent",
    "normalized_kl": "KL/norm",
    "normalized_stderr": "stderr",
    "mean_kl": "KL",
    "mean_test_acc": "test acc",
    "mean_test_ece": "test ECE",
    "mean_train_seconds": "train s",
    "mean_evaluation_seconds": "eval s",
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
}
REAL_PREFIX = "real/"  # real-data problems: ranked on their joint NLL
REGRESSION_PREFIXES = ("regression/", "regression_test/")  # GP regression: a table of its own
C2ST_COLUMNS = [
    "label",
    "task",
    "budget",
    "mean_c2st",
    "ci_low",
    "ci_high",
    "num_observations",
    "paper_c2st",
    "paper_min",
    "paper_max",
]
PER_OBSERVATION_COLUMNS = ["label", "task", "budget", "observation", "c2st", "paper_c2st"]


@dataclasses.dataclass
class Board:
    """The loaded results and the tables derived from them: joint KL per tau (synthetic
    problems), joint NLL per tau (real data: no true likelihood), C2ST (posteriors)."""

    df: pd.DataFrame
    problem_ids: list[str] | None
    kl: dict[int | None, pd.DataFrame]
    clean_kl: pd.DataFrame | None
    c2st: pd.DataFrame | None
    results: str | None = None  # the results file they came from
    nll: dict[int | None, pd.DataFrame] = dataclasses.field(default_factory=dict)
    clean_nll: pd.DataFrame | None = None
    c2st_per_observation: pd.DataFrame | None = None  # ours beside the paper's, per run
    regression: dict[int | None, pd.DataFrame] = dataclasses.field(default_factory=dict)
    clean_regression: pd.DataFrame | None = None

    @property
    def normalizer(self) -> str | None:
        return next((t.attrs.get("normalizer") for t in self.kl.values()), None)


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
) -> Board:
    """Loads `results` and ranks: Neural Testbed tables per tau (classification KL, real-data
    NLL, GP regression KL), SBI C2ST table (with the SBI benchmark paper's C2ST beside
    ours; per observation too with `per_observation`). Regression is normalised as the
    reference does it too: by `uniform`, which on regression is the function f = 0 (the
    reference's uniform-class-probabilities agent with one output)."""
    if metric not in ("auto", "kl", "c2st"):
        raise bad_value("metric", metric, ["auto", "kl", "c2st"])
    ids = problem_universe(sweep)
    df = load(results)
    if not len(df):
        raise InputError(f"results: {str(results)!r} holds no finished jobs yet")
    real = df["problem_id"].str.startswith(REAL_PREFIX)
    reg = df["problem_id"].str.startswith(REGRESSION_PREFIXES)
    real_ids = None if ids is None else [i for i in ids if i.startswith(REAL_PREFIX)]
    reg_ids = None if ids is None else [i for i in ids if i.startswith(REGRESSION_PREFIXES)]
    other_ids = None
    if ids is not None:
        other_ids = [i for i in ids if not i.startswith((REAL_PREFIX, *REGRESSION_PREFIXES))]
    has_kl_column = "kl_estimate" in df.columns
    kl_rows = df[~real & ~reg & df["kl_estimate"].notna()] if has_kl_column else []
    has_kl = len(kl_rows) > 0 or bool(other_ids and metric == "kl")
    has_reg = bool((has_kl_column and (reg & df["kl_estimate"].notna()).any()) or reg_ids)
    has_nll = bool(real.any() or real_ids)
    has_c2st = "c2st" in df.columns and df["c2st"].notna().any()
    kl: dict[int | None, pd.DataFrame] = {}
    nll: dict[int | None, pd.DataFrame] = {}
    clean = clean_nll = None
    rank = dict(tau=tau, normalize=normalize, best_only=best_only)
    if metric in ("auto", "kl") and (has_kl or (metric == "kl" and not has_reg)):
        clean, kl = _ranked(_kl_rows(df[~real & ~reg], other_ids), other_ids, **rank)
    regression: dict[int | None, pd.DataFrame] = {}
    clean_reg = None
    if metric in ("auto", "kl") and has_reg:
        clean_reg, regression = _ranked(_kl_rows(df[reg], reg_ids), reg_ids, **rank)
    if metric in ("auto", "kl") and has_nll:
        # real data: the joint NLL ranked by the same rules (the leaderboard's KL column)
        # the scoring rules read the score from the `kl_estimate` column: here, the NLL
        rows = df[real].assign(kl_estimate=df[real]["joint_nll"] if "joint_nll" in df else None)
        clean_nll, nll = _ranked(rows, real_ids, **rank)
    c2st = c2st_obs = None
    if metric in ("auto", "c2st") and (has_c2st or metric == "c2st"):
        c2st_df = df if ids is None else df[df["problem_id"].isin(ids)]
        per_obs = scoring.c2st_per_observation(c2st_df, best_only=best_only)
        c2st = literature.beside(scoring.c2st_table(c2st_df, best_only=best_only), per_obs)
        if per_observation:
            c2st_obs = literature.per_observation(per_obs)
    if not kl and not nll and not regression and c2st is None:
        failed = int((df["status"] == "failed").sum())
        if failed == len(df):
            raise InputError(
                f"results: all {failed} jobs in {str(results)!r} failed, so there is nothing "
                f"to rank; allowed: results with finished jobs (testbed leaderboard --failures "
                f"--results {results} lists the failures and their reasons)"
            )
        raise InputError(
            f"results: {str(results)!r} has no kl_estimate or c2st metric to rank; allowed: "
            "results of joint-KL or posterior problems"
        )
    board = Board(df, ids, kl, clean, c2st, os.fspath(results), nll, clean_nll)
    board.c2st_per_observation = c2st_obs
    board.regression, board.clean_regression = regression, clean_reg
    return board


def _ranked(rows: pd.DataFrame, ids: Sequence[str] | None, *, tau, normalize, best_only):
    """(cleaned rows, ranking per tau) of KL-type rows under the Neural Testbed's rules."""
    clean = scoring.clean_kl(rows, ids)
    if tau is None:
        return clean, scoring.kl_rankings(clean, normalize=normalize, best_only=best_only)
    return clean, {tau: scoring.kl_ranking(clean, tau, normalize=normalize, best_only=best_only)}


def _kl_rows(df: pd.DataFrame, ids: Sequence[str] | None) -> pd.DataFrame:
    """Rows that belong to the KL leaderboard: problems where some agent reported a KL
    (failed jobs of those problems included: they count as missing)."""
    if "kl_estimate" not in df.columns:
        raise InputError("results: no 'kl_estimate' metric; allowed: joint-KL problems")
    kl_problems = set(df.loc[df["kl_estimate"].notna(), "problem_id"])
    if ids is not None:
        kl_problems |= set(ids)
    return df[df["problem_id"].isin(kl_problems)]


def tables(board: Board, full: bool = False) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for display; `full` keeps every column (csv/json output)."""
    out = []
    for name, ranked in (
        ("joint KL", board.kl),
        ("joint NLL (real data)", board.nll),
        ("regression KL (GP environments)", board.regression),
    ):
        for tau, table in ranked.items():
            norm = table.attrs.get("normalizer")
            title = f"{name}, tau={tau}" if tau is not None else name
            title += f" (normalised by {norm})" if norm else " (not normalised)"
            shown = table if full else table[[c for c in KL_COLUMNS if c in table.columns]]
            if ranked is board.regression and not full:  # no accuracy or ECE for regression
                shown = shown.drop(columns=["mean_test_acc", "mean_test_ece"], errors="ignore")
            if full:
                shown = shown.assign(tau=tau)
            out.append((title, shown))
    if board.c2st is not None:
        shown = board.c2st if full else board.c2st[C2ST_COLUMNS]
        title = "C2ST per task x budget (mean over observations, 95% bootstrap CI; paper: SBI "
        out.append((title + "benchmark's mean and range over the same observations)", shown))
    if board.c2st_per_observation is not None:
        obs = board.c2st_per_observation
        shown = obs if full else obs[[c for c in PER_OBSERVATION_COLUMNS if c in obs.columns]]
        out.append(("C2ST per observation, ours beside the SBI benchmark paper's", shown))
    return out
