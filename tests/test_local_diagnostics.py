"""Local-HPD, the oracle C2ST, the local-diagnostic registry and the L-C2ST reproduction's
store, report and refusals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from testbed.errors import InputError
from testbed.metrics import LocalData, LocalHPD, hpd_values, oracle_c2st
from testbed.metrics.lhpd import levels_for
from testbed.metrics.local import LOCAL_DIAGNOSTICS, p_values, run_local


def gaussian_toy(n: int, rng, scale: float = 1.0):
    """theta ~ N(0, 1), x = theta + N(0, 1): p(theta | x) = N(x / 2, 1 / 2); q has the
    posterior's mean and `scale` times its variance."""
    theta = rng.normal(size=(n, 1))
    x = theta + rng.normal(size=(n, 1))
    sd = math.sqrt(0.5 * scale)
    draws = x[None, :, 0] / 2 + sd * rng.normal(size=(500, n))  # [L, n] draws of q
    logq = lambda t: stats.norm.logpdf(t, x[:, 0] / 2, sd)  # noqa: E731
    return x, hpd_values(logq(theta[:, 0]), logq(draws))


def test_hpd_values_count_draws_of_higher_density():
    truth = np.array([0.0, -1.0, -5.0])
    draws = np.array([[1.0, -2.0, -4.0], [-1.0, 0.0, -6.0], [0.5, -0.5, -7.0], [-0.1, -3, -5]])
    # column 0: 1.0 and 0.5 exceed 0.0; column 1: 0.0 and -0.5; column 2: -4.0
    np.testing.assert_allclose(hpd_values(truth, draws), [0.5, 0.5, 0.25])
    with pytest.raises(InputError, match="log_prob_draws"):
        hpd_values(truth, draws[:, :2])


def test_hpd_values_are_uniform_for_the_exact_posterior():
    _, hpd = gaussian_toy(4000, np.random.default_rng(0))
    assert stats.kstest(hpd, "uniform").pvalue > 0.001
    _, wide = gaussian_toy(4000, np.random.default_rng(0), scale=2.0)
    assert wide.mean() < 0.45  # too wide: the truth sits in q's high-density region


def test_lhpd_statistic_is_the_mean_squared_coverage_error_of_its_classifiers():
    x, hpd = gaussian_toy(300, np.random.default_rng(1))
    test = LocalHPD(x, hpd, num_levels=4, num_trials_null=3, seed=5).train()
    x_o = np.array([[0.3]], np.float32)
    trained, levels = test.trained
    np.testing.assert_allclose(levels[0], levels_for(hpd, 4))
    np.testing.assert_allclose(levels[0], np.linspace(0, hpd.max() - 0.001, 4))
    cov = [trained.prob_class1_host(i, x_o)[0] for i in range(4)]  # numpy forward pass
    expected = np.mean((np.asarray(cov) - levels[0]) ** 2)
    assert test.get_statistic_on_observed_data(x_o) == pytest.approx(expected, rel=1e-5)
    null = test.get_statistics_under_null_hypothesis(x_o)
    assert null.shape == (3,)
    assert test.p_value(x_o) == pytest.approx(np.mean(null > expected), abs=1e-9)
    assert test.p_value(x_o, "exact") == pytest.approx((1 + np.sum(null >= expected)) / 4)


def test_lhpd_rejects_a_posterior_with_twice_the_variance():
    x, hpd = gaussian_toy(1000, np.random.default_rng(2), scale=2.0)
    test = LocalHPD(x, hpd, num_trials_null=9, seed=0).train()
    assert all(test.reject_test(np.array([v])) for v in (-1.0, 0.0, 1.0))


def test_lhpd_null_is_reused_and_checked():
    x, hpd = gaussian_toy(300, np.random.default_rng(3))
    first = LocalHPD(x, hpd, num_levels=3, num_trials_null=2).train()
    again = LocalHPD(x, hpd * 0.9, num_levels=3, num_trials_null=2, trained_null=first.trained_null)
    again.train()
    assert again.trained_null is first.trained_null
    with pytest.raises(InputError, match="trained_null"):
        LocalHPD(x, hpd, num_levels=4, num_trials_null=2, trained_null=first.trained_null)
    with pytest.raises(InputError, match="hpd"):
        LocalHPD(x, hpd + 1.0)
    with pytest.raises(InputError, match="not trained"):
        LocalHPD(x, hpd).p_value(np.zeros(1))


@pytest.mark.slow
def test_lhpd_holds_its_level_with_the_exact_posterior():
    """30 independent runs of the exact posterior, one test each (at x_o = 0: tests at
    several x_o of one run share a classifier, so they are not independent): the exact
    p-value's rejections at 0.05 stay under the 99.9% quantile of Binomial(30, 0.05)."""
    runs = 30
    rejections = 0
    for seed in range(runs):
        x, hpd = gaussian_toy(1000, np.random.default_rng(100 + seed))
        test = LocalHPD(x, hpd, num_trials_null=39, seed=seed).train()
        rejections += test.reject_test(np.zeros(1), method="exact")
    assert rejections <= stats.binom.ppf(0.999, runs, 0.05)


