"""One self-contained HTML report: ranking tables and plots (PNG embedded as base64).

No scripts, no external files: it opens anywhere. Every piece of text from the results
(agent names, configs, errors) is HTML-escaped; plot labels escape matplotlib's `$`.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from leaderboard import scoring
from leaderboard.board import (
    COMPILE_NOTE,
    SHORT_NAMES,
    Board,
    Ranking,
    column_help,
    coverage_notes,
    missing_note,
    over,
    per_observation_columns,
    runtimes,
    shipped_notes,
    shown_columns,
    stderr_cells,
    whose,
)
from leaderboard.outputs import check_output_path, write_atomically
from leaderboard.tables import fmt_cell
from testbed.ranking import FILL, TESTBED, RankedBy

# Narrow screens: the page never scrolls sideways; a wide table scrolls inside its box.
_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em;max-width:1100px;color:#222;
line-height:1.4;overflow-wrap:anywhere}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1.05em;margin:1em 0 .3em}
.scroll{overflow-x:auto;max-width:100%;margin:.3em 0 1em}
table{border-collapse:collapse;font-size:.9em;overflow-wrap:normal}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3;white-space:nowrap}th[title]{cursor:help}th.text{text-align:left}
td.text{text-align:left;font-family:monospace;min-width:8em;max-width:36em;
overflow-wrap:anywhere}
td.rank{font-weight:600}
tr.yours td{background:#fff4cc;font-weight:600}
td.label{white-space:nowrap}
details pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em;margin:.3em 0}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}img{max-width:100%;height:auto}
.note{color:#555;font-size:.9em}
dl.legend{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.1em .8em;
font-size:.85em;color:#444;margin:.3em 0 1.2em}
dl.legend dt{font-weight:600;text-align:right}dl.legend dd{margin:0}
"""

READING = (
    "Each section ranks the agents on the score its problem family is ranked on, with a "
    "note on what that score means. Rank 1 is the best; lower is better unless a legend "
    "says otherwise; hover over a column header for its meaning, and each ranking's legend "
    "is under it. A job's wall seconds exceed its train + evaluation seconds: the job also "
    "builds its problem (the environment, its training data and test batches) and, in a "
    "worker's first jobs, compiles the JAX programs later jobs reuse."
)
RULE_NOTES = {
    TESTBED: (
        "Neural Testbed rules, per agent config and problem: a negative score clipped to 0 "
        "(a KL's estimation noise); a failed job, a non-finite score or a test batch with a "
        "label the agent gives probability 0 counts 1e6; an agent config that ran part of the "
        "problems is scored apart, over those it ran (never with 1e6 for the others); the "
        "mean per tau is divided by the normalising agent's (1 = as good as it; the run of it "
        "that covers the problems: ours, shipped, when yours is partial); standard error "
        "over problem-seed groups "
        "(seed % 10); the best config per agent (best mean over all problems) is shown."
    ),
}
FAMILY_NOTE = (
    "Problems of different families are ranked apart (each family has its own tables, "
    "health, best config per agent and normaliser), as the Neural Testbed ranks each of "
    "its sweeps on its own."
)
RUNTIME_NOTE = (
    "Seconds per finished job, medians beside means: " + COMPILE_NOTE + "; a training "
    "shared by several problems (tau pairs) counts once in the training seconds."
)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _mpl(text: Any) -> str:
    """Text safe for matplotlib (a `$` would start mathtext)."""
    return str(text).replace("$", r"\$")


def _help(column: str, normalizer: str | None = None, spec: RankedBy | None = None) -> str:
    """What `column` means (a header's tooltip and legend line)."""
    text = column_help(column, spec)
    if column.startswith("normalized_") and column != "normalized_stderr":
        if normalizer:
            named_above = "the normalising agent's (named above the table)"
            text = text.replace(named_above, f"{normalizer}'s")
            text = text.replace("the normalising agent", normalizer)
        else:
            text += " (not normalised here: the mean itself)"
    return text


def _header(column: str) -> str:
    return SHORT_NAMES.get(column, str(column))


def _tau_phrase(taus: list[Any]) -> str:
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


def _cell(column: str, value: Any, cells: dict[str, Any] | None) -> str:
    if cells and column in cells:
        return cells[column](value)
    if column == "rank":
        return f'<td class="rank">{_esc(fmt_cell(column, value))}</td>'
    kind = ' class="text"' if isinstance(value, str) else ""
    return f"<td{kind}>{_esc(fmt_cell(column, value))}</td>"


