"""Ranking tables as text: markdown, CSV or JSON (the terminal table is drawn by the CLI)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from testbed.errors import bad_value

SIGNIFICANT = 4  # digits a float shows
MAX_DECIMALS = 10  # below 5e-11 a float shows as 0 (csv and json keep every digit)


def fmt_value(v: Any) -> str:
    """A short, stable rendering of one cell: integers as they are, floats in fixed
    notation (never an exponent) with 4 significant digits, trailing zeros dropped
    (0.1340 -> 0.134, 7.917e-05 -> 0.00007917, 1e6 -> 1000000)."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, bool | str):
        return str(v)
    if hasattr(v, "item") and not isinstance(v, int | float):  # numpy scalars
        v = v.item()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0:
            return "0"
        digits = SIGNIFICANT - 1 - math.floor(math.log10(abs(v)))
        text = f"{v:.{min(max(digits, 0), MAX_DECIMALS)}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "0") else text
    return str(v)


def fmt_cell(column: str, v: Any) -> str:
    """`fmt_value`, except shares (`pct_*` columns, 0..1) as percentages: 0.95 -> 95%."""
    if str(column).startswith("pct_") and isinstance(v, float) and math.isfinite(v):
        return fmt_value(100 * v) + "%"
    return fmt_value(v)


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