def test_oracle_c2st_finds_a_shift_and_not_an_identity():
    rng = np.random.default_rng(4)
    draw = lambda: rng.normal(size=(300, 2))  # noqa: E731
    same = oracle_c2st(draw(), draw(), draw(), draw(), num_trials_null=9)
    shifted = oracle_c2st(rng.normal(size=(300, 2)) + 1.0, rng.normal(size=(300, 2)),
                          rng.normal(size=(300, 2)) + 1.0, rng.normal(size=(300, 2)),
                          num_trials_null=9)  # fmt: skip
    assert shifted.accuracy > 0.65 and shifted.p_values()["p_sbi_accuracy"] == 0.0
    assert shifted.p_values()["p_exact_mse"] == pytest.approx(1 / 10)
    assert abs(same.accuracy - 0.5) < 0.1 and same.p_values()["p_exact_accuracy"] > 0.05
    assert same.null_mse.shape == (9,)
    with pytest.raises(InputError, match="p_train"):
        oracle_c2st(np.zeros((5, 2)), np.zeros((4, 2)), np.zeros((5, 2)), np.zeros((5, 2)))


def test_p_values_of_both_forms():
    p_sbi, p_exact = p_values(np.array([1.0, 0.0]), np.array([[0.5, 1.0, 2.0], [1, 2, 3]]))
    np.testing.assert_allclose(p_sbi, [1 / 3, 1.0])
    np.testing.assert_allclose(p_exact, [3 / 4, 1.0])


def _toy_data(**kw) -> LocalData:
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(50, 1))
    x = theta + rng.normal(size=(50, 1))
    return LocalData(theta, x, x / 2, np.zeros((2, 1)), rng.normal(size=(2, 30, 1)), **kw)


def test_registry_checks_what_a_diagnostic_needs_and_returns():
    assert {"lc2st", "lc2st_nf", "lhpd", "oracle_c2st"} <= set(LOCAL_DIAGNOSTICS.names())
    with pytest.raises(InputError, match="inverse_transform"):
        run_local("lc2st_nf", _toy_data())
    with pytest.raises(InputError, match="local diagnostic"):
        run_local("nosuch", _toy_data())
    from testbed.metrics.local import LocalResult, register_local

    @register_local("returns_nan_for_test", "NaN")
    def bad(data):
        return {"mse": LocalResult(np.array([np.nan, 0.0]), np.zeros(2), np.ones(2))}

    with pytest.raises(InputError, match="non-finite"):
        run_local("returns_nan_for_test", _toy_data())


def test_lhpd_reads_a_flows_one_pass_draws_and_densities_as_the_two_passes():
    """q = N(x / 2, 1/2) (the toy's posterior): `draws_log_prob_at` of the same draws and
    densities gives local-HPD the same statistics as `draws_at` then `log_prob_pairs`."""

    def log_q(theta, x):
        return stats.norm.logpdf(np.asarray(theta)[..., 0], x[:, 0] / 2, np.sqrt(0.5))

    def draws(x, num, seed):
        z = np.random.default_rng(seed).normal(size=(num, len(x), 1))
        return x[None] / 2 + np.sqrt(0.5) * z

    two = dict(log_prob_pairs=log_q, draws_at=draws, num_trials_null=3)
    one = dict(two, draws_log_prob_at=lambda x, n, s: (draws(x, n, s), log_q(draws(x, n, s), x)))
    one["draws_at"] = lambda *a: 1 / 0  # the one pass is used, not the two
    a, b = run_local("lhpd", _toy_data(**two)), run_local("lhpd", _toy_data(**one))
    np.testing.assert_allclose(a["mse"].statistic, b["mse"].statistic)
    np.testing.assert_allclose(a["mse"].p_exact, b["mse"].p_exact)


@pytest.fixture(scope="module")
def small_npe():
    """A quickly trained NPE on two_moons (its flow's methods are what is tested)."""
    import agents
    import generative
    from generative.sbi.problems import simulator_knowledge
    from testbed.simulation import SimulationAccess

    task = generative.sbi.get_task("two_moons")
    access = SimulationAccess(task, 300, task.observation(1))
    agent = agents.load("npe", max_num_epochs=3, num_transforms=2, hidden_features=16)
    return task, agent(access, simulator_knowledge(task, 300))