_TEXT = ' class="text"'


def html_table(
    df: pd.DataFrame,
    name: str,
    columns: list[str] | None = None,
    *,
    normalizer: str | None = None,
    cells: dict[str, Any] | None = None,
    spec: RankedBy | None = None,
    row_classes: list[str] | None = None,
) -> str:
    """An escaped HTML table in a box that scrolls sideways when the table is wider than
    the page; `name` goes into data-table for tests and styling; every header carries
    its meaning as a tooltip; `cells` maps a column to its own cell renderer;
    `row_classes` gives each row a class (e.g. `yours`: highlighted)."""
    cols = [c for c in (columns or list(df.columns)) if c in df.columns]
    text = {c for c in cols if len(df) and isinstance(df[c].iloc[0], str)}  # left-aligned
    head = "".join(
        f'<th{_TEXT if c in text else ""} title="{_esc(_help(c, normalizer, spec))}">'
        f"{html.escape(_header(c))}</th>"
        for c in cols
    )
    body = []
    classes = row_classes or [""] * len(df)
    for kind, values in zip(classes, df[cols].itertuples(index=False)):
        tr = f'<tr class="{_esc(kind)}">' if kind else "<tr>"
        body.append(tr + "".join(_cell(c, v, cells) for c, v in zip(cols, values)) + "</tr>")
    return (
        f'<div class="scroll"><table data-table="{_esc(name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def html_legend(
    name: str, columns: list[str], normalizer: str | None = None, spec: RankedBy | None = None
) -> str:
    """A legend: one line per column header (the rank and agent columns need none)."""
    lines = [
        f"<dt>{html.escape(_header(c))}</dt><dd>{html.escape(_help(c, normalizer, spec))}</dd>"
        for c in dict.fromkeys(columns)
        if c not in ("label", "agent")
    ]
    return f'<dl class="legend" data-legend="{_esc(name)}">{"".join(lines)}</dl>'


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(name: str, fig, caption: str) -> str:
    alt = html.escape(caption, quote=True)
    return (
        f'<figure data-plot="{html.escape(name, quote=True)}">'
        f'<img alt="{alt}" src="data:image/png;base64,{_png(fig)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


YOURS, SHIPPED = "#dd8452", "#4c72b0"  # bar colours: the user's runs, our shipped ones


def plot_by_agent(rankings: list[Ranking]):
    """Normalised score per agent with seed-group stderr (no whisker where there is none:
    one seed group), one panel per family and tau (marginal vs joint); families are never
    pooled; the user's bars in their own colour, apart from our shipped ones."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = max((len(r.table) for r in rankings), default=1)
    fig, axes = plt.subplots(1, len(rankings), figsize=(4.5 * len(rankings), 0.9 + 0.45 * rows))
    axes = np.atleast_1d(axes)
    for ax, r in zip(axes, rankings):
        t = r.table.iloc[::-1]
        y = np.arange(len(t))
        short = r.spec.short
        colors = [YOURS if w == "yours" else SHIPPED for w in whose(t["label"])]
        ax.barh(y, t[f"normalized_{short}"], xerr=t["normalized_stderr"].fillna(0), color=colors)
        ax.set_yticks(y, [_mpl(v) for v in t["label"]])
        score = r.spec.title(r.tau)  # marginal at tau = 1, else the family's score
        said = score + ("" if r.tau is None else f" (tau={r.tau})")
        ax.set_title(_mpl(f"{r.family}: {said}"), fontsize=10)
        norm = r.table.attrs.get("normalizer")
        ax.set_xlabel(_mpl(f"{score} / {norm}'s" if norm else f"mean {score}"))
        if norm:
            ax.axvline(1.0, color="#999", lw=0.8, ls="--")
    kinds = {w for r in rankings for w in whose(r.table["label"])}
    if len(kinds) > 1:  # the user's runs beside ours: say which colour is whose
        handles = [Patch(color=YOURS, label="yours"), Patch(color=SHIPPED, label="ours, shipped")]
        fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    fig.tight_layout(rect=(0, 0.04 if len(kinds) > 1 else 0, 1, 1))
    return fig


def _best_rows(board: Board, rankings: list[Ranking]) -> pd.DataFrame | None:
    """The cleaned rows of each family's best configs (problems at the fill value left
    out), with tau and temperature filled where a family has none."""
    parts = []
    for family in dict.fromkeys(r.family for r in rankings):
        clean, spec = board.clean.get(family), rankings[0].spec
        if clean is None or "num_train" not in clean.columns:
            continue
        best = scoring.best_configs(clean, spec.lower_is_better)
        df = clean[[best.get(a) == k for a, k in zip(clean["agent"], clean["config_key"])]]
        df = df[df["score"].abs() < FILL].assign(family=family)
        # the configs each table ranks: one that ran part of the problems is in its table
        # apart, not drawn as a mean over fewer problems beside the others
        ranked = {(r.tau, k) for r in rankings if r.family == family for k in r.table.get(
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

    df = _best_rows(board, rankings)
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
                ax.plot(m.index, m.to_numpy(), label=_mpl(label), **styles[label])
            ax.set_xscale("symlog", linthresh=1)
            ax.set_title(_mpl(f"{family}: tau={tau}, temperature={temp}"), fontsize=9)
            ax.set_xlabel("num_train")
            ax.set_ylabel(_mpl(f"mean {rankings[0].spec.title(tau)}"))
    _legend_below(fig, [ax for ax in axes.flat if ax.get_visible()])
    return fig


def line_styles(labels: list[str]) -> dict[str, dict[str, Any]]:
    """A line style per label: a colour of its own (up to 20), the user's runs solid and
    thick with round markers, our shipped ones dashed and thin, a paper's dotted."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"]
    out = {}
    for i, (label, kind) in enumerate(zip(labels, whose(pd.Series(labels, dtype=object)))):
        yours = kind == "yours"
        out[label] = dict(color=cmap(i % cmap.N), ls="-" if yours else "--",
                          lw=2.2 if yours else 1.0, marker="o" if yours else ".",
                          ms=4 if yours else 3, zorder=3 if yours else 2)  # fmt: skip
        if kind == "published":  # a paper's rows: dotted, crosses
            out[label].update(ls=":", marker="x", lw=1.0)
    return out


