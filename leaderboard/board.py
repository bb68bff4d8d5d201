"""The leaderboard: results -> the ranking tables of every family present.

Each problem family declares how it is ranked (`testbed.ranking.RankedBy`, given when it
registers): the metric, the rule (the Neural Testbed's, one table per tau; the SBI
benchmark's, per cell over observations), its normaliser and the published results shown
beside. Families are never pooled: each is cleaned and ranked on its own. With a sweep,
only its problems count. Nothing here names a family or a score.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from leaderboard import literature, scoring
from leaderboard import shipped as shipped_runs
from leaderboard.store import DEFAULT_PATH, load
from testbed.errors import InputError, bad_value
from testbed.ranking import OBSERVATIONS, TESTBED, RankedBy

SHIPPED_SUFFIX = scoring.SHIPPED_LABEL.format(agent="")  # " (ours, shipped)"
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
OPTIONAL = ("mean_test_acc", "mean_test_ece")  # not shown where no problem reports them

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
    "num_non_finite": "non-finite",
    "mean_c2st": "C2ST",
    "ci_low": "CI low",
    "ci_high": "CI high",
    "num_observations": "obs",
    "paper_c2st": "paper C2ST",
    "paper_min": "paper min",
    "paper_max": "paper max",
    "paper_source": "paper",
    "observation": "obs",
    "c2st": "C2ST",
    "jobs": "jobs",
    "mean_train_seconds": "train s (mean)",
    "mean_evaluation_seconds": "eval s (mean)",
    "median_wall_seconds": "wall s (median)",
    "mean_wall_seconds": "wall s (mean)",
    "agent_seed": "seed",
    "coverage": "ran",
    "whose": "whose",
}
COMPILE_NOTE = (
    "the first jobs in each worker process also compile JAX code that later jobs reuse, "
    "which a mean carries and a median mostly does not"
)
MEDIAN_NOTE = "a median: robust to the first jobs' compilation in each worker"
MEAN_NOTE = "a mean: includes the first jobs' compilation in each worker"
HEALTH_HELP = (
    "share of the agent config's jobs (the family's problems it ran x its seeds) that gave a "
    "usable score; a missing seed or a failed job, a non-finite score, or a score below -1e-4 "
    "(negative beyond rounding) counts against it (the Neural Testbed's rule; 100% = all "
    "usable); a problem it never ran is coverage, shown apart, not health"
)
COLUMN_HELP = {  # what a header means: the report's tooltips and legends
    "rank": "position in this table: 1 = best (lowest score); ties share a rank",
    "label": "agent, with the config fields that differ between its configs",
    "agent": "agent name",
    "normalized_kl": "mean KL divided by the normalising agent's (named above the table); "
    "lower is better: 0 = the true predictive, 1 = as good as the normalising agent",
    "normalized_stderr": "standard error of the score (normalised, where the title says so) "
    "over problem-seed groups (seed % 10); 'n/a: 1 seed group' when the problems fall in "
    "fewer than two groups (a spread of one value is unknown, not 0)",
    "coverage": "problems the config ran of the table's (a table of configs that ran part "
    "of them: each scored over those it ran, not ranked with the configs that ran them all)",
    "whose": "yours: a run in your results file; shipped: our run shipped with the package; "
    "published: a paper's runs, over the same observations",
    "mean_kl": "mean KL from the true predictive to the agent's over the problems (negative "
    "clipped to 0, a failed job or non-finite score counts 1e6); lower is better",
    "normalized_nll": "mean joint NLL divided by the normalising agent's (named above the "
    "table); lower is better, 1 = as good as the normalising agent",
    "mean_nll": "mean joint negative log-likelihood (nats) of tau test labels over the "
    "problems (a uniform predictive gives tau * log C); lower is better",
    "mean_test_acc": "mean test accuracy of the agent's mean predictive (higher is better; "
    "a tie goes to the first class, so a uniform predictive scores the first class's share)",
    "mean_test_ece": "mean expected calibration error of the agent's mean predictive, 10 "
    "bins (lower is better)",
    "median_train_seconds": f"median seconds of training per job ({MEDIAN_NOTE}); problems "
    "that share their training data (tau pairs) train once: the first job of such a group "
    "holds the training time, the others 0",
    "median_evaluation_seconds": f"median seconds of scoring per job: the KL estimate and "
    f"accuracy on the test batches ({MEDIAN_NOTE})",
    "pct_health": HEALTH_HELP,
    "num_non_finite": "problems scored as infinitely wrong: a test batch held a label the "
    "agent gives probability 0 (an infinite KL or NLL), so the problem counts 1e6, as the "
    "reference ranks a non-finite score (the stored kl_estimate clips such batches to the "
    "largest finite one, for parity with the reference's per-problem values)",
    "num_problems": "problems scored in this row (a failed job counts 1e6; a config that ran "
    "part of the table's problems is shown apart, scored over those it ran)",
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
    "paper_c2st": "the published C2ST for this agent: the SBI benchmark paper's (mean over "
    "the same observations where this row is a mean) or, for a newer method the benchmark "
    "did not run, a paper's at the same task and budget (its mean over its own runs; the "
    "paper column says whose, the docs where none exists)",
    "paper_source": "whose published C2ST: Lueckmann 2021 = Lueckmann et al., "
    "'Benchmarking Simulation-Based Inference', AISTATS 2021 (the SBI benchmark); Miller "
    "2022 = Miller, Weniger, Forre, 'Contrastive Neural Ratio Estimation', NeurIPS 2022 "
    "(data: leaderboard.published('sbi_new_methods'))",
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


@dataclasses.dataclass
class Ranking:
    """One ranking table: the problems of one family (at one tau, None: no tau), ranked as
    the family declares (`spec`)."""

    spec: RankedBy
    family: str
    tau: int | None
    table: pd.DataFrame
    # the configs that ran part of the ranked problems, each scored over those it ran (not
    # ranked with the table's: `scoring.score_ranking`)
    partial: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    @property
    def coverage(self) -> dict[str, int]:
        """label -> problems run, of each config that ran part of the problems here."""
        return dict(self.table.attrs.get("partial_coverage", {}))

    @property
    def observations(self) -> bool:
        """Ranked per cell over observations (the SBI benchmark's rule)."""
        return self.spec.rule == OBSERVATIONS


@dataclasses.dataclass
class Board:
    """The loaded results and the tables derived from them: one ranking per family and
    tau (or per family, ranked over observations), in the order families registered."""

    df: pd.DataFrame  # the rows that count: all of the results, or the sweep's problems
    problem_ids: list[str] | None  # the sweep's problem ids (None: whatever ran)
    rankings: list[Ranking]
    clean: dict[str, pd.DataFrame]  # family -> its cleaned rows (Neural Testbed rule)
    results: str | None = None  # the results file they came from
    per_observation: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    sweep: str | None = None
    # shipped agent configs left out: the user's results hold all their jobs: agent -> jobs
    shipped_held: dict[str, int] = dataclasses.field(default_factory=dict)
    # ranked families whose shipped source (named by the family) holds none of the
    # problems ranked: family -> source
    shipped_none: dict[str, str] = dataclasses.field(default_factory=dict)

    def tables_of(self, family: str) -> dict[int | None, pd.DataFrame]:
        """A family's ranking tables by tau (None: ranked over observations, or no tau)."""
        return {r.tau: r.table for r in self.rankings if r.family == family}

    def families(self) -> list[str]:
        """The ranked families, in display order."""
        return list(dict.fromkeys(r.family for r in self.rankings))

    def sections(self) -> list[tuple[RankedBy, list[Ranking]]]:
        """The rankings grouped by what they score (families ranked alike, e.g. two sweeps
        ranked on the joint KL, share a section), in display order."""
        out: dict[str, tuple[RankedBy, list[Ranking]]] = {}
        for r in self.rankings:
            out.setdefault(r.spec.name, (r.spec, []))[1].append(r)
        return list(out.values())

    def observed(self) -> pd.DataFrame | None:
        """The tables of the families ranked over observations, in one (family column)."""
        parts = [r.table.assign(family=r.family) for r in self.rankings if r.observations]
        return pd.concat(parts, ignore_index=True) if parts else None

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


def _load(results, sweep: str | None, ids: list[str] | None) -> pd.DataFrame:
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
    return df


def _check_args(metric: str, tau: int | None) -> None:
    if metric not in ("auto", *METRIC_RULES):
        raise bad_value("metric", metric, ["auto", *METRIC_RULES])
    if tau is not None and (isinstance(tau, bool) or not isinstance(tau, int) or tau < 1):
        raise InputError(f"tau: got {tau!r}; allowed: an integer >= 1, or None (every tau)")


METRIC_RULES = {"kl": TESTBED, "c2st": OBSERVATIONS}  # --metric: which rule's tables


def build(
    results: str | os.PathLike | None = DEFAULT_PATH,
    *,
    sweep: str | None = None,
    tau: int | None = None,
    normalize: str | None = "default",
    best_only: bool = True,
    metric: str = "auto",
    per_observation: bool = False,
    unranked_ok: bool = False,
    shipped: bool = True,
) -> Board:
    """Loads `results` and ranks each family present as it declares (`RankedBy`): the
    Neural Testbed's tables per family and tau, the SBI benchmark's per cell over
    observations (with the published results the family names beside ours; per
    observation too with `per_observation`).

    `normalize`: 'default' (each family's own normaliser), an agent name, or None /
    'none'. `metric` 'kl' or 'c2st' keeps only the tables of the Neural Testbed's or the
    SBI benchmark's rule. With `sweep`, only the sweep's problems count. Each ranking
    gets a `rank` column (1 = best; ties share one) and, for the Neural Testbed's rule,
    the median train / evaluation seconds beside the means. With `unranked_ok`, results
    with nothing to rank give a board without rankings instead of an error. With
    `shipped` (default), our shipped runs of the same problems that a family names
    (`RankedBy.shipped`) are ranked beside the user's, labelled `<agent> (ours,
    shipped)`; `Board.df` holds the user's rows only. `results=None` ranks our shipped
    runs of the sweep's problems alone (`sweep` required): where the reference agents
    stand."""
    _check_args(metric, tau)
    ids = problem_universe(sweep)
    published = shipped  # the published rows beside, as our shipped ones (--no-shipped: none)
    if results is None:
        df, shipped = _shipped_only(sweep, ids, shipped), False
    else:
        df = _load(results, sweep, ids)
    specs = scoring.ranked_by(sorted(set(scoring.family_of(df["problem_id"]))))
    if metric != "auto":
        specs = {f: spec for f, spec in specs.items() if spec.rule == METRIC_RULES[metric]}
        if not specs or not any(spec.score in df for spec in specs.values()):
            whose = f"results: {str(results)!r}" if results is not None else (
                f"--shipped-only: our shipped runs of sweep {sweep!r}"
            )  # fmt: skip
            raise InputError(
                f"{whose} has no family ranked by --metric {metric}; "
                "allowed: --metric auto, or results of such problems"
            )
    rank = dict(normalize=normalize, best_only=best_only)
    ranked, held, none = _with_shipped(df, specs, ids) if shipped else (df, {}, {})
    rankings, clean = _rank_testbed(ranked, ids, tau, specs, rank)
    observed, per_obs = _rank_observations(
        ranked, specs, best_only, per_observation, ids if published else None, published
    )
    rankings += observed
    if normalize not in (None, "default", "none") and all(r.observations for r in rankings):
        raise InputError(
            f"normalize: got {normalize!r}, but these results have no ranking to normalise "
            "(scores ranked over observations are not normalised); allowed: the default, or none"
        )
    if not rankings and not unranked_ok:
        raise _nothing_to_rank(df, results, sweep)
    order = {f: i for i, f in enumerate(_registration_order())}
    rankings.sort(key=lambda r: (order.get(r.family, len(order)), r.tau or 0))
    ranked_families = {r.family for r in rankings}
    none = {f: source for f, source in none.items() if f in ranked_families}
    path = None if results is None else os.fspath(results)
    return Board(df, ids, rankings, clean, path, per_obs, sweep, held, none)


def _shipped_only(sweep: str | None, ids: list[str] | None, shipped: bool) -> pd.DataFrame:
    """Our shipped runs of `sweep`'s problems, labelled as ours, as the rows to rank."""
    if not shipped:
        raise InputError(
            "shipped: ranking the shipped runs alone needs them; allowed: results of yours "
            "with --no-shipped, or the shipped runs without it"
        )
    if sweep is None or ids is None:
        raise InputError(
            "sweep: the shipped runs alone are ranked over a sweep's problems, and none was "
            "given; allowed: a sweep, e.g. classification_2d"
        )
    specs = scoring.ranked_by(sorted({i.split("/", 1)[0] for i in ids}))
    sources = {spec.shipped for spec in specs.values() if spec.shipped is not None}
    parts = [
        shipped_runs.beside(spec.shipped, [i for i in ids if i.startswith(f"{fam}/")])
        for fam, spec in specs.items()
        if spec.shipped is not None
    ]
    parts = [p for p in parts if len(p)]
    if not parts:
        held = {f for source in sources for f in shipped_runs.families(source)}
        raise InputError(
            f"sweep: the package ships no runs of the problems of sweep {sweep!r}; allowed: a "
            f"sweep of problems of {', '.join(sorted(held)) or 'a family with shipped runs'}"
        )
    return pd.concat(parts, ignore_index=True)


def _with_shipped(
    df: pd.DataFrame, specs: dict[str, RankedBy], ids: Sequence[str] | None
) -> tuple[pd.DataFrame, dict[str, int], dict[str, str]]:
    """`df` and, for each family that names shipped runs of ours, those of its problems
    in the sweep (`ids`) or, without a sweep, in `df`; how many shipped jobs of each
    agent were left out because `df` holds every job of their config there (shown once,
    as the user's); and the families whose source holds none of those problems."""
    family = scoring.family_of(df["problem_id"])
    parts = [df]
    held: dict[str, int] = {}
    none: dict[str, str] = {}
    for fam, spec in specs.items():
        if spec.shipped is None:
            continue
        if ids is not None:
            wanted = [i for i in ids if i.split("/", 1)[0] == fam]
        else:
            wanted = list(dict.fromkeys(df.loc[family == fam, "problem_id"]))
        if wanted:
            parts.append(shipped_runs.beside(spec.shipped, wanted, held=df["key"]))
            same = shipped_runs.shipped(spec.shipped)  # the family's own problems only
            same = same[same["problem_id"].isin(set(wanted))]
            if not len(same):
                none[fam] = spec.shipped
            same = same[shipped_runs.wholly_held(same, df["key"])]
            for agent, n in same["agent"].value_counts().items():
                held[agent] = held.get(agent, 0) + int(n)
    parts = [p for p in parts if len(p)]
    return (pd.concat(parts, ignore_index=True) if len(parts) > 1 else df), held, none


def _registration_order() -> list[str]:
    import generative

    return list(generative.FAMILIES)


def _nothing_to_rank(df: pd.DataFrame, results, sweep: str | None) -> InputError:
    import generative

    unknown = sorted(set(scoring.family_of(df["problem_id"])) - set(generative.FAMILIES))
    if unknown:
        return InputError(
            f"results: {str(results)!r} holds problems of {', '.join(unknown)}, not registered "
            "here, so how to rank them is unknown; allowed: --import the module that "
            "registers them (as the sweep did)"
        )
    failed = int((df["status"] == "failed").sum())
    if failed == len(df):
        where = f"{str(results)!r}" + (f" (sweep {sweep})" if sweep else "")
        return InputError(
            f"results: all {failed} jobs in {where} failed, so there is nothing to rank; "
            f"allowed: results with finished jobs ({failures_command(results, sweep)} lists "
            "the failures and their reasons)"
        )
    return InputError(
        f"results: {str(results)!r} has no score its families are ranked on; allowed: "
        "results of ranked families (testbed list problems; a family registered with "
        "ranked_by=None keeps its scores in its rows: leaderboard.load)"
    )


def _rank_testbed(
    df: pd.DataFrame,
    ids: Sequence[str] | None,
    tau: int | None,
    specs: dict[str, RankedBy],
    rank: dict[str, Any],
) -> tuple[list[Ranking], dict[str, pd.DataFrame]]:
    """The Neural Testbed's rankings of `df`, one family at a time (a family with no score
    in any row has none); with `tau`, only that tau's tables (an error when no family
    has it)."""
    family = scoring.family_of(df["problem_id"])
    rankings: list[Ranking] = []
    clean: dict[str, pd.DataFrame] = {}
    present: set[int] = set()
    for fam, spec in specs.items():
        rows = df[family == fam]
        if spec.rule != TESTBED or spec.score not in rows or not rows[spec.score].notna().any():
            continue
        fam_ids = None if ids is None else [i for i in ids if i.split("/", 1)[0] == fam]
        # every problem of the family counts, also one where every job failed (leaving it
        # out made an agent that failed there look fully healthy)
        cleaned = scoring.clean_scores(rows, fam_ids, spec)
        tables = scoring.score_rankings(cleaned, spec=spec, **rank)
        present |= {t for t in tables if t is not None}
        picked = {t: table for t, table in tables.items() if tau is None or t == tau}
        if picked:
            clean[fam] = cleaned
            for t, table in picked.items():
                partial = table.attrs.pop("partial", pd.DataFrame())
                _add_rank_and_medians(table, cleaned, t, spec)
                _add_medians(partial, cleaned, t)
                rankings.append(Ranking(spec, fam, t, table, partial))
    if tau is not None and not rankings and present:
        raise bad_value("tau", tau, sorted(present))
    return rankings, clean


def _sweep_cells(ids: Sequence[str], fam: str, spec: RankedBy) -> pd.DataFrame:
    """The task, budget and observation of each of the sweep's problems of `fam`."""
    from leaderboard.store import settings_table

    fam_ids = [i for i in ids if i.split("/", 1)[0] == fam]
    settings = settings_table(fam_ids)
    frame = pd.DataFrame([{"problem_id": i, **settings[i]} for i in fam_ids])
    if not len(frame):
        return frame
    return scoring.observation_rows(frame.assign(**{spec.score: math.nan}), {fam: spec})


def _with_paper_rows(
    table: pd.DataFrame, g: pd.DataFrame, fam: str, spec: RankedBy, ids: Sequence[str] | None
) -> pd.DataFrame:
    """`table` and the published algorithms' rows of each of its cells (and, with a
    sweep, of the sweep's cells none of ours ran), over the observations our rows of the
    cell hold (the sweep's, in a cell with none)."""
    cells = g[["task", "budget", "observation"]]
    if ids is not None:
        sweep = _sweep_cells(ids, fam, spec)
        if len(sweep):
            ran = set(zip(cells["task"], cells["budget"]))
            fresh = [(t, b) not in ran for t, b in zip(sweep["task"], sweep["budget"])]
            cells = pd.concat([cells, sweep.loc[fresh, list(cells.columns)]], ignore_index=True)
    paper = literature.paper_rows(cells, spec.published, fam)
    if not len(paper):
        return table
    table = pd.concat([table, paper], ignore_index=True)
    order = ["family", "task", "budget", "mean_score"]
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def _rank_observations(
    df: pd.DataFrame,
    specs: dict[str, RankedBy],
    best_only: bool,
    per_observation: bool,
    ids: Sequence[str] | None = None,
    published: bool = True,
) -> tuple[list[Ranking], dict[str, pd.DataFrame]]:
    """One ranking per family ranked over observations, with its published results beside
    ours (`literature`; with `published`, the published algorithms as labelled rows too,
    also in the cells of the sweep `ids` none of ours ran), and, with `per_observation`,
    its runs one by one."""
    rows = scoring.observation_rows(df, specs)
    if not len(rows):
        return [], {}
    labels = scoring.entry_labels(df)
    rankings, per_obs = [], {}
    for fam, g in rows.groupby("family", sort=False):
        spec = specs[fam]
        table = scoring.observation_table(g, labels, best_only=best_only,
                                          lower_is_better=spec.lower_is_better)  # fmt: skip
        best = table if best_only else None
        runs = scoring.per_observation(g, labels, best)
        table = literature.beside(table, runs, spec.published)
        if published:
            table = _with_paper_rows(table, g, fam, spec, ids)
        table = table.rename(columns={"mean_score": f"mean_{spec.short}"})
        by_cell = table.groupby(["task", "budget"], sort=False)[f"mean_{spec.short}"]
        ascending = spec.lower_is_better
        table["rank"] = by_cell.rank(method="min", ascending=ascending, na_option="bottom")
        table["rank"] = table["rank"].astype(int)
        table.attrs.update(spec=spec, normalizer=None)
        rankings.append(Ranking(spec, fam, None, table))
        if per_observation:
            runs = literature.per_observation(runs, spec.published)
            per_obs[fam] = runs.rename(columns={"score": spec.short})
    return rankings, per_obs


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
    return f"{_jobs(n)} failed (their reasons: {failures_command(board.results, board.sweep)})"


def missing_note(board: Board) -> str | None:
    """One line saying how many of the sweep's problems have no stored job at all (None
    without a sweep or when none is missing): tables ranked over observations show only
    what ran."""
    if board.problem_ids is None or board.sweep is None or board.results is None:
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


def _add_rank_and_medians(
    table: pd.DataFrame, clean: pd.DataFrame, tau: int | None, spec: RankedBy
) -> None:
    """Adds `rank` (by the normalised score, ties share the best rank) and the median
    train / evaluation seconds over the table's problems to a ranking table, in place."""
    if not len(table):
        return
    ranks = table[f"normalized_{spec.short}"].rank(method="min", ascending=spec.lower_is_better)
    table["rank"] = ranks.astype(int)
    _add_medians(table, clean, tau)


def _add_medians(table: pd.DataFrame, clean: pd.DataFrame, tau: int | None) -> None:
    """Adds the median train / evaluation seconds over the problems each config ran."""
    if not len(table):
        return
    rows = clean if tau is None or "tau" not in clean.columns else clean[clean["tau"] == tau]
    for metric in ("train_seconds", "evaluation_seconds"):
        medians = rows.groupby(scoring.ENTRY)[metric].median() if metric in rows else {}
        entries = zip(table["agent"], table["config_key"])
        table[f"median_{metric}"] = [float(medians.get(e, math.nan)) for e in entries]


def shown_columns(spec: RankedBy) -> list[str]:
    """The columns a ranking table of `spec` shows."""
    if spec.rule == OBSERVATIONS:
        paper = [f"paper_{spec.short}", "paper_min", "paper_max", "paper_source"]
        paper = paper if spec.published else []
        return ["task", "budget", "rank", "label", f"mean_{spec.short}", "ci_low", "ci_high",
                "num_observations", *paper]  # fmt: skip
    columns = [c.replace("_kl", f"_{spec.short}") for c in KL_COLUMNS]
    if not spec.accuracy:
        columns = [c for c in columns if c not in ("mean_test_acc", "mean_test_ece")]
    if spec.finite_share:
        columns.insert(columns.index("pct_health"), "num_non_finite")
    return columns


def per_observation_columns(spec: RankedBy) -> list[str]:
    paper = [f"paper_{spec.short}"] if spec.published else []
    return ["label", "task", "budget", "observation", spec.short, *paper]


def title(board: Board, ranking: Ranking) -> str:
    """A ranking table's title: what it scores (marginal at tau = 1), its family when
    several families share a section, its tau and normaliser."""
    spec = ranking.spec
    said = spec.title(ranking.tau)
    if ranking.observations:
        said += " per task x budget (mean over observations, 95% bootstrap CI, none below "
        said += f"{scoring.MIN_CI_OBSERVATIONS} observations"
        said += (
            f"; {spec.published}: its algorithms as rows '<ALGORITHM> ({spec.published} "
            "paper)' and its mean and range beside each of ours, over the same observations)"
            if (spec.published)
            else ")"
        )
    shared = next(rs for s, rs in board.sections() if s.name == spec.name)
    if len({r.family for r in shared}) > 1 or ranking.observations:
        said += f" on {ranking.family}"
    if ranking.observations:
        return said
    text = f"{said}, tau={ranking.tau}" if ranking.tau is not None else said
    norm = ranking.table.attrs.get("normalizer")
    return text + (f" (normalised by {norm}{over(ranking)})" if norm else
                   f" (not normalised{over(ranking)})")  # fmt: skip


def over(ranking: Ranking) -> str:
    """'; over the 14 of 210 problems uniform ran' when the table ranks part of the
    problems (no config ran them all, or the normaliser ran part), else ''."""
    attrs = ranking.table.attrs
    n, ranked = attrs.get("num_problems"), attrs.get("ranked_problems")
    if n is None or ranked is None or ranked >= n or not len(ranking.table):
        return ""
    norm = attrs.get("normalizer")
    whose = f"{norm} ran" if norm else "the config that ran the most ran"
    return f"; over the {ranked} of {n} problems {whose}: no config here ran them all"


def partial_title(board: Board, ranking: Ranking) -> str:
    """The title of a ranking's table of configs that ran part of its problems."""
    norm = ranking.table.attrs.get("normalizer")
    scale = f", normalised by {norm}'s mean on the same problems" if norm else ""
    return (
        f"{title(board, ranking)}: configs that ran part of the problems, each scored over "
        f"those it ran{scale}; not ranked with the table above"
    )


def stderr_cells(table: pd.DataFrame, column: str = "normalized_stderr") -> pd.Series:
    """`column` for display: where it is blank, why ('n/a: 1 seed group')."""
    values = table[column].astype(object)
    if "num_seed_groups" not in table:
        return values
    for i in np.flatnonzero(table[column].isna().to_numpy()):
        groups = table["num_seed_groups"].iloc[i]
        values.iloc[i] = f"n/a: {int(groups)} seed group" + ("" if groups == 1 else "s")
    return values


def whose(labels: pd.Series) -> pd.Series:
    """'yours' for a user's row, 'shipped' for our shipped runs, 'published' for a
    paper's (`<ALGORITHM> (sbibm paper)`)."""

    def kind(label: object) -> str:
        text = str(label)
        if text.endswith(SHIPPED_SUFFIX):
            return "shipped"
        return "published" if text.endswith(literature.PAPER_SUFFIX) else "yours"

    return pd.Series([kind(v) for v in labels], index=getattr(labels, "index", None), dtype=object)


def coverage_notes(board: Board) -> list[str]:
    """One line per family whose tables leave out, or score apart, configs that ran part
    of the ranked problems, naming each and what it ran; and one per table ranked over
    part of its problems (no config ran them all)."""
    lines = []
    for family in board.families():
        rankings = [r for r in board.rankings if r.family == family and not r.observations]
        ran: dict[str, list[str]] = {}
        for r in rankings:
            n = r.table.attrs.get("num_problems", 0)
            at = f" at tau {r.tau}" if r.tau is not None else ""
            for label, k in r.coverage.items():
                ran.setdefault(label, []).append(f"{k} of {n}{at}")
        if ran:
            each = "; ".join(f"{label} ({', '.join(v)})" for label, v in sorted(ran.items()))
            lines.append(
                f"{family}: configs that ran part of the ranked problems are shown apart, "
                f"each scored over those it ran, not ranked with the configs that ran them "
                f"all (a missing problem is not counted 1e6): {each}."
            )
        for r in rankings:
            if over(r):
                lines.append(f"{family}{'' if r.tau is None else f', tau {r.tau}'}: ranked"
                             f"{over(r)[1:]}.")  # fmt: skip
    return lines + scope_notes(board)


def scope_notes(board: Board) -> list[str]:
    """Without --sweep: one line per family whose shipped runs hold more of its problems
    than the ranking has (the README's job ranks 14 of classification_2d's 420), saying
    so and which sweep ranks over them all."""
    if board.sweep is not None or board.results is None:
        return []
    import generative

    lines = []
    for family in board.families():
        spec = next(r.spec for r in board.rankings if r.family == family)
        if spec.shipped is None or spec.rule != TESTBED or family not in board.clean:
            continue
        held = {p for p in shipped_runs.shipped(spec.shipped)["problem_id"]
                if p.split("/", 1)[0] == family}  # fmt: skip
        ranked = set(board.clean[family]["problem_id"])
        if len(held - ranked) == 0:
            continue
        sweeps = [(len(ids), name) for name in generative.family_sweeps().get(family, [])
                  if held <= set(ids := generative.sweep_ids(name))]  # fmt: skip
        where = f" (--sweep {max(sweeps)[1]} ranks over them all)" if sweeps else ""
        lines.append(
            f"{family}: ranked over the {len(ranked)} problems your results hold; our "
            f"shipped runs hold {len(held)}{where}."
        )
    return lines


def tables(board: Board, full: bool = False) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for display; `full` keeps every column and adds the table's
    family and tau (csv/json output)."""
    out = []
    for ranking in board.rankings:
        shown = ranking.table
        if not full:
            keep = [*shown_columns(ranking.spec), "num_seed_groups"]  # (why a stderr is blank)
            shown = shown[[c for c in keep if c in shown.columns]]
            shown = shown.drop(
                columns=[c for c in OPTIONAL if c in shown and shown[c].isna().all()]
            )
            if not ranking.table.attrs.get("normalizer"):
                shown = unnormalised(shown, ranking.spec.short)
        else:
            shown = shown.assign(family=ranking.family, tau=ranking.tau)
            if "label" in shown:
                shown["whose"] = whose(shown["label"]).to_numpy()
        shown.attrs["spec"] = ranking.spec
        if not full:
            shown = _display(shown)
        out.append((title(board, ranking), shown))
        if len(ranking.partial):
            part = ranking.partial
            if full:
                part = part.assign(family=ranking.family, tau=ranking.tau)
                part["whose"] = whose(part["label"]).to_numpy()
            else:
                cols = [c for c in shown_columns(ranking.spec) if c != "rank"]
                cols.insert(cols.index("label") + 1, "coverage")
                part = part[[c for c in cols if c in part.columns] + (
                    ["num_seed_groups"] if "num_seed_groups" in part else [])]  # fmt: skip
                part = part.drop(
                    columns=[c for c in OPTIONAL if c in part and part[c].isna().all()]
                )
                if not ranking.table.attrs.get("normalizer"):
                    part = unnormalised(part, ranking.spec.short)
                part = _display(part)
            part.attrs["spec"] = ranking.spec
            out.append((partial_title(board, ranking), part))
    for fam, runs in board.per_observation.items():
        spec = next(r.spec for r in board.rankings if r.family == fam)
        cols = per_observation_columns(spec)
        shown = runs if full else runs[[c for c in cols if c in runs.columns]]
        shown.attrs["spec"] = spec
        published = f", beside {spec.published}'s" if spec.published else ""
        out.append((f"{spec.name} per observation on {fam}{published}", shown))
    return out


def _display(shown: pd.DataFrame) -> pd.DataFrame:
    """A table as shown: a blank standard error says why; `whose` beside the agent when
    the table mixes the user's rows with our shipped ones."""
    shown = shown.copy()
    if "normalized_stderr" in shown and "num_seed_groups" in shown:
        shown["normalized_stderr"] = stderr_cells(shown)
    shown = shown.drop(columns=["num_seed_groups"], errors="ignore")
    if "label" in shown and len(set(whose(shown["label"]))) > 1:
        shown.insert(list(shown.columns).index("label") + 1, "whose", whose(shown["label"]))
    return shown


def unnormalised(shown: pd.DataFrame, short: str) -> pd.DataFrame:
    """A table with no normalising agent: the score shown once (its "normalised" copy
    dropped), its standard error after it."""
    columns = [c for c in shown.columns if c not in (f"normalized_{short}", "normalized_stderr")]
    if "normalized_stderr" in shown and f"mean_{short}" in columns:
        columns.insert(columns.index(f"mean_{short}") + 1, "normalized_stderr")
    return shown[columns]


TERMINAL_LEGEND = (  # the headers explained under the terminal's tables (the report: all)
    "rank",
    "normalized_*",
    "mean_*",
    "ci_low",
    "num_observations",
    "paper_*",
    "paper_min",
    "median_train_seconds",
    "median_evaluation_seconds",
    "num_non_finite",
    "pct_health",
    "num_problems",
    "coverage",
    "whose",
)


def column_help(column: str, spec: RankedBy | None = None) -> str:
    """What a header means: COLUMN_HELP's text, or one made from the family's score."""
    if column in COLUMN_HELP:
        return COLUMN_HELP[column]
    if spec is not None:
        better = "lower" if spec.lower_is_better else "higher"
        if column == f"normalized_{spec.short}":
            return (
                f"mean {spec.name} divided by the normalising agent's (named above the "
                f"table); {better} is better, 1 = as good as the normalising agent"
            )
        if column in (f"mean_{spec.short}", spec.short):
            return f"mean {spec.name} over the problems; {better} is better"
        if column == f"paper_{spec.short}":
            return f"the published {spec.name} ({spec.published}) at the same cell"
    return f"the {column} column"


def _matches(column: str, pattern: str) -> bool:
    return column.startswith(pattern[:-1]) if pattern.endswith("*") else column == pattern


def legend(board: Board) -> list[str]:
    """What the shown tables' less obvious headers mean, one line each (printed under the
    terminal's tables)."""
    lines = ["Lower is better for every ranked score unless its legend says otherwise; "
             "rank 1 is the best."]  # fmt: skip
    seen: set[str] = set()
    specs = {r.family: r.spec for r in board.rankings}
    for _, table in tables(board):
        spec = table.attrs.get("spec") or next(iter(specs.values()), None)
        for pattern in (*TERMINAL_LEGEND, spec.short if spec else "-"):
            for column in table.columns:
                if column not in seen and _matches(column, pattern):
                    seen.add(column)
                    name = SHORT_NAMES.get(column, column)
                    if spec is not None and column == spec.short:  # a per-observation table
                        name += " (per observation table)"
                    lines.append(f"{name}: {column_help(column, spec)}")
    return lines + shipped_notes(board)


def shipped_notes(board: Board) -> list[str]:
    """What the tables leave out of our shipped runs, a line each: the runs of jobs the
    user's results hold too (e.g. taken from the package; they count once, as the
    user's), and the families whose shipped source holds none of the ranked problems
    (else their tables show no shipped agent without saying why)."""
    lines = []
    if board.shipped_held:
        held = sorted(board.shipped_held.items())
        agents = ", ".join(f"{a} ({_jobs(n)})" for a, n in held)
        lines.append(f"Our shipped runs of agent configs whose every job here your results "
                     f"also hold are shown once, as yours: {agents}.")  # fmt: skip
    by_source: dict[str, list[str]] = {}
    for fam, source in board.shipped_none.items():
        by_source.setdefault(source, []).append(fam)
    for source, families in by_source.items():
        covered = shipped_runs.families(source)
        lines.append(
            f"Our shipped runs ({source}) hold none of the ranked problems of "
            f"{', '.join(families)}, so no shipped agent is shown there; they hold runs of "
            f"{', '.join(covered) or 'no problem yet'}."
        )
    return lines


def _jobs(n: int) -> str:
    return "1 job" if n == 1 else f"{n} jobs"


def runtimes(df: pd.DataFrame) -> pd.DataFrame:
    """Per agent config over its finished jobs: jobs, then the median and the mean train,
    evaluation and wall seconds per job (the first jobs in a worker also compile, which
    the mean includes: the median is the typical job). A training shared by several
    problems counts once in the training seconds (its other jobs record 0 s)."""
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
            if m == "train_seconds" and "shared_training" in g:  # each training once
                values = values[~((g["shared_training"].fillna(1) > 1) & (values == 0))]
            row[f"median_{m}"], row[f"mean_{m}"] = float(values.median()), float(values.mean())
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
