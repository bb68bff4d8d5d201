"""The decisions reproduction: correlations across agents with bootstrap intervals checked on
cases with a known answer, the report from a small frame, shipping that merges, and the
refusals of its command line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments import decisions_report, reproduce_decisions
from experiments.correlation import (
    bootstrap_comparison,
    bootstrap_correlation,
    pearson,
    spearman,
)
from testbed.errors import InputError


def _units(means, noise, num_units, seed):
    rng = np.random.default_rng(seed)
    return np.asarray(means, float)[:, None] + noise * rng.standard_normal((len(means), num_units))


def test_correlations_of_known_vectors():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, x**3) == pytest.approx(1.0) and pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert np.isnan(pearson(x, np.ones(4)))  # a constant side has no correlation


def test_bootstrap_interval_covers_the_truth_and_excludes_zero_for_a_strong_relation():
    """Eight agents whose regret rises with their KL (the means 1..8, unit noise of sd 0.3 over
    20 units each): rho = 1 in truth, the interval holds 1 and lies far above 0."""
    means = np.arange(1.0, 9.0)
    x, y = _units(means, 0.3, 20, 0), _units(10 * means, 3.0, 20, 1)
    c = bootstrap_correlation(x, y, "spearman", num_bootstrap=500)
    assert c.value == pytest.approx(1.0) and c.high == pytest.approx(1.0) and c.low > 0.8


def test_bootstrap_interval_holds_zero_for_unrelated_scores():
    """Unrelated scores (independent agent means) give an interval that holds 0, with noise
    wide enough that the agents' order is uncertain."""
    rng = np.random.default_rng(7)
    x = _units(rng.standard_normal(8), 2.0, 10, 2)
    y = _units(rng.standard_normal(8), 2.0, 10, 3)
    c = bootstrap_correlation(x, y, "pearson", num_bootstrap=500)
    assert c.low < 0 < c.high


def test_bootstrap_correlation_minus_says_which_predictor_is_better():
    """y follows x's order, z does not: corr(x, y) - corr(x, z) > 0 with an interval above 0;
    y and z swapped, below 0."""
    means = np.arange(8.0)
    x = _units(means, 0.2, 15, 0)
    y = _units(means, 0.2, 30, 1)
    z = _units(np.array([3, 0, 6, 1, 7, 2, 5, 4], float), 0.2, 30, 2)
    better = bootstrap_correlation(x, y, minus=z, num_bootstrap=400)
    assert better.value > 0.5 and better.low > 0
    worse = bootstrap_correlation(x, z, minus=y, num_bootstrap=400)
    assert worse.high < 0
    # the difference's draws are the two correlations' own (the same replicates)
    alone = [bootstrap_correlation(x, s, num_bootstrap=400).value for s in (y, z)]
    assert better.value == pytest.approx(alone[0] - alone[1])
    with pytest.raises(InputError, match=r"units: got \(8, 30\) and \(8, 29\)"):
        bootstrap_correlation(x, y, minus=z[:, :29])
    with pytest.raises(InputError, match="at least 3"):
        bootstrap_correlation(x[:2], y[:2])


def test_one_comparison_is_the_three_correlations():
    """`bootstrap_comparison` draws the replicates once: its three results are those of the
    three `bootstrap_correlation` calls, values and intervals alike."""
    rng = np.random.default_rng(3)
    x = _units(rng.standard_normal(7), 1.0, 12, 4)
    y, z = _units(rng.standard_normal(7), 1.0, 25, 5), _units(rng.standard_normal(7), 1.0, 25, 6)
    for method in ("spearman", "pearson"):
        kw = {"num_bootstrap": 300, "seed": 2}
        got = bootstrap_comparison(x, y, z, method, **kw)
        alone = [bootstrap_correlation(x, s, method, **kw) for s in (y, z)]
        assert got == (*alone, bootstrap_correlation(x, y, method, minus=z, **kw))
        assert got[0] != got[1]  # the sides differ: the check can fail
    with pytest.raises(InputError, match=r"units: got \(7, 25\) and \(7, 24\)"):
        bootstrap_comparison(x, y, z[:, :24])


def _bandit_frame(regrets: dict[str, list[float]]) -> pd.DataFrame:
    """Finished bandit rows of d = 2, T = 0.1 (ids 0, 1, ...: seeds 0, 1, ...) with the given
    average regrets per agent and seed, and a flat regret curve."""
    rows = []
    for agent, values in regrets.items():
        for seed, value in enumerate(values):
            row = {"key": f"{agent}/bandit/{seed}/0", "agent": agent, "config_key": agent,
                   "problem_id": f"bandit/{seed}", "status": "ok", "average_regret": value,
                   "num_steps": 10_000}  # fmt: skip
            row.update({f"regret_w{i:02d}": value for i in range(50)})
            rows.append(row)
    return pd.DataFrame(rows)