def _legend_below(fig, axes) -> None:
    """One legend for the figure, outside and below its panels (it never covers them)."""
    handles, labels = {}, []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = handle
                labels.append(label)
    if labels:
        fig.legend(
            [handles[label] for label in labels],
            labels,
            loc="outside lower center",
            ncol=min(4, len(labels)),
            fontsize=8,
        )


def plot_vs_budget(ranking: Ranking):
    """Mean score with 95% bootstrap CI against simulation budget, one panel per task, the
    published mean and range dashed beside."""
    import matplotlib.pyplot as plt

    t, short = ranking.table, ranking.spec.short
    if not len(t):
        return None
    mean, paper_col = f"mean_{short}", f"paper_{short}"
    tasks = sorted(t["task"].unique(), key=str)
    cols = min(4, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False, layout="constrained"
    )
    styles = line_styles(sorted(set(t["label"]), key=str))
    for ax, task in zip(axes.flat, tasks):
        cell = t[t["task"] == task]
        for label, g in cell.groupby("label", sort=True):
            g = g.sort_values("budget")
            # no whisker where there is no interval (too few observations)
            low, high = g[mean] - g["ci_low"], g["ci_high"] - g[mean]
            err = np.vstack([low.fillna(0), high.fillna(0)])
            style = styles[label]
            color = style["color"]
            ax.errorbar(
                g["budget"], g[mean], yerr=err, capsize=2, label=_mpl(label), **style
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
                    label=_mpl(f"{label} (paper)"),
                )
        ax.set_xscale("log")
        ax.set_title(_mpl(task), fontsize=9)
        ax.set_xlabel("simulation budget")
        ax.set_ylabel(_mpl(ranking.spec.name))
    for ax in list(axes.flat)[len(tasks) :]:
        ax.set_visible(False)
    _legend_below(fig, list(axes.flat)[: len(tasks)])
    return fig


RUNTIME_PARTS = {  # column -> bar label
    "median_train_seconds": "train",
    "median_evaluation_seconds": "evaluation",
    "median_wall_seconds": "wall (whole job)",
}


