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
from leaderboard.board import C2ST_COLUMNS, KL_COLUMNS, SHORT_NAMES, Board
from leaderboard.board import PER_OBSERVATION_COLUMNS as PER_OBS_COLUMNS
from leaderboard.outputs import check_output_path, write_atomically
from leaderboard.tables import fmt_value

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td.text{text-align:left;font-family:monospace}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}img{max-width:100%}
.note{color:#666;font-size:.9em}
"""


KL_NOTE = (
    "Negative KL clipped to 0; missing or non-finite KL counts 1e6; mean per tau; stderr over "
    "problem-seed groups (seed % 10); best config per agent (lowest mean KL over all problems)."
)
NLL_NOTE = (
    "Real data have no true likelihood: the score is the joint negative log-likelihood of tau "
    "test labels (lower is better), cleaned and ranked as the KL above."
)
REG_NOTE = (
    "GP regression (the environment is a function drawn from the NNGP of a ReLU network): "
    "the KL of the true predictive N(f(x), noise^2) to the agent's mixture of its sampled "
    "functions, each blurred by the known noise, over 1,001 test inputs (lower is better; "
    "oracle 0, gp_posterior is the Bayes-optimal agent). Normalised by uniform, which on "
    "regression is the function f = 0, as the reference."
)


def _esc(value: Any) -> str:
    return html.escape(fmt_value(value), quote=True)


def _mpl(text: Any) -> str:
    """Text safe for matplotlib (a `$` would start mathtext)."""
    return str(text).replace("$", r"\$")


def html_table(df: pd.DataFrame, name: str, columns: list[str] | None = None) -> str:
    """An escaped HTML table; `name` goes into data-table for tests and styling."""
    cols = [c for c in (columns or list(df.columns)) if c in df.columns]
    head = "".join(f"<th>{html.escape(SHORT_NAMES.get(c, str(c)))}</th>" for c in cols)
    body = []
    for _, row in df[cols].iterrows():
        cells = []
        for c in cols:
            v = row[c]
            kind = ' class="text"' if isinstance(v, str) else ""
            cells.append(f"<td{kind}>{_esc(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table data-table="{html.escape(name, quote=True)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


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


def plot_kl_by_agent(board: Board):
    """Normalised KL per agent with seed-group stderr, one panel per tau (marginal vs joint)."""
    import matplotlib.pyplot as plt

    taus = list(board.kl)
    fig, axes = plt.subplots(1, len(taus), figsize=(4.5 * len(taus), 0.5 + 0.45 * _rows(board)))
    axes = np.atleast_1d(axes)
    for ax, tau in zip(axes, taus):
        t = board.kl[tau].iloc[::-1]
        y = np.arange(len(t))
        ax.barh(y, t["normalized_kl"], xerr=t["normalized_stderr"].fillna(0), color="#4c72b0")
        ax.set_yticks(y, [_mpl(v) for v in t["label"]])
        ax.set_title(_mpl("marginal (tau=1)" if tau == 1 else f"joint (tau={tau})"))
        norm = board.kl[tau].attrs.get("normalizer")
        ax.set_xlabel(_mpl(f"KL / KL of {norm}" if norm else "mean KL"))
        if norm:
            ax.axvline(1.0, color="#999", lw=0.8, ls="--")
    fig.tight_layout()
    return fig


def _rows(board: Board) -> int:
    return max((len(t) for t in board.kl.values()), default=1)


def plot_kl_vs_num_train(board: Board):
    """Mean KL (best config per agent) against training size, one panel per tau x temperature.
    Problems filled with 1e6 (missing or non-finite) are left out of the lines."""
    import matplotlib.pyplot as plt

    clean = board.clean_kl
    if clean is None or "num_train" not in clean.columns:
        return None
    best = scoring.best_configs(clean)
    df = clean[[best.get(a) == k for a, k in zip(clean["agent"], clean["config_key"])]]
    df = df[df["kl_estimate"] < scoring.KL_FILL]
    if "tau" not in df.columns:
        df = df.assign(tau=1)
    if "temperature" not in df.columns or df["temperature"].isna().all():
        df = df.assign(temperature="n/a")
    taus = sorted(df["tau"].dropna().unique())
    temps = sorted(df["temperature"].dropna().unique(), key=str)
    if not taus or not temps:
        return None
    fig, axes = plt.subplots(
        len(taus), len(temps), figsize=(3.6 * len(temps), 2.9 * len(taus)), squeeze=False
    )
    for i, tau in enumerate(taus):
        for j, temp in enumerate(temps):
            ax = axes[i][j]
            cell = df[(df["tau"] == tau) & (df["temperature"] == temp)]
            for label, g in cell.groupby("label", sort=True):
                m = g.groupby("num_train")["kl_estimate"].mean()
                ax.plot(m.index, m.to_numpy(), marker="o", ms=3, label=_mpl(label))
            ax.set_xscale("symlog", linthresh=1)
            ax.set_title(_mpl(f"tau={tau}, temperature={temp}"), fontsize=9)
            ax.set_xlabel("num_train")
            ax.set_ylabel("mean KL")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0.06 + 0.02 * (len(labels) // 4), 1, 1))
    return fig


def plot_c2st_vs_budget(board: Board):
    """Mean C2ST with 95% bootstrap CI against simulation budget, one panel per task."""
    import matplotlib.pyplot as plt

    t = board.c2st
    if t is None or not len(t):
        return None
    tasks = sorted(t["task"].unique(), key=str)
    cols = min(4, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        cell = t[t["task"] == task]
        for i, (label, g) in enumerate(cell.groupby("label", sort=True)):
            g = g.sort_values("budget")
            err = np.vstack([g["mean_c2st"] - g["ci_low"], g["ci_high"] - g["mean_c2st"]])
            color = f"C{i % 10}"
            ax.errorbar(
                g["budget"],
                g["mean_c2st"],
                yerr=err,
                marker="o",
                ms=3,
                capsize=2,
                color=color,
                label=_mpl(label),
            )
            paper = g.dropna(subset=["paper_c2st"]) if "paper_c2st" in g else g.iloc[:0]
            if len(paper):  # the SBI benchmark paper's mean and range, dashed
                low, high = paper["paper_c2st"] - paper["paper_min"], paper["paper_max"]
                ax.errorbar(
                    paper["budget"],
                    paper["paper_c2st"],
                    yerr=np.vstack([low, high - paper["paper_c2st"]]),
                    ls="--",
                    marker="x",
                    ms=3,
                    capsize=2,
                    alpha=0.6,
                    color=color,
                    label=_mpl(f"{label} (paper)"),
                )
        ax.axhline(0.5, color="#999", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_ylim(0.45, 1.02)
        ax.set_title(_mpl(task), fontsize=9)
        ax.set_xlabel("simulation budget")
        ax.set_ylabel("C2ST")
    for ax in list(axes.flat)[len(tasks) :]:
        ax.set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def plot_runtimes(timing: pd.DataFrame):
    """Mean train and evaluation seconds per agent config (log scale)."""
    import matplotlib.pyplot as plt

    cols = [c for c in ("train_seconds", "evaluation_seconds", "wall_seconds") if c in timing]
    if not len(timing) or not cols:
        return None
    t = timing.iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.4 * len(t) * len(cols) / 2 + 0.6))
    y = np.arange(len(t))
    h = 0.8 / len(cols)
    for i, c in enumerate(cols):
        ax.barh(y + i * h, np.maximum(t[c].to_numpy(float), 1e-6), height=h, label=c)
    ax.set_yticks(y + h * (len(cols) - 1) / 2, [_mpl(v) for v in t["label"]])
    ax.set_xscale("log")
    ax.set_xlabel("seconds per job (mean)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


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
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">{len(df)} jobs: {counts.get("ok", 0)} ok, '
        f"{counts.get('failed', 0)} failed; {df['agent'].nunique()} agents, "
        f"{df['problem_id'].nunique()} problems. Generated {when}.</p>",
    ]
    for name, ranked, note in (
        ("Joint KL (Neural Testbed rules)", board.kl, KL_NOTE),
        ("Joint NLL on real data (Neural Testbed rules)", board.nll, NLL_NOTE),
        ("Gaussian KL on GP regression (Neural Testbed rules)", board.regression, REG_NOTE),
    ):
        if not ranked:
            continue
        parts.append(f"<h2>{html.escape(name)}</h2>")
        parts.append(f'<p class="note">{html.escape(note)}</p>')
        kind = "kl" if ranked is board.kl else ("nll" if ranked is board.nll else "reg")
        for tau, table in ranked.items():
            norm = table.attrs.get("normalizer")
            heading = f"tau = {tau}" if tau is not None else "all problems"
            heading += f", normalised by {norm}" if norm else ", not normalised"
            parts.append(f"<h3>{html.escape(heading)}</h3>")
            columns = KL_COLUMNS
            if kind == "reg":  # no accuracy or ECE for regression
                columns = [c for c in KL_COLUMNS if c not in ("mean_test_acc", "mean_test_ece")]
            parts.append(html_table(table, f"{kind}-tau-{tau}", columns))
    if board.kl:
        parts.append(
            _figure(
                "kl-by-agent",
                plot_kl_by_agent(board),
                "Normalised KL per agent: marginal (tau=1) against joint predictions.",
            )
        )
        fig = plot_kl_vs_num_train(board)
        if fig is not None:
            parts.append(
                _figure(
                    "kl-vs-num-train",
                    fig,
                    "Mean KL against training size per temperature (best configs).",
                )
            )
    if board.c2st is not None:
        parts.append("<h2>C2ST per task and simulation budget (SBI benchmark rules)</h2>")
        parts.append(html_table(board.c2st, "c2st", C2ST_COLUMNS))
        fig = plot_c2st_vs_budget(board)
        if fig is not None:
            parts.append(
                _figure(
                    "c2st-vs-budget",
                    fig,
                    "Mean C2ST over observations with 95% bootstrap CI (0.5 is perfect); "
                    "dashed: the SBI benchmark paper's mean and range over its observations.",
                )
            )
        if board.c2st_per_observation is not None:
            parts.append("<h3>Per observation, beside the SBI benchmark paper</h3>")
            parts.append(
                html_table(board.c2st_per_observation, "c2st-per-observation", PER_OBS_COLUMNS)
            )
    timing = scoring.timings(df)
    parts.append("<h2>Runtimes</h2>")
    parts.append(html_table(timing, "timings", [c for c in timing.columns if c != "agent"]))
    fig = plot_runtimes(timing)
    if fig is not None:
        parts.append(_figure("runtimes", fig, "Mean seconds per job for each agent config."))
    fails = scoring.failures(df)
    parts.append(f"<h2>Failed jobs ({len(fails)})</h2>")
    parts.append(html_table(fails, "failures") if len(fails) else "<p>None.</p>")
    configs = df.drop_duplicates("config_key")[["agent", "config_key", "config"]]
    parts.append("<h2>Agent configs</h2>")
    parts.append(html_table(configs, "configs"))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(board: Board, out: str | os.PathLike, title: str = "testbed leaderboard") -> Path:
    """Writes the report to `out` and returns its path.

    `out` may not be the board's results file, its side files or any SQLite file; the
    page goes to a temporary file renamed into place (a crash keeps an older report).
    """
    check_output_path("out", out, [board.results] if board.results else [])
    text = render_report(board, title)
    return write_atomically("out", out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
