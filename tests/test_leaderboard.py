"""Leaderboard without worker processes: job keys, the results store, scoring rules, CLI."""

from __future__ import annotations

import json
import math
import os
import sqlite3

import leaderboard_faults  # noqa: F401  (registers the lbfault_sbi settings family)
import numpy as np
import pandas as pd
import pytest

from experiments.cli import main
from leaderboard import build as lb_build
from leaderboard.execution import results as results_module
from leaderboard.execution.jobs import Job, expand, parse_seeds, sweep_jobs
from leaderboard.execution.runner import todo
from leaderboard.ranking import scoring, scoring_neural_testbed, scoring_per_cell
from leaderboard.store import ResultsStore
from testbed.errors import InputError
from testbed.ranking import c2st

# ---------------------------------------------------------------- jobs


def test_job_key_is_stable_and_separates_seed_from_config():
    a = Job.make("beta_bernoulli", {"a": 1.0, "b": 2.0, "seed": 5}, "coin/3", seed=1)
    b = Job.make("beta_bernoulli", {"b": 2.0, "a": 1.0}, "coin/3", seed=1)
    c = Job.make("beta_bernoulli", {"b": 2.0, "a": 1.0}, "coin/3", seed=2)
    d = Job.make("beta_bernoulli", {"b": 2.0, "a": 3.0}, "coin/3", seed=1)
    assert a.key == b.key == f"{a.config_key}/coin/3/1"
    assert c.config_key == a.config_key and c.key != a.key
    assert d.config_key != a.config_key
    assert "seed" not in a.config


def test_sweep_expansion_over_configs_problems_seeds():
    jobs = sweep_jobs(["uniform", "beta_bernoulli"], "coin", seeds=[0, 1])
    # uniform takes no seed (nothing in it is random): seed 0 only
    assert len(jobs) == 18 * (1 + 2) and len({j.key for j in jobs}) == len(jobs)
    assert {j.seed for j in jobs if j.agent == "uniform"} == {0}
    one = expand(["beta_bernoulli"], ["coin/0", "coin/0"], overrides={"a": 2.0})
    assert len(one) == 1 and one[0].config["a"] == 2.0


@pytest.mark.parametrize("text, seeds", [("0", [0]), ("0,2", [0, 2]), ("1-3,3", [1, 2, 3])])
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "x", "1-b", "0-"])  # "0-": half a range
def test_parse_seeds_bad(text):
    with pytest.raises(InputError, match="seeds"):
        parse_seeds(text)


# ---------------------------------------------------------------- store


def _result(agent="uniform", pid="coin/0", seed=0, status="ok", config=None, **metrics):
    job = Job.make(agent, config or {}, pid, seed).as_dict()
    return {
        **job,
        "status": status,
        "error": None if status == "ok" else "boom",
        "metrics": metrics,
        "wall_seconds": 0.5,
        "versions": {"testbed": "x"},
        "host": "h",
    }


def test_store_commits_keeps_ok_rows_and_replaces_failed_ones(tmp_path):
    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        assert s.record(_result(kl_estimate=0.25)) is True
        assert s.record(_result(kl_estimate=9.0)) is False  # an ok row is never overwritten
        assert s.record(_result(pid="coin/1", status="failed", kl_estimate=math.nan))
        assert s.record(_result(pid="coin/1", kl_estimate=0.5))  # retried: replaced
        assert s.count() == {"ok": 2, "failed": 0}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    df = results_module.load(path)
    assert df.set_index("problem_id")["kl_estimate"].to_dict() == {"coin/0": 0.25, "coin/1": 0.5}
    assert df.set_index("problem_id")["attempts"].to_dict() == {"coin/0": 1, "coin/1": 2}
    # problem settings joined from generative.problem_settings (coin/1: p=0.2, n=10, tau=1)
    row = df.set_index("problem_id").loc["coin/1"]
    assert (row["p"], row["num_train"], row["tau"], row["seed"]) == (0.2, 10, 1, 2)


def test_a_batch_of_results_commits_whole_or_not_at_all(tmp_path):
    """`record_many` (restoring shipped runs) commits its rows in one transaction: a row
    SQLite refuses leaves none of the batch behind, and ok rows are still kept."""
    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        assert s.record(_result(pid="coin/0", kl_estimate=0.25))
        bad = {**_result(pid="coin/2"), "host": object()}  # no SQLite type binds it
        with pytest.raises(sqlite3.ProgrammingError, match="binding"):  # not "damaged"
            s.record_many([_result(pid="coin/1", kl_estimate=0.5), bad])
        assert s.keys() == {_result(pid="coin/0")["key"]}  # coin/1 rolled back with it
        batch = [_result(pid=p, kl_estimate=0.5) for p in ("coin/0", "coin/1", "coin/2")]
        assert s.record_many(batch) == 2  # coin/0's ok row is kept
    kl = results_module.load(path).set_index("problem_id")["kl_estimate"].to_dict()
    assert kl == {"coin/0": 0.25, "coin/1": 0.5, "coin/2": 0.5}


def test_a_real_job_row_has_metrics_timings_config_and_versions(tmp_path):
    from leaderboard.execution.executors import InlineExecutor
    from leaderboard.execution.runner import run_sweep

    jobs = expand(["beta_bernoulli"], ["coin/1"], overrides={"a": 2.0})
    with ResultsStore(tmp_path / "r.db") as s:
        assert run_sweep(jobs, s, InlineExecutor()).ok == 1
    row = results_module.load(tmp_path / "r.db").iloc[0]
    assert row["status"] == "ok" and row["kl_estimate"] > 0 and row["wall_seconds"] > 0
    assert row["train_seconds"] >= 0 and row["evaluation_seconds"] > 0
    assert json.loads(row["config"])["a"] == 2.0 and "seed" not in json.loads(row["config"])
    versions = json.loads(row["versions"])
    assert {"python", "testbed", "jax", "numpy"} <= set(versions)
    assert (row["p"], row["tau"]) == (0.2, 1)  # problem settings joined


