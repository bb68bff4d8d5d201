"""Our shipped runs (`leaderboard.ranking.shipped`): made from a finished results store, written
with their provenance, read back, and ranked beside a user's agent on the same problems,
labelled as ours, by every rule (the Neural Testbed's per tau, the SBI benchmark's over
the same observations). Small files here, not the package's."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pandas as pd
import pytest

import leaderboard
from experiments.cli import main
from generative.sbi.problems import SBIBM
from leaderboard import build
from leaderboard.execution import shipped_store
from leaderboard.execution.jobs import Job
from leaderboard.ranking import literature, scoring_neural_testbed, shipped
from leaderboard.ranking.board import (
    coverage_notes,
    legend,
    missing_note,
    shipped_notes,
    tables,
    title,
)
from leaderboard.ranking.report import _best_rows, render_report
from leaderboard.store import ResultsStore
from testbed.errors import InputError


def _record(store, agent, pid, **metrics):
    job = Job.make(agent, {}, pid).as_dict()
    metrics = {"train_seconds": 2.0, "evaluation_seconds": 0.5, **metrics}
    store.record({**job, "status": "ok", "error": None, "metrics": metrics, "wall_seconds": 1.0})


@pytest.fixture
def nt(tmp_path, monkeypatch):
    """A shipped source for the Neural Testbed: uniform and mlp on four problems (tau 1
    and 10 of two environments), made with the real functions and put in place."""
    db = tmp_path / "ours.db"
    with ResultsStore(db) as s:
        kls = {"classification_2d/0": 0.4, "classification_2d/1": 0.6}
        kls |= {"classification_2d/210": 4.0, "classification_2d/211": 6.0}
        for pid, kl in kls.items():
            _record(s, "uniform", pid, kl_estimate=kl, pct_finite_kl=1.0, test_acc=0.5)
            _record(s, "mlp", pid, kl_estimate=kl / 2, pct_finite_kl=1.0, test_acc=0.8)
    path = tmp_path / "neural_testbed.csv.gz"
    shipped.write(shipped_store.from_results(db), path, notes=["a test file"])
    monkeypatch.setitem(shipped.SOURCES, "neural_testbed", path)
    monkeypatch.setitem(shipped.SOURCES, "tuned_references", tmp_path / "no-tuned.csv.gz")
    return path


def test_a_store_ships_its_rows_with_provenance(nt):
    df = leaderboard.published("neural_testbed")  # the API users call
    assert len(df) == 8 and set(df["agent"]) == {"uniform", "mlp"}
    assert list(df.columns[: len(shipped.COLUMNS)]) == shipped.COLUMNS
    assert {"kl_estimate", "pct_finite_kl", "test_acc", "train_seconds"} <= set(df.columns)
    assert "tau" not in df.columns  # settings are joined when ranked, not shipped
    assert df["config"].iloc[0].startswith("{")
    lines = shipped.provenance()
    assert "labelled as ours" in lines[0] and "at commit" in lines[1] and "jax" in lines[1]


def test_a_users_agent_is_ranked_beside_the_shipped_reference_agents(nt, tmp_path):
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:  # the user's agent on the tau = 1 problems only
        for pid, kl in (("classification_2d/0", 0.1), ("classification_2d/1", 0.1)):
            _record(s, "my_agent", pid, kl_estimate=kl, pct_finite_kl=1.0)
    board = build(db)
    table = board.tables_of("classification_2d")[1].set_index("label")
    assert set(table.index) == {"my_agent", "mlp (ours, shipped)", "uniform (ours, shipped)"}
    assert set(board.tables_of("classification_2d")) == {1}  # only the problems the user ran
    # uniform, shipped, normalises: the user did not run it
    assert table["normalized_kl"]["uniform (ours, shipped)"] == pytest.approx(1.0)
    assert table["normalized_kl"]["my_agent"] == pytest.approx(0.1 / 0.5)
    assert table["rank"]["my_agent"] == 1 and table["rank"]["mlp (ours, shipped)"] == 2
    assert set(board.df["agent"]) == {"my_agent"}  # the user's rows, not ours
    bare = build(db, shipped=False).tables_of("classification_2d")[1]
    assert list(bare["label"]) == ["my_agent"]
    # with the sweep's problems, ours cover all four and the user's missing ones count 1e6
    full = build(db, sweep="classification_2d").tables_of("classification_2d")
    assert set(full) == {1, 10}
    assert "my_agent" not in set(full[10]["label"])  # 1e6 everywhere: dropped, as the paper


def test_a_family_whose_shipped_source_holds_none_of_the_problems_says_so(nt, tmp_path):
    """Without the note, a table with no shipped agent looks as if there were none to show."""
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:  # classification_test names the same source, which has none
        _record(s, "my_agent", "classification_test/0", kl_estimate=0.1, pct_finite_kl=1.0)
        _record(s, "my_agent", "classification_2d/0", kl_estimate=0.1, pct_finite_kl=1.0)
    board = build(db)
    assert board.shipped_none == {"classification_test": "neural_testbed"}
    said = ("Our shipped runs (neural_testbed) hold none of the ranked problems of "
            "classification_test, so no shipped agent is shown there; they hold runs of "
            "classification_2d.")  # fmt: skip
    assert shipped_notes(board) == [said] and legend(board)[-1] == said
    assert said in render_report(board)
    assert list(board.tables_of("classification_test")[1]["label"]) == ["my_agent"]
    assert build(db, shipped=False).shipped_none == {}  # asked for none: nothing to explain
    assert build(db, sweep="classification_2d").shipped_none == {}


def test_runs_taken_from_the_shipped_ones_are_not_shown_twice(nt, tmp_path, monkeypatch, capsys):
    """A store that took shipped runs (`restore`) ranks them as its own rows, once."""
    rows = shipped.shipped("neural_testbed")
    mlp = set(rows.loc[rows["agent"] == "mlp", "key"])
    db = tmp_path / "mine.db"
    assert shipped_store.restore("neural_testbed", db, mlp) == 4
    opened = []  # held already: the store is only read (a read-only store stays usable)
    real_init = ResultsStore.__init__
    monkeypatch.setattr(ResultsStore, "__init__", lambda self, path, mode="w": (
        opened.append(mode), real_init(self, path, mode))[1])  # fmt: skip
    assert shipped_store.restore("neural_testbed", db, mlp) == 0 and opened == ["r"]
    monkeypatch.setattr(ResultsStore, "__init__", real_init)
    board = build(db)
    table = board.tables_of("classification_2d")[1].set_index("label")
    assert set(table.index) == {"mlp", "uniform (ours, shipped)"}
    assert table.loc["mlp", "mean_kl"] == pytest.approx((0.2 + 0.3) / 2)
    assert board.shipped_held == {"mlp": 4}  # and the leaderboard and report say so
    with ResultsStore(db) as s:  # a second family with the same shipped source: still 4
        _record(s, "mlp", "classification_2d_2021/1", kl_estimate=0.1, pct_finite_kl=1.0)
    board = build(db)
    said = ("Our shipped runs of agent configs whose every job here your results also hold "
            "are shown once, as yours: mlp (4 jobs).")  # fmt: skip
    assert said in legend(board) and said in render_report(board)
    capsys.readouterr()  # csv: the note on stderr, out of the table
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    assert said in capsys.readouterr().err
    one = dataclasses.replace(board, shipped_held={"mlp": 1, "uniform": 2})
    assert shipped_notes(one)[0].endswith(": mlp (1 job), uniform (2 jobs).")
    assert build(db, shipped=False).shipped_held == {}
    broken = tmp_path / "broken.csv"
    rows.assign(config="{not json").to_csv(broken, index=False)
    monkeypatch.setitem(shipped.SOURCES, "neural_testbed", broken)
    with pytest.raises(InputError, match="config or versions that is not JSON"):
        shipped_store.restore("neural_testbed", tmp_path / "other.db", mlp)


def test_a_shipped_config_the_user_holds_in_part_is_shown_whole(nt, tmp_path):
    """Leaving out only the held jobs counted them as missing (1e6): shipped mlp's KL/norm
    went from 0.32 to 79,908 on a user's sweep that shared 14 of its 420 jobs."""
    rows = shipped.shipped("neural_testbed")
    mlp_0 = set(
        rows.loc[(rows["agent"] == "mlp") & (rows["problem_id"] == "classification_2d/0"), "key"]
    )
    db = tmp_path / "mine.db"
    assert shipped_store.restore("neural_testbed", db, mlp_0) == 1
    with ResultsStore(db) as s:
        _record(s, "my_agent", "classification_2d/1", kl_estimate=0.1, pct_finite_kl=1.0)
    board = build(db)
    table = board.tables_of("classification_2d")[1].set_index("label")
    assert table.loc["mlp (ours, shipped)", "mean_kl"] == pytest.approx((0.2 + 0.3) / 2)
    assert table.loc["mlp (ours, shipped)", "num_problems"] == 2
    assert board.shipped_held == {} and shipped_notes(board) == []


