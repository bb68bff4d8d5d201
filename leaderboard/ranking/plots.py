"""Plot pieces every rule's figures share: a line style per agent (the user's runs apart
from ours and a paper's), one legend below the panels, and the runtimes figure."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.ranking.standings import whose

SHIPPED_HATCH = "//"  # our shipped runs' bars (the user's are solid)


def mpl(text: Any) -> str:
    """Text safe for matplotlib (a `$` would start mathtext)."""
    return str(text).replace("$", r"\$")


_COLOURS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "colours", default=None
)


def agent_name(label: object) -> str:
    """The agent a label names: `ensemble+ (ours, shipped)`, `ensemble+ [l2=0.1]` ->
    `ensemble+`."""
    return str(label).split(" (", 1)[0].split(" [", 1)[0]


@contextlib.contextmanager
def one_colour_per_agent(labels: Iterable[object]) -> Iterator[None]:
    """Within: each agent of `labels` (a report's) has one colour in every figure drawn, its
    runs and ours of it alike (styles tell them apart), whatever else a figure shows."""
    import matplotlib

    names = sorted({agent_name(label) for label in labels})
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    token = _COLOURS.set({name: cmap(i % cmap.N) for i, name in enumerate(names)})
    try:
        yield
    finally:
        _COLOURS.reset(token)


def colour_of(label: object, i: int, count: int) -> Any:
    """`label`'s colour: its agent's in the report being drawn, else the i-th of `count`."""
    import matplotlib

    colours = _COLOURS.get()
    if colours is not None and agent_name(label) in colours:
        return colours[agent_name(label)]
    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return cmap(i % cmap.N)


def line_styles(labels: list[str]) -> dict[str, dict[str, Any]]:
    """A line style per label: its agent's colour (`colour_of`), the user's runs solid and
    thick with round markers, our shipped ones dashed and thin, a paper's dotted."""
    out = {}
    for i, (label, kind) in enumerate(zip(labels, whose(pd.Series(labels, dtype=object)))):
        yours = kind == "yours"
        out[label] = dict(color=colour_of(label, i, len(labels)), ls="-" if yours else "--",
                          lw=2.2 if yours else 1.0, marker="o" if yours else ".",
                          ms=4 if yours else 3, zorder=3 if yours else 2)  # fmt: skip
        if kind == "published":  # a paper's rows: dotted, crosses
            out[label].update(ls=":", marker="x", lw=1.0)
    return out


def task_panels(count: int, max_cols: int, panel: tuple[float, float]) -> tuple[Any, list]:
    """A figure of `count` panels (one per task), at most `max_cols` a row, each `panel`
    (width, height) inches, the grid's spare panels hidden: (figure, the `count` axes)."""
    import matplotlib.pyplot as plt

    cols = min(max_cols, count)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel[0] * cols, panel[1] * rows), squeeze=False, layout="constrained"
    )
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:count]


def legend_below(fig, axes) -> None:
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
    ax.set_yticks(y + h * (len(cols) - 1) / 2, [mpl(v) for v in t["label"]])
    ax.set_xscale("log")
    ax.set_xlabel("seconds per job (median over the agent config's finished jobs)")
    fig.legend(loc="outside upper center", ncol=len(cols), fontsize=8, frameon=False)
    return fig
