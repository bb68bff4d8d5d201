"""experiments.ppl_power: each measure of a PPL's posterior holds its level with the exact
sampler, rejects samplers made wrong in known ways, resumes from its store, reports from a
small store or our shipped file, and refuses bad input in one line."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import agents
from experiments import ppl_power as pp
from testbed.errors import InputError


def _rates(cell: pp.Cell) -> dict[str, tuple[int, int]]:
    """(rejections at 0.05, trials) of each measure of a cell run here."""
    problem = pp.load_problem(cell.problem, cell.group)
    metrics = pp.cell_metrics(cell, pp.Draws(problem, cell.sampler, cell.trials, cell.n))
    out: dict[str, list[float]] = {}
    for name, value in metrics.items():
        out.setdefault(name.split("/")[0], []).append(value)
    return {m: (int(np.sum(np.array(v) < 0.05)), len(v)) for m, v in out.items()}


def test_the_level_bound_is_the_binomial_quantile():
    # Binomial(50, 0.05): P(X <= 7) = 0.9968 < 0.999 <= P(X <= 8) = 0.9992
    assert pp.level_bound(50) == 8
    assert pp.level_bound(100) == 13  # P(X <= 12) = 0.9985, P(X <= 13) = 0.9995


@pytest.mark.slow
def test_the_exact_sampler_holds_the_level_of_every_test():
    trials = 50  # a level-0.05 test rejects more than level_bound(50) = 8 with p < 0.001
    rates = _rates(pp.Cell("wyb/1", "exact", 100, "tests", trials))
    for test in ("pit_ks", "mahalanobis", "ddks"):
        k, n = rates[test]
        assert n == trials and k <= pp.level_bound(trials), (test, k)
    if pp.wyb is not None:  # the benchmark's adKS never rejects (its p-value is about 1)
        assert rates["wyb_adks"][0] == 0


@pytest.mark.slow
def test_a_too_narrow_prior_and_correlated_draws_are_rejected():
    # 5 trials each: a level-0.05 test rejects 3 or more of 5 with probability 0.0012
    for sampler in ("prior_0.1", "correlated"):
        rates = _rates(pp.Cell("wyb/9", sampler, 100, "tests", 5))
        assert rates["pit_ks"][0] >= 3 and rates["ddks"][0] >= 3, (sampler, rates)


def test_the_narrow_prior_keeps_the_mean_and_shrinks_the_sd():
    import generative

    gamma = pp.narrow_prior(generative.load("conjugate/wyb/9").family, 0.1)
    assert np.isclose(gamma.shape / gamma.rate, 1.0) and np.isclose(
        gamma.shape**0.5 / gamma.rate, 0.1
    )
    normal = pp.narrow_prior(generative.load("conjugate/wyb/16").family, 0.1)
    assert np.allclose(normal.prior_cov, 0.01 * np.eye(2))


def _small(tmp_path, *extra: str) -> list[str]:
    store = str(tmp_path / "power.db")
    return ["--problems", "wyb/1", "--samplers", "exact", "--sizes", "10", "--trials", "3",
            "--c2st-trials", "0", "--results", store, "--no-shipped", *extra]  # fmt: skip


def test_a_run_resumes_and_reports_from_its_store(tmp_path, capsys):
    from leaderboard.store import ResultsStore

    args = _small(tmp_path)
    assert pp.main(args) == 0
    with ResultsStore(args[args.index("--results") + 1], "r") as store:
        first = {r["key"]: r["finished_at"] for r in store.rows()}
    assert list(first) == ["ppl_power/wyb/1/exact/10/tests/T3"]
    capsys.readouterr()
    assert pp.main(args + ["--sizes", "10,12"]) == 0  # the stored cell is kept, one more runs
    with ResultsStore(args[args.index("--results") + 1], "r") as store:
        rows = {r["key"]: r["finished_at"] for r in store.rows()}
    assert (
        len(rows) == 2
        and rows["ppl_power/wyb/1/exact/10/tests/T3"] == first["ppl_power/wyb/1/exact/10/tests/T3"]
    )
    assert pp.main(args + ["--report"]) == 0
    out = capsys.readouterr().out
    assert "| wyb/1 | exact | 10 |" in out and "| pit_ks |" in out and "(3)" in out
    assert pp.main(args + ["--report", "--sizes", "12"]) == 0  # the report shows a selection
    assert "| wyb/1 | exact | 10 |" not in capsys.readouterr().out
    assert pp.main(args + ["--report", "--samplers", "nuts"]) == 2
    assert "no stored or shipped trial matches" in capsys.readouterr().err


def test_a_smaller_run_of_a_shipped_cell_counts_each_trial_once(tmp_path, monkeypatch):
    """Trial t is one seeded trial whatever the cell's number of trials: a 2-trial run
    beside a shipped 3-trial cell replaces it, and is not pooled with it."""
    args = _small(tmp_path)
    shipped = tmp_path / "ppl_power_ours.csv.gz"
    assert pp.main(args + ["--ship", str(shipped)]) == 0
    monkeypatch.setattr(pp, "SHIPPED", shipped)
    mine = str(tmp_path / "mine.db")
    small = [a if a != "3" else "2" for a in args]
    small[small.index("--results") + 1] = mine
    assert pp.main(small) == 0
    frame = pp.long_frame(mine)
    counts = frame.groupby("measure")["trial"].agg(["count", "nunique"])
    assert (counts["count"] == counts["nunique"]).all() and set(counts["count"]) == {2}


def test_shipped_trials_are_reported_on_a_fresh_install(tmp_path, capsys, monkeypatch):
    args = _small(tmp_path)
    shipped = tmp_path / "ppl_power_ours.csv.gz"
    assert pp.main(args + ["--ship", str(shipped)]) == 0
    with gzip.open(shipped, "rt") as f:
        head = [f.readline() for _ in range(2)]
    assert head[0].startswith("# ") and "commit" in head[1] and "cores" in head[1]
    monkeypatch.setattr(pp, "SHIPPED", shipped)
    capsys.readouterr()
    assert pp.main(["--report", "--results", str(tmp_path / "none.db")]) == 0
    assert "| wyb/1 | exact | 10 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, field, allowed",
    [
        (["--samplers", "exact,bogus"], "--samplers", "exact, nuts"),
        (["--measures", "kl"], "--measures", "pit_ks"),
        (["--problems", "wyb/22"], "--problems", "wyb/1"),
        (["--sizes", "0"], "--sizes", "integers 2 to"),
        (["--sizes", "1"], "--sizes", "integers 2 to"),
        (["--sizes", "10,,20"], "--sizes", "got '10,,20', which has an empty item; allowed: a"),
        (["--sizes", "10,,20"], "--sizes", "comma-separated list of integers 2 to 100000"),
        (["--sizes", "10,"], "--sizes", "which has an empty item"),
        (["--sizes", "10,10"], "--sizes", "got '10,10', which names 10 twice; allowed: each once"),
        (["--measures", "mahalanobis", "--problems", "wyb/9"], "--measures", "wyb/1-6"),
        (["--report", "--ship", "README.md"], "--ship", ".csv.gz"),
        (["--report", "--out", "README"], "--out", ".md"),
        (["--trials", "0"], "--trials", "1 to 10000"),
        (["--c2st-trials", "-1"], "--c2st-trials", "0 to 10000"),
    ],
)
def test_bad_input_is_one_line_with_status_2(tmp_path, capsys, monkeypatch, args, field, allowed):
    monkeypatch.setattr(pp, "run", lambda *_: pytest.fail("cells ran"))
    assert pp.main(["--results", str(tmp_path / "x.db"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ppl_power: error: {field}: got"), err
    assert allowed in err[0]
    assert not (tmp_path / "x.db").exists()


def test_an_empty_store_is_refused_in_one_line(tmp_path, capsys):
    assert pp.main(["--report", "--no-shipped", "--results", str(tmp_path / "none.db")]) == 2
    assert "holds no finished ppl_power cell" in capsys.readouterr().err


def test_nuts_refuses_a_step_size_that_is_not_positive():
    with pytest.raises(InputError, match="step_size: got 0.0; allowed: a finite number > 0"):
        agents.load("nuts", step_size=0.0)
    config = agents.load("numpyro").config
    assert (config.step_size, config.adapt) == (1.0, True)  # the defaults are NumPyro's


def test_the_table_marks_a_level_above_the_binomial_bound():
    import pandas as pd

    rows = [
        {"problem": "wyb/1", "sampler": s, "n": 100, "group": "tests", "trials": 100,
         "trial": t, "measure": "pit_ks", "value": 0.01 if t < k else 0.5}
        for s, k in (("exact", 14), ("nuts", 13))
        for t in range(100)
    ]  # fmt: skip
    text = pp.report(pd.DataFrame(rows))
    assert "| wyb/1 | exact | 100 | 0.14 [0.09, 0.22] ! |" in text  # 14 > level_bound(100)
    assert "| all | exact | 100 | 0.14 [0.09, 0.22] ! |" in text
    assert "| wyb/1 | nuts | 100 | 0.13 [0.08, 0.21] |" in text  # only the level is marked


def test_the_level_table_pools_the_correct_samplers_and_names_the_problems_above_the_bound():
    import pandas as pd

    rows = [
        {"problem": p, "sampler": s, "n": 1000, "group": "tests", "trials": 100,
         "trial": t, "measure": "pit_ks", "value": 0.01 if t < k else 0.5}
        for s, ks in (("nuts", (12, 14)), ("nuts_ess", (5, 6)), ("warmup_5", (40, 40)))
        for p, k in zip(("wyb/1", "wyb/2"), ks)
        for t in range(100)
    ]  # fmt: skip
    text = pp.level_table(pd.DataFrame(rows))
    low, high = pp.binomial_range(200)
    assert (low, high) == (0.02, 0.08)  # Binomial(200, 0.05): 4 and 16 rejections
    # 26 of 200 is outside; wyb/2's 14 of 100 is above level_bound(100) = 13
    assert "| nuts | 1000 | pit_ks | 2 | 200 | 0.130 [" in text and "| no | wyb/2 |" in text
    assert "| nuts_ess | 1000 | pit_ks | 2 | 200 | 0.055 [" in text and "| yes | - |" in text
    assert "warmup_5" not in text  # a faulty sampler's rate is power, not level
    assert pp.level_table(pd.DataFrame(rows).query("sampler == 'warmup_5'")) is None


def test_the_docs_level_table_is_the_reports_on_our_shipped_runs(tmp_path):
    """docs/reproductions/ppl-level-power.md shows the level table and the per-problem
    table that `--report` prints from the shipped trials: a run shipped since makes the
    page wrong, and this test says so."""
    from pathlib import Path

    page = (Path(pp.__file__).parents[1] / "docs/reproductions/ppl-level-power.md").read_text()
    long = pp.long_frame(str(tmp_path / "none.db"))
    level = pp.level_table(long)
    assert level.split("\n\n", 1)[1] in page
    per_problem = pp.report(long).split("Problem by problem:\n\n", 1)[1]
    assert per_problem in page
