"""The SBI benchmark's ranking rule: per agent config and cell (the family's declared
cell, e.g. task and budget), the mean score over the observations with a bootstrap
interval, the best config per agent over its cells, and the published results the family
names beside ours; its tables' columns, headers and legend lines, its score-against-budget
figure and the runs one by one. A family declares it with
`testbed.ranking.PerCellSettings`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from leaderboard.problem_settings import settings_table
from leaderboard.ranking import literature, scoring_per_cell
from leaderboard.ranking.html import figure, html_table, table_name
from leaderboard.ranking.plots import legend_below, line_styles, mpl, task_panels
from leaderboard.ranking.rules import Ranked, Rule, Scope, register_rule
from leaderboard.ranking.scoring import MIN_CI_OBSERVATIONS
from leaderboard.ranking.standings import Board, Ranking
from testbed.ranking import OBSERVATIONS, PerCellSettings, RankedBy

HELP = {
    "task": "simulator task",
    "budget": "simulation budget: simulations the agent may run",
    "mean_c2st": "mean C2ST over observations: accuracy of a classifier telling the agent's "
    "posterior samples from the reference posterior's; 0.5 = indistinguishable (perfect), "
    "1 = fully apart; lower is better",
    "ci_low": "lower end of the 95% bootstrap interval of the mean C2ST over observations; "
    f"blank below {MIN_CI_OBSERVATIONS} observations (a bootstrap of so few values "
    "gives about their range, not a 95% interval)",
    "ci_high": "upper end of the 95% bootstrap interval of the mean C2ST over observations; "
    f"blank below {MIN_CI_OBSERVATIONS} observations",
    "num_observations": "observations averaged (the interval needs at least "
    f"{MIN_CI_OBSERVATIONS})",
    "observation": "the SBI benchmark's observation number",
    "c2st": "C2ST at this observation (0.5 is perfect; lower is better)",
}
SHORT_NAMES = {  # terminal and report headers
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
}
TERMINAL_LEGEND = ("rank", "mean_*", "ci_low", "num_observations", "paper_*", "coverage", "whose")


def _sweep_cells(ids: Sequence[str], fam: str, spec: RankedBy) -> pd.DataFrame:
    """The task, budget and observation of each of the sweep's problems of `fam`."""
    fam_ids = [i for i in ids if i.split("/", 1)[0] == fam]
    settings = settings_table(fam_ids)
    frame = pd.DataFrame([{"problem_id": i, **settings[i]} for i in fam_ids])
    if not len(frame):
        return frame
    return scoring_per_cell.observation_rows(frame.assign(**{spec.score: math.nan}), {fam: spec})


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
    paper = literature.paper_rows(cells, spec.settings.published, fam)
    if not len(paper):
        return table
    table = pd.concat([table, paper], ignore_index=True)
    order = ["family", "task", "budget", "mean_score"]
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def plot_vs_budget(ranking: Ranking):
    """Mean score with 95% bootstrap CI against simulation budget, one panel per task, the
    published mean and range dashed beside."""
    t, short = ranking.table, ranking.spec.short
    if not len(t):
        return None
    mean, paper_col = f"mean_{short}", f"paper_{short}"
    tasks = sorted(t["task"].unique(), key=str)
    fig, axes = task_panels(len(tasks), 4, (3.6, 3.0))
    styles = line_styles(sorted(set(t["label"]), key=str))
    for ax, task in zip(axes, tasks):
        cell = t[t["task"] == task]
        for label, g in cell.groupby("label", sort=True):
            g = g.sort_values("budget")
            # no whisker where there is no interval (too few observations)
            low, high = g[mean] - g["ci_low"], g["ci_high"] - g[mean]
            err = np.vstack([low.fillna(0), high.fillna(0)])
            style = styles[label]
            color = style["color"]
            ax.errorbar(
                g["budget"], g[mean], yerr=err, capsize=2, label=mpl(label), **style
            )  # fmt: skip
            paper = g.dropna(subset=[paper_col]) if paper_col in g else g.iloc[:0]
            if len(paper):  # the published mean and range (a mean alone: none), dashed
                low, high = paper[paper_col] - paper["paper_min"], paper["paper_max"]
                ax.errorbar(
                    paper["budget"],
                    paper[paper_col],
                    yerr=np.nan_to_num(np.vstack([low, high - paper[paper_col]]).astype(float)),
                    ls="--",
                    marker="x",
                    ms=3,
                    capsize=2,
                    alpha=0.6,
                    color=color,
                    label=mpl(f"{label} (paper)"),
                )
        ax.set_xscale("log")
        ax.set_title(mpl(task), fontsize=9)
        ax.set_xlabel("simulation budget")
        ax.set_ylabel(mpl(ranking.spec.name))
    legend_below(fig, axes)
    return fig