def test_resume_skips_ok_and_failed_unless_retrying(tmp_path):
    jobs = expand(["uniform"], ["coin/0", "coin/1", "coin/2"])
    with ResultsStore(tmp_path / "r.db") as s:
        s.record(_result(pid="coin/0", kl_estimate=0.1))
        s.record(_result(pid="coin/1", status="failed"))
        assert [j.problem_id for j in todo(jobs, s)] == ["coin/2"]
        assert [j.problem_id for j in todo(jobs, s, retry_failed=True)] == ["coin/1", "coin/2"]


def test_non_finite_metrics_round_trip(tmp_path):
    with ResultsStore(tmp_path / "r.db") as s:
        s.record(_result(status="failed", kl_estimate=math.nan, test_acc=math.inf))
    row = results_module.load(tmp_path / "r.db").iloc[0]
    assert math.isnan(row["kl_estimate"]) and row["test_acc"] == math.inf
    assert row["error"] == "boom"


def test_export_csv_and_parquet(tmp_path):
    with ResultsStore(tmp_path / "r.db") as s:
        for i in range(3):
            s.record(_result(pid=f"coin/{i}", kl_estimate=0.1 * i))
    assert results_module.export(tmp_path / "r.db", tmp_path / "r.csv") == 3
    assert results_module.export(tmp_path / "r.db", tmp_path / "r.parquet") == 3
    for back in (pd.read_csv(tmp_path / "r.csv"), pd.read_parquet(tmp_path / "r.parquet")):
        assert list(back["kl_estimate"]) == [0.0, 0.1, 0.2]
        assert list(back["p"]) == [0.2, 0.2, 0.2]
    with pytest.raises(InputError, match="allowed: a path ending in .csv or .parquet"):
        results_module.export(tmp_path / "r.db", tmp_path / "r.xlsx")


def _old_version_file(path):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', '0')")


def test_bad_results_files(tmp_path):
    _old_version_file(tmp_path / "old.db")
    for mode in ("r", "w"):
        with pytest.raises(InputError, match="schema version 0.*allowed: version 1"):
            ResultsStore(tmp_path / "old.db", mode=mode)
    (tmp_path / "text.db").write_text("hello")
    with pytest.raises(InputError, match="not a SQLite file"):
        ResultsStore(tmp_path / "text.db")
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(InputError, match="no 'meta' table"):
        ResultsStore(tmp_path / "other.db")
    with pytest.raises(InputError, match="does not exist"):
        ResultsStore(tmp_path / "missing.db", mode="r")


def test_read_only_results_paths(tmp_path):
    path = tmp_path / "r.db"
    ResultsStore(path).close()
    os.chmod(path, 0o444)
    with pytest.raises(InputError, match="cannot be written: the file is read-only"):
        ResultsStore(path)
    assert len(results_module.load(path)) == 0  # reading still works
    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o555)
    try:
        with pytest.raises(InputError, match="folder .* is read-only"):
            ResultsStore(folder / "new.db")
    finally:
        os.chmod(folder, 0o755)


# ---------------------------------------------------------------- Neural Testbed scoring


def _kl_frame(rows):
    """rows: (agent, config, problem_id, agent_seed, kl, status) -> a results DataFrame."""
    results = [
        _result(agent=a, config=c, pid=p, seed=s, status=st, kl_estimate=kl, test_acc=0.5)
        for a, c, p, s, kl, st in rows
    ]
    return results_module.to_dataframe(
        [
            {
                **r,
                "agent_seed": r["seed"],
                "config": json.dumps(r["config"]),
                "attempts": 1,
                "finished_at": "t",
            }
            for r in results
        ]
    )


def test_clean_kl_applies_the_papers_rules():
    ids = [f"coin/{i}" for i in range(6)]
    df = _kl_frame(
        [
            ("uniform", {}, "coin/0", 0, -0.5, "ok"),  # clipped to 0, counts as bad
            ("uniform", {}, "coin/1", 0, -5e-5, "ok"),  # clipped, within tolerance
            ("uniform", {}, "coin/2", 0, math.nan, "failed"),  # -> 1e6, bad
            ("uniform", {}, "coin/3", 0, math.inf, "ok"),  # -> 1e6, bad
            ("uniform", {}, "coin/4", 0, -math.inf, "ok"),  # clipped to 0 first (as the paper)
            ("uniform", {}, "coin/7", 0, 0.3, "ok"),  # not in the sweep: dropped, bad
            # coin/5 missing -> 1e6 here, not run: coverage (scored apart), not health
        ]
    )
    clean = scoring_neural_testbed.clean_scores(df, ids).set_index("problem_id")
    assert clean["score"].to_dict() == {
        "coin/0": 0.0,
        "coin/1": 0.0,
        "coin/2": 1e6,
        "coin/3": 1e6,
        "coin/4": 0.0,
        "coin/5": 1e6,
    }
    # As the paper: bad = 2 below -1e-4 (-0.5, -inf) + 2 non-finite + 1 extra = 5 over the
    # 5 jobs it ran -> health 0; without the extra id: 1 - 4/5. The problem it never ran
    # (coin/5) is not a bad job: the ranking shows the config apart, with what it ran.
    assert clean["pct_health"].iloc[0] == pytest.approx(0.0)
    clean = scoring_neural_testbed.clean_scores(df[df["problem_id"] != "coin/7"], ids)
    assert clean["pct_health"].iloc[0] == pytest.approx(1 - 4 / 5)
    assert clean.set_index("problem_id")["has_job"].to_dict() == {
        **{f"coin/{i}": 1.0 for i in range(5)}, "coin/5": 0.0}  # fmt: skip
    clean = clean.set_index("problem_id")
    assert clean.loc["coin/3", "tau"] == 1 and clean.loc["coin/3", "p"] == 0.5


