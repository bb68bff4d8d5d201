"""HTML pieces of the report: escaped tables with a tooltip per header, legends, and
figures embedded as PNG. Every piece of text from the results is escaped."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import pandas as pd

from leaderboard.ranking.legend import column_help, header
from leaderboard.ranking.rules import rule_of
from leaderboard.ranking.tables import fmt_cell
from testbed.ranking import RankedBy

_TEXT = ' class="text"'


def esc(value: Any) -> str:
    """`value` as text safe inside HTML and its attributes."""
    return html.escape(str(value), quote=True)


def help_text(column: str, normalizer: str | None = None, spec: RankedBy | None = None) -> str:
    """What `column` means (a header's tooltip and legend line), in a table normalised by
    `normalizer` (None: not normalised), as the rule of `spec` says it."""
    text = column_help(column, spec)
    return text if spec is None else rule_of(spec).normalised_help(text, column, normalizer)


def _cell(column: str, value: Any, cells: dict[str, Any] | None) -> str:
    if cells and column in cells:
        return cells[column](value)
    if column == "rank":
        return f'<td class="rank">{esc(fmt_cell(column, value))}</td>'
    kind = ' class="text"' if isinstance(value, str) else ""
    return f"<td{kind}>{esc(fmt_cell(column, value))}</td>"


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
        f'<th{_TEXT if c in text else ""} title="{esc(help_text(c, normalizer, spec))}">'
        f"{html.escape(header(c, spec))}</th>"
        for c in cols
    )
    body = []
    classes = row_classes or [""] * len(df)
    for kind, values in zip(classes, df[cols].itertuples(index=False)):
        tr = f'<tr class="{esc(kind)}">' if kind else "<tr>"
        body.append(tr + "".join(_cell(c, v, cells) for c, v in zip(cols, values)) + "</tr>")
    return (
        f'<div class="scroll"><table data-table="{esc(name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def html_legend(
    name: str, columns: list[str], normalizer: str | None = None, spec: RankedBy | None = None
) -> str:
    """A legend: one line per column header (the rank and agent columns need none)."""
    lines = [
        f"<dt>{html.escape(header(c, spec))}</dt>"
        f"<dd>{html.escape(help_text(c, normalizer, spec))}</dd>"
        for c in dict.fromkeys(columns)
        if c not in ("label", "agent")
    ]
    return f'<dl class="legend" data-legend="{esc(name)}">{"".join(lines)}</dl>'


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figure(name: str, fig, caption: str) -> str:
    """A matplotlib figure as an embedded PNG with its caption (the alt text too)."""
    alt = html.escape(caption, quote=True)
    return (
        f'<figure data-plot="{html.escape(name, quote=True)}">'
        f'<img alt="{alt}" src="data:image/png;base64,{_png(fig)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def table_name(rankings: list, ranking) -> str:
    """A table's data-table name: `<short>-<part name>-<part>` (`<short>` for a rule with
    one table a family), with the family when several families of `rankings` share the
    short name."""
    sharing = {r.family for r in rankings if r.spec.short == ranking.spec.short}
    name = ranking.spec.short if len(sharing) == 1 else f"{ranking.spec.short}-{ranking.family}"
    part = ranking.rule.part_name
    return f"{name}-{part}-{ranking.part}" if part else name