@pytest.mark.slow
def test_npe_flow_draws_densities_and_inverse_agree(small_npe):
    task, q = small_npe
    from agents.sbi_torch import SbiFlow

    assert isinstance(q, SbiFlow)
    x = task.simulate(task.sample_prior(40, seed=0), seed=1)
    draws = q.flow_draws(x, 50, seed=3)  # [50, 40, 2]
    assert draws.shape == (50, 40, 2)
    np.testing.assert_array_equal(draws, q.flow_draws(x, 50, seed=3))  # seeded
    z = q.inverse_transform(draws.reshape(-1, 2), np.repeat(x[None], 50, 0).reshape(-1, 2))
    # the base space is N(0, I): the flow's draws map onto standard normal draws
    assert abs(z.mean()) < 0.15 and abs(z.std() - 1) < 0.1
    # log q = log N(z) + log |det dz/dtheta|: the inverse embeds x as the density does
    import torch

    net = q._net()
    with torch.no_grad():
        ctx = net._embedding_net(torch.as_tensor(x, dtype=torch.float32))
        z1, logdet = net._transform(torch.as_tensor(draws[0]), context=ctx)
    lp = stats.norm.logpdf(np.asarray(z1)).sum(1) + np.asarray(logdet)
    np.testing.assert_allclose(q.flow_log_prob(draws[0], x), lp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(q.inverse_transform(draws[0], x), np.asarray(z1), atol=1e-5)
    assert q.flow_log_prob(draws, x).shape == (50, 40)
    # one pass for local-HPD: the same draws (same seed), their densities as the forward pass
    same, log_q = q.flow_draws_log_prob(x, 50, seed=3)
    np.testing.assert_allclose(same, draws, atol=1e-6)
    np.testing.assert_allclose(log_q, q.flow_log_prob(draws, x), rtol=1e-4, atol=1e-4)
    q.CHUNK_ROWS = 120  # chunked (2 rows a chunk): other draws, each row's own density
    chunked, chunked_log_q = q.flow_draws_log_prob(x, 50, seed=3)
    assert chunked.shape == (50, 40, 2) and not np.allclose(chunked, draws)
    np.testing.assert_allclose(chunked_log_q, q.flow_log_prob(chunked, x), rtol=1e-4, atol=1e-4)
    del q.CHUNK_ROWS
    # the posterior's own density at one x is the flow's renormalised to the prior's box
    # (sbi's leakage correction): a constant shift inside the box, -inf outside
    own = q.log_prob(draws[:, 0], x[0])
    inside = np.all(np.abs(draws[:, 0]) < 1, axis=1)
    assert np.all(np.isneginf(own[~inside])) and inside.sum() > 10
    shift = own[inside] - q.flow_log_prob(draws[:, :1], x[:1])[inside, 0]
    assert shift.std() < 1e-3 and shift.mean() >= -1e-4


def _store_with(path, cells_and_pvalues):
    """A results store holding hand-made cells: (cell, p_sbi per observation)."""
    from experiments.reproduce_lc2st import Cell
    from leaderboard.store import ResultsStore

    with ResultsStore(path, "w") as store:
        for fields, ps in cells_and_pvalues:
            cell = Cell(*fields)
            metrics = {}
            for k, p in enumerate(ps, start=1):
                metrics.update(
                    {f"mse/T/{k}": 0.01 * k, f"mse/p_sbi/{k}": p, f"mse/p_exact/{k}": p + 0.01}
                )
            store.record({
                "key": cell.key, "agent": cell.diagnostic, "config_key": cell.kind,
                "config": {**cell.__dict__}, "problem_id": f"lc2st/{cell.task}", "seed": cell.run,
                "status": "ok", "metrics": metrics, "wall_seconds": 1.0,
            })  # fmt: skip


def test_report_rates_from_a_small_store(tmp_path):
    from experiments import reproduce_lc2st as rl

    db = tmp_path / "r.db"
    _store_with(db, [
        (("level", "two_moons", 0, 10_000, 1, "lc2st"), [0.0, 0.5, 0.05, 0.9]),
        (("level", "two_moons", 0, 10_000, 2, "lc2st"), [0.04, 0.5, 0.5, 0.9]),
        (("power", "slcp", 1_000, 10_000, 1, "lhpd"), [0.0, 0.0, 0.0, 0.2]),
    ])  # fmt: skip
    table = rl.summary(rl.long_frame(str(db), shipped=False))
    level = table[table["kind"] == "level"].iloc[0]
    # p_sbi <= 0.05 at 0.0, 0.05 (run 1) and 0.04 (run 2): 3 of 8; exact (p + 0.01): 2 of 8
    assert (level.runs, level.tests) == (2, 8)
    assert level.rate == pytest.approx(3 / 8) and level.rate_exact == pytest.approx(2 / 8)
    assert level.rate_low < 3 / 8 < level.rate_high
    # over runs: run shares 2/4 and 1/4, t(1) interval 0.375 +- 12.71 * 0.177 / sqrt(2)
    assert (level.runs_low, level.runs_high) == (0.0, 1.0)
    from experiments.lc2st_report import over_runs

    half = stats.t.ppf(0.975, 3) * np.std([0.3, 0.4, 0.5, 0.4], ddof=1) / 2
    assert over_runs([0.3, 0.4, 0.5, 0.4]) == pytest.approx((0.4 - half, 0.4 + half))
    assert all(map(math.isnan, over_runs([0.1])))
    power = table[table["kind"] == "power"].iloc[0]
    assert power.rate == pytest.approx(3 / 4)
    text = rl.markdown(table)
    assert "Local type-I error" in text and "0.38 [" in text
    assert "| slcp | 1,000 | local-HPD (MSE) | 1 (yours) | 4 |" in text
    out = tmp_path / "out"
    assert rl.main(["--report", "--no-shipped", "--results", str(db), "--out", str(out)]) == 0
    written = (out / "tables.md").read_text()
    assert written.startswith(text) and "The paper: True-positive rate against N_cal" in written
    assert (out / "lc2st.png").stat().st_size > 10_000


def _authors_layout(root, runs=50):
    """The authors' results folder for two_moons with known rejections: at every budget
    and N_cal the first `k` of the runs reject at all 10 observations."""
    import torch

    from experiments.lc2st_published import RESULTS

    folder = root / "saved_experiments/neurips2023/exp_2/two_moons" / RESULTS
    folder.mkdir(parents=True)

    def table(values, k):
        rows = lambda j: [np.full(10, 1 if r < j else 0) for r in range(runs)]  # noqa: E731
        methods = ("c2st", "lc2st", "lc2st_nf", "lhpd")
        return {
            v: {m: {"accuracy": [] if m == "lhpd" else rows(k), "mse": rows(k + i), "div": []}
                for i, m in enumerate(methods)}
            for v in values
        }  # fmt: skip

    torch.save(table((100, 1_000, 10_000, 100_000), 10), folder / "emp_power_dict_n_train.pkl")
    torch.save(table((100, 10_000), 20), folder / "emp_power_dict_n_cal.pkl")
    torch.save(table((100, 10_000), 2), folder / "type_I_error_dict_n_cal.pkl")
    means = {"t_stat_mean": {"mse": [np.float64(0.1), 0.01, 0.001, 0.0001], "accuracy": []}}
    avg = {m: means for m in ("c2st", "lc2st", "lc2st_nf", "lhpd")}
    torch.save(avg, folder / "avg_results_n_train.pkl")


def test_the_papers_rates_are_decoded_from_the_authors_layout(tmp_path):
    from experiments.lc2st_published import decode

    _authors_layout(tmp_path)
    pub = decode(tmp_path).set_index(["kind", "budget", "n_cal", "diagnostic", "statistic"])
    # budget sweep: k = 10 of 50 runs reject (+1 per method in the MSE form)
    assert pub.loc[("power", 100, 10_000, "oracle_c2st", "accuracy"), "rate"] == 0.2
    assert pub.loc[("power", 100, 10_000, "lc2st", "mse"), "rate"] == pytest.approx(11 / 50)
    assert pub.loc[("power", 10_000, 10_000, "lhpd", "mse"), "mean_T"] == pytest.approx(0.001)
    assert pub.loc[("null", 1_000, 100, "lc2st_nf", "mse"), "rate"] == pytest.approx(4 / 50)
    assert pub.loc[("power", 1_000, 100, "lhpd", "mse"), "tests"] == 500
    # budget 1,000 at N_cal 10,000 is in both sweeps: one row, the budget sweep's (with T)
    assert pub.loc[("power", 1_000, 10_000, "lc2st", "mse"), "rate"] == pytest.approx(11 / 50)
    assert ("lhpd", "accuracy") not in set(
        zip(pub.reset_index().diagnostic, pub.reset_index().statistic)
    )
    with pytest.raises(InputError, match="repo: .*allowed: a checkout of JuliaLinhart/lc2st"):
        decode(tmp_path / "empty")
    from experiments.lc2st_published import RESULTS, main

    damaged = tmp_path / "saved_experiments/neurips2023/exp_2/two_moons" / RESULTS
    (damaged / "emp_power_dict_n_train.pkl").write_bytes(b"not a pickle")
    with pytest.raises(InputError, match="cannot be read as the authors' results"):
        decode(tmp_path)
    assert main([str(tmp_path), "--out", str(tmp_path / "README.md")]) == 2  # not a .csv


def test_the_shipped_paper_rates_agree_with_the_reference_notes():
    """shared/reference/diagnostics_and_ppl.md section 1.5 decoded the same files by hand."""
    from experiments.lc2st_published import read_published

    pub = read_published().set_index(["kind", "task", "budget", "n_cal", "diagnostic", "statistic"])
    rate = lambda *k: round(float(pub.loc[k, "rate"]), 2)  # noqa: E731
    assert rate("power", "slcp", 1_000, 2_000, "lc2st", "mse") == pytest.approx(0.83, abs=0.005)
    assert rate("power", "slcp", 1_000, 2_000, "lc2st_nf", "mse") == pytest.approx(0.92, abs=0.005)
    assert rate("power", "slcp", 1_000, 2_000, "lhpd", "mse") == pytest.approx(0.23, abs=0.005)
    assert rate("power", "bernoulli_glm_raw", 1_000, 10_000, "lc2st", "mse") == pytest.approx(
        0.30, abs=0.005
    )
    assert rate("null", "two_moons", 1_000, 100, "lc2st", "accuracy") == pytest.approx(
        0.55, abs=0.005
    )
    assert set(pub.reset_index()["task"]) == {
        "two_moons", "slcp", "gaussian_mixture", "gaussian_linear_uniform", "bernoulli_glm",
        "bernoulli_glm_raw",
    }  # fmt: skip
    assert (pub["runs"] == 50).all()


def test_report_draws_the_figure_with_cells_of_other_sizes(tmp_path):
    """A small run (--n-eval 10 --null-trials 1) or a smaller N_cal beside the paper-sized
    cells is its own method in the tables and figure (it once broke the figure)."""
    from experiments import reproduce_lc2st as rl

    db = tmp_path / "r.db"
    _store_with(db, [
        (("level", "two_moons", 0, 10_000, 1, "lc2st"), [0.0, 0.5]),
        (("level", "two_moons", 0, 10_000, 1, "lc2st", 10, 1), [0.5, 0.5]),
        (("level", "two_moons", 0, 500, 1, "lc2st"), [0.5, 0.0]),
        (("power", "two_moons", 1_000, 500, 1, "lc2st", 10, 1), [0.0, 0.0]),
    ])  # fmt: skip
    out = tmp_path / "out"
    assert rl.main(["--report", "--no-shipped", "--results", str(db), "--out", str(out)]) == 0
    assert (out / "lc2st.png").stat().st_size > 10_000
    assert "L-C2ST (MSE, N_v 10, H 100)" in (out / "tables.md").read_text()


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--parts", "figure9"], "--parts"),
        (["--runs", "0"], "--runs"),
        (["--diagnostics", "lc2st,nosuch"], "--diagnostics"),
        (["--tasks", "two_moon"], "--tasks"),
        (["--n-cals", "123"], "--n-cals"),
        (["--import", "nosuch.py"], "--import"),
        (["--import", "SYNTAX"], "--import"),
        (["--tasks", "slcp", "--parts", "level"], "--tasks"),
        (["--out", "/nonexistent/folder/out"], "--out"),
        (["--import", "README.md"], "--import"),
        (["--report", "--ship", "README.md"], "--ship"),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv, field, tmp_path, capsys):
    from experiments import reproduce_lc2st as rl

    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    argv = [str(bad) if a == "SYNTAX" else a for a in argv]
    out = [] if "--out" in argv else ["--out", str(tmp_path / "o")]
    code = rl.main([*argv, "--results", str(tmp_path / "r.db"), *out])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "o").exists()


