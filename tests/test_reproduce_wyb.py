"""The "What's your bench" reproduction: the benchmark's two measures (testbed.metrics.wyb)
against hand computations and its published rows, and the runner, store and report of
`experiments.reproduce_wyb`."""

import numpy as np
import pytest
from scipy import optimize, stats

from testbed.errors import InputError
from testbed.metrics.wyb import wyb_adks, wyb_grid, wyb_kl, wyb_measures, wyb_support

# The benchmark's P1 (y ~ N(3, 1), n = 10, random_state 1) and its reference predictive.
P1 = {"n": 10, "random_state": 1, "loc": 3.0}


def paper_p1():
    """The benchmark's P1 data (scipy's draw with its random_state) and the conjugate
    predictive it scores against: N(mu_n, sqrt(var_n + 1)) under the N(3, 1) prior."""
    y = stats.norm(P1["loc"], 1).rvs(size=P1["n"], random_state=P1["random_state"])
    mu_n = (P1["loc"] + y.sum()) / (1 + P1["n"])
    scale = np.sqrt(1 / (1 + P1["n"]) + 1)
    return y, mu_n, scale


def test_the_grid_is_dense_in_the_tails_and_spans_the_limits():
    grid = wyb_grid(-10.0, 10.0)
    steps = np.diff(grid[:, 0])
    assert grid.shape == (999, 1) and grid[0, 0] == -10.0 and grid[-1, 0] == pytest.approx(10.0)
    assert np.all(steps > 0) and steps[0] < steps[498] / 100  # tails 100x finer than centre
    two = wyb_grid([0.0, 0.0], [1.0, 2.0])
    assert two.shape == (999, 2) and np.allclose(two[:, 1], 2 * two[:, 0])  # one diagonal


def test_wyb_kl_is_a_riemann_sum_of_the_absolute_integrand():
    """Equal densities give 0; a hand sum on a 3-point grid; the absolute value makes it
    positive where the true KL integrand is negative, and for d = 2 each term carries
    the product of both axes' steps."""
    assert wyb_kl(stats.norm(0, 1).pdf, stats.norm(0, 1).pdf, -10, 10) == 0.0
    p, q = stats.norm(0.5, 1), stats.norm(0, 1)
    grid = wyb_grid(-1.0, 1.0, 4)[:, 0]  # 3 points: -1, 0, 1
    f = np.abs(p.pdf(grid) * np.log(p.pdf(grid) / q.pdf(grid)))
    assert wyb_kl(p.pdf, q.pdf, -1.0, 1.0, 4) == pytest.approx(np.sum(np.diff(grid) * f[1:]))
    kl = wyb_kl(p.pdf, q.pdf, -10, 10)
    assert kl > 0.125 * 1.5  # true KL 0.125; |integrand| adds its negative part
    mp, mq = stats.multivariate_normal([0.5, 0.0]), stats.multivariate_normal([0.0, 0.0])
    path = wyb_grid([-1.0, -1.0], [1.0, 1.0], 4)
    g = np.abs(mp.pdf(path) * np.log(mp.pdf(path) / mq.pdf(path)))
    expected = np.sum(np.prod(np.diff(path, axis=0), axis=1) * g[1:])
    assert wyb_kl(mp.pdf, mq.pdf, [-1.0, -1.0], [1.0, 1.0], 4) == pytest.approx(expected)


def test_wyb_adks_by_hand_in_one_dimension():
    """Two draws at 0 and 1 against U(0, 2) clipped at 2: at t = 0 the 'above' orthant
    holds both draws (>= t) against mass 1, 'below' none against 0; at t = 1: 1/2 vs 1/2.
    At the reference's draw t = 0.5: pred above 1/2, mass 3/4 -> D = 1/4."""
    u = stats.uniform(0, 2)
    distance, p_value = wyb_adks([0.0, 1.0], [0.5, 0.5], lambda x: u.cdf(x[:, 0]), 2.0)
    assert distance == pytest.approx(0.25)
    assert 0.0 <= p_value <= 1.0


def test_the_support_limits_use_the_variance_for_a_covariance():
    one = wyb_support(3.0, 2.0)
    assert one["ks_lim"] == 23.0 and one["lower"][0] == -17.0 and one["upper"][0] == 23.0
    many = wyb_support([1.0, 5.0], np.diag([4.0, 1.0]))
    assert many["ks_lim"] == 41.0 and list(many["lower"]) == [-39.0, -5.0]