def test_kl_ranking_normalises_by_uniform_with_seed_group_stderr():
    # coin/0..8 have tau=1 and problem seeds 1..9 (groups seed % 10 are singletons).
    kls = {"uniform": [0.2, 0.4, 0.6, 0.2, 0.4, 0.6, 0.2, 0.4, 0.6]}
    kls["beta_bernoulli"] = [v / 4 for v in kls["uniform"]]
    rows = [(a, {}, f"coin/{i}", 0, v, "ok") for a, vals in kls.items() for i, v in enumerate(vals)]
    rank = scoring_neural_testbed.score_ranking(
        scoring_neural_testbed.clean_scores(_kl_frame(rows)), tau=1
    )
    assert list(rank["agent"]) == ["beta_bernoulli", "uniform"]
    assert rank.attrs["normalizer"] == "uniform"
    r = rank.set_index("agent")
    assert r.loc["uniform", "normalized_kl"] == pytest.approx(1.0)
    assert r.loc["beta_bernoulli", "normalized_kl"] == pytest.approx(0.25)
    # stderr = np.std(ddof=0) of the 9 group means / sqrt(9): values 0.2,0.4,0.6 x3 ->
    # std = sqrt(((-.2)^2 + 0 + .2^2) / 3) = 0.163299..., / 3 = 0.054433
    assert r.loc["uniform", "stderr_kl"] == pytest.approx(math.sqrt(0.08 / 3) / 3)
    assert r.loc["uniform", "normalized_stderr"] == pytest.approx(math.sqrt(0.08 / 3) / 3 / 0.4)
    assert r.loc["uniform", "mean_test_acc"] == 0.5 and r.loc["uniform", "num_problems"] == 9
    with pytest.raises(InputError, match="normalize: got 'mlp'"):
        scoring_neural_testbed.score_ranking(
            scoring_neural_testbed.clean_scores(_kl_frame(rows)), tau=1, normalize="mlp"
        )


def test_seed_groups_pool_problems_with_equal_seed_mod_10():
    kl = pd.Series([1.0, 3.0, 10.0])
    seeds = pd.Series([1, 11, 2])  # groups {1: mean 2, 2: mean 10}
    assert scoring_neural_testbed.seed_group_stderr(kl, seeds) == pytest.approx(
        np.std([2.0, 10.0]) / 2**0.5
    )


def test_no_uniform_means_no_normalisation_and_best_config_is_selected():
    rows = []
    for i in range(9):
        rows.append(("beta_bernoulli", {"a": 1.0}, f"coin/{i}", 0, 0.3, "ok"))
        rows.append(("beta_bernoulli", {"a": 2.0}, f"coin/{i}", 0, 0.1, "ok"))
    clean = scoring_neural_testbed.clean_scores(_kl_frame(rows))
    best = scoring_neural_testbed.best_configs(clean)
    assert best["beta_bernoulli"] == Job.make("beta_bernoulli", {"a": 2.0}, "x").config_key
    rank = scoring_neural_testbed.score_ranking(clean, tau=1)
    assert rank.attrs["normalizer"] is None and len(rank) == 1
    assert rank["normalized_kl"].iloc[0] == pytest.approx(0.1)
    assert rank["label"].iloc[0] == "beta_bernoulli[a=2.0]"
    assert len(scoring_neural_testbed.score_ranking(clean, tau=1, best_only=False)) == 2


def test_agent_seeds_are_averaged_and_all_missing_agents_are_dropped():
    rows = [("uniform", {}, "coin/0", 0, 0.2, "ok"), ("uniform", {}, "coin/0", 1, 0.4, "ok")]
    rows += [("oracle", {}, "coin/0", 0, math.nan, "failed")]
    rank = scoring_neural_testbed.score_ranking(
        scoring_neural_testbed.clean_scores(_kl_frame(rows)), tau=1, normalize="none"
    )
    assert list(rank["agent"]) == ["uniform"]  # oracle's 1e6 is >= the 1e6 limit: dropped
    assert rank["mean_kl"].iloc[0] == pytest.approx(0.3)


# ---------------------------------------------------------------- SBI scoring


def _c2st_frame(values, task="two_moons", budget=1000, agent="uniform"):
    rows = [
        _result(agent=agent, pid=f"lbfault_sbi/{task}/{budget}/{k + 1}", c2st=v)
        for k, v in enumerate(values)
    ]
    return results_module.to_dataframe(
        [{**r, "agent_seed": 0, "config": "{}", "attempts": 1, "finished_at": "t"} for r in rows]
    )