def plot_runtimes(timing: pd.DataFrame):
    """Median train, evaluation and wall seconds per job for each agent config (log
    scale); the legend sits above the bars, outside the axes."""
    import matplotlib.pyplot as plt

    cols = [c for c in RUNTIME_PARTS if c in timing]
    if not len(timing) or not cols:
        return None
    t = timing.iloc[::-1]
    height = 1.2 + 0.25 * len(t) * len(cols)
    fig, ax = plt.subplots(figsize=(7, height), layout="constrained")
    y = np.arange(len(t))
    h = 0.8 / len(cols)
    for i, c in enumerate(cols):
        values = np.maximum(t[c].to_numpy(float), 1e-6)
        ax.barh(y + i * h, values, height=h, label=RUNTIME_PARTS[c], color=f"C{i}")
    ax.set_yticks(y + h * (len(cols) - 1) / 2, [_mpl(v) for v in t["label"]])
    ax.set_xscale("log")
    ax.set_xlabel("seconds per job (median over the agent config's finished jobs)")
    fig.legend(loc="outside upper center", ncol=len(cols), fontsize=8, frameon=False)
    return fig


def _table_name(board: Board, ranking: Ranking) -> str:
    """A table's data-table name: `<short>-tau-<tau>` (or `<short>` over observations),
    with the family when several families share the short name."""
    sharing = {r.family for r in board.rankings if r.spec.short == ranking.spec.short}
    name = ranking.spec.short if len(sharing) == 1 else f"{ranking.spec.short}-{ranking.family}"
    return name if ranking.observations else f"{name}-tau-{ranking.tau}"


def _table_title(ranking: Ranking) -> str:
    title = f"{ranking.family} problems"
    if ranking.tau == 1:
        title += ", tau = 1: marginal predictions (one test input at a time)"
    elif ranking.tau is not None:
        title += f", tau = {ranking.tau}: joint predictions over {ranking.tau} test inputs together"
    if ranking.observations:
        return title + " (mean over observations, ranked within each task and budget)"
    norm = ranking.table.attrs.get("normalizer")
    return title + (f"; normalised by {norm}" if norm else "; not normalised") + over(ranking)


def _section(board: Board, spec: RankedBy, rankings: list[Ranking]) -> list[str]:
    """A ranking section: heading, notes, one table per family and tau (families are never
    pooled), a legend, its plots."""
    taus = list(dict.fromkeys(r.tau for r in rankings))
    phrase = _tau_phrase(taus)
    name = spec.title(1) if taus == [1] else spec.name  # one test input: a marginal score
    heading = f"{name}: {phrase}" if phrase else name
    parts = [f"<h2>{html.escape(heading)}</h2>"]
    for note in (spec.note, RULE_NOTES.get(spec.rule, "")):
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
    if len({r.family for r in rankings}) > 1:
        parts.append(f'<p class="note">{html.escape(FAMILY_NOTE)}</p>')
    bare = [r for r in rankings if not r.observations and r.table.attrs.get("normalizer") is None]
    if spec.normalizer and bare:
        parts.append(
            f'<p class="note">Tables marked "not normalised" show the mean score itself: their '
            f"results hold no run of {html.escape(spec.normalizer)}, the normalising agent "
            "(--normalize AGENT normalises by another).</p>"
        )
    norms = {r.table.attrs.get("normalizer") for r in rankings}
    norm = next(iter(norms)) if len(norms) == 1 else None
    columns: list[str] = []
    for r in rankings:
        table_norm = r.table.attrs.get("normalizer")
        parts.append(f"<h3>{html.escape(_table_title(r))}</h3>")
        cols = [c for c in shown_columns(spec) if c in r.table.columns]
        if table_norm is None:  # the normalised column would repeat the mean: the mean
            mean = f"mean_{spec.short}"  # takes its place, its standard error beside it
            cols = [mean if c == f"normalized_{spec.short}" else c for c in cols if c != mean]
        if len(r.table):
            table = _table_name(board, r)  # not `name`: the plots' captions use that
            parts.append(_ranking_table(r.table, table, cols, table_norm, spec))
        else:
            parts.append('<p class="note">No agent config has a score here.</p>')
        labels = r.table["label"] if "label" in r.table else pd.Series([], dtype=object)
        columns += cols + (["whose"] if len(set(whose(labels))) > 1 else [])
        if len(r.partial):
            scale = (
                f", normalised by {table_norm}'s mean on the same problems" if table_norm else ""
            )
            parts.append(
                f'<p class="note" data-partial="{_esc(_table_name(board, r))}">Apart: agent '
                f"configs that ran part of these problems, each scored over those it ran"
                f"{html.escape(scale)}; not ranked with the table above (a problem not run "
                "is not counted 1e6).</p>"
            )
            part_cols = [c for c in cols if c != "rank"]
            part_cols.insert(part_cols.index("label") + 1, "coverage")
            columns.append("coverage")
            name = f"{_table_name(board, r)}-partial"
            parts.append(_ranking_table(r.partial, name, part_cols, table_norm, spec))
        if r.observations:
            parts += _observation_extras(board, r)
    parts.append(html_legend(spec.short, columns, norm, spec))
    if spec.rule == TESTBED:
        parts += _testbed_plots(board, spec, rankings, norm, phrase, name)
    return parts