@pytest.mark.parametrize("inside", ["", "sub"])
def test_out_in_the_stores_kept_nulls_is_refused(inside, tmp_path, capsys):
    """`--out` aimed at the nulls kept beside the store (`<results>.nulls`), or a folder in
    it, is one line and status 2 before anything runs."""
    from experiments import reproduce_lc2st as rl

    results, nulls = tmp_path / "r.db", tmp_path / "r.db.nulls"
    (nulls / "sub").mkdir(parents=True)  # kept by an earlier run
    code = rl.main(["--parts", "level", "--results", str(results), "--out", str(nulls / inside)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--out" in err and "nulls kept" in err
    assert not results.exists() and [p.name for p in nulls.rglob("*")] == ["sub"]


def test_your_own_diagnostic_runs_beside_and_a_failing_one_is_stored(tmp_path):
    """The plugin example runs through the experiment's level part on gaussian_linear; a
    diagnostic that raises is stored as failed with its reason, the others still run."""
    from experiments import reproduce_lc2st as rl
    from leaderboard.store import ResultsStore
    from testbed.metrics.local import register_local

    @register_local("raises_for_test", "raises")
    def raises(data):
        raise KeyError("this diagnostic always fails")

    @register_local("returns_none_for_test", "None")
    def returns_none(data):
        return None

    settings = rl.Settings(budgets=(100,), n_cals=(100,), n_eval=200, num_trials_null=9)
    rl.import_file(
        str(__import__("pathlib").Path(__file__).parents[1] / "examples/my_local_diagnostic.py")
    )
    names = ["nn_sign", "raises_for_test", "returns_none_for_test"]
    cells = rl.plan(["level"], [1], names, ["gaussian_linear"], settings)
    assert [c.diagnostic for c in cells] == names
    assert cells[0].key.endswith("/nn_sign/neval200/H9")  # not the paper's sizes: in the key
    db = str(tmp_path / "r.db")
    assert rl.run(cells, db, settings) == 2
    with ResultsStore(db, "r") as store:
        rows = {r["agent"]: r for r in store.rows()}
        failures = store.failures()
    assert rows["nn_sign"]["status"] == "ok"
    assert len([k for k in rows["nn_sign"]["metrics"] if k.startswith("mse/p_exact/")]) == 10
    assert any("always fails" in v for v in failures.values())
    assert any("returned NoneType" in v for v in failures.values())
    assert rl.run(cells, db, settings) == 2  # resumes: the ok row is kept, the failed rerun


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_later_run_loads_the_npe_kept_beside_the_store(tmp_path, caplog, monkeypatch):
    """The NPE a run trains is checkpointed in `<results>.checkpoints` and kept; a later
    run (a new process: new Estimators) with another diagnostic loads the ended training
    (which trains no further: tests/test_sbi_checkpoint.py)."""
    import logging

    from experiments import reproduce_lc2st as rl
    from testbed.checkpoints import CHECKPOINTS_ENV

    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    settings = rl.Settings(budgets=(100,), n_cals=(100,), n_eval=200, num_trials_null=9)
    db = str(tmp_path / "r.db")
    first = rl.plan(["figure2"], [1], ["lc2st_nf"], ["two_moons"], settings)
    first = [c for c in first if c.kind == "power"]
    with caplog.at_level(logging.INFO, "testbed.progress"):
        assert rl.run(first, db, settings) == 0
    kept = list((tmp_path / "r.db.checkpoints").glob("npe-two_moons-*.pt"))
    assert len(kept) == 1 and "training resumed" not in caplog.text
    caplog.clear()
    later = [dataclasses.replace(c, diagnostic="lc2st") for c in first]
    with caplog.at_level(logging.INFO, "testbed.progress"):
        assert rl.run(later, db, settings) == 0
    assert f"training resumed from {kept[0]}" in caplog.text and "(it had ended)" in caplog.text
    assert list((tmp_path / "r.db.checkpoints").glob("*.pt")) == kept  # kept, not removed


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_later_process_reuses_the_oracles_kept_null_and_gets_the_same_rows(
    tmp_path, monkeypatch
):
    """The oracle's null, computed once per estimator and reused by later runs, was kept in
    memory: runs 2-3 in a new process paid it again (40 minutes on a 10-d task) and
    tested against another run's null. Now it is kept in `<results>.nulls/`: run 1, then
    runs 2-3 in a later process (new Estimators) store the rows one process stores, and
    the later process trains no null."""
    import testbed.metrics.local_builtin as builtin
    from experiments import reproduce_lc2st as rl
    from leaderboard.store import ResultsStore

    settings = rl.Settings(budgets=(100,), n_cals=(100,), n_eval=200, num_trials_null=9)
    cells = rl.plan(["level"], [1, 2, 3], ["oracle_c2st"], ["gaussian_linear"], settings)

    def metrics(db):
        with ResultsStore(str(db), "r") as store:
            return {r["key"]: r["metrics"] for r in store.rows()}

    assert rl.run(cells, str(tmp_path / "one.db"), settings) == 0
    assert rl.run(cells[:1], str(tmp_path / "two.db"), settings) == 0
    kept = list((tmp_path / "two.db.nulls").glob("*.pkl"))
    assert len(kept) == 10  # one null a observation
    nulls_given = []
    oracle = builtin.oracle_c2st

    def spy(*args, **kwargs):
        nulls_given.append(kwargs["null"] is not None)
        return oracle(*args, **kwargs)

    monkeypatch.setattr(builtin, "oracle_c2st", spy)
    assert rl.run(cells, str(tmp_path / "two.db"), settings) == 0
    assert nulls_given == [True] * 20  # runs 2 and 3, 10 observations each
    assert metrics(tmp_path / "two.db") == metrics(tmp_path / "one.db")


def test_an_oracle_cell_stopped_after_keeping_nulls_resumes_to_the_rows_of_one_run(
    tmp_path, monkeypatch
):
    """An oracle cell stopped after keeping the nulls of its first three observations, then
    run again, reads them back. Its observed classifiers there trained alone, but in one
    batch with the null's in a run that never stopped, which rounds otherwise: the resumed
    cell stored other statistics. Now the observed classifier always trains alone."""
    import testbed.metrics.local_builtin as builtin
    from experiments import reproduce_lc2st as rl
    from leaderboard.store import ResultsStore

    settings = rl.Settings(budgets=(100,), n_cals=(100,), n_eval=50, num_trials_null=3)
    cells = rl.plan(["level"], [1], ["oracle_c2st"], ["gaussian_linear"], settings)

    def metrics(db):
        with ResultsStore(str(db), "r") as store:
            return {r["key"]: r["metrics"] for r in store.rows() if r["status"] == "ok"}

    assert rl.run(cells, str(tmp_path / "one.db"), settings) == 0
    oracle, nulls_given, stop_at = builtin.oracle_c2st, [], [4]

    def spy(*args, **kwargs):  # stops the cell at its fourth observation, the first time
        nulls_given.append(kwargs["null"] is not None)
        if len(nulls_given) == stop_at[0]:
            raise RuntimeError("stopped")
        return oracle(*args, **kwargs)

    monkeypatch.setattr(builtin, "oracle_c2st", spy)
    assert rl.run(cells, str(tmp_path / "two.db"), settings) == 1  # stored as failed
    assert len(list((tmp_path / "two.db.nulls").glob("*.pkl"))) == 3
    nulls_given.clear()
    stop_at[0] = None
    assert rl.run(cells, str(tmp_path / "two.db"), settings) == 0  # new Estimators: read back
    assert nulls_given == [True] * 3 + [False] * 7
    assert metrics(tmp_path / "two.db") == metrics(tmp_path / "one.db") != {}


def test_kept_nulls_read_back_and_set_aside_what_they_cannot_use(tmp_path, caplog):
    """An entry is read back under the same salt only; a large one stays in memory; an
    unreadable file is set aside (the null computed again) and an unwritable folder is
    said, never raised."""
    import logging

    from experiments.kept_nulls import KeptNulls

    a = KeptNulls(tmp_path / "n", salt=(200, 9), max_bytes=1000)
    a["oracle/x"] = (np.arange(3.0), np.ones(2))
    a["big"] = np.zeros(1000)  # 8,000 bytes: in memory only
    assert a["big"].shape == (1000,)
    assert KeptNulls(tmp_path / "n", salt=(200, 9), max_bytes=10**9).get("big") is None
    again = KeptNulls(tmp_path / "n", salt=(200, 9))["oracle/x"]
    assert np.array_equal(again[0], np.arange(3.0)) and np.array_equal(again[1], np.ones(2))
    assert KeptNulls(tmp_path / "n", salt=(200, 10)).get("oracle/x") is None
    path = a.path("oracle/x")
    path.write_bytes(b"not a pickle")
    with caplog.at_level(logging.INFO, "testbed.progress"):
        assert KeptNulls(tmp_path / "n", salt=(200, 9)).get("oracle/x") is None
    assert "cannot be read" in caplog.text and not path.exists()
    assert path.with_name(path.name + ".unused").exists()
    blocked = tmp_path / "file"
    blocked.write_text("")
    b = KeptNulls(blocked / "n", salt=())
    with caplog.at_level(logging.INFO, "testbed.progress"):
        b["k"] = 1.0
    assert b["k"] == 1.0 and "not written" in caplog.text
    caplog.clear()
    c = KeptNulls(tmp_path / "c", salt=())
    with caplog.at_level(logging.INFO, "testbed.progress"):
        c["lambda"] = unpicklable = lambda: 0  # noqa: E731 (a diagnostic's own cache entry)
    assert c["lambda"] is unpicklable and "stays in memory" in caplog.text
    assert not (tmp_path / "c").exists()


class _Pickled:
    """Counts its pickles."""

    count = 0

    def __reduce__(self):
        _Pickled.count += 1
        return (_Pickled, ())


def test_kept_nulls_pickle_an_entry_set_again_once(tmp_path):
    """The diagnostics set their null after every use; a null too large to keep (520 MB
    for L-C2ST-NF on a 100-d x) was pickled again each time to learn its size."""
    from experiments.kept_nulls import KeptNulls

    cache, value = KeptNulls(tmp_path / "n", max_bytes=1), _Pickled()
    for _ in range(3):
        cache["too large"] = value
    assert _Pickled.count == 1 and cache["too large"] is value
    cache["too large"] = _Pickled()  # another null under the key: looked at again
    assert _Pickled.count == 2


def test_shipped_runs_fill_the_cells_a_store_lacks(tmp_path, monkeypatch):
    from experiments import reproduce_lc2st as rl

    ours, mine = tmp_path / "ours.db", tmp_path / "mine.db"
    _store_with(ours, [
        (("level", "two_moons", 0, 10_000, 1, "lc2st"), [0.0, 0.0]),
        (("level", "two_moons", 0, 10_000, 1, "lhpd"), [0.0, 0.0]),
        (("null", "two_moons", 1_000, 100, 1, "lc2st"), [0.0, 0.9]),
    ])  # fmt: skip
    from experiments import lc2st_report

    monkeypatch.setattr(lc2st_report, "SHIPPED", tmp_path / "shipped.csv.gz")
    said = rl.ship(str(ours), lc2st_report.SHIPPED)
    assert said == f"{lc2st_report.SHIPPED}: 3 cells (3 from {ours}, 0 kept)"
    shipped = rl.summary(rl.long_frame(str(tmp_path / "none.db")))
    assert set(shipped["kind"]) == {"level", "null"}  # "null" is a kind, not a missing value
    _store_with(mine, [(("level", "two_moons", 0, 10_000, 1, "lc2st"), [0.9, 0.9])])
    table = rl.summary(rl.long_frame(str(mine)))
    table = table[table["kind"] == "level"].set_index("diagnostic")
    assert table.loc["lc2st", "rate"] == 0.0  # mine (0.9: none rejected) replaced ours
    assert table.loc["lhpd", "rate"] == 1.0  # ours, which mine lacks
    only = shipped[shipped["kind"] == "level"].set_index("diagnostic")
    assert only.loc["lc2st", "rate"] == 1.0 and not (tmp_path / "none.db").exists()
    with pytest.raises(InputError, match="no finished"):
        rl.long_frame(str(tmp_path / "none.db"), shipped=False)


def test_the_exact_gaussian_posterior_inverse_maps_true_parameters_to_base_draws():
    """q = p on gaussian_linear: z of the true theta given x is N(0, I), independent of x
    (what L-C2ST-NF's level run relies on); other tasks get no inverse, so no NF cells."""
    import generative
    from experiments import reproduce_lc2st as rl

    task = generative.sbi.get_task("gaussian_linear")
    theta = task.sample_prior(4000, seed=0)
    x = task.simulate(theta, seed=1)
    z = rl.ReferenceAsEstimator(task).inverse_transform(theta, x)
    assert np.all(np.abs(z.mean(0)) < 0.06) and np.all(np.abs(z.std(0) - 1) < 0.05)
    assert np.max(np.abs(np.corrcoef(z.T, x.T)[:10, 10:])) < 0.06
    cells = rl.plan(["level"], [1], ["lc2st", "lc2st_nf"], None)
    assert {c.task for c in cells if c.diagnostic == "lc2st_nf"} == {"gaussian_linear"}


def test_lhpd_pp_band_is_read_at_the_estimators_levels():
    """A q whose HPD values stop at 0.8: the null band at the top level sits near 0.8 (the
    null's coverage at that level), not near the null's own top level (about 1)."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(600, 1))
    hpd = 0.8 * rng.uniform(size=600)
    test = LocalHPD(x, hpd, num_levels=5, num_trials_null=9).train()
    band = test.pp_plot_data(np.zeros(1))
    assert band["levels"][-1] == pytest.approx(hpd.max() - 0.001)
    assert 0.65 < band["null_low"][-1] <= band["null_high"][-1] < 0.92


def test_report_on_a_missing_store_says_so(tmp_path, capsys):
    from experiments import reproduce_lc2st as rl

    code = rl.main(
        ["--report", "--results", str(tmp_path / "typo.db"), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 0 and "does not exist" in err and not (tmp_path / "typo.db").exists()


def test_the_docs_tables_are_the_report_of_the_shipped_runs(tmp_path):
    """docs/reproductions/lc2st.md shows what `--report` gives on the shipped runs (our
    tables, their headings one level down) and says how many cells ship: a re-ship without
    the docs, or a table edited by hand, shows here."""
    from pathlib import Path

    import pandas as pd

    from experiments import reproduce_lc2st as rl
    from experiments.lc2st_report import SHIPPED

    out = tmp_path / "out"
    assert rl.main(["--report", "--results", str(tmp_path / "none.db"), "--out", str(out)]) == 0
    tables = (out / "tables.md").read_text().splitlines()
    ours = tables[: next(i for i, s in enumerate(tables) if s.startswith("Intervals:")) + 1]
    ours = ["#" + s if s.startswith("#") else s for s in ours]
    docs = (Path(__file__).resolve().parents[1] / "docs/reproductions/lc2st.md").read_text()
    assert "\n".join(ours) in docs
    cell = ["kind", "task", "budget", "n_cal", "run", "diagnostic", "n_eval", "null_trials"]
    shipped = pd.read_csv(SHIPPED, comment="#", keep_default_na=False)
    assert f"lc2st_ours.csv.gz`, {len(shipped[cell].drop_duplicates())} cells)" in docs


def test_the_report_narrows_to_the_parts_tasks_budgets_and_n_cals_given(tmp_path, capsys):
    """`--report --tasks slcp` tabled every task (the selection flags ran cells and
    nothing else); now they narrow the tables, the diagnostics and runs never do (yours
    stay beside ours), and a selection nothing matches is one line with status 2."""
    from experiments import reproduce_lc2st as rl

    def tabled(*flags: str) -> set[tuple[str, str, int]]:
        args = ["--report", "--results", str(tmp_path / "none.db"), "--out", str(tmp_path), *flags]
        table, _, failed = rl._run(rl._parser().parse_args(args))
        assert failed == 0
        return set(zip(table["kind"], table["task"], table["budget"]))

    every = tabled()
    assert {t for _, t, _ in every} > {"slcp", "two_moons", "gaussian_mixture"}
    assert {t for _, t, _ in tabled("--tasks", "slcp")} == {"slcp"}
    appendix = tabled("--parts", "appendix", "--budgets", "100000")
    assert appendix and {(k, b) for k, _, b in appendix} == {("power", 100_000)}
    assert {t for _, t, _ in appendix} <= set(rl.APPENDIX_TASKS)
    assert {k for k, _, _ in tabled("--parts", "level")} == {"level"}
    assert tabled("--diagnostics", "lc2st", "--runs", "1") == every
    capsys.readouterr()
    code = rl.main(
        ["--report", "--parts", "level", "--tasks", "slcp", "--results", str(tmp_path / "n.db"),
         "--out", str(tmp_path / "o")]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("reproduce_lc2st: error: --parts, --tasks: no stored")


def test_the_papers_rates_in_the_report_are_those_of_the_tasks_tabled(tmp_path):
    """The report's section of the paper's rates followed no selection (`--tasks slcp`
    printed every task's); it now holds the tasks tabled, and is left out when none of
    them is the paper's (the level part alone)."""
    from experiments import reproduce_lc2st as rl

    def report(*flags: str) -> str:
        out = tmp_path / "o"
        args = ["--report", "--results", str(tmp_path / "none.db"), "--out", str(out), *flags]
        assert rl.main(args) == 0
        return (out / "tables.md").read_text()

    every = report().split("### The paper's rates")[1]
    assert "| slcp |" in every and "| two_moons |" in every
    slcp = report("--tasks", "slcp").split("### The paper's rates")[1]
    assert "| slcp |" in slcp and "| two_moons |" not in slcp
    assert "### The paper's rates" not in report("--parts", "level")
