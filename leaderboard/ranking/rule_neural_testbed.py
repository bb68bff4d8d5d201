"""The Neural Testbed's ranking rule: one table per family and tau, each agent config's
mean score over the problems (a failed or non-finite problem counts FILL), normalised by
the family's normalising agent, with a standard error over problem-seed groups; its
tables' columns, headers and legend lines, titles, notes, and its bar and training-size
figures. A family declares it with `testbed.ranking.NeuralTestbedSettings`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.ranking import scoring, scoring_neural_testbed
from leaderboard.ranking.html import figure
from leaderboard.ranking.plots import SHIPPED_HATCH, colour_of, legend_below, line_styles, mpl
from leaderboard.ranking.rules import Ranked, Rule, Scope, drop_blank, register_rule
from leaderboard.ranking.standings import Board, Ranking, whose
from testbed.errors import InputError
from testbed.ranking import FILL, NEURAL_TESTBED, NeuralTestbedSettings, RankedBy

COLUMNS = [  # the columns a ranking table shows (csv/json output: every column)
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
NOTE = (
    "Neural Testbed rules, per agent config and problem: a negative score clipped to 0 "
    "(a KL's estimation noise); a failed job, a non-finite score or a test batch with a "
    "label the agent gives probability 0 counts 1e6; an agent config that ran part of the "
    "problems is scored apart, over those it ran (never with 1e6 for the others); the "
    "mean per tau is divided by the normalising agent's (1 = as good as it; the run of it "
    "that covers the problems: ours, shipped, when yours is partial); standard error "
    "over problem-seed groups "
    "(seed % 10); the best config per agent (best mean over all problems) is shown."
)
HEALTH_HELP = (
    "share of the agent config's jobs (the family's problems it ran x its seeds) that gave a "
    "usable score; a missing seed or a failed job, a non-finite score, or a score below -1e-4 "
    "(negative beyond rounding) counts against it (the Neural Testbed's rule; 100% = all "
    "usable); a problem it never ran is coverage, shown apart, not health"
)
HELP = {
    "normalized_kl": "mean KL divided by the normalising agent's (named above the table); "
    "lower is better: 0 = the true predictive, 1 = as good as the normalising agent",
    "mean_kl": "mean KL from the true predictive to the agent's over the problems (negative "
    "clipped to 0, a failed job or non-finite score counts 1e6); lower is better",
    "normalized_nll": "mean joint NLL divided by the normalising agent's (named above the "
    "table); lower is better, 1 = as good as the normalising agent",
    "mean_nll": "mean joint negative log-likelihood (nats) of tau test labels over the "
    "problems (a uniform predictive gives tau * log C); lower is better",
    "normalized_stderr": "standard error of the score (normalised, where the title says so) "
    "over problem-seed groups (seed % 10); 'n/a: 1 seed group' when the problems fall in "
    "fewer than two groups (a spread of one value is unknown, not 0)",
    "mean_test_acc": "mean test accuracy of the agent's mean predictive (higher is better; "
    "a tie goes to the first class, so a uniform predictive scores the first class's share)",
    "mean_test_ece": "mean expected calibration error of the agent's mean predictive, 10 "
    "bins (lower is better)",
    "pct_health": HEALTH_HELP,
    "num_problems": "problems scored in this row (a failed job counts 1e6; a config that ran "
    "part of the table's problems is shown apart, scored over those it ran)",
    "num_non_finite": "problems scored as infinitely wrong: a test batch held a label the "
    "agent gives probability 0 (an infinite KL or NLL), so the problem counts 1e6, as the "
    "reference ranks a non-finite score (the stored kl_estimate clips such batches to the "
    "largest finite one, for parity with the reference's per-problem values)",
}
SHORT_NAMES = {  # terminal and report headers
    "normalized_kl": "KL/norm",
    "normalized_stderr": "stderr",
    "mean_kl": "KL",
    "normalized_nll": "NLL/norm",
    "mean_nll": "NLL",
    "mean_test_acc": "test acc",
    "mean_test_ece": "test ECE",
    "pct_health": "health",
    "num_problems": "n",
    "num_non_finite": "non-finite",
}
TERMINAL_LEGEND = ("rank", "normalized_*", "mean_*", "median_train_seconds",
                   "median_evaluation_seconds", "num_non_finite", "pct_health", "num_problems",
                   "coverage", "whose")  # fmt: skip


class TauRanking(Ranking):
    """A table of the Neural Testbed's rule: its part is a tau."""

    @property
    def tau(self) -> Any:
        """The table's tau (None: the problems have none)."""
        return self.part