def test_an_ideal_ppl_scores_0_2085_on_p1():
    """The exact posterior mean under the benchmark's own N(0, 1) PPL prior, put through its
    KL, gives 0.2085 on P1 (they published 0.207 / 0.207 / 0.215): the prior mismatch."""
    y, mu_n, scale = paper_p1()
    ideal = stats.norm(y.sum() / (P1["n"] + 1), 1)
    out = wyb_measures(ideal, stats.norm(mu_n, scale), mu_n, scale, P1["random_state"])
    assert out["wyb_kl"] == pytest.approx(0.2085, abs=5e-5)
    assert out["wyb_ks_distance"] == pytest.approx(0.1297394037246704, abs=1e-12)


@pytest.mark.parametrize(
    "ppl, kl, distance, p_value",
    [  # results/results-clean.csv, Problem # 1 (their P1)
        ("pymc", 0.2068185060236445, 0.1297394037246704, 0.9999812575289292),
        ("pyro", 0.207380031131677, 0.1297394037246704, 0.9999811891288222),
        ("stan", 0.2153608402475541, 0.1331641376018524, 0.999394941062988),
    ],
)
def test_published_p1_rows_are_matched_to_their_precision(ppl, kl, distance, p_value):
    """The PPL's posterior mean is not published, but the KL is a monotone function of it:
    inverted from the published KL, it gives the published KS distance and KS score to
    every printed digit (the draws, the grid and the p-value are deterministic)."""
    y, mu_n, scale = paper_p1()
    q = stats.norm(mu_n, scale)
    limits = wyb_support(mu_n, scale)

    def gap(mu):
        return wyb_kl(stats.norm(mu, 1).pdf, q.pdf, limits["lower"], limits["upper"]) - kl

    mean = optimize.brentq(gap, mu_n - 3, mu_n - 1e-9, xtol=1e-14)
    out = wyb_measures(stats.norm(mean, 1), q, mu_n, scale, P1["random_state"])
    assert out["wyb_ks_distance"] == pytest.approx(distance, abs=1e-12)
    assert out["wyb_ks_pvalue"] == pytest.approx(p_value, abs=1e-13)


def test_the_multivariate_measures_run_with_a_diagonal_covariance():
    """d = 5 in milliseconds (the benchmark's loop took 15 s): the orthant masses of a
    diagonal covariance are products of marginal CDFs; the KL along its diagonal path is
    tiny whatever the distributions (their d = 5 values were 1e-7)."""
    q = stats.multivariate_normal(np.arange(5.0), 1.02 * np.eye(5))
    p = stats.multivariate_normal(np.arange(5.0) + 0.3, np.eye(5))
    out = wyb_measures(p, q, np.arange(5.0), 1.02 * np.eye(5), 10)
    assert 0 < out["wyb_kl"] < 1e-4
    assert 0 < out["wyb_ks_distance"] < 1 and 0 <= out["wyb_ks_pvalue"] <= 1


# -- the runner, the store, the report -------------------------------------------------


def reproduce(*args: str) -> int:
    from experiments.reproduce_wyb import main

    return main(list(args))


