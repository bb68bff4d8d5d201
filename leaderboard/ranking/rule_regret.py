"""The bandit's ranking rule: the SBI benchmark's per-cell rule over bandit runs (cell = the
reward model's environment and the run's steps, replicate = the bandit seed), ranked on
average regret (lower first), with the regret curves of each agent's best config."""

from __future__ import annotations

import numpy as np
import pandas as pd

from leaderboard.ranking.html import figure, table_name
from leaderboard.ranking.plots import legend_below, line_styles, mpl, task_panels
from leaderboard.ranking.rule_per_cell import HELP, TERMINAL_LEGEND, PerCellRule
from leaderboard.ranking.rules import register_rule
from leaderboard.ranking.scoring import MIN_CI_OBSERVATIONS, family_of
from leaderboard.ranking.standings import Board, Ranking
from testbed.ranking import REGRET, RankedBy

CURVE_PREFIX = "regret_w"  # the family's regret-curve windows: regret_w00 ... regret_w49

REGRET_HELP = {
    **HELP,
    "task": "bandit environment: input dimension d and temperature T of the random-MLP "
    "reward model (the generator of the classification problems)",
    "budget": "steps of the run (actions taken)",
    "mean_regret": "average regret per step over bandit seeds (best reward probability - "
    "chosen one; 0 = the best action every step); lower is better",
    "ci_low": "lower end of the 95% bootstrap interval of the mean over seeds; blank below "
    f"{MIN_CI_OBSERVATIONS} seeds",
    "ci_high": "upper end of the 95% bootstrap interval of the mean over seeds; blank below "
    f"{MIN_CI_OBSERVATIONS} seeds",
    "num_observations": "bandit seeds averaged (the interval needs at least "
    f"{MIN_CI_OBSERVATIONS})",
    "observation": "the bandit seed",
    "regret": "average regret per step of this seed's run",
}


def regret_curves(df: pd.DataFrame, ranking: Ranking) -> pd.DataFrame:
    """Running average regret per (label, environment, window end), the mean over seeds of
    the table's agent configs: columns label, task, step, running_regret."""
    t = ranking.table
    windows = sorted(c for c in df.columns if str(c).startswith(CURVE_PREFIX))
    if not len(t) or not windows or "config_key" not in t:
        return pd.DataFrame(columns=["label", "task", "step", "running_regret"])
    spec = ranking.spec
    rows = df[(family_of(df["problem_id"]) == ranking.family) & (df["status"] == "ok")]
    rows = rows.merge(t[["config_key", "label"]].drop_duplicates(), on="config_key")
    out = []
    cell = spec.settings.cell
    for (label, task, steps), g in rows.groupby(["label", cell[0], cell[1]]):
        curve = g[windows].to_numpy(float)
        curve = curve[np.all(np.isfinite(curve), axis=1)]
        if not len(curve):
            continue
        sizes = np.array([len(w) for w in np.array_split(np.arange(int(steps)), len(windows))])
        ends = np.cumsum(sizes)
        running = np.cumsum(curve.mean(0) * sizes) / ends
        out += [
            dict(label=label, task=task, step=e, running_regret=r) for e, r in zip(ends, running)
        ]
    return pd.DataFrame(out)


def plot_regret_curves(df: pd.DataFrame, ranking: Ranking):
    """Running average regret against steps, one panel per environment (log-log)."""
    curves = regret_curves(df, ranking)
    if not len(curves):
        return None
    tasks = sorted(curves["task"].unique(), key=str)
    fig, axes = task_panels(len(tasks), 3, (4.0, 3.2))
    styles = line_styles(sorted(set(curves["label"]), key=str))
    for ax, task in zip(axes, tasks):
        for label, g in curves[curves["task"] == task].groupby("label", sort=True):
            style = {**styles[label], "marker": None}
            ax.plot(g["step"], g["running_regret"], label=mpl(label), **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(mpl(task), fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("average regret so far")
    legend_below(fig, axes)
    return fig


class RegretRule(PerCellRule):
    """Per-cell means over bandit seeds (see the module doc)."""

    name = REGRET
    metric = "regret"
    column_help = REGRET_HELP
    terminal_legend = (*TERMINAL_LEGEND, "task", "budget", "mean_regret")
    figures = (*PerCellRule.figures, "regret_curves", "plot_regret_curves")
    regret_curves = staticmethod(regret_curves)
    plot_regret_curves = staticmethod(plot_regret_curves)

    def columns(self, spec: RankedBy) -> list[str]:
        return ["task", "budget", "rank", "label", f"mean_{spec.short}", "ci_low", "ci_high",
                "num_observations"]  # fmt: skip

    def title(self, ranking: Ranking, shared: bool) -> str:
        return (
            f"{ranking.spec.name} per environment x steps (mean over bandit seeds, 95% "
            f"bootstrap CI, none below {MIN_CI_OBSERVATIONS} seeds) on {ranking.family}"
        )

    def table_title(self, ranking: Ranking, title: str) -> str:
        return title + " (ranked within each environment; lower is better)"

    def table_extras(self, board: Board, ranking: Ranking) -> list[str]:
        """The regret curves of the table's agent configs, one panel per environment."""
        parts = []
        fig = plot_regret_curves(board.df, ranking)
        if fig is not None:
            caption = (
                "Running average regret against steps, mean over bandit seeds, of each agent "
                "config in the table (from the 50-window regret curve each run stores)."
            )
            parts.append(figure(f"{table_name(board.rankings, ranking)}-curves", fig, caption))
        runs = board.per_observation.get(ranking.family)
        if runs is not None:
            from leaderboard.ranking.html import html_table

            parts.append("<h3>Per seed</h3>")
            columns = self.per_observation_columns(ranking.spec)
            name = f"{table_name(board.rankings, ranking)}-per-seed"
            parts.append(html_table(runs, name, columns, spec=ranking.spec))
        return parts


RULE = register_rule(RegretRule())