def test_c2st_mean_and_bootstrap_interval():
    rng = np.random.default_rng(0)
    values = rng.normal(0.7, 0.05, size=200)
    table = scoring_per_cell.rank_observations(_c2st_frame(values))
    row = table.iloc[0]
    assert (row["task"], row["budget"], row["num_observations"]) == ("two_moons", 1000, 200)
    assert row["mean_c2st"] == pytest.approx(values.mean())
    # The percentile bootstrap of a mean of n=200 near-normal values matches the normal
    # interval mean +- 1.96 sd/sqrt(n). Monte Carlo error of a 2.5% quantile with B=1000:
    # sqrt(.025*.975/1000)/phi(1.96) = 0.085 standard errors, i.e. ~4% of the half-width;
    # 20% of the half-width leaves room for 3 MC sds plus finite-n skew.
    half = 1.96 * values.std() / np.sqrt(len(values))
    assert row["ci_low"] == pytest.approx(values.mean() - half, abs=0.2 * half)
    assert row["ci_high"] == pytest.approx(values.mean() + half, abs=0.2 * half)


def test_c2st_constant_values_give_a_point_interval_and_nan_is_counted():
    df = _c2st_frame([0.6] * 5 + [math.nan])
    row = scoring_per_cell.rank_observations(df).iloc[0]
    assert (row["mean_c2st"], row["ci_low"], row["ci_high"]) == (0.6, 0.6, 0.6)
    assert row["num_failed"] == 1 and row["num_observations"] == 5


def test_c2st_has_no_interval_below_five_observations(tmp_path, capsys):
    """A bootstrap of 2 values gives just the two values (of 4, about their range): no
    95% interval is claimed below MIN_CI_OBSERVATIONS, and the tables say so."""
    from leaderboard.ranking import board as lb

    for n in (2, 4):
        row = scoring_per_cell.rank_observations(_c2st_frame([0.6, 0.8, 0.7, 0.9][:n])).iloc[0]
        assert row["num_observations"] == n and row["mean_c2st"] == pytest.approx(
            0.7 + 0.05 * (n > 2)
        )
        assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    row = scoring_per_cell.rank_observations(_c2st_frame([0.6, 0.8, 0.7, 0.9, 0.65])).iloc[0]
    assert 0.6 <= row["ci_low"] < row["mean_c2st"] < row["ci_high"] <= 0.9
    assert scoring.MIN_CI_OBSERVATIONS == 5
    assert "blank below 5 observations" in lb.column_help("ci_low", c2st(("task", "budget")))
    path = tmp_path / "sbi.db"
    with ResultsStore(path) as s:
        for k, v in ((1, 0.6), (2, 0.8)):
            s.record(_result(agent="npe", pid=f"lbfault_sbi/two_moons/1000/{k}", c2st=v))
    assert main(["leaderboard", "--results", str(path)]) == 0
    out = capsys.readouterr().out
    assert "none below 5 observations" in out  # the table's title
    assert "CI low: lower end of the 95% bootstrap interval" in out  # the legend
    assert main(["leaderboard", "--results", str(path), "--format", "json"]) == 0
    (rows,) = json.loads(capsys.readouterr().out).values()
    assert (rows[0]["ci_low"], rows[0]["ci_high"], rows[0]["num_observations"]) == (None, None, 2)


# ---------------------------------------------------------------- command line


def test_conjugate_results_are_ranked_beside_the_others(tmp_path, capsys):
    """A conjugate model run as a simulator has no task setting: it stopped leaderboard,
    report and --export for the whole file ('c2st rows have no task setting'). Its problem
    name is its task now; exact agents' rows (no budget) stay out of the C2ST table."""
    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        for name, c2st in (("beta_binomial/1", 0.65), ("wyb/1", 0.7)):
            s.record(_result(agent="rej_abc", pid=f"conjugate_sbi/{name}/1000", c2st=c2st))
        s.record(_result(agent="exact", pid="conjugate/wyb/1", c2st=0.5))
        s.record(_result(agent="uniform", pid="coin/0", kl_estimate=0.5))
    board = lb_build(path)
    c2st = board.observed().set_index("task")
    assert sorted(c2st.index) == ["beta_binomial/1", "wyb/1"]
    assert c2st.loc["wyb/1", "mean_c2st"] == 0.7 and c2st.loc["wyb/1", "budget"] == 1000
    assert board.rankings  # the coin KL table is still there
    assert main(["leaderboard", "--results", str(path)]) == 0
    assert "beta_binomial/1" in capsys.readouterr().out
    report = tmp_path / "r.html"
    assert main(["report", "--results", str(path), "--out", str(report)]) == 0
    assert main(["leaderboard", "--results", str(path), "--export", str(tmp_path / "a.csv")]) == 0
    # only an exact agent's row: its C2ST has no budget, nothing to rank (was a KeyError)
    exact_only = tmp_path / "exact.db"
    with ResultsStore(exact_only) as s:
        s.record(_result(agent="exact", pid="conjugate/wyb/1", c2st=0.5))
    capsys.readouterr()
    assert main(["leaderboard", "--results", str(exact_only)]) == 2
    err = capsys.readouterr().err
    assert "has no score its families are ranked on" in err and "Traceback" not in err
    assert main(["report", "--results", str(exact_only), "--out", str(report)]) == 0


