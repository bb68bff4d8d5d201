"""Plot pieces every rule's figures share: a line style per agent (the user's runs apart
from ours and a paper's), one legend below the panels, and the runtimes figure."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from leaderboard.standings import whose

YOURS, SHIPPED = "#dd8452", "#4c72b0"  # bar colours: the user's runs, our shipped ones


def mpl(text: Any) -> str:
    """Text safe for matplotlib (a `$` would start mathtext)."""
    return str(text).replace("$", r"\$")


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