def test_report_from_a_small_frame(tmp_path):
    """Regret that follows the testbed KL's order of four shipped agents gives a Spearman of
    1 with both KLs (their order is the same at both taus here), tables and a figure."""
    shipped = decisions_report.kl_rows(pd.DataFrame(columns=["status", "problem_id"]), 2, 0.1)
    kl = shipped[shipped["tau"] == 10].groupby("agent")["kl_estimate"].mean()
    chosen = ["uniform", "ensemble+", "dropout", "bbb"]
    order = kl[chosen].sort_values().index  # lowest joint KL first
    regrets = {a: [0.01 * (i + 1), 0.01 * (i + 1) + 0.001] for i, a in enumerate(order)}
    said = decisions_report.write(_bandit_frame(regrets), tmp_path)
    for name in decisions_report.OUTPUTS:
        assert (tmp_path / name).exists(), name
    corr = pd.read_csv(tmp_path / "correlation.csv")
    spear = corr[corr["method"] == "spearman"].iloc[0]
    assert spear["joint"] == pytest.approx(1.0) and spear["n"] == 4 and spear["agents"] == "all"
    assert spear["seeds"] == 2 and spear["problems"] == 70  # classification_2d pairs at T = 0.1
    assert said and said[0].startswith("d=2, T=0.1, all agents: ")
    # and the learning agents alone (uniform left out): three of the four
    learning = corr[(corr["method"] == "spearman") & (corr["agents"] == "learning")].iloc[0]
    assert learning["n"] == 3 and learning["joint"] == pytest.approx(1.0)
    regret = pd.read_csv(tmp_path / "regret.csv")
    assert list(regret["agent"]) == list(order) and regret["kl_tau10"].notna().all()


def test_ship_merges_and_keeps_every_earlier_job(tmp_path):
    """--ship onto a file that holds another job keeps it and adds the store's."""
    import leaderboard
    from leaderboard.ranking import shipped
    from leaderboard.shipped_files import shipped as read

    results = tmp_path / "r.db"
    leaderboard.sweep(["oracle"], ["bandit/0"], results=results, executor="inline",
                      progress=False)  # fmt: skip
    path = tmp_path / "ours.csv.gz"
    first = reproduce_decisions.ship(str(results), str(path))
    assert "1 jobs (1 from" in first
    earlier = read(path=path).assign(key="another/bandit/3/0", problem_id="bandit/3")
    shipped.write(pd.concat([read(path=path), earlier], ignore_index=True), path)
    said = reproduce_decisions.ship(str(results), str(path))
    rows = read(path=path)
    assert set(rows["key"]) == {"another/bandit/3/0", *leaderboard.load(results)["key"]}
    assert "2 jobs (1 from" in said and "1 kept" in said


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agents", "ensembel"], "did you mean"),
        (["--seeds", "11"], "--seeds: got 11; allowed: 1 to 10"),
        (["--report", "--no-shipped", "--results", "nope.db"], "holds no runs"),
    ],
)
def test_refusals_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert reproduce_decisions.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce_decisions: error: ") and message in err[0]


@pytest.mark.parametrize(
    "given, said",
    [("mlp,,ensemble", "which has an empty item"), ("mlp,", "which has an empty item"),
     ("mlp,mlp", "which names mlp twice")],
)  # fmt: skip
def test_an_empty_or_repeated_agent_is_refused(tmp_path, capsys, monkeypatch, given, said):
    """`--agents` dropped an empty item and ran a repeated agent's jobs twice."""
    monkeypatch.setattr(reproduce_decisions, "run", lambda *_: pytest.fail("jobs ran"))
    argv = ["--agents", given, "--results", str(tmp_path / "d.db"), "--out", str(tmp_path / "o")]
    assert reproduce_decisions.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce_decisions: error: --agents: got"), err
    assert f"got {given!r}, {said}; allowed: " in err[0]


def test_the_docs_tables_are_the_report_of_the_shipped_runs(tmp_path):
    """docs/reproductions/decisions.md shows what `--report` gives on our shipped runs: a
    re-ship without the docs, or a number edited by hand, shows here."""
    from pathlib import Path

    out = tmp_path / "out"
    assert reproduce_decisions.main(["--report", "--results", str(tmp_path / "none.db"),
                                     "--out", str(out)]) == 0  # fmt: skip
    docs = (Path(__file__).resolve().parents[1] / "docs/reproductions/decisions.md").read_text()
    for name in ("regret.md", "correlation.md"):
        assert (out / name).read_text().strip() in docs, name


def test_a_partial_kl_run_is_never_compared_with_complete_ones():
    """An agent whose testbed runs cover part of the problem pairs (a run still going) has no
    KL in the tables and no place in the correlation: its mean is over other problems."""
    kl = pd.DataFrame(
        [dict(agent=a, unit=u, tau=t, kl_estimate=1.0) for a in ("a", "b")
         for u in ("10/1", "10/2") for t in (1, 10) if not (a == "b" and u == "10/2")]
    )  # fmt: skip
    assert decisions_report.complete(kl, ["a", "b"]) == ["a"]
    assert decisions_report.complete(kl[:0], ["a"]) == []
