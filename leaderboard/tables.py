"""Ranking tables as text: markdown, CSV or JSON (the terminal table is drawn by the CLI)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from testbed.errors import bad_value

FORMATS = ("table", "csv", "json", "markdown")


def fmt_value(v: Any) -> str:
    """A short, stable rendering of one cell."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.4g}"
    return "" if v is None else str(v)


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub markdown table (pipes in cells escaped)."""
    cols = [str(c) for c in df.columns]
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(esc(fmt_value(v)) for v in row) + " |")
    return "\n".join(lines)


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _json_value(v.item())
    return v


def render(df: pd.DataFrame, fmt: str) -> str:
    """`df` as csv, json (records; non-finite -> null) or markdown."""
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        records = [{k: _json_value(v) for k, v in r.items()} for r in df.to_dict("records")]
        return json.dumps(records, indent=2)
    if fmt == "markdown":
        return to_markdown(df)
    raise bad_value("format", fmt, ["csv", "json", "markdown"])