def _ranking_table(
    table: pd.DataFrame, name: str, cols: list[str], norm: str | None, spec: RankedBy
) -> str:
    """A ranking table as HTML: a blank standard error says why, and the user's rows are
    highlighted, with a `whose` column, when our shipped rows are beside them."""
    shown = table.copy()
    if "normalized_stderr" in shown and "num_seed_groups" in shown:
        shown["normalized_stderr"] = stderr_cells(shown)
    kinds = list(whose(shown["label"])) if "label" in shown else []
    classes = None
    if len(set(kinds)) > 1:
        shown["whose"] = kinds
        cols = list(cols)
        cols.insert(cols.index("label") + 1, "whose")
        classes = ["yours" if k == "yours" else "" for k in kinds]
    cells = {"label": _label_cell}
    return html_table(shown, name, cols, normalizer=norm, spec=spec, cells=cells,
                      row_classes=classes)  # fmt: skip


def _label_cell(value: Any) -> str:
    """An agent's label on one line ('logistic_regression (ours, shipped)' wrapped onto
    three); a long one (many config fields) wraps."""
    kind = "text label" if len(str(value)) <= LABEL_ON_ONE_LINE else "text"
    return f'<td class="{kind}">{_esc(value)}</td>'


LABEL_ON_ONE_LINE = 48  # characters


def _observation_extras(board: Board, ranking: Ranking) -> list[str]:
    """The score against budget per task, and the runs one by one when asked for."""
    parts = []
    fig = plot_vs_budget(ranking)
    spec = ranking.spec
    if fig is not None:
        published = (
            f"; dotted, crosses: {spec.published}'s algorithms over the same observations; "
            f"dashed beside an agent of ours: {spec.published}'s mean and range for it"
            if spec.published
            else ""
        )
        caption = (
            f"Mean {spec.name} over observations with 95% bootstrap CI (none below "
            f"{scoring.MIN_CI_OBSERVATIONS} observations){published}."
        )
        parts.append(_figure(f"{_table_name(board, ranking)}-vs-budget", fig, caption))
    runs = board.per_observation.get(ranking.family)
    if runs is not None:
        parts.append("<h3>Per observation</h3>")
        name = f"{_table_name(board, ranking)}-per-observation"
        parts.append(html_table(runs, name, per_observation_columns(spec), spec=spec))
    return parts


def _testbed_plots(
    board: Board,
    spec: RankedBy,
    rankings: list[Ranking],
    norm: str | None,
    phrase: str,
    name: str,
) -> list[str]:
    scored = f"{name} / {norm}'s" if norm else f"mean {name}"
    better = "lower" if spec.lower_is_better else "higher"
    parts = [
        _figure(
            f"{spec.short}-by-agent",
            plot_by_agent(rankings),
            f"{scored} per agent (bar: mean, whisker: standard error, none where the problems "
            f"fall in one seed group; {better} is better; your runs' bars orange, our shipped "
            f"runs' blue; agents that ran part of the problems are in the tables only), "
            f"one panel per problem family and tau: {phrase or 'all problems'}.",
        )
    ]
    fig = plot_vs_num_train(board, rankings)
    if fig is not None:
        parts.append(
            _figure(
                f"{spec.short}-vs-num-train",
                fig,
                f"Mean {name} ({better} is better) against training size, one panel per "
                "problem family, tau and temperature (best config per agent; problems with a "
                "failed job or non-finite score left out; agents that ran part of the "
                "problems are in their tables only); your runs solid, our shipped runs dashed.",
            )
        )
    return parts