def exact_run(folder, *extra: str) -> int:
    db, out = str(folder / "wyb.db"), str(folder / "out")
    return reproduce(
        "--agents", "exact", "--problems", "1", "--seeds", "2", "--results", db,
        "--out", out, "--no-shipped", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def exact_store(tmp_path_factory):
    """The exact agent on P1, both priors, seeds 1 and 2 (4 cells, a few seconds)."""
    folder = tmp_path_factory.mktemp("wyb")
    assert exact_run(folder) == 0
    return folder


def stored(tmp_path):
    from leaderboard.store import ResultsStore

    with ResultsStore(str(tmp_path / "wyb.db"), "r") as store:
        return {r["key"]: r for r in store.rows()}


def test_the_exact_agent_is_run_scored_stored_and_reported(exact_store):
    """Matched and paper prior, 2 seeds: 4 rows with both measures and ours; the exact
    posterior's draws differ by seed; the paper prior's ideal PPL scores about P1's
    published KL; the report's tables and figure are written."""
    tmp_path = exact_store
    rows = stored(tmp_path)
    assert set(rows) == {f"wyb/{p}/1/exact/{s}" for p in ("matched", "paper") for s in (1, 2)}
    m1, m2 = rows["wyb/matched/1/exact/1"]["metrics"], rows["wyb/matched/1/exact/2"]["metrics"]
    for m in (m1, m2):
        assert {"wyb_kl", "wyb_ks_pvalue", "pit_ks_pvalue", "c2st_pvalue", "joint_kl"} <= set(m)
    assert m1["plugin_mean"] != m2["plugin_mean"]
    paper = rows["wyb/paper/1/exact/1"]["metrics"]
    assert paper["wyb_kl"] == pytest.approx(0.2085, abs=0.01)  # the prior mismatch
    assert paper["mahalanobis_pvalue"] < 0.01 < m1["mahalanobis_pvalue"]
    text = (tmp_path / "out" / "tables.md").read_text()
    assert "What the published KL measures" in text and "| 1 | 0.2099 |" in text
    assert (tmp_path / "out" / "wyb.png").stat().st_size > 10_000


def test_a_second_run_runs_nothing(exact_store, monkeypatch):
    import experiments.reproduce_wyb as wyb

    def never(*args):
        raise AssertionError("a stored cell ran again")

    monkeypatch.setattr(wyb, "run_cell", never)
    assert exact_run(exact_store) == 0


def test_a_failing_agent_is_a_stored_failure_with_its_reason(tmp_path, monkeypatch):
    """A PPL that raises is stored as a failure, the run goes on and exits 1; the exact
    agent on the paper's Student-t model (no exact posterior) is not a cell at all."""
    import experiments.reproduce_wyb as wyb

    db, out = str(tmp_path / "wyb.db"), str(tmp_path / "out")
    args = ["--agents", "exact", "--problems", "1,8", "--priors", "paper", "--seeds", "1"]
    real = wyb.predictive_of

    def crash(cell, problem):
        if cell.problem == 1:
            raise RuntimeError("the sampler died")
        return real(cell, problem)

    monkeypatch.setattr(wyb, "predictive_of", crash)
    assert reproduce(*args, "--results", db, "--out", out, "--no-shipped") == 1  # tabled too
    assert "Failed cells (1" in (tmp_path / "out" / "tables.md").read_text()
    rows = stored(tmp_path)
    assert rows["wyb/paper/1/exact/1"]["status"] == "failed"
    assert "the sampler died" in rows["wyb/paper/1/exact/1"]["error"]
    assert "wyb/paper/8/exact/1" not in rows


def test_the_report_reads_a_small_store_and_shipped_runs(exact_store, tmp_path, monkeypatch):
    """--ship writes the finished rows with their provenance; a fresh install (no store)
    tables them; --no-shipped without a store is refused in one line."""
    import experiments.wyb_report as report

    shipped = tmp_path / "wyb_ours.csv.gz"
    said = report.ship(str(exact_store / "wyb.db"), shipped)
    assert said == f"{shipped}: 4 cells (4 from {exact_store / 'wyb.db'}, 0 kept)"
    import gzip

    head = gzip.open(shipped, "rt").read().splitlines()[:2]
    assert head[0].startswith("# Our runs") and "commit" in head[1] and "cores" in head[1]
    monkeypatch.setattr(report, "SHIPPED", shipped)
    frame = report.load_frame(str(tmp_path / "none.db"))
    assert len(frame) == 4 and set(frame["source"]) == {"shipped"}
    assert "Matched prior" in report.markdown(frame)
    with pytest.raises(InputError, match="holds no finished wyb cell .*--no-shipped"):
        report.load_frame(str(tmp_path / "none.db"), shipped=False)


def test_the_report_narrows_to_the_agents_problems_and_priors_given(tmp_path, capsys):
    """`--report --agents stan` tabled every PPL; the selection flags now narrow the
    tables (left at their defaults: every cell; --seeds never), and a selection nothing
    matches is one line with status 2."""
    from experiments.reproduce_wyb import _chosen as chosen
    from experiments.reproduce_wyb import load_frame, parse

    frame = load_frame(str(tmp_path / "none.db"))  # our shipped runs
    assert len(chosen(parse([]), frame)) == len(frame) > 0
    assert len(chosen(parse(["--seeds", "1"]), frame)) == len(frame)
    narrowed = chosen(
        parse(["--agents", "stan,pymc", "--problems", "3,4", "--priors", "paper"]), frame
    )
    assert set(narrowed["agent"]) == {"stan", "pymc"} and set(narrowed["problem"]) == {3, 4}
    assert set(narrowed["prior"]) == {"paper"}
    assert len(narrowed) == len(
        frame[
            frame["agent"].isin(["stan", "pymc"])
            & frame["problem"].isin([3, 4])
            & frame["prior"].eq("paper")
        ]
    )
    out = tmp_path / "out"
    code = reproduce(
        "--report", "--agents", "nuts", "--results", str(tmp_path / "n.db"), "--out", str(out)
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("reproduce_wyb: error: --agents: no stored or shipped")


@pytest.mark.parametrize(
    "args, field, allowed",
    [
        (["--agents", "stan,turing"], "--agents", "pymc"),
        (["--problems", "22"], "--problems", "21"),
        (["--priors", "flat"], "--priors", "matched, paper"),
        (["--seeds", "0"], "--seeds", "1 to 100"),
    ],
)
def test_refusals_exit_2_in_one_line(args, field, allowed, tmp_path, capsys):
    assert reproduce(*args, "--results", str(tmp_path / "x.db"), "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and allowed in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow
def test_numpyro_with_tiny_settings_records_its_times(tmp_path):
    """A PPL cell: compile and sampling seconds apart, the first run of its shape marked,
    a later one of the same shape not; the sizes are part of the key."""
    db, out = str(tmp_path / "wyb.db"), str(tmp_path / "out")
    args = ["--agents", "numpyro", "--problems", "1,4", "--priors", "matched", "--seeds", "1"]
    sizes = ["--num-warmup", "50", "--num-samples", "100"]
    assert reproduce(*args, *sizes, "--results", db, "--out", out, "--no-shipped") == 0
    rows = stored(tmp_path)
    first, later = (rows[f"wyb/matched/{k}/numpyro/1/w50s100"]["metrics"] for k in (1, 4))
    assert first["first_in_process"] == 1.0 and later["first_in_process"] == 0.0
    assert first["compile_seconds"] > 0 and later["sampling_seconds"] > 0
    assert 0 <= first["wyb_ks_pvalue"] <= 1 and np.isfinite(first["joint_kl"])


def test_the_report_ends_with_its_verdict_computed_from_the_tables(tmp_path):
    """On our shipped runs the verdict is the docs' answer (no PPL told apart; Stan and PyMC
    for one run, BlackJAX and nutpie for many); a PPL made worse on every problem is told
    apart by the measure that sees it."""
    import numpy as np

    import experiments.wyb_report as report

    frame = report.load_frame(str(tmp_path / "none.db"))  # our shipped runs
    text = report.markdown(frame)
    tail = text[text.index("### Verdict") :]
    assert "Accuracy: no PPL can be told apart by any measure." in tail
    assert "one run of a model (compilation included), fastest: stan" in tail
    assert "many runs of one model (compiled once), fastest: blackjax" in tail
    worse = frame.copy()
    pyro = (worse["agent"] == "pyro") & (worse["prior"] == "matched")
    worse.loc[pyro, "joint_kl"] = worse.loc[pyro, "joint_kl"] + 0.05 + 0.001 * np.arange(pyro.sum())
    said = report.verdict(worse)
    assert "joint_kl: tells PPLs apart" in said and "some measure tells the PPLs apart" in said


def test_the_matched_table_says_how_the_tests_read_the_draws():
    """Our shipped runs (before the tests thinned the chains) are said to be of pooled
    draws; a store whose PPL rows carry `tests_thinning` is said to be of thinned ones."""
    import pandas as pd

    from experiments.wyb_report import _read_as

    old = pd.DataFrame({"agent": ["stan", "exact"], "pit_ks_pvalue": [0.3, 0.5]})
    assert "1,000 of the pooled draws" in _read_as(old)
    new = old.assign(tests_thinning=[5.0, None])  # the exact agent's rows need none
    assert "thinned to their ESS" in _read_as(new)
    assert "pooled" in _read_as(new.assign(tests_thinning=[None, None]))