class PerCellRule(Rule):
    """The SBI benchmark's rule (see the module doc and `.scoring_per_cell`)."""

    name = OBSERVATIONS
    metric = "c2st"
    settings_type = PerCellSettings
    over_observations = True
    column_help = HELP
    short_names = SHORT_NAMES
    terminal_legend = TERMINAL_LEGEND
    figures = ("plot_vs_budget",)
    plot_vs_budget = staticmethod(plot_vs_budget)

    def rank(self, df: pd.DataFrame, specs: Mapping[str, RankedBy], scope: Scope) -> Ranked:
        """One ranking per family, with its published results beside ours (`literature`;
        with `scope.published`, the published algorithms as labelled rows too, also in
        the cells of the sweep none of ours ran), and with `scope.per_observation` its
        runs one by one."""
        rows = scoring_per_cell.observation_rows(df, specs)
        out = Ranked()
        for fam, g in rows.groupby("family", sort=False) if len(rows) else ():
            spec = specs[fam]
            table = scoring_per_cell.observation_table(
                g, scope.labels, best_only=scope.best_only, lower_is_better=spec.lower_is_better
            )
            runs = scoring_per_cell.per_observation(
                g, scope.labels, table if scope.best_only else None
            )
            table = literature.beside(table, runs, spec.settings.published)
            if scope.published:
                table = _with_paper_rows(table, g, fam, spec, scope.ids)
            table = table.rename(columns={"mean_score": f"mean_{spec.short}"})
            by_cell = table.groupby(["task", "budget"], sort=False)[f"mean_{spec.short}"]
            ascending = spec.lower_is_better
            table["rank"] = by_cell.rank(method="min", ascending=ascending, na_option="bottom")
            table["rank"] = table["rank"].astype(int)
            table.attrs.update(spec=spec, normalizer=None)
            out.rankings.append(Ranking(spec, fam, None, table))
            if scope.per_observation:
                runs = literature.per_observation(runs, spec.settings.published)
                out.per_observation[fam] = runs.rename(columns={"score": spec.short})
        return out

    def columns(self, spec: RankedBy) -> list[str]:
        paper = [f"paper_{spec.short}", "paper_min", "paper_max", "paper_source"]
        paper = paper if spec.settings.published else []
        return ["task", "budget", "rank", "label", f"mean_{spec.short}", "ci_low", "ci_high",
                "num_observations", *paper]  # fmt: skip

    def per_observation_columns(self, spec: RankedBy) -> list[str]:
        paper = [f"paper_{spec.short}"] if spec.settings.published else []
        return ["label", "task", "budget", "observation", spec.short, *paper]

    def per_observation_title(self, spec: RankedBy, family: str) -> str:
        published = spec.settings.published
        beside = f", beside {published}'s" if published else ""
        return f"{super().per_observation_title(spec, family)}{beside}"

    def help(self, column: str, spec: RankedBy) -> str | None:
        """The published results' columns as the family says them, then the rule's."""
        published = spec.settings.published
        paper = dict(getattr(published, "column_help", ()))
        if column in paper:
            return paper[column]
        own = super().help(column, spec)
        if own is None and column == f"paper_{spec.short}":
            return f"the published {spec.name} ({published}) at the same cell"
        return own

    def legend_name(self, column: str, spec: RankedBy) -> str | None:
        """The score of a run one by one is said to be the per observation table's."""
        return f"{self.header(column) or column} (per observation table)" if (
            column == spec.short) else None  # fmt: skip

    def title(self, ranking: Ranking, shared: bool) -> str:
        spec, published = ranking.spec, ranking.spec.settings.published
        said = spec.name
        said += " per task x budget (mean over observations, 95% bootstrap CI, none below "
        said += f"{MIN_CI_OBSERVATIONS} observations"
        said += (
            f"; {published}: its algorithms as rows '<ALGORITHM> ({published} "
            "paper)' and its mean and range beside each of ours, over the same observations)"
            if published
            else ")"
        )
        return f"{said} on {ranking.family}"

    def table_title(self, ranking: Ranking, title: str) -> str:
        return title + " (mean over observations, ranked within each task and budget)"

    def table_extras(self, board: Board, ranking: Ranking) -> list[str]:
        """The score against budget per task, and the runs one by one when asked for."""
        parts = []
        fig = plot_vs_budget(ranking)
        spec, published = ranking.spec, ranking.spec.settings.published
        name = table_name(board.rankings, ranking)
        if fig is not None:
            published = (
                f"; dotted, crosses: {published}'s algorithms over the same observations; "
                f"dashed beside an agent of ours: {published}'s mean and range for it"
                if published
                else ""
            )
            caption = (
                f"Mean {spec.name} over observations with 95% bootstrap CI (none below "
                f"{MIN_CI_OBSERVATIONS} observations){published}."
            )
            parts.append(figure(f"{name}-vs-budget", fig, caption))
        runs = board.per_observation.get(ranking.family)
        if runs is not None:
            parts.append("<h3>Per observation</h3>")
            columns = self.per_observation_columns(spec)
            parts.append(html_table(runs, f"{name}-per-observation", columns, spec=spec))
        return parts


RULE = register_rule(PerCellRule())