def test_health_counts_problems_where_every_job_failed_and_each_seed(tmp_path):
    """Two ways a ranking looked healthier than its jobs: a problem on which every job
    failed was left out (100% health over the rest), and a missing problem counted once
    for all of an agent's seeds (2 ok of 2 seeds x 4 problems was 40%)."""
    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        for i in range(18):  # raiser fails on coin/12..17 and nobody else ran them
            ok = i < 12
            s.record(_result(agent="raiser", pid=f"coin/{i}", status="ok" if ok else "failed",
                             **({"kl_estimate": 0.2} if ok else {})))  # fmt: skip
        for seed in (0, 1):  # two seeds on coin/0, one on coin/1: 3 of its 4 jobs
            s.record(_result(agent="seeded", pid="coin/0", seed=seed, kl_estimate=0.1))
        s.record(_result(agent="seeded", pid="coin/1", seed=0, kl_estimate=0.1))
    board = lb_build(path, normalize=None)
    tables = [t.set_index("agent") for t in board.tables_of("coin").values()]  # one a tau
    assert all(t.loc["raiser", "pct_health"] == pytest.approx(12 / 18) for t in tables)
    assert sum(t.loc["raiser", "num_problems"] for t in tables) == 18
    assert max(t.loc["raiser", "mean_kl"] for t in tables) > 1e5  # failures count 1e6
    # seeded ran 2 of the 18 problems: apart, over those (the 16 others are coverage)
    assert all("seeded" not in t.index for t in tables)
    apart = [r.partial.set_index("agent") for r in board.rankings if len(r.partial)]
    seeded = [t.loc["seeded", "pct_health"] for t in apart if "seeded" in t.index]
    assert seeded and all(h == pytest.approx(3 / 4) for h in seeded)


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        for i in range(18):
            s.record(_result(agent="uniform", pid=f"coin/{i}", kl_estimate=0.5))
            s.record(_result(agent="oracle", pid=f"coin/{i}", kl_estimate=0.1 if i else -1.0))
    return path


def test_leaderboard_formats(results_file, capsys):
    assert main(["leaderboard", "--results", str(results_file), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tau1 = next(v for k, v in out.items() if "tau=1" in k)
    assert [r["agent"] for r in tau1] == ["oracle", "uniform"]
    # oracle: coin/0 clipped to 0, eight more at 0.1 -> mean 0.8/9; uniform 0.5
    assert tau1[0]["normalized_kl"] == pytest.approx(0.8 / 9 / 0.5)
    assert main(["leaderboard", "--results", str(results_file), "--format", "csv"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].startswith("agent,label,normalized_kl") and len(csv) == 1 + 4
    assert main(["leaderboard", "--results", str(results_file), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| agent | normalized_kl |" in md.replace("label", "agent") and "### joint KL" in md
    assert main(["leaderboard", "--results", str(results_file), "--tau", "5"]) == 0
    assert "tau=5" in capsys.readouterr().out
    out = results_file.parent / "all.parquet"
    assert main(["leaderboard", "--results", str(results_file), "--export", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 36 and "exported 36 rows" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sweep", "--agent", "uniform", "--sweep", "nope"], "sweep: got 'nope'"),
        (["sweep", "--agent", "nope", "--sweep", "coin"], "agent: got 'nope'"),
        (["sweep", "--agent", "uniform", "--problem", "coin/99"], "coin/99"),
        (["sweep", "--agent", "uniform", "--sweep", "coin", "--seeds", "a"], "seeds: got 'a'"),
        (["sweep", "--agent", "uniform", "--sweep", "coin", "--set", "seed=3"], "--seeds"),
        (["sweep", "--agent", ",", "--sweep", "coin"], "--agent: got ','; allowed: a "
         "comma-separated list of agent names (testbed list agents)"),
        (["leaderboard", "--tau", "3"], "tau: got 3"),
        (["leaderboard", "--normalize", "mlp"], "normalize: got 'mlp'"),
        # was: "c2st rows have no task setting; allowed: a setting named one of: task, ..."
        (["leaderboard", "--metric", "c2st"], "has no family ranked by --metric c2st"),
        (["leaderboard", "--tau", "0"], "tau: got 0; allowed: an integer >= 1"),
    ],
)
def test_bad_input_one_line_exit_2(argv, message, results_file, capsys):
    argv = argv + ["--results", str(results_file)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_results_files_from_cli(tmp_path, capsys):
    _old_version_file(tmp_path / "old.db")
    ro = tmp_path / "ro.db"
    ResultsStore(ro).close()
    os.chmod(ro, 0o444)
    cases = [
        (["leaderboard", "--results", str(tmp_path / "old.db")], "schema version 0"),
        (["report", "--results", str(tmp_path / "old.db")], "schema version 0"),
        (
            ["sweep", "--agent", "uniform", "--problem", "coin/0", "--results", str(ro)],
            "read-only",
        ),
        (
            [
                "sweep",
                "--agent",
                "uniform",
                "--sweep",
                "coin",
                "--results",
                str(tmp_path / "old.db"),
            ],
            "schema version 0",
        ),
    ]
    for command in ("leaderboard", "report"):  # a folder is not a results file
        cases.append(([command, "--results", str(tmp_path)], "which is a folder"))
    cases.append(
        (["sweep", "--agent", "uniform", "--problem", "coin/0", "--results", str(tmp_path)],
         "which is a folder")
    )  # fmt: skip
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_compilation_cache_env():
    """Default folder under the cache home; a folder or `off` from TESTBED_JAX_CACHE; a
    JAX_COMPILATION_CACHE_DIR the user set is left alone."""
    from leaderboard.execution.worker import compilation_cache_env

    env = compilation_cache_env({"XDG_CACHE_HOME": "/c"})
    assert env["JAX_COMPILATION_CACHE_DIR"] == "/c/testbed/jax"
    assert float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) == 0  # small ones too
    assert "JAX_COMPILATION_CACHE_MAX_SIZE" not in env  # no LRU eviction (see the docstring)
    assert compilation_cache_env({"TESTBED_JAX_CACHE": "/x"})["JAX_COMPILATION_CACHE_DIR"] == "/x"
    assert compilation_cache_env({"TESTBED_JAX_CACHE": "OFF"}) == {}
    assert compilation_cache_env({"JAX_COMPILATION_CACHE_DIR": "/mine"}) == {}


def test_enable_compilation_cache_sets_this_process_and_children(tmp_path, monkeypatch):
    """The CLI's own process: JAX is already imported, so jax.config is set (and the
    environment, for the processes it starts)."""
    import jax

    from leaderboard.execution.worker import enable_compilation_cache

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    saved = {n: getattr(jax.config, n) for n in names}
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "x")  # so that undo removes what we set
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path))
    try:
        env = enable_compilation_cache()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path)
        min_secs = float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"])
        assert jax.config.jax_persistent_cache_min_compile_time_secs == min_secs
        assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)  # what its children get
    finally:
        for n, v in saved.items():
            jax.config.update(n, v)


