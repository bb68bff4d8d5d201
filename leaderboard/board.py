"""The leaderboard: results -> the ranking tables of every kind of problem present."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence

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
    "share of the table's problems where the agent config gave a usable score; a missing "
    "or failed job, a non-finite score, or a score below -1e-4 (negative beyond rounding) "
    "counts against it (the Neural Testbed's rule; 100% = all usable)"
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
    "ci_low": "lower end of the 95% bootstrap interval of the mean C2ST",
    "ci_high": "upper end of the 95% bootstrap interval of the mean C2ST",
    "num_observations": "observations averaged",
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
    "agent_seed": "the job's seed",
    "error": "the stored reason, in one line",
    "traceback": "the end of the Python traceback (none for a timeout or a dead worker)",
    "attempts": "times the job ran (--retry-failed runs a failed job again)",
    "finished_at": "when the job's result was stored (UTC)",
}
REAL_PREFIX = "real/"  # real-data problems: ranked on their joint NLL
REGRESSION_PREFIXES = ("regression/", "regression_test/")  # GP regression: a table of its own
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
    unranked_ok: bool = False,
) -> Board:
    """Loads `results` and ranks: Neural Testbed tables per tau (classification KL, real-data
    NLL, GP regression KL), SBI C2ST table (with the SBI benchmark paper's C2ST beside
    ours; per observation too with `per_observation`). Regression is normalised as the
    reference does it too: by `uniform`, which on regression is the function f = 0 (the
    reference's uniform-class-probabilities agent with one output).

    Each ranking gets a `rank` column (1 = best; ties share one; per task x budget for
    C2ST) and the median train / evaluation seconds per problem beside the means. With
    `unranked_ok`, results with nothing to rank (every job failed, or no rankable
    metric) give a board without rankings instead of an error (the report shows its
    failures)."""
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
    for ranked, rows in ((kl, clean), (nll, clean_nll), (regression, clean_reg)):
        for table_tau, table in ranked.items():
            _add_rank_and_medians(table, rows, table_tau)
    if c2st is not None and len(c2st):
        by_cell = c2st.groupby(["task", "budget"], sort=False)["mean_c2st"]
        c2st["rank"] = by_cell.rank(method="min", na_option="bottom").astype(int)
    if not kl and not nll and not regression and c2st is None and not unranked_ok:
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


def tables(board: Board, full: bool = False) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for display; `full` keeps every column (csv/json output)."""
    out = []
    for kind, attr, name in KINDS:
        for tau, table in getattr(board, attr).items():
            norm = table.attrs.get("normalizer")
            # one test input is a marginal prediction, not a joint one
            said = name.replace("joint ", "marginal ") if tau == 1 else name
            title = f"{said}, tau={tau}" if tau is not None else said
            title += f" (normalised by {norm})" if norm else " (not normalised)"
            shown = named(kind, table)
            if not full:
                shown = shown[[c for c in shown_columns(kind) if c in shown.columns]]
            else:
                shown = shown.assign(tau=tau)
            out.append((title, shown))
    if board.c2st is not None:
        shown = board.c2st if full else board.c2st[[c for c in C2ST_COLUMNS if c in board.c2st]]
        title = "C2ST per task x budget (mean over observations, 95% bootstrap CI; paper: SBI "
        out.append((title + "benchmark's mean and range over the same observations)", shown))
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
            lines.append(f"{SHORT_NAMES.get(column, column)}: {COLUMN_HELP[column]}")
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
