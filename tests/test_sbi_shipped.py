"""Our shipped runs (`leaderboard.shipped`): made from a finished results store, written
with their provenance, read back, and set beside a user's C2ST ranking over the same
observations as the user's runs, labelled as ours. A small file here, not the package's.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from leaderboard import shipped
from leaderboard.jobs import Job
from leaderboard.store import ResultsStore
from testbed.errors import InputError


def _record(store, agent, pid, c2st, **metrics):
    job = Job.make(agent, {}, pid).as_dict()
    metrics = {"c2st": c2st, "train_seconds": 2.0, "sampling_seconds": 0.5, **metrics}
    store.record({**job, "status": "ok", "error": None, "metrics": metrics, "wall_seconds": 1.0})


@pytest.fixture
def ours(tmp_path):
    """A shipped file: fmpe at observations 1..6 of two_moons / 1,000 and one slcp run."""
    db = tmp_path / "ours.db"
    with ResultsStore(db) as s:
        for k in range(1, 7):
            _record(s, "fmpe", f"sbi/two_moons/1000/{k}", 0.6 + 0.01 * k)
        _record(s, "fmpe", "sbi/slcp/1000/1", 0.9)
        _record(s, "fmpe", "sbi/two_moons/1000/1/seeded", 0.99)  # not the benchmark's k
        _record(s, "fmpe", "sbi/slcp/1000/1/iid10", 0.99)  # another posterior than k's
    rows = shipped.from_results(db)
    path = tmp_path / "sbibm_ours.csv"
    shipped.write(rows, path, notes=["a test file"])
    return path


def test_a_store_ships_its_benchmark_runs(ours):
    text = ours.read_text()
    assert text.startswith("# a test file\nagent,task,budget,observation,c2st,")
    df = shipped.shipped(path=ours)
    assert len(df) == 7  # the seeded and i.i.d. runs stay out
    assert set(df["task"]) == {"two_moons", "slcp"} and (df["agent"] == "fmpe").all()
    assert df["sampling_seconds"].eq(0.5).all() and df["train_seconds"].eq(2.0).all()
    assert df["budget"].dtype.kind == "i" and df["observation"].dtype.kind == "i"
    assert df["config"].iloc[0].startswith("{")  # the agent's config, as JSON


def test_provenance_says_when_where_and_with_what():
    lines = shipped.provenance()
    assert "labelled as ours" in lines[0] and "sbi 0.27" in lines[1]
    assert "at commit" in lines[1] and "cores" in lines[1]


def test_the_package_file_reads():
    """The package's file (no runs shipped until the benchmark run is made) reads as a
    table of the shipped columns."""
    df = shipped.shipped()
    assert list(df.columns)[: len(shipped.COLUMNS)] == shipped.COLUMNS
    with pytest.raises(InputError, match="shipped results: got 'nope'; allowed: one of"):
        shipped.shipped("nope")


def test_shipped_runs_stand_beside_a_users_over_the_same_observations(ours):
    # the user's C2ST ranking: their agent at observations 1..3 of two_moons / 1,000
    table = pd.DataFrame(
        [
            {"agent": "mine", "label": "mine", "config_key": "k", "family": "sbi",
             "task": "two_moons", "budget": 1000, "mean_score": 0.55, "ci_low": math.nan,
             "ci_high": math.nan, "num_observations": 3, "num_failed": 0},
        ]
    )  # fmt: skip
    observed = pd.DataFrame(
        {"family": "sbi", "task": "two_moons", "budget": 1000, "observation": [1, 2, 3]}
    )
    out = shipped.beside_ours(table, observed, path=ours)
    assert len(out) == 2  # no slcp row: the user ran no slcp cell
    row = out[out["shipped"]].iloc[0]
    assert row["label"] == "fmpe (ours, shipped)" and row["agent"] == "fmpe"
    assert row["config_key"].startswith("shipped:")
    assert row["mean_score"] == pytest.approx(np.mean([0.61, 0.62, 0.63]))  # k = 1..3 only
    assert row["num_observations"] == 3 and math.isnan(row["ci_low"])  # < 5: no interval
    assert not out.loc[out["agent"] == "mine", "shipped"].iloc[0]
    # at all six observations: a bootstrap interval, as the user's rows get
    observed6 = observed.merge(pd.DataFrame({"observation": range(1, 7)}), how="cross")
    observed6 = observed6.drop(columns="observation_x").rename(
        columns={"observation_y": "observation"}
    )
    row = shipped.beside_ours(table, observed6, path=ours).query("shipped").iloc[0]
    assert row["num_observations"] == 6 and row["ci_low"] <= row["mean_score"] <= row["ci_high"]
    # an older table names its score mean_c2st; a cell of another family gets nothing
    old = table.rename(columns={"mean_score": "mean_c2st"})
    assert "mean_c2st" in shipped.beside_ours(old, observed, path=ours).query("shipped")
    other = observed.assign(family="conjugate_sbi")
    assert len(shipped.beside_ours(table, other, path=ours)) == 1


def test_a_file_without_the_columns_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("agent,task\nfmpe,slcp\n")
    with pytest.raises(InputError, match="lacks the columns budget, observation"):
        shipped.shipped(path=bad)


def test_testbed_leaderboard_ranks_a_users_agent_beside_our_shipped_runs(
    ours, tmp_path, monkeypatch, capsys
):
    from experiments.cli import main

    monkeypatch.setitem(shipped.SOURCES, "sbibm_ours", ours)
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        for k in (1, 2, 3):
            _record(s, "my_agent", f"sbi/two_moons/1000/{k}", 0.55)
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("label")
    assert set(rows.index) == {"my_agent", "fmpe (ours, shipped)"}
    assert rows.loc["fmpe (ours, shipped)", "num_observations"] == 3  # the user's k = 1..3
    rank = rows["rank"]
    assert rank["my_agent"] == 1 and rank["fmpe (ours, shipped)"] == 2  # 0.55 < 0.62
