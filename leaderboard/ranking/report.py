"""One self-contained HTML report: ranking tables and plots (PNG embedded as base64).

No scripts, no external files: it opens anywhere. Every piece of text from the results
(agent names, configs, errors) is HTML-escaped; plot labels escape matplotlib's `$`.
"""

from __future__ import annotations

import datetime
import html
import os
from pathlib import Path
from typing import Any

import pandas as pd

from leaderboard.outputs import check_output_path, write_atomically
from leaderboard.ranking.board import runtimes
from leaderboard.ranking.html import esc, figure, html_legend, html_table, table_name
from leaderboard.ranking.legend import COMPILE_NOTE, runtime_note
from leaderboard.ranking.notes import coverage_notes, missing_note, shipped_notes
from leaderboard.ranking.plots import one_colour_per_agent, plot_runtimes
from leaderboard.ranking.rules import RULES, rule_of
from leaderboard.ranking.standings import SHIPPED_SUFFIX, Board, Ranking, whose
from testbed.ranking import RankedBy

__all__ = ["html_table", "plot_runtimes", "render_report", "write_report"]
# the names scripts imported from here before their rules owned them: (old, the rule's)
_FORMER = {"_best_rows": "best_rows"}


def __getattr__(name: str) -> Any:
    """A figure a registered rule draws (`Rule.figures`, e.g. `plot_vs_budget`),
    importable from here as before the rules owned their figures."""
    wanted = _FORMER.get(name, name)
    for rule in RULES.values():
        if wanted in rule.figures:
            return getattr(rule, wanted)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
FAMILY_NOTE = (
    "Problems of different families are ranked apart (each family has its own tables, "
    "health, best config per agent and normaliser), as the Neural Testbed ranks each of "
    "its sweeps on its own."
)


def _table_title(ranking: Ranking) -> str:
    return ranking.rule.table_title(ranking, f"{ranking.family} problems")


def _section(board: Board, spec: RankedBy, rankings: list[Ranking]) -> list[str]:
    """A ranking section: heading, notes, one table per family and part (families are
    never pooled), a legend, its plots; as the section's rule says them."""
    rule = rule_of(spec)
    name, phrase = rule.section_name(spec, rankings)
    heading = f"{name}: {phrase}" if phrase else name
    parts = [f"<h2>{html.escape(heading)}</h2>"]
    for note in (spec.note, rule.note):
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
    if len({r.family for r in rankings}) > 1:
        parts.append(f'<p class="note">{html.escape(FAMILY_NOTE)}</p>')
    notes = rule.section_notes(spec, rankings)  # (text: its quotes are not escaped)
    parts += [f'<p class="note">{html.escape(n, quote=False)}</p>' for n in notes]
    norms = {r.table.attrs.get("normalizer") for r in rankings}
    norm = next(iter(norms)) if len(norms) == 1 else None
    columns: list[str] = []
    for r in rankings:
        table_norm = r.table.attrs.get("normalizer")
        parts.append(f"<h3>{html.escape(_table_title(r))}</h3>")
        cols = rule.report_columns(r)
        if len(r.table):
            table = table_name(board.rankings, r)  # not `name`: the plots' captions use that
            parts.append(_ranking_table(r.table, table, cols, table_norm, spec))
        else:
            parts.append('<p class="note">No agent config has a score here.</p>')
        labels = r.table["label"] if "label" in r.table else pd.Series([], dtype=object)
        columns += cols + (["whose"] if len(set(whose(labels))) > 1 else [])
        if len(r.partial):
            parts.append(
                f'<p class="note" data-partial="{esc(table_name(board.rankings, r))}">'
                f"{html.escape(rule.partial_note(r))}</p>"
            )
            part_cols = [c for c in cols if c != "rank"]
            part_cols.insert(part_cols.index("label") + 1, "coverage")
            columns.append("coverage")
            apart = f"{table_name(board.rankings, r)}-partial"  # (`name`: the plots' captions)
            parts.append(_ranking_table(r.partial, apart, part_cols, table_norm, spec))
        parts += rule.table_extras(board, r)
    parts.append(html_legend(spec.short, columns, norm, spec))
    parts += rule.section_plots(board, spec, rankings, norm, phrase, name)
    return parts


def _ranking_table(
    table: pd.DataFrame, name: str, cols: list[str], norm: str | None, spec: RankedBy
) -> str:
    """A ranking table as HTML: its cells as its rule shows them, and the user's rows
    highlighted, with a `whose` column, when our shipped rows are beside them."""
    shown = rule_of(spec).cells(table.copy())
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
    return f'<td class="{kind}">{esc(value)}</td>'


LABEL_ON_ONE_LINE = 48  # characters


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
    labels = [label for r in board.rankings for label in r.table.get("label", [])]
    with one_colour_per_agent(labels):  # one colour per agent in every figure below
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
    parts.append(f'<p class="note">{html.escape(runtime_note())}</p>')
    if len(timing):
        shown = [c for c in timing.columns if c not in ("agent", "config_key")]
        parts.append(html_table(timing, "timings", shown))
        parts.append(html_legend("timings", shown))
        fig = plot_runtimes(timing)
        if fig is not None:
            parts.append(
                figure(
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