def add_rank_and_medians(
    table: pd.DataFrame, clean: pd.DataFrame, tau: int | None, spec: RankedBy
) -> None:
    """Adds `rank` (by the normalised score, ties share the best rank) and the median
    train / evaluation seconds over the table's problems to a ranking table, in place."""
    if not len(table):
        return
    ranks = table[f"normalized_{spec.short}"].rank(method="min", ascending=spec.lower_is_better)
    table["rank"] = ranks.astype(int)
    add_medians(table, clean, tau)


def add_medians(table: pd.DataFrame, clean: pd.DataFrame, tau: int | None) -> None:
    """Adds the median train / evaluation seconds over the problems each config ran. A
    training shared by problems (a tau pair) counts once, at any tau: its other jobs record
    0 s, and at tau 10 all of them would."""
    if not len(table):
        return
    rows = clean if tau is None or "tau" not in clean.columns else clean[clean["tau"] == tau]
    trainings = clean
    if "train_seconds" in clean and "shared_training" in clean:
        shared = (clean["shared_training"].fillna(1) > 1) & (clean["train_seconds"] == 0)
        trainings = clean[~shared]
    for metric in ("train_seconds", "evaluation_seconds"):
        source = trainings if metric == "train_seconds" else rows
        medians = source.groupby(scoring.ENTRY)[metric].median() if metric in source else {}
        entries = zip(table["agent"], table["config_key"])
        table[f"median_{metric}"] = [float(medians.get(e, math.nan)) for e in entries]


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


def stderr_cells(table: pd.DataFrame, column: str = "normalized_stderr") -> pd.Series:
    """`column` for display: where it is blank, why ('n/a: 1 seed group')."""
    values = table[column].astype(object)
    if "num_seed_groups" not in table:
        return values
    for i in np.flatnonzero(table[column].isna().to_numpy()):
        groups = table["num_seed_groups"].iloc[i]
        values.iloc[i] = f"n/a: {int(groups)} seed group" + ("" if groups == 1 else "s")
    return values


def unnormalised(columns: list[str], short: str) -> list[str]:
    """The columns of a table with no normalising agent: the score shown once (its
    "normalised" copy left out), its standard error after it."""
    out = [c for c in columns if c not in (f"normalized_{short}", "normalized_stderr")]
    if "normalized_stderr" in columns and f"mean_{short}" in out:
        out.insert(out.index(f"mean_{short}") + 1, "normalized_stderr")
    return out


def tau_phrase(taus: list[Any]) -> str:
    """'marginal predictions (tau = 1)', 'joint predictions (tau = 10)' or both."""
    taus = [t for t in taus if t is not None]
    if not taus:
        return ""
    marginal = [t for t in taus if t == 1]
    joint = [str(t) for t in taus if t != 1]
    if marginal and joint:
        return f"marginal (tau = 1) and joint (tau = {', '.join(joint)}) predictions"
    if marginal:
        return "marginal predictions (tau = 1)"
    return f"joint predictions (tau = {', '.join(joint)})"