def _traceback_cell(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        return '<td class="text"></td>'
    last = value.strip().splitlines()[-1]
    return (
        f'<td class="text"><details><summary>{html.escape(last[:80])}</summary>'
        f"<pre>{html.escape(value)}</pre></details></td>"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


SHIPPED_SUFFIX = scoring.SHIPPED_LABEL.format(agent="")  # " (ours, shipped)"


def _whose(board: Board) -> str:
    return "Our shipped runs: " if board.results is None else ""


def _beside_shipped(board: Board) -> str:
    """How many of our shipped agents the tables rank beside the user's (none: "")."""
    if board.results is None:
        return ""
    labels = {label for r in board.rankings for label in r.table.get("label", [])}
    n = sum(1 for label in labels if str(label).endswith(SHIPPED_SUFFIX))
    return f"; ranked beside our shipped runs of {_count(n, 'agent')}" if n else ""


def _of_sweep(board: Board) -> str:
    return f" of sweep {html.escape(board.sweep)}" if board.sweep else ""


def render_report(board: Board, title: str = "testbed leaderboard") -> str:
    """The report as one HTML string."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    df = board.df
    counts = df["status"].value_counts().to_dict()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{_whose(board)}{_count(len(df), "job")}{_of_sweep(board)}: '
        f"{counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed; "
        f"{_count(df['agent'].nunique(), 'agent')}{_unranked_agents(df)}, "
        f"{_count(df['problem_id'].nunique(), 'problem')}{_beside_shipped(board)}. "
        f"Generated {when}.</p>",
        f"<p>{html.escape(READING)}</p>",
    ]
    notes = [missing_note(board), *shipped_notes(board), *coverage_notes(board)]
    parts += [f'<p class="note">{html.escape(line)}</p>' for line in notes if line]
    if not board.rankings:
        reason = (
            "No job finished"
            if not counts.get("ok", 0)
            else "No finished job has a score its family is ranked on"
        )
        parts.append(
            f'<p class="note" data-empty="rankings">{reason}, so there is nothing to rank; '
            "the failed jobs and their reasons are below.</p>"
        )
    for spec, rankings in board.sections():
        parts += _section(board, spec, rankings)
    parts += _runtimes_section(df) + _failures_section(df)
    configs = df.drop_duplicates("config_key")[["agent", "config_key", "config"]]
    parts.append("<h2>Agent configs</h2>")
    parts.append(html_table(configs, "configs"))
    parts.append("</body></html>")
    return "\n".join(parts)


def _runtimes_section(df: pd.DataFrame) -> list[str]:
    """The report's runtimes: a table of seconds per agent config and its figure."""
    parts = []
    timing = runtimes(df)
    parts.append("<h2>Runtimes</h2>")
    parts.append(f'<p class="note">{html.escape(RUNTIME_NOTE)}</p>')
    if len(timing):
        shown = [c for c in timing.columns if c not in ("agent", "config_key")]
        parts.append(html_table(timing, "timings", shown))
        parts.append(html_legend("timings", shown))
        fig = plot_runtimes(timing)
        if fig is not None:
            parts.append(
                _figure(
                    "runtimes",
                    fig,
                    "Median seconds per job for each agent config (log scale): medians, "
                    "because " + COMPILE_NOTE + "; the table gives the means too.",
                )
            )
    else:
        parts.append('<p class="note">No finished jobs.</p>')
    return parts


def _failures_section(df: pd.DataFrame) -> list[str]:
    """The report's failed jobs, each with its stored reason and traceback."""
    parts = []
    fail_cols = ["agent", "problem_id", "agent_seed", "attempts", "error", "traceback"]
    fails = df.loc[df["status"] == "failed", [c for c in fail_cols if c in df]]
    parts.append(f"<h2>Failed jobs ({len(fails)})</h2>")
    if len(fails):
        parts.append(
            '<p class="note">Each failed job with its stored reason; open a traceback to see '
            "where it raised (<code>testbed leaderboard --failures</code> lists them too, "
            "<code>--retry-failed</code> on the sweep runs them again).</p>"
        )
        parts.append(html_table(fails, "failures", cells={"traceback": _traceback_cell}))
    else:
        parts.append("<p>None.</p>")
    return parts


def _unranked_agents(df: pd.DataFrame) -> str:
    """' (2 with no finished job: a, b; not in the rankings, their failures below)', or ''
    when every agent finished a job: an agent that failed everywhere has no score to rank."""
    finished = set(df.loc[df["status"] == "ok", "agent"])
    none = sorted(set(df["agent"]) - finished)
    if not none:
        return ""
    names = html.escape(", ".join(none))
    return f" ({len(none)} with no finished job: {names}; not ranked, their failures below)"


def write_report(board: Board, out: str | os.PathLike, title: str = "testbed leaderboard") -> Path:
    """Writes the report to `out` and returns its path.

    `out` may not be the board's results file, its side files or any SQLite file; the
    page goes to a temporary file renamed into place (a crash keeps an older report).
    """
    check_output_path("out", out, [board.results] if board.results else [])
    text = render_report(board, title)
    return write_atomically("out", out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
