"""The L-C2ST report says which runs are the user's and marks rates of one run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments import lc2st_report as report


def _long(runs: dict[int, str]) -> pd.DataFrame:
    """Level runs of two_moons at N_cal 10,000 (L-C2ST, MSE): run number -> whose."""
    rows = []
    for run, source in runs.items():
        for obs in range(1, 11):
            rows.append(dict(kind="level", task="two_moons", budget=0, n_cal=10_000, run=run,
                             diagnostic="lc2st", n_eval=10_000, null_trials=100,
                             statistic="mse", obs=obs, p_sbi=0.5, p_exact=0.5, T=0.01,
                             seconds=1.0, source=source))  # fmt: skip
    return pd.DataFrame(rows)


def test_the_tables_say_which_runs_are_yours():
    mixed = report.summary(_long({1: "yours", 2: "shipped", 3: "shipped"}))
    assert mixed["runs"].iloc[0] == 3 and mixed["your_runs"].iloc[0] == 1
    assert "| 3 (1 yours) |" in report.markdown(mixed)
    only = report.summary(_long({1: "yours"}))
    assert "| 1 (yours) |" in report.markdown(only)
    ours = report.summary(_long({1: "shipped", 2: "shipped"}))
    assert "| 2 |" in report.markdown(ours) and "yours" not in report._section(
        "t", "level", "n_cal", ours, {}
    )
    assert report.runs_cell(3, 0) == "3" and report.runs_cell(2, 2) == "2 (yours)"


def test_the_figure_marks_rates_of_one_run(tmp_path, monkeypatch):
    """A rate of one run (ten tests of one classifier) is drawn hollow and the legend says
    so; shipped Figure 2 cells are one run each."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    table = report.summary(report.read_shipped())
    seen = {}
    real = plt.Figure.savefig

    def keep(fig, path, **kwargs):
        seen["labels"] = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        seen["hollow"] = sum(
            1 for ax in fig.axes for line in ax.get_lines() if line.get_markerfacecolor() == "white"
        )
        return real(fig, path, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    report.figure(table, tmp_path / "f.png")
    assert "hollow: a rate of one run" in seen["labels"] and seen["hollow"] > 0
    assert (tmp_path / "f.png").stat().st_size > 0 and np.any(table["runs"] == 1)