def test_thread_env_gives_our_own_thread_pools_the_same_budget(monkeypatch):
    """Workers get TESTBED_THREADS with the BLAS / XLA variables, and the metric trainer's
    thread pool honours it (a sweep's workers must not each start one thread per core)."""
    import concurrent.futures

    import jax

    import testbed.metrics.mlp as mlp
    import testbed.metrics.mlp_chunks as mlp_chunks
    from leaderboard.execution.worker import thread_env
    from testbed.cores import THREADS_ENV, thread_budget, usable_cores

    env = thread_env(3)
    assert env[THREADS_ENV] == env["OMP_NUM_THREADS"] == "3"
    monkeypatch.setenv(THREADS_ENV, "1")
    assert thread_budget() == 1
    monkeypatch.setenv(THREADS_ENV, "100000")
    assert thread_budget() == usable_cores()
    for bad in ("0", "two"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(InputError, match=f"{THREADS_ENV}: got '{bad}'"):
            thread_budget()
    monkeypatch.delenv(THREADS_ENV)
    assert thread_budget() == usable_cores()

    started = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers):
            started.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(mlp_chunks, "ThreadPoolExecutor", Recording)  # the chunks' threads
    monkeypatch.setenv(THREADS_ENV, "1")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 2)).astype(np.float32)
    y = (rng.random((4, 40)) < 0.5).astype(np.float32)
    cfg = mlp.MLPConfig(hidden_layers=(4,), max_iter=2)
    mlp.train_many(cfg, x, y, [np.arange(40)] * 4, init_seeds=range(4), key=jax.random.key(0))
    assert started == [1]


def test_an_override_applies_to_the_agents_that_have_it():
    """`uniform,beta_bernoulli --set a=2` sets beta_bernoulli's a and leaves uniform as it
    is; a key no agent has is a one-line error naming each agent's fields."""
    jobs = expand(["uniform", "beta_bernoulli"], ["coin/1"], overrides={"a": 2.0})
    configs = {j.agent: j.config for j in jobs}
    assert configs["beta_bernoulli"]["a"] == 2.0 and "a" not in configs["uniform"]
    with pytest.raises(InputError, match="set zz: no agent among uniform, beta_bernoulli"):
        expand(["uniform", "beta_bernoulli"], ["coin/1"], overrides={"zz": 1})


# ---------------------------------------------------------------- failures, tables that explain