def plot_by_agent(rankings: list[Ranking]):
    """Normalised score per agent with seed-group stderr (no whisker where there is none:
    one seed group), one panel per family and tau (marginal vs joint); families are never
    pooled; each agent in its colour (as in every figure), our shipped runs' bars hatched."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = max((len(r.table) for r in rankings), default=1)
    fig, axes = plt.subplots(1, len(rankings), figsize=(4.5 * len(rankings), 0.9 + 0.45 * rows))
    axes = np.atleast_1d(axes)
    for ax, r in zip(axes, rankings):
        t = r.table.iloc[::-1]
        y = np.arange(len(t))
        short = r.spec.short
        colors = [colour_of(label, i, len(t)) for i, label in enumerate(t["label"])]
        bars = ax.barh(y, t[f"normalized_{short}"], xerr=t["normalized_stderr"].fillna(0),
                       color=colors)  # fmt: skip
        for bar, kind in zip(bars, whose(t["label"])):
            if kind != "yours":
                bar.set_hatch(SHIPPED_HATCH)
                bar.set_edgecolor("white")
        ax.set_yticks(y, [mpl(v) for v in t["label"]])
        score = r.spec.title(r.part)  # marginal at tau = 1, else the family's score
        said = score + ("" if r.part is None else f" (tau={r.part})")
        ax.set_title(mpl(f"{r.family}: {said}"), fontsize=10)
        norm = r.table.attrs.get("normalizer")
        ax.set_xlabel(mpl(f"{score} / {norm}'s" if norm else f"mean {score}"))
        if norm:
            ax.axvline(1.0, color="#999", lw=0.8, ls="--")
    kinds = {w for r in rankings for w in whose(r.table["label"])}
    if len(kinds) > 1:  # the user's runs beside ours: say which bars are whose
        handles = [Patch(facecolor="#999", label="yours"),
                   Patch(facecolor="#999", hatch=SHIPPED_HATCH, edgecolor="white",
                         label="ours, shipped")]  # fmt: skip
        fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    fig.tight_layout(rect=(0, 0.04 if len(kinds) > 1 else 0, 1, 1))
    return fig


def best_rows(board: Board, rankings: list[Ranking]) -> pd.DataFrame | None:
    """The cleaned rows of each family's best configs (problems at the fill value left
    out), with tau and temperature filled where a family has none."""
    parts = []
    for family in dict.fromkeys(r.family for r in rankings):
        clean, spec = board.clean.get(family), rankings[0].spec
        if clean is None or "num_train" not in clean.columns:
            continue
        best = scoring_neural_testbed.best_configs(clean, spec.lower_is_better)
        df = clean[[best.get(a) == k for a, k in zip(clean["agent"], clean["config_key"])]]
        df = df[df["score"].abs() < FILL].assign(family=family)
        # the configs each table ranks: one that ran part of the problems is in its table
        # apart, not drawn as a mean over fewer problems beside the others
        ranked = {(r.part, k) for r in rankings if r.family == family for k in r.table.get(
            "config_key", [])}  # fmt: skip
        if "tau" in df.columns and df["tau"].notna().any():
            df = df[[(int(t), k) in ranked for t, k in zip(df["tau"], df["config_key"])]]
        else:
            df = df[[(None, k) in ranked for k in df["config_key"]]]
        if "tau" not in df.columns or df["tau"].isna().all():
            df = df.assign(tau=1)
        if "temperature" not in df.columns or df["temperature"].isna().all():
            df = df.assign(temperature="n/a")
        parts.append(df.dropna(subset=["tau", "temperature", "num_train"]))
    df = pd.concat(parts, ignore_index=True) if parts else None
    return df if df is not None and len(df) else None


def plot_vs_num_train(board: Board, rankings: list[Ranking]):
    """Mean score (best config per agent, chosen within each family) against training
    size, one panel per family x tau x temperature (families never pooled)."""
    import matplotlib.pyplot as plt

    df = best_rows(board, rankings)
    if df is None:
        return None
    rows = df[["family", "tau"]].drop_duplicates().sort_values(["family", "tau"])
    temps = sorted(df["temperature"].unique(), key=str)
    styles = line_styles(sorted(set(df["label"])))
    fig, axes = plt.subplots(
        len(rows), len(temps), figsize=(3.6 * len(temps), 2.9 * len(rows)), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    for i, (family, tau) in enumerate(rows.itertuples(index=False)):
        for j, temp in enumerate(temps):
            ax = axes[i][j]
            cell = df[(df["family"] == family) & (df["tau"] == tau) & (df["temperature"] == temp)]
            if not len(cell):  # this family has no problem at this temperature
                ax.set_visible(False)
                continue
            for label, g in cell.groupby("label", sort=True):
                m = g.groupby("num_train")["score"].mean()
                ax.plot(m.index, m.to_numpy(), label=mpl(label), **styles[label])
            ax.set_xscale("symlog", linthresh=1)
            ax.set_title(mpl(f"{family}: tau={tau}, temperature={temp}"), fontsize=9)
            ax.set_xlabel("num_train")
            ax.set_ylabel(mpl(f"mean {rankings[0].spec.title(tau)}"))
    legend_below(fig, [ax for ax in axes.flat if ax.get_visible()])
    return fig


class NeuralTestbedRule(Rule):
    """The Neural Testbed's rule (see the module doc and `.scoring_neural_testbed`)."""

    name = NEURAL_TESTBED
    metric = "kl"
    settings_type = NeuralTestbedSettings
    part_name = "tau"
    normalised = True
    note = NOTE
    column_help = HELP
    short_names = SHORT_NAMES
    terminal_legend = TERMINAL_LEGEND
    optional = ("mean_test_acc", "mean_test_ece")  # not shown where no problem reports them
    figures = ("best_rows", "plot_by_agent", "plot_vs_num_train")
    shared_training = "tau pairs"
    evaluation = "the KL estimate and accuracy on the test batches"
    best_rows = staticmethod(best_rows)
    plot_by_agent = staticmethod(plot_by_agent)
    plot_vs_num_train = staticmethod(plot_vs_num_train)

    def rank(self, df: pd.DataFrame, specs: Mapping[str, RankedBy], scope: Scope) -> Ranked:
        """One ranking per family and tau (a family with no score in any row has none);
        with a tau asked for (`scope.only`), only that tau's tables."""
        family = scoring.family_of(df["problem_id"])
        out, tau = Ranked(), scope.part_of(self)
        for fam, spec in specs.items():
            rows = df[family == fam]
            if spec.score not in rows or not rows[spec.score].notna().any():
                continue
            ids = None if scope.ids is None else [i for i in scope.ids if i.split("/", 1)[0] == fam]
            # every problem of the family counts, also one where every job failed (leaving
            # it out would make an agent that failed there look fully healthy)
            cleaned = scoring_neural_testbed.clean_scores(rows, ids, spec)
            tables = scoring_neural_testbed.score_rankings(
                cleaned, spec=spec, normalize=scope.normalize, best_only=scope.best_only
            )
            out.parts |= {t for t in tables if t is not None}
            picked = {t: table for t, table in tables.items() if tau in (None, t)}
            if picked:
                out.clean[fam] = cleaned
            for t, table in picked.items():
                partial = table.attrs.pop("partial", pd.DataFrame())
                add_rank_and_medians(table, cleaned, t, spec)
                add_medians(partial, cleaned, t)
                out.rankings.append(TauRanking(spec, fam, t, table, partial))
        return out

    def check_part(self, part: Any) -> None:
        if isinstance(part, bool) or not isinstance(part, int) or part < 1:
            raise InputError(f"tau: got {part!r}; allowed: an integer >= 1, or None (every tau)")

    def columns(self, spec: RankedBy) -> list[str]:
        columns = [c.replace("_kl", f"_{spec.short}") for c in COLUMNS]
        if not spec.settings.accuracy:
            columns = [c for c in columns if c not in self.optional]
        if spec.settings.finite_share:
            columns.insert(columns.index("pct_health"), "num_non_finite")
        return columns

    def title(self, ranking: Ranking, shared: bool) -> str:
        said = super().title(ranking, shared)
        text = f"{said}, tau={ranking.part}" if ranking.part is not None else said
        norm = ranking.table.attrs.get("normalizer")
        return text + (f" (normalised by {norm}{over(ranking)})" if norm else
                       f" (not normalised{over(ranking)})")  # fmt: skip

    def table_title(self, ranking: Ranking, title: str) -> str:
        tau = ranking.part
        if tau == 1:
            title += ", tau = 1: marginal predictions (one test input at a time)"
        elif tau is not None:
            title += f", tau = {tau}: joint predictions over {tau} test inputs together"
        norm = ranking.table.attrs.get("normalizer")
        return title + (f"; normalised by {norm}" if norm else "; not normalised") + over(ranking)

    def section_name(self, spec: RankedBy, rankings: list[Ranking]) -> tuple[str, str]:
        """The marginal score's name when every table is at tau 1, and the taus."""
        taus = list(dict.fromkeys(r.part for r in rankings))
        return spec.title(1) if taus == [1] else spec.name, tau_phrase(taus)

    def section_notes(self, spec: RankedBy, rankings: list[Ranking]) -> list[str]:
        bare = [r for r in rankings if r.table.attrs.get("normalizer") is None]
        norm = spec.settings.normalizer
        if not (norm and bare):
            return []
        return [f'Tables marked "not normalised" show the mean score itself: their results '
                f"hold no run of {norm}, the normalising agent (--normalize AGENT normalises "
                "by another)."]  # fmt: skip

    def coverage_notes(self, board: Board, rankings: list[Ranking]) -> list[str]:
        """The configs that ran part of the ranked problems, by table; and each table
        ranked over part of its problems (no config ran them all)."""
        lines, family, ran = [], rankings[0].family, {}
        for r in rankings:
            n = r.table.attrs.get("num_problems", 0)
            at = f" at tau {r.part}" if r.part is not None else ""
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
                lines.append(f"{family}{'' if r.part is None else f', tau {r.part}'}: ranked"
                             f"{over(r)[1:]}.")  # fmt: skip
        return lines

    def help(self, column: str, spec: RankedBy) -> str | None:
        own = super().help(column, spec)
        if own is None and column == f"normalized_{spec.short}":
            better = "lower" if spec.lower_is_better else "higher"
            return (
                f"mean {spec.name} divided by the normalising agent's (named above the "
                f"table); {better} is better, 1 = as good as the normalising agent"
            )
        return own

    def normalised_help(self, text: str, column: str, normalizer: str | None) -> str:
        """The normalising agent named in a normalised score's help ('not normalised
        here' when there is none)."""
        if not column.startswith("normalized_") or column == "normalized_stderr":
            return text
        if not normalizer:
            return text + " (not normalised here: the mean itself)"
        text = text.replace("the normalising agent's (named above the table)", f"{normalizer}'s")
        return text.replace("the normalising agent", normalizer)

    def shown(self, table: pd.DataFrame, ranking: Ranking, apart: bool = False) -> pd.DataFrame:
        """The table's columns (a blank standard error says why; without a normalising
        agent, the mean in place of the normalised score)."""
        columns = [*self.shown_columns(ranking.spec, apart), "num_seed_groups"]
        shown = drop_blank(table[[c for c in columns if c in table.columns]], self.optional)
        if not ranking.table.attrs.get("normalizer"):
            shown = shown[unnormalised(list(shown.columns), ranking.spec.short)]
        return self.cells(shown).drop(columns=["num_seed_groups"], errors="ignore")

    def report_columns(self, ranking: Ranking) -> list[str]:
        columns = super().report_columns(ranking)
        if ranking.table.attrs.get("normalizer") is None:
            return unnormalised(columns, ranking.spec.short)
        return columns

    def cells(self, table: pd.DataFrame) -> pd.DataFrame:
        """A blank standard error says why ('n/a: 1 seed group')."""
        table = table.copy()
        if "normalized_stderr" in table and "num_seed_groups" in table:
            table["normalized_stderr"] = stderr_cells(table)
        return table

    def partial_note(self, ranking: Ranking) -> str:
        said = super().partial_note(ranking).removesuffix(".")
        return f"{said} (a problem not run is not counted 1e6)."

    def section_plots(self, board: Board, spec: RankedBy, rankings: list[Ranking],
                      norm: str | None, phrase: str, name: str) -> list[str]:  # fmt: skip
        scored = f"{name} / {norm}'s" if norm else f"mean {name}"
        better = "lower" if spec.lower_is_better else "higher"
        parts = [
            figure(
                f"{spec.short}-by-agent",
                plot_by_agent(rankings),
                f"{scored} per agent (bar: mean, whisker: standard error, none where the "
                f"problems fall in one seed group; {better} is better; your runs' bars orange, "
                f"our shipped runs' blue; agents that ran part of the problems are in the "
                f"tables only), one panel per problem family and tau: {phrase or 'all problems'}.",
            )
        ]
        fig = plot_vs_num_train(board, rankings)
        if fig is not None:
            parts.append(
                figure(
                    f"{spec.short}-vs-num-train",
                    fig,
                    f"Mean {name} ({better} is better) against training size, one panel per "
                    "problem family, tau and temperature (best config per agent; problems with "
                    "a failed job or non-finite score left out; agents that ran part of the "
                    "problems are in their tables only); your runs solid, our shipped runs "
                    "dashed.",
                )
            )
        return parts


RULE = register_rule(NeuralTestbedRule())