def test_leaderboard_and_report_show_them(nt, tmp_path, capsys):
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        _record(s, "my_agent", "classification_2d/0", kl_estimate=0.1, pct_finite_kl=1.0)
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert "uniform (ours, shipped)" in set(rows["label"])
    report = tmp_path / "r.html"
    assert main(["report", "--results", str(db), "--out", str(report)]) == 0
    assert "mlp (ours, shipped)" in report.read_text()
    assert "; ranked beside our shipped runs of 2 agents." in report.read_text()
    capsys.readouterr()
    # --no-shipped: the user's rows alone
    assert main(["leaderboard", "--results", str(db), "--format", "csv", "--no-shipped"]) == 0
    assert set(pd.read_csv(io.StringIO(capsys.readouterr().out))["label"]) == {"my_agent"}
    assert main(["report", "--results", str(db), "--out", str(report), "--no-shipped"]) == 0
    assert "(ours, shipped)" not in report.read_text()


def test_the_shipped_runs_alone_rank_the_reference_agents_on_a_sweep(nt, tmp_path, capsys):
    board = build(None, sweep="classification_2d")  # no results file of the user's
    tables = board.tables_of("classification_2d")
    assert set(tables) == {1, 10} and board.results is None
    table = tables[1].set_index("label")
    assert list(table.index) == ["mlp (ours, shipped)", "uniform (ours, shipped)"]
    assert table.attrs["normalizer"] == "uniform (ours, shipped)"  # the tables say whose
    # the four problems shipped: both ran the same 2 of tau 1's 210, ranked over those (the
    # other 208 counted 1e6 made every score about 1e6 * 208 / 210)
    assert table.loc["mlp (ours, shipped)", "num_problems"] == 2
    assert table.loc["mlp (ours, shipped)", "normalized_kl"] == pytest.approx(0.5)
    said = "(normalised by uniform (ours, shipped); over the 2 of 210 problems uniform (ours,"
    assert said in title(board, board.rankings[0])
    assert missing_note(board) is None  # no results file to name
    assert main(["leaderboard", "--shipped-only", "--sweep", "classification_2d_quick"]) == 0
    out = capsys.readouterr().out
    assert "mlp (ours, shipped)" in out and "uniform (ours, shipped)" in out
    report = tmp_path / "r.html"
    args = ["--shipped-only", "--sweep", "classification_2d_quick"]
    assert main(["report", *args, "--out", str(report)]) == 0
    assert "mlp (ours, shipped)" in report.read_text()
    with pytest.raises(InputError, match="^sweep: the shipped runs alone are ranked over a"):
        build(None)
    with pytest.raises(
        InputError, match="sweep 'regression'; allowed: a sweep of problems of classif"
    ):
        build(None, sweep="regression")  # the test source holds classification_2d only
    capsys.readouterr()
    assert "Our shipped runs: " in report.read_text()  # the header says whose jobs
    refused = (["--no-shipped"], ["--export", str(tmp_path / "x.csv")], ["--failures"])
    for extra in (*refused, ["--results", str(tmp_path / "mine.db")]):
        assert main(["leaderboard", *args, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"testbed: error: {extra[0]}: ") and "\n" not in err


def test_every_tau_is_ranked_once(nt, monkeypatch):
    """A ranking per tau, not per row (4,200 rows made 4,200 rankings: 78 s, now 3 s)."""
    calls = []
    real = scoring_neural_testbed.score_ranking
    monkeypatch.setattr(
        scoring_neural_testbed,
        "score_ranking",
        lambda c, t, **k: (calls.append(t), real(c, t, **k))[1],
    )
    ids = ["classification_2d/0", "classification_2d/1", "classification_2d/210",
           "classification_2d/211"]  # fmt: skip
    clean = scoring_neural_testbed.clean_scores(shipped.beside("neural_testbed", ids))
    assert set(scoring_neural_testbed.score_rankings(clean)) == {1, 10} and sorted(calls) == [1, 10]


def test_over_observations_the_same_observations_as_the_users(tmp_path, monkeypatch):
    db = tmp_path / "ours.db"
    with ResultsStore(db) as s:
        for k in range(1, 7):
            _record(s, "fmpe", f"sbi/two_moons/1000/{k}", c2st=0.6 + 0.01 * k)
        _record(s, "fmpe", "sbi/slcp/1000/1", c2st=0.9)
    path = tmp_path / "sbibm_ours.csv"
    shipped.write(shipped_store.from_results(db), path, notes=["a test file"])
    monkeypatch.setitem(shipped.SOURCES, "sbibm_ours", path)
    user = tmp_path / "user.db"
    with ResultsStore(user) as s:
        for k in (1, 2, 3):
            _record(s, "my_agent", f"sbi/two_moons/1000/{k}", c2st=0.55)
    table = build(user).observed().set_index("label")
    ours = table[~table.index.str.endswith(" (sbibm paper)")]  # the paper's rows: below
    assert set(ours.index) == {"my_agent", "fmpe (ours, shipped)"}  # no slcp cell
    assert set(table["task"]) == {"two_moons"}
    assert table.loc["fmpe (ours, shipped)", "num_observations"] == 3  # the user's k = 1..3
    assert table.loc["fmpe (ours, shipped)", "mean_c2st"] == pytest.approx(
        np.mean([0.61, 0.62, 0.63])
    )
    assert table.loc["my_agent", "rank"] == 1
    # the paper's NPE over the same three observations
    paper = leaderboard.published("sbibm").query(
        "task == 'two_moons' and num_simulations == 1000 and algorithm == 'NPE' "
        "and num_observation <= 3"
    )
    assert table.loc["NPE (sbibm paper)", "num_observations"] == 3
    assert table.loc["NPE (sbibm paper)", "mean_c2st"] == pytest.approx(paper["c2st"].mean())


def test_the_sbi_leaderboard_shows_the_papers_rows_beside_ours(tmp_path, capsys):
    """Issue 47: the SBI comparison needed `leaderboard.published("sbibm")` from Python; the
    new methods' paper columns were empty where a paper reports the same task and budget."""
    board = build(None, sweep="sbi_two_moons")  # the shipped runs: fmpe, npse, nre_c, bnre
    table = board.observed()
    paper = leaderboard.published("sbibm").query("task == 'two_moons'")
    for budget in (1000, 10000, 100000):  # 100,000: a cell of the sweep none of ours ran
        cell = table[table["budget"] == budget].set_index("label")
        labels = {f"{a} (sbibm paper)" for a in paper["algorithm"].unique()}
        assert labels <= set(cell.index)
        npe = paper.query(f"num_simulations == {budget} and algorithm == 'NPE'")["c2st"]
        assert cell.loc["NPE (sbibm paper)", "mean_c2st"] == pytest.approx(npe.mean())
        assert cell.loc["NPE (sbibm paper)", "num_observations"] == 10
        assert sorted(cell["rank"]) == list(range(1, len(cell) + 1))  # ranked with ours
    nre_c = table[table["label"] == "nre_c (ours, shipped)"].set_index("budget")
    assert nre_c["paper_c2st"].to_dict() == {1000: 0.746, 10000: 0.591}  # Miller et al.
    assert set(nre_c["paper_source"]) == {"Miller 2022"}
    assert nre_c["mean_c2st"].round(3).to_dict() == {1000: 0.820, 10000: 0.825}
    fmpe = table[table["label"] == "fmpe (ours, shipped)"]
    assert fmpe["paper_c2st"].isna().all()  # no paper reports it here (the docs say so)
    assert main(["leaderboard", "--shipped-only", "--sweep", "sbi_two_moons"]) == 0
    out = capsys.readouterr().out
    assert "NPE (sbibm paper)" in out and "Miller 2022" in out and "published" in out
    report = tmp_path / "r.html"
    args = ["report", "--shipped-only", "--sweep", "sbi_two_moons", "--out", str(report)]
    assert main(args) == 0
    assert "REJ-ABC (sbibm paper)" in report.read_text()
    # a user's npe and our shipped npe both get the paper's columns; --no-shipped: no rows
    runs = pd.DataFrame({"agent": ["npe", "npe (ours, shipped)"], "task": "two_moons",
                         "budget": 1000, "observation": 1})  # fmt: skip
    beside = literature.beside(runs[["agent", "task", "budget"]], runs, SBIBM)
    first = paper.query("num_simulations == 1000 and algorithm == 'NPE' and num_observation == 1")
    assert list(beside["paper_c2st"]) == [first["c2st"].iloc[0]] * 2
    assert set(beside["paper_source"]) == {"Lueckmann 2021"}
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        _record(s, "my_agent", "sbi/two_moons/1000/1", c2st=0.7)
    mine = build(db, shipped=False).observed()
    assert list(mine["label"]) == ["my_agent"]


def test_unknown_sources_and_files_without_the_columns_are_refused(tmp_path):
    with pytest.raises(InputError, match="published results: got 'nope'; allowed: one of"):
        leaderboard.published("nope")
    bad = tmp_path / "bad.csv"
    bad.write_text("agent,task\nfmpe,slcp\n")
    with pytest.raises(InputError, match="lacks the columns key, config_key"):
        shipped.shipped(path=bad)


def test_the_neural_testbed_source_covers_every_reference_agent(tmp_path, capsys):
    from experiments import ship_neural_testbed as ship

    jobs = ship.expected_jobs()
    assert len(jobs) == 15 * 420 + 12 * 270 + 7 * 420
    assert {j.agent for j in jobs if j.problem_id.startswith("regression/")} >= {"gp_posterior"}
    figure = [j for j in jobs if j.problem_id.startswith("classification_2d_2021/")]
    assert {j.config["num_batches"] for j in figure if j.agent == "bbb"} == {10_000}
    db = tmp_path / "r.db"
    with ResultsStore(db) as s:  # one job of the source, one other
        s.record({**jobs[0].as_dict(), "status": "ok", "metrics": {"kl_estimate": 0.5}})
        _record(s, "mine", "classification_2d/0", kl_estimate=0.1)
    out = tmp_path / "nt.csv.gz"
    assert ship.main(["write", "--results", str(db), "--out", str(out)]) == 0
    assert "1 rows ->" in capsys.readouterr().out
    assert list(shipped.shipped(path=out)["key"]) == [jobs[0].key]
    # writing again from another store keeps the runs the file has (none lost), and a
    # store's run of a job the file holds replaces that row
    other = tmp_path / "other.db"
    with ResultsStore(other) as s:
        s.record({**jobs[1].as_dict(), "status": "ok", "metrics": {"kl_estimate": 0.7}})
        s.record({**jobs[0].as_dict(), "status": "ok", "metrics": {"kl_estimate": 0.6}})
    with ResultsStore(tmp_path / "third.db") as s:
        s.record({**jobs[2].as_dict(), "status": "ok", "metrics": {"kl_estimate": 0.9}})
    assert ship.main(["write", "--results", str(other), "--out", str(out)]) == 0
    rows = shipped.shipped(path=out).set_index("key")
    assert rows["kl_estimate"].to_dict() == {jobs[0].key: 0.6, jobs[1].key: 0.7}
    assert ship.main(["write", "--results", str(tmp_path / "third.db"), "--out", str(out)]) == 0
    assert "2 runs kept from" in capsys.readouterr().out
    rows = shipped.shipped(path=out).set_index("key")
    assert rows["kl_estimate"].to_dict() == {jobs[2].key: 0.9, jobs[0].key: 0.6, jobs[1].key: 0.7}
    assert ship.main(["write", "--results", str(tmp_path / "typo.db"), "--out", str(out)]) == 2
    assert "typo.db" in capsys.readouterr().err and len(shipped.shipped(path=out)) == 3
    assert ship.main(["run", "--sweeps", "nope"]) == 2


@pytest.mark.parametrize(
    "given, said",
    [("regression,,classification_2d", "which has an empty item"), ("regression,", "which has an "
     "empty item"), ("regression,regression", "which names regression twice")],
)  # fmt: skip
def test_ship_run_refuses_an_empty_or_repeated_sweep(tmp_path, capsys, monkeypatch, given, said):
    """`--sweeps` dropped an empty item and ran a repeated sweep's jobs twice."""
    from experiments import ship_neural_testbed as ship

    monkeypatch.setattr(ship, "expected_jobs", lambda *_: pytest.fail("jobs planned"))
    assert ship.main(["run", "--sweeps", given, "--results", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ship_neural_testbed: error: --sweeps: got"), err
    assert f"got {given!r}, {said}; allowed: " in err[0]
    assert list(tmp_path.iterdir()) == []


def _docs_table(path: str, header: str) -> dict[str, list[str]]:
    """A markdown table of a docs page: first column -> the other cells."""
    from pathlib import Path

    text = Path(__file__).resolve().parent.parent.joinpath(path).read_text()
    block = text[text.index(header) :].split("\n\n")[0].splitlines()
    cells = [[c.strip() for c in row.split("|")[1:-1]] for row in block[2:]]
    return {row[0]: row[1:] for row in cells}


def test_the_shipped_new_sbi_methods_hold_every_cell_and_the_docs_numbers():
    """The package's `sbibm_ours`: 4 agents x 3 tasks x 2 budgets x 10 observations, ok,
    and the docs' table is their mean C2ST per cell."""
    df = leaderboard.published("sbibm_ours")
    assert len(df) == 240 and set(df["status"]) == {"ok"} and df["key"].is_unique
    parts = df["problem_id"].str.split("/", expand=True)
    cells = df.assign(task=parts[1], budget=parts[2].astype(int), obs=parts[3].astype(int))
    counts = cells.groupby(["agent", "task", "budget"])["obs"].nunique()
    assert len(counts) == 24 and set(counts) == {10}
    assert df["c2st"].between(0.5, 1.0).all() and (df["sampling_seconds"] > 0).all()
    head = shipped.SOURCES["sbibm_ours"].read_text().splitlines()[:2]
    assert "labelled as ours" in head[0] and "sbi 0.27.0" in head[1]
    means = cells.groupby(["agent", "task", "budget"])["c2st"].mean()
    docs = _docs_table("docs/problems/sbi_new_methods.md", "| agent | two_moons 1k |")
    columns = [(t, b) for t in ("two_moons", "gaussian_linear", "slcp") for b in (1000, 10000)]
    for agent in ("fmpe", "npse", "nre_c", "bnre"):
        shown = [float(v) for v in docs[f"{agent} (ours)"]]
        assert shown == [round(means[agent, t, b], 3) for t, b in columns], agent


def test_a_users_run_is_ranked_beside_the_shipped_new_sbi_methods(tmp_path):
    ours = leaderboard.published("sbibm_ours").set_index("problem_id")
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        _record(s, "my_agent", "sbi/two_moons/1000/1", c2st=0.7)
    table = build(db).observed().set_index("label")
    assert {"fmpe (ours, shipped)", "bnre (ours, shipped)"} <= set(table.index)
    fmpe = ours[ours["agent"] == "fmpe"].loc["sbi/two_moons/1000/1", "c2st"]
    assert table.loc["fmpe (ours, shipped)", "mean_c2st"] == pytest.approx(fmpe)
    assert table.loc["fmpe (ours, shipped)", "num_observations"] == 1


def test_a_table_without_its_normalising_agent_shows_the_score_once(nt, tmp_path):
    """The 2021 sweep has no shipped uniform: its tables are not normalised, so the score
    shows once, its standard error beside it, and the legend explains every column."""
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        _record(s, "my_agent", "classification_2d_2021/1", kl_estimate=0.1, pct_finite_kl=1.0)
    board = build(db)
    ((title, shown),) = tables(board)
    assert title.endswith("(not normalised)")
    assert "normalized_kl" not in shown
    assert list(shown.columns[2:4]) == ["mean_kl", "normalized_stderr"]
    named = {line.split(":")[0] for line in legend(board)}
    assert {"KL", "stderr", "train s (median)", "eval s (median)"} <= named
    assert "KL/norm" not in named
    report = render_report(board)  # the report as the terminal: the mean once, and why
    assert ">KL/norm</th>" not in report and ">KL</th>" in report
    assert "their results hold no run of uniform, the normalising agent" in report
    normalised = build(db, normalize="my_agent")
    assert "normalized_kl" in tables(normalised)[0][1]
    assert ">KL/norm</th>" in render_report(normalised)


def test_the_shipped_classification_2d_runs_hold_every_job_and_give_the_docs_table():
    """Every reference agent on all 420 problems, and the docs' table is their ranking
    (`testbed leaderboard --shipped-only --sweep classification_2d`), rounded."""
    from experiments import ship_neural_testbed as ship

    rows = shipped.shipped("neural_testbed")
    jobs = ship.expected_jobs(["classification_2d"])
    assert {j.key for j in jobs} <= set(rows.loc[rows["status"] == "ok", "key"])
    board = build(None, sweep="classification_2d")
    tables = {tau: t.set_index("agent") for tau, t in board.tables_of("classification_2d").items()}
    docs = _docs_table("docs/reproductions/neural_testbed.md", "| agent | tau = 1 | +- s.e. |")
    tuned = " tuned (ours, shipped)"  # the tuned references: their own page, not this table
    defaults = [a for a in tables[10].index if not a.endswith(tuned)]
    assert list(docs) == [a.removesuffix(" (ours, shipped)") for a in defaults]
    for agent, shown in docs.items():
        one, ten = (tables[t].loc[f"{agent} (ours, shipped)"] for t in (1, 10))
        values = [one["normalized_kl"], one["normalized_stderr"], ten["normalized_kl"],
                  ten["normalized_stderr"], ten["mean_test_acc"]]  # fmt: skip
        assert [float(v) for v in shown] == [round(v, 3) for v in values], agent


def test_the_shipped_regression_runs_hold_every_job_and_give_the_docs_table():
    """Every reference agent on all 270 `regression` problems, and the docs' table is
    their ranking (`testbed leaderboard --shipped-only --sweep regression`), rounded."""
    from experiments import ship_neural_testbed as ship

    rows = shipped.shipped("neural_testbed")
    jobs = ship.expected_jobs(["regression"])
    assert {j.key for j in jobs} <= set(rows.loc[rows["status"] == "ok", "key"])
    (table,) = build(None, sweep="regression").tables_of("regression").values()
    table = table.set_index("agent")
    docs = _docs_table("docs/reproductions/neural_testbed.md", "| agent | KL / uniform's |")
    assert list(docs) == [a.removesuffix(" (ours, shipped)") for a in table.index]
    for agent, shown in docs.items():
        row = table.loc[f"{agent} (ours, shipped)"]
        values = [row["normalized_kl"], row["normalized_stderr"]]
        assert [float(v) for v in shown[:2]] == [round(v, 4) for v in values], agent
        assert int(shown[2]) == row["num_problems"] == 270


def test_the_shipped_2021_runs_hold_every_job_and_give_the_docs_table(tmp_path, capsys):
    """The package ships every job of the Neural Testbed reproduction, and its `--report`
    on them prints the table the docs show (a change to either shows here)."""
    from pathlib import Path

    import generative
    from experiments import reproduce_neural_testbed as rnt

    rows = shipped.shipped("neural_testbed")
    ids = generative.sweep_ids(rnt.SWEEP)
    jobs = rnt.jobs_for(list(rnt.FIGURE_2021), rnt.configs("2021"), ids)
    assert {j.key for j in jobs} <= set(rows.loc[rows["status"] == "ok", "key"])
    out = tmp_path / "out"
    argv = ["--report", "--results", str(tmp_path / "r.db"), "--out", str(out)]
    assert rnt.main(argv) == 0
    table = (out / "table.md").read_text().strip()
    docs = Path(__file__).resolve().parents[1] / "docs" / "reproductions" / "neural_testbed.md"
    assert table in docs.read_text(), table
    assert "| bbb | 100 | 210 |" in table


@pytest.mark.slow  # the full-size problems: compiling their scoring takes a while
@pytest.mark.parametrize("agent", ["uniform", "knn", "mlp"])
def test_a_shipped_run_is_what_the_code_gives_today(agent, tmp_path):
    """The shipped runs stay true: today's code gives each shipped KL again (up to float32
    rounding between processors, as the golden values); a change that moves them shows
    here, and then the runs are made again."""
    pair = ["classification_2d/7", "classification_2d/217"]  # tau 1 and 10, one training
    db = tmp_path / "again.db"
    argv = ["sweep", "--agent", agent, "--problem", ",".join(pair), "--results", str(db)]
    assert main([*argv, "--executor", "inline", "-q"]) == 0
    again = leaderboard.load(db).set_index("key")
    ours = shipped.shipped("neural_testbed").set_index("key")
    assert len(again) == 2 and set(again.index) <= set(ours.index)
    for key, row in again.iterrows():
        assert row["kl_estimate"] == pytest.approx(ours.loc[key, "kl_estimate"], rel=1e-6), key


def test_a_users_partial_normaliser_never_normalises_the_complete_ones(nt, tmp_path, capsys):
    """Issue 47: a user's `uniform` on a few problems (the README's job) normalised every
    agent on the full sweep, each missing problem counted 1e6: every agent read about 1e-7,
    nothing said why. The normaliser is now the run of it that covers the problems (ours,
    shipped), and a config that ran part of them is scored apart, over those it ran."""
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:
        _record(s, "uniform", "classification_2d/0", kl_estimate=0.8, pct_finite_kl=1.0)
        kls = {"classification_2d/0": 0.1, "classification_2d/1": 0.3}
        kls |= {"classification_2d/210": 1.0, "classification_2d/211": 3.0}
        for pid, kl in kls.items():
            _record(s, "my_agent", pid, kl_estimate=kl, pct_finite_kl=1.0)
    board = build(db)  # the problems the results hold: all four
    tau1 = board.tables_of("classification_2d")[1]
    assert tau1.attrs["normalizer"] == "uniform (ours, shipped)"
    table = tau1.set_index("label")
    assert list(table.index) == ["my_agent", "mlp (ours, shipped)", "uniform (ours, shipped)"]
    assert table.loc["my_agent", "normalized_kl"] == pytest.approx(0.2 / 0.5)
    assert table.loc["uniform (ours, shipped)", "normalized_kl"] == pytest.approx(1.0)
    assert (table["mean_kl"] < 1e5).all() and (table["num_problems"] == 2).all()
    (ranking,) = [r for r in board.rankings if r.tau == 1]
    apart = ranking.partial.set_index("label")  # the user's uniform: over the one it ran
    assert list(apart.index) == ["uniform"] and apart.loc["uniform", "coverage"] == "1 of 2"
    assert apart.loc["uniform", "normalized_kl"] == pytest.approx(0.8 / 0.4)
    assert apart.loc["uniform", "mean_kl"] == pytest.approx(0.8)
    assert apart.loc["uniform", "pct_health"] == 1.0  # a problem not run is coverage
    assert ranking.coverage == {"uniform": 1}
    assert "uniform" not in set(board.tables_of("classification_2d")[10]["label"])
    # shown: the table apart, its blank standard error saying why, whose rows are whose
    shown = dict(tables(board))
    main_title = "marginal KL, tau=1 (normalised by uniform (ours, shipped))"
    assert list(shown[main_title]["whose"]) == ["yours", "shipped", "shipped"]
    part = next(t for title, t in shown.items() if title.startswith(main_title + ": configs"))
    assert list(part["label"]) == ["uniform"] and list(part["coverage"]) == ["1 of 2"]
    assert list(part["normalized_stderr"]) == ["n/a: 1 seed group"]
    # named on stderr in every format
    for fmt in ("table", "csv"):
        assert main(["leaderboard", "--results", str(db), "--format", fmt]) == 0
        err = capsys.readouterr().err
        assert "classification_2d: configs that ran part of the ranked problems are shown " in err
        assert "uniform (1 of 2 at tau 1, 0 of 2 at tau 10)." in err
    report = render_report(board)  # the report: the same rule, the user's rows marked
    assert 'data-table="kl-tau-1-partial"' in report and "normalised by uniform (ours, sh" in report
    assert '<tr class="yours"><td class="rank">1</td><td class="text label">my_agent</td>' in report
    assert ">n/a: 1 seed group</td>" in report
    assert "uniform (1 of 2 at tau 1, 0 of 2 at tau 10)." in report
    drawn = _best_rows(board, board.rankings)  # the num_train plot: not a mean over fewer
    assert set(drawn["label"]) == {"my_agent", "mlp (ours, shipped)", "uniform (ours, shipped)"}


def test_without_a_sweep_the_ranking_says_what_it_covers_and_why_a_stderr_is_blank(
    nt, tmp_path, capsys
):
    """Issue 47: on the README's job the report's stderr column was blank and nothing said
    why, nor that its problems were a few of the sweep's."""
    db = tmp_path / "user.db"
    with ResultsStore(db) as s:  # one environment, at tau 1 and 10
        for pid in ("classification_2d/0", "classification_2d/210"):
            _record(s, "my_agent", pid, kl_estimate=0.1, pct_finite_kl=1.0)
    board = build(db)
    ((title, shown), _) = tables(board)
    assert list(shown["normalized_stderr"]) == ["n/a: 1 seed group"] * 3
    assert "num_seed_groups" not in shown and "num_seed_groups" in board.rankings[0].table
    said = ("classification_2d: ranked over the 2 problems your results hold; our shipped "
            "runs hold 4 (--sweep classification_2d ranks over them all).")  # fmt: skip
    assert said in coverage_notes(board)
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    assert said in capsys.readouterr().err
    assert said in render_report(board)
    swept = coverage_notes(build(db, sweep="classification_2d"))
    assert not any("problems your results hold" in note for note in swept)


def test_shipped_only_with_a_metric_no_family_ranks_names_the_shipped_runs():
    """`--shipped-only --metric c2st` on a Neural Testbed sweep: the refusal names our
    shipped runs of the sweep (it said "'None' has no family")."""
    with pytest.raises(InputError, match="--shipped-only: our shipped runs of sweep"):
        build(None, sweep="classification_2d", metric="c2st")