def test_load_and_failures_give_the_stored_error_and_traceback(tmp_path, capsys):
    from leaderboard.execution.executors import InlineExecutor
    from leaderboard.execution.runner import run_sweep

    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        assert run_sweep(expand(["uniform"], ["lbfault/raise"]), s, InlineExecutor()).failed == 1
        s.record(_result(pid="coin/1", status="failed"))  # no traceback (a timeout, an old row)
        s.record(_result(pid="coin/2", kl_estimate=0.1))
    df = results_module.load(path).set_index("problem_id")
    columns = list(df.reset_index().columns)
    assert columns.index("traceback") == columns.index("error") + 1
    raised = df.loc["lbfault/raise"]
    assert raised["error"] == "RuntimeError: deliberate failure second line"
    assert raised["traceback"].startswith("Traceback (most recent call last)")
    assert "RuntimeError: deliberate failure\nsecond line" in raised["traceback"]
    assert df.loc["coin/1", "error"] == "boom" and pd.isna(df.loc["coin/1", "traceback"])
    assert pd.isna(df.loc["coin/2", "traceback"]) and pd.isna(df.loc["coin/2", "error"])

    assert main(["leaderboard", "--failures", "--results", str(path), "--format", "json"]) == 0
    listed = {r["problem_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"lbfault/raise", "coin/1"}
    assert listed["lbfault/raise"]["traceback"] == raised["traceback"]
    assert listed["coin/1"]["traceback"] is None
    assert main(["leaderboard", "--failures", "--results", str(path)]) == 0
    out = capsys.readouterr().out
    assert "failed jobs (2)" in out and "deliberate failure" in out and "--format json" in out


@pytest.mark.parametrize(
    "value, text",
    [
        (7.917e-05, "0.00007917"),
        (0.134045, "0.134"),
        (1.0, "1"),
        (1e6, "1000000"),
        (123456.7, "123457"),
        (-0.25, "-0.25"),
        (1e-12, "0"),
        (math.nan, ""),
        (math.inf, "inf"),
        (np.float64(0.5), "0.5"),
        (np.int64(3), "3"),
        (None, ""),
    ],
)
def test_numbers_show_in_one_fixed_format(value, text):
    from leaderboard.ranking.tables import fmt_cell, fmt_value

    assert fmt_value(value) == text
    assert fmt_cell("pct_health", 0.95) == "95%" and fmt_cell("pct_health", 0.9996) == "99.96%"


def test_terminal_tables_rank_and_explain_themselves(results_file, capsys):
    assert main(["leaderboard", "--results", str(results_file), "--format", "json"]) == 0
    tau1 = next(v for k, v in json.loads(capsys.readouterr().out).items() if "tau=1" in k)
    assert [(r["agent"], r["rank"]) for r in tau1] == [("oracle", 1), ("uniform", 2)]
    assert "median_train_seconds" in tau1[0] and "mean_train_seconds" in tau1[0]
    assert main(["leaderboard", "--results", str(results_file)]) == 0
    out = capsys.readouterr().out
    assert "rank" in out and "health" in out
    assert "Lower is better for every ranked score" in out
    assert "health: share of the agent config's jobs" in out  # the legend under the tables


def test_real_data_tables_are_headed_as_a_joint_nll(tmp_path, capsys):
    from leaderboard.ranking import board as lb

    path = tmp_path / "real.db"
    with ResultsStore(path) as s:
        for tau in (1, 10):
            s.record(_result(agent="uniform", pid=f"real/iris/{tau}/0", joint_nll=1.1 * tau))
            s.record(_result(agent="mlp", pid=f"real/iris/{tau}/0", joint_nll=0.5 * tau))
    board = lb_build(path)
    assert board.tables_of("real")[10]["mean_nll"].tolist() == [5.0, 11.0]  # the KL's rules
    for full in (False, True):
        shown = dict(lb.tables(board, full=full))
        title = "joint NLL (real data), tau=10 (normalised by uniform)"
        table = shown[title]
        assert {"normalized_nll", "mean_nll"} <= set(table.columns)
        assert not any(c.endswith("_kl") for c in table.columns), list(table.columns)
        assert table["rank"].tolist() == [1, 2]
    assert main(["leaderboard", "--results", str(path)]) == 0
    out = capsys.readouterr().out
    assert "NLL/norm" in out and "KL/norm" not in out


# ---------------------------------------------------------------- families never pooled


def _mixed_families(path):
    """The user trial's file: uniform on the 7 problems of classification_2d_test (all ok)
    and on coin/4, whose tau is 1 too; ensemble on the sweep only, one job failed."""
    sweep = [f"classification_2d_test/{i}" for i in range(7)]
    with ResultsStore(path) as s:
        for i, pid in enumerate(sweep):
            s.record(_result(agent="uniform", pid=pid, kl_estimate=0.6 + 0.02 * i, test_acc=0.5))
            status = "failed" if i == 6 else "ok"
            kl = math.nan if i == 6 else 0.3
            s.record(_result(agent="ensemble", pid=pid, status=status, kl_estimate=kl))
        s.record(_result(agent="uniform", pid="coin/4", kl_estimate=0.05))
    return sweep


def test_a_sweep_counts_only_its_problems_and_families_are_never_pooled(tmp_path):
    from leaderboard.ranking import board as lb

    path = tmp_path / "h.db"
    _mixed_families(path)
    uniform_kl = np.mean([0.6 + 0.02 * i for i in range(7)])
    board = lb_build(path, sweep="classification_2d_test")
    assert [(r.spec.name, r.family, r.tau) for r in board.rankings] == [
        ("joint KL", "classification_2d_test", 1)
    ]
    table = board.tables_of("classification_2d_test")[1].set_index("agent")
    assert table.loc["uniform", "pct_health"] == 1.0  # coin/4 is not held against it
    assert table.loc["uniform", "num_problems"] == 7
    assert table.loc["uniform", "mean_kl"] == pytest.approx(uniform_kl)
    assert table.loc["ensemble", "pct_health"] == pytest.approx(6 / 7)  # its failed job
    assert set(board.df["problem_id"]) == set(generative_sweep("classification_2d_test"))

    board = lb_build(path)  # no sweep: a table per family, never one pooled tau=1 table
    assert [(r.family, r.tau) for r in board.rankings] == [
        ("classification_2d_test", 1),
        ("coin", 1),
    ]
    kl = board.tables_of("classification_2d_test")[1].set_index("agent")
    assert kl.loc["uniform", "mean_kl"] == pytest.approx(uniform_kl)
    assert kl.loc["uniform", "num_problems"] == 7 and kl.loc["uniform", "pct_health"] == 1.0
    coin = board.tables_of("coin")[1]
    assert coin["agent"].tolist() == ["uniform"] and coin["num_problems"].tolist() == [1]
    titles = [t for t, _ in lb.tables(board)]
    assert titles == [
        "marginal KL on classification_2d_test, tau=1 (normalised by uniform)",
        "marginal KL on coin, tau=1 (normalised by uniform)",
    ]
    full = lb.tables(board, full=True)  # csv/json carry the family and tau as fields
    assert [set(t["family"]) for _, t in full] == [{"classification_2d_test"}, {"coin"}]


def generative_sweep(name):
    import generative

    return generative.sweep_ids(name)


def test_the_neural_testbed_sweeps_are_ranked_apart_and_so_are_real_and_regression(tmp_path):
    """classification_2d and classification are families of their own (the reference ranks
    each sweep apart); real data and GP regression tables are per family too."""
    from leaderboard.ranking import board as lb

    path = tmp_path / "r.db"
    with ResultsStore(path) as s:
        for pid, kl in (("classification_2d/0", 0.2), ("classification/0", 0.8)):
            s.record(_result(agent="uniform", pid=pid, kl_estimate=kl))
            s.record(_result(agent="mlp", pid=pid, kl_estimate=kl / 2))
        for pid, kl in (("regression/0", 0.4), ("regression_test/0", 0.1)):
            s.record(_result(agent="uniform", pid=pid, kl_estimate=kl))
        s.record(_result(agent="uniform", pid="real/iris/1/0", joint_nll=1.1))
    board = lb_build(path, shipped=False)  # the user's rows alone
    got = [
        (r.spec.short, r.family, r.tau, r.table[f"mean_{r.spec.short}"].tolist())
        for r in board.rankings
    ]
    assert got == [
        ("kl", "classification", 1, [0.4, 0.8]),
        ("kl", "classification_2d", 1, [0.1, 0.2]),
        ("nll", "real", 1, [1.1]),
        ("kl", "regression", 1, [0.4]),
        ("kl", "regression_test", 1, [0.1]),
    ]
    titles = [t for t, _ in lb.tables(board)]
    assert (
        "regression KL (GP environments) on regression_test, tau=1 (normalised by uniform)"
        in titles
    )
    assert "joint NLL (real data), tau=1 (normalised by uniform)" not in titles  # tau 1
    assert "marginal NLL (real data), tau=1 (normalised by uniform)" in titles  # one family


def test_c2st_tasks_of_different_families_are_never_pooled(tmp_path):
    """A task name two families share is two rows, ranked apart; the SBI benchmark paper's
    numbers sit beside the benchmark's own problems only."""

    path = tmp_path / "c.db"
    with ResultsStore(path) as s:
        for k in (1, 2):
            s.record(_result(agent="npe", pid=f"sbi/two_moons/1000/{k}", c2st=0.7))
            s.record(_result(agent="npe", pid=f"lbfault_sbi/two_moons/1000/{k}", c2st=0.9))
    board = lb_build(path, per_observation=True, shipped=False)  # the user's rows alone
    c2st = board.observed().set_index("task")
    assert c2st.loc["two_moons", "mean_c2st"] == pytest.approx(0.7)
    assert c2st.loc["two_moons (lbfault_sbi)", "mean_c2st"] == pytest.approx(0.9)
    assert c2st["rank"].tolist() == [1, 1]  # each alone in its cell
    assert not math.isnan(c2st.loc["two_moons", "paper_c2st"])
    assert math.isnan(c2st.loc["two_moons (lbfault_sbi)", "paper_c2st"])
    obs = pd.concat(board.per_observation.values())
    assert obs.loc[obs["family"] != "sbi", "paper_c2st"].isna().all()
    assert obs.loc[obs["family"] == "sbi", "paper_c2st"].notna().all()


def test_the_terminal_says_how_many_jobs_failed(tmp_path, capsys):
    path = tmp_path / "h.db"
    _mixed_families(path)
    for argv in ([], ["--sweep", "classification_2d_test"]):
        assert main(["leaderboard", "--results", str(path), *argv]) == 0
        out, err = capsys.readouterr()
        line = f"1 job failed (their reasons: testbed leaderboard --failures --results {path}"
        assert out.rstrip().splitlines()[-1] == line + " ".join(["", *argv]) + ")", out
        assert not err
    for fmt in ("csv", "json", "markdown"):  # machine-readable output: the line on stderr
        assert main(["leaderboard", "--results", str(path), "--format", fmt]) == 0
        out, err = capsys.readouterr()
        assert "failed" not in out and err.strip().startswith("1 job failed (their reasons:")
    with ResultsStore(path) as s:  # none failed: no line
        s.record(_result(agent="ensemble", pid="classification_2d_test/6", kl_estimate=0.3))
    assert main(["leaderboard", "--results", str(path)]) == 0
    assert "failed (their reasons" not in capsys.readouterr().out


def test_runtimes_count_a_shared_training_once():
    """Two problems sharing one training: the first job holds its 8 s, the other 0 s; the
    runtimes give 8 s of training (not the median of 8 and 0), and both jobs' scoring."""
    from leaderboard.ranking.board import runtimes

    df = pd.DataFrame(
        {
            "status": ["ok"] * 3,
            "agent": ["mlp", "mlp", "uniform"],
            "config_key": ["a", "a", "b"],
            "config": ["{}", "{}", "{}"],
            "shared_training": [2, 2, 1],
            "train_seconds": [8.0, 0.0, 0.0],
            "evaluation_seconds": [1.0, 3.0, 0.5],
        }
    )
    t = runtimes(df).set_index("agent")
    assert t.loc["mlp", "jobs"] == 2
    assert t.loc["mlp", "median_train_seconds"] == t.loc["mlp", "mean_train_seconds"] == 8.0
    assert t.loc["mlp", "median_evaluation_seconds"] == 2.0
    assert t.loc["uniform", "median_train_seconds"] == 0.0  # an agent that does not train


def test_a_tau_tables_training_once_whichever_tau_holds_it():
    """A tau pair trains once, its tau = 1 job holding the 8 s: the tau = 10 table shows
    the 8 s too (it showed 0), each tau its own scoring."""
    from leaderboard.ranking.rule_neural_testbed import add_medians

    clean = pd.DataFrame({
        "agent": ["mlp"] * 4, "config_key": ["a"] * 4, "tau": [1, 10, 1, 10],
        "shared_training": [2] * 4, "train_seconds": [8.0, 0.0, 6.0, 0.0],
        "evaluation_seconds": [1.0, 5.0, 1.0, 7.0],
    })  # fmt: skip
    for tau, evaluation in ((1, 1.0), (10, 6.0)):
        table = pd.DataFrame({"agent": ["mlp"], "config_key": ["a"]})
        add_medians(table, clean, tau)
        assert table.loc[0, "median_train_seconds"] == 7.0  # of 8 and 6, not of 0 and 0
        assert table.loc[0, "median_evaluation_seconds"] == evaluation
