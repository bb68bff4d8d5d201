"""The real-data reproduction: its plan shares tune_references' selection problems and
never a held-out one, its report gives the known answer on a small hand-made store
(monotone scores: Spearman 1; shuffled: an interval holding 0), a missing or failed job
is counted and never scored, and bad input is one line."""

from __future__ import annotations

import pandas as pd
import pytest

import generative
from experiments import real_data_report as report
from experiments import reproduce_real_data as rrd
from experiments import tune_references as tune

SELECTION, HELD_OUT = tune.split(generative.sweep_ids(tune.SWEEP), 0)
L2 = ["0.01", "0.1", "1", "3", "10", "30", "100", "300"]  # eight mlp configs (--grid)
GRID = {"l2_weight_decay": L2}
DATASETS = ("iris", "wine")


def test_the_regimes_are_the_variant_data_sweeps_sizes():
    assert [rrd.low_size(d) for d in rrd.offline_datasets()] == [10, 10, 10, 100]
    ids = rrd.real_ids(rrd.offline_datasets(), seeds=rrd.SEEDS)
    assert set(ids["full"]) == set(generative.sweep_ids("real_offline"))
    assert set(ids["low"]) <= set(generative.sweep_ids("real_offline_variant_data"))
    one = rrd.real_ids(["digits"], taus=(10,))
    assert one == {"full": ["real/digits/10/1"], "low": ["real/digits/10/1/100"]}


def test_the_synthetic_side_is_tune_references_selection_and_never_held_out():
    assert sorted(rrd.AGENTS) == sorted(tune.AGENTS)
    assert rrd.synthetic_ids("mlp") == SELECTION
    assert rrd.synthetic_ids("bbb") == tune.first_round(SELECTION)  # halved: the first round
    assert {tune.seed_group(p) for a in rrd.AGENTS for p in rrd.synthetic_ids(a)} == {0}
    assert not set(HELD_OUT) & {p for a in rrd.AGENTS for p in rrd.synthetic_ids(a)}


def test_the_matched_side_is_the_classification_sweep_near_the_datasets_shapes(monkeypatch):
    ids = rrd.matched()
    settings = [generative.problem_settings(p) for p in ids]
    cells = {(s["input_dim"], s["num_train"], s["temperature"], s["tau"]) for s in settings}
    assert set(ids) <= set(generative.sweep_ids("classification")) and len(cells) == len(ids)
    assert {(d, n) for d, n, _, _ in cells} == {(10, 10), (10, 100), (10, 1000), (100, 100),
                                                (100, 1000)}  # fmt: skip
    assert {t for _, _, t, _ in cells} == {0.01, 0.1, 0.5} and {c[3] for c in cells} == {1, 10}
    assert len(ids) == 30 and rrd.synthetic_ids("mlp", "matched") == ids
    halved = rrd.synthetic_ids("bbb", "matched")
    assert {generative.problem_settings(p)["temperature"] for p in halved} == {0.1}
    ran = []
    monkeypatch.setattr(rrd, "_run", lambda jobs, *_: ran.append(list(jobs)) or False)
    rrd.run_all(["mlp"], rrd.real_ids(["iris"], taus=(1,)), {}, "r.db", side="matched")
    synthetic = {j.problem_id for j in ran[0] if not j.problem_id.startswith("real/")}
    assert synthetic == set(ids)  # uniform and every config there, nothing of classification_2d
    assert rrd.design(["mlp"], {}, {}, "matched").pooled == tune.first_round(ids)


def test_the_run_plans_every_config_on_the_selection_problems_only(monkeypatch):
    ran = []
    monkeypatch.setattr(rrd, "_run", lambda jobs, results, workers, shipped: ran.append(
        (list(jobs), shipped)) or False)  # fmt: skip
    rrd.run_all(["sgmcmc"], rrd.real_ids(["iris"], taus=(1,)), {}, "r.db")
    rrd.run_all(["sgmcmc"], rrd.real_ids(["iris"], taus=(1,)), {}, "r.db", shipped=False)
    (jobs, shipped), (again, computed) = ran
    assert shipped and not computed and again == jobs  # --no-shipped: the same jobs, all run
    uniform = [j for j in jobs if j.agent == "uniform"]
    synthetic = [j for j in jobs if j.agent != "uniform" and not j.problem_id.startswith("real/")]
    real = [j for j in jobs if j.problem_id.startswith("real/")]
    assert jobs == uniform + synthetic + real
    assert {j.agent for j in uniform} == {"uniform"}
    assert {j.problem_id for j in synthetic} == set(tune.first_round(SELECTION))
    assert len({j.config_key for j in synthetic}) == len({j.config_key for j in real}) == 36
    assert {j.problem_id for j in real} == {"real/iris/1/1", "real/iris/1/1/10"}
    # the report's expected jobs are the jobs the plan makes: the same keys
    assert {j.key for j in rrd.jobs_of("sgmcmc", rrd.synthetic_ids("sgmcmc"), {})} == {
        j.key for j in synthetic
    }


def _store(path, real_of, *, skip=(), fail=()) -> None:
    """A store of the eight mlp configs of GRID: config i scores KL 0.1 (i + 1) on each
    selection problem (uniform 1.0) and NLL real_of(i) on each real problem; jobs of
    (config index, side) in `skip` are not stored, in `fail` stored as failed."""
    from leaderboard.store import ResultsStore

    real = rrd.real_ids(DATASETS, ("full",), (1,))["full"]
    with ResultsStore(path) as store:
        for j in rrd.jobs_of("uniform", SELECTION, {}):
            store.record({**j.as_dict(), "status": "ok", "metrics": {"kl_estimate": 1.0}})
        for i in range(len(rrd.agent_configs("mlp", GRID))):
            for side, ids in (("synthetic", SELECTION), ("real", real)):
                if (i, side) in skip:
                    continue
                for p in ids:
                    j = rrd.jobs_of("mlp", [p], {"l2_weight_decay": [L2[i]]})[0]
                    metric = {"kl_estimate": 0.1 * (i + 1)} if side == "synthetic" else {
                        "joint_nll": real_of(i)}  # fmt: skip
                    status = "failed" if (i, side) in fail else "ok"
                    store.record({**j.as_dict(), "status": status, "metrics": metric,
                                  "error": "boom" if status == "failed" else None})


def _report(tmp_path, db) -> pd.DataFrame:
    argv = ["--report", "--results", str(db), "--agents", "mlp", "--datasets", ",".join(DATASETS),
            "--regimes", "full", "--taus", "1", "--grid", f"l2_weight_decay={','.join(L2)}",
            "--no-shipped", "--bootstrap", "500", "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main(argv) == 0
    return pd.read_csv(tmp_path / "out" / "correlation.csv")


def test_monotone_scores_give_spearman_one_and_the_verdict_holds(tmp_path):
    _store(tmp_path / "r.db", lambda i: 1.0 + i)
    row = _report(tmp_path, tmp_path / "r.db").iloc[0]
    assert row["configs"] == 8 and row["n"] == 8 and row["missing"] == 0
    assert row["spearman"] == pytest.approx(1.0) and row["spearman_low"] > 0.95
    assert row["pearson"] == pytest.approx(1.0) and row["verdict"] == "holds"
    assert row["paper"] == report.PAPER
    text = (tmp_path / "out" / "correlation.md").read_text()
    assert "mlp: holds in 1 of 1 (full tau=1: holds, Spearman 1.00" in text
    configs = pd.read_csv(tmp_path / "out" / "configs.csv")
    assert configs["synthetic"].tolist() == pytest.approx([0.1 * (i + 1) for i in range(8)])
    assert configs["real_iris"].tolist() == pytest.approx([1.0 + i for i in range(8)])
    for name in report.OUTPUTS:
        assert (tmp_path / "out" / name).exists(), name


def test_scores_in_reverse_order_are_said_reversed(tmp_path):
    _store(tmp_path / "r.db", lambda i: 10.0 - i)  # the testbed's best is real data's worst
    row = _report(tmp_path, tmp_path / "r.db").iloc[0]
    assert row["spearman"] == pytest.approx(-1.0) and row["verdict"] == "reversed"
    text = (tmp_path / "out" / "correlation.md").read_text()
    assert "mlp: holds in 0 of 1, reversed in 1 (full tau=1: reversed, Spearman -1.00" in text


def test_shuffled_scores_give_an_interval_holding_zero(tmp_path):
    order = [3, 7, 0, 5, 1, 6, 4, 2]  # a shuffle: Spearman with 0..7 is -0.07
    _store(tmp_path / "r.db", lambda i: 1.0 + order[i])
    row = _report(tmp_path, tmp_path / "r.db").iloc[0]
    assert abs(row["spearman"]) < 0.2 and row["spearman_low"] < 0 < row["spearman_high"]
    assert row["verdict"] == "not shown"


def test_a_missing_or_failed_config_is_counted_never_scored(tmp_path):
    _store(tmp_path / "r.db", lambda i: 1.0 + i, skip={(2, "real")}, fail={(5, "synthetic")})
    row = _report(tmp_path, tmp_path / "r.db").iloc[0]
    assert row["configs"] == 8 and row["n"] == 6 and row["missing"] == 2
    assert row["spearman"] == pytest.approx(1.0)  # the six complete configs, still monotone
    configs = pd.read_csv(tmp_path / "out" / "configs.csv")
    assert configs["real"].isna().tolist() == [i == 2 for i in range(8)]
    assert configs["synthetic"].isna().tolist() == [i == 5 for i in range(8)]
    datasets = pd.read_csv(tmp_path / "out" / "datasets.csv")
    assert datasets["dataset"].tolist() == list(DATASETS) and set(datasets["missing"]) == {2}


def test_the_pooled_interval_does_not_hang_on_the_order_of_the_agents():
    """Figure 5(b)'s bootstrap resamples configs: `--agents a,b` and `--agents b,a` gave
    intervals apart by 0.01 (the same draws fell on other configs)."""
    import numpy as np

    rng = np.random.default_rng(0)
    scores = pd.DataFrame([{"agent": agent, "config_key": f"k{i}", "regime": "low", "tau": 1,
                            "synthetic_pooled": rng.normal(), "real": rng.normal()}
                           for agent in ("mlp", "bbb", "ensemble") for i in range(7)])  # fmt: skip
    one = report.pooled(scores, num_bootstrap=300)
    other = report.pooled(scores.iloc[::-1], num_bootstrap=300)
    pd.testing.assert_frame_equal(one, other)


def test_no_config_complete_on_both_sides_is_tabled_not_a_crash(tmp_path):
    _store(tmp_path / "r.db", lambda i: 1.0 + i, skip={(i, "synthetic") for i in range(8)})
    row = _report(tmp_path, tmp_path / "r.db").iloc[0]
    assert row["n"] == 0 and row["missing"] == 8 and pd.isna(row["spearman"])
    assert row["verdict"] == "not run: 0 of 8 configs finished on both sides"  # not "too few"
    assert "mlp: not run: 0 of 8 configs finished on both sides in its one cell" in (
        tmp_path / "out" / "correlation.md").read_text()  # fmt: skip


def test_a_report_of_runs_that_never_happened_says_they_are_not_run(tmp_path, capsys):
    """mnist was never run: every row says so (not `too few configs`), status 0 (a store
    of another machine's may hold them)."""
    argv = ["--report", "--datasets", "tfds/mnist", "--agents", "mlp,epinet", "--taus", "1",
            "--bootstrap", "100", "--results", str(tmp_path / "none.db"),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main(argv) == 0
    out = capsys.readouterr().out
    assert "too few configs" not in out
    assert "| not run: 0 of 17 configs finished on both sides |" in out
    assert "epinet: not run: 0 of 1 config finished on both sides in all 2 cells" in out


def test_the_figures_log_axis_labels_never_overlap(tmp_path):
    """Over about a decade matplotlib labelled the minor ticks too (3x10^-1, 4x10^-1, ...),
    one on another: only plain labels at 1, 2 and 5 times a power of ten now."""
    import numpy as np

    x = np.geomspace(0.25, 4.0, 40)
    keys = [f"k{i}" for i in range(40)]
    scores = pd.DataFrame({"agent": "mlp", "config_key": keys, "regime": "full", "tau": 1,
                           "synthetic_pooled": x, "real": x})  # fmt: skip
    fig = report.figure(scores)
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    labels = [t for t in ax.get_xticklabels(which="both")
              if t.get_text() and low <= t.get_position()[0] <= high]  # fmt: skip
    texts = [t.get_text() for t in labels]
    boxes = sorted((b.x0, b.x1) for b in (t.get_window_extent() for t in labels))
    assert all(left[1] <= right[0] for left, right in zip(boxes, boxes[1:])), texts
    assert texts == ["0.5", "1", "2"], texts


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agents", "ensembel"], "did you mean 'ensemble'"),
        (["--datasets", "irsi"], "did you mean 'iris'"),
        (["--seeds", "6"], "--seeds: got '6'"),
        (["--synthetic", "3d"], "--synthetic: got '3d'; allowed: one of 2d, matched"),
        (["--synthetic", "2d,matched"], "allowed: one of 2d, matched"),
        (["--agents", "mlp", "--grid", "l2_weight_decay=abc", "--results", "r.db"],
         "--grid: agent mlp: l2_weight_decay: got 'abc'"),
        (["--agents", "mlp", "--grid", "nosuch=1", "--plan"], "--grid: set nosuch: no agent"),
        (["--agents", "npe", "--plan"], "--agents: agent npe predicts a posterior"),
        (["--synthetic", "matched", "--prior-functions"], "--synthetic: not with --prior"),
        (["--agents", "mlp", "--prior-functions"], "--agents: not with --prior-functions"),
        (["--report", "--no-shipped", "--results", "nope.db"], "'nope.db' does not exist"),
        (["--agents", "uniform", "--datasets", "tfds/iris", "--results", "r.db"],
         "TFDS datasets not prepared"),
        (["--agents", "mlp", "--grid", "hidden_sizes=50 50", "--plan"],
         "allowed: a comma-separated list of integers (e.g. 50,50; several separated by ';': "
         "50,50;100)"),
        (["--agents", "mlp", "--grid", "l2_weight_decay=0.1", "--grid", "l2_weight_decay=1",
          "--plan"], "--grid: got l2_weight_decay twice; allowed: each field once"),
        (["--agents", "mlp", "--grid", "l2_weight_decay=1,,10", "--plan"],
         "--grid: got 'l2_weight_decay=1,,10', which has an empty value"),
        (["--agents", "mlp", "--grid", "hidden_sizes=,50", "--plan"],  # it ran [50]
         "--grid: got 'hidden_sizes=,50', which has an empty value"),
        (["--agents", "mlp", "--grid", "l2_weight_decay=1,1", "--plan"],  # it ran one config
         "--grid: got 'l2_weight_decay=1,1', which gives 1 twice; allowed: each value once"),
        (["--agents", "mlp,,bbb", "--plan"], "--agents: got 'mlp,,bbb', which has an empty item"),
        (["--agents", "mlp,mlp", "--plan"], "--agents: got 'mlp,mlp', which names mlp twice"),
        (["--report", "--plan"], "--report: not with --plan; allowed: one of the two"),
        (["--plan", "--ship", "x.csv.gz"], "--ship: not with --plan; allowed: one of the two"),
        (["--agents", "mlp,ensemble", "--grid", "num_ensemble=5", "--plan"],
         "--grid: set num_ensemble: not a field of mlp (of --agents mlp,ensemble, only "
         "ensemble has it)"),
        (["--agents", "mlp,bbb", "--grid", "nosuch=5", "--plan"],
         "--grid: set nosuch: no agent among mlp, bbb has this field"),
    ],
)  # fmt: skip
def test_refusals_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    monkeypatch.setenv("TESTBED_TFDS_DOWNLOAD", "0")
    assert rrd.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce_real_data: error: "), err
    assert message in err[0]


def test_a_store_without_real_data_is_refused(tmp_path, capsys):
    from leaderboard.store import ResultsStore

    with ResultsStore(tmp_path / "r.db") as store:
        j = rrd.jobs_of("uniform", SELECTION[:1], {})[0]
        store.record({**j.as_dict(), "status": "ok", "metrics": {"kl_estimate": 1.0}})
    argv = ["--report", "--no-shipped", "--results", str(tmp_path / "r.db"),
            "--out", str(tmp_path / "o")]  # fmt: skip (ours shipped hold real-data runs)
    assert rrd.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no real-data run" in err[0]
    assert "(real/...) and --no-shipped leaves out ours; allowed: a store" in err[0]


@pytest.mark.parametrize("option, example", [("--out", "a folder such as real_data"),
                                             ("--results", "a results file such as real.db")])
def test_an_empty_path_is_refused_not_the_current_folder(tmp_path, capsys, monkeypatch,
                                                         option, example):  # fmt: skip
    """`--out ""` wrote every report file into the current folder; `--results ""` was
    said to be '.', a folder."""
    monkeypatch.chdir(tmp_path)
    argv = ["--report", "--agents", "mlp", "--taus", "1", "--bootstrap", "100",
            "--results", str(tmp_path / "none.db"), "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main([*argv, option, ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"reproduce_real_data: error: {option}: got '', which is empty; allowed: "
                   f"{example}"]  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_a_list_field_of_the_grid_is_a_list_and_lists_are_separated_by_semicolons():
    """`--grid hidden_sizes=50,50` was split on its comma: two one-layer [50] networks
    (one config). A list field's text is one list, as `--set` writes it; `;` separates
    several values, of any field."""
    def hidden(*grid: str) -> list:
        args = rrd.parse(["--agents", "mlp", *(a for g in grid for a in ("--grid", g))])
        return [c["hidden_sizes"] for c in rrd.agent_configs("mlp", rrd.choices(args)["grid"])]

    assert hidden("hidden_sizes=50,50") == [[50, 50]]
    assert hidden("hidden_sizes=(50, 50)") == [[50, 50]]  # as --set takes it too
    assert hidden("hidden_sizes=50,50;100;20,20,20") == [[50, 50], [100], [20, 20, 20]]
    assert hidden("hidden_sizes=100", "l2_weight_decay=1;10") == [[100], [100]]
    args = rrd.parse(["--agents", "mlp", "--grid", "l2_weight_decay=1,10"])
    assert rrd.choices(args)["grid"] == {"l2_weight_decay": ["1", "10"]}


def test_plan_counts_jobs_and_what_the_store_holds(tmp_path, capsys):
    _store(tmp_path / "r.db", lambda i: 1.0 + i)
    argv = ["--plan", "--agents", "mlp", "--datasets", ",".join(DATASETS), "--regimes", "full",
            "--taus", "1", "--grid", f"l2_weight_decay={','.join(L2)}",
            "--results", str(tmp_path / "r.db")]  # fmt: skip
    assert rrd.main(argv) == 0
    line = [r for r in capsys.readouterr().out.splitlines() if r.strip().startswith("mlp")][0]
    assert line.split()[:6] == ["mlp", "8", str(8 * 42), "16", str(8 * 42 + 16), "0"]


def test_the_plan_counts_what_ships_unless_no_shipped(tmp_path, capsys):
    """mlp's real-data runs ship: the plan counts none left to run, and with --no-shipped
    (a run that computes them all) every one, at the shipped runs' cost."""
    argv = ["--plan", "--agents", "mlp", "--results", str(tmp_path / "none.db")]
    for extra, stored in (([], True), (["--no-shipped"], False)):
        assert rrd.main([*argv, *extra]) == 0
        out = capsys.readouterr().out.splitlines()
        row = dict(zip(out[0].split(), [r for r in out if r.strip().startswith("mlp")][0].split()))
        total = int(row["synthetic_jobs"]) + int(row["full_jobs"]) + int(row["low_jobs"])
        assert (int(row["stored"]), int(row["to_run"])) == ((total, 0) if stored else (0, total))
        assert (float(row["real_hours"]) == 0) == stored


def test_the_plan_says_no_estimate_where_nothing_times_a_job_and_sums_all(tmp_path, capsys):
    """knn has no shipped run and no COST: its hours were NaN; the plan says `no estimate`,
    why, and sums the agents in an `all` row (the docs' plan table), a lower bound here."""
    argv = ["--plan", "--agents", "knn,mlp", "--datasets", "iris", "--taus", "1",
            "--no-shipped", "--results", str(tmp_path / "none.db")]  # fmt: skip
    assert rrd.main(argv) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "nan" not in out
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["knn"].split()[-4:] == ["no", "estimate", "no", "estimate"]
    mlp, knn = rows["mlp"].split(), rows["knn"].split()
    jobs = [int(a) + int(b) for a, b in zip(mlp[2:7], knn[2:7])]
    assert rows["all"].split()[1:6] == [str(n) for n in jobs]
    assert rows["all"].split()[6:] == [">=", f"{float(mlp[7]):.2f}", ">=", f"{float(mlp[8]):.2f}"]
    assert rows["no"].startswith("no estimate: nothing times a job of knn (no shipped")


def test_the_plan_costs_a_job_what_the_shipped_runs_took(tmp_path, monkeypatch, capsys):
    """Per agent and regime, the mean wall time of its shipped real-data runs (full ids
    have no training size; low ones do); `COST` only where none ships."""
    from leaderboard import shipped_files

    rows = pd.DataFrame({
        "agent": ["mlp", "mlp", "mlp", "bbb", "mlp"],
        "problem_id": ["real/iris/1/1", "real/wine/10/1", "real/iris/1/1/10",
                       "classification_2d/3", "real/digits/1/1"],
        "status": ["ok", "ok", "ok", "ok", "failed"],
        "wall_seconds": [2.0, 4.0, 10.0, 99.0, 500.0],
    })  # fmt: skip
    assert rrd.seconds_a_job(rows) == {"mlp": {"full": 3.0, "low": 10.0}}
    monkeypatch.setitem(shipped_files.SOURCES, rrd.SHIPPED, tmp_path / "none.csv.gz")
    monkeypatch.setattr(rrd, "seconds_a_job", lambda shipped: {"mlp": {"full": 36.0}})
    argv = ["--plan", "--agents", "mlp", "--datasets", "iris", "--taus", "1", "--grid",
            "l2_weight_decay=1,10", "--results", str(tmp_path / "r.db")]  # fmt: skip
    assert rrd.main(argv) == 0
    line = [r for r in capsys.readouterr().out.splitlines() if r.strip().startswith("mlp")][0]
    hours = 2 * (36.0 + rrd.COST["mlp"][2]) / 3600  # 2 configs: a full job 36 s, a low COST's
    assert float(line.split()[-1]) == pytest.approx(round(hours, 2))


def test_one_tiny_run_end_to_end(tmp_path, monkeypatch):
    """A cheap agent, three configs, one synthetic and one real problem, through the
    leaderboard's sweep into a store, then the report."""
    monkeypatch.setattr(rrd, "synthetic_ids", lambda agent, side="2d": SELECTION[:1])
    argv = ["--agents", "average_class_probs", "--grid", "form=log",
            "--grid", "pseudo_count=0.1,1,10", "--datasets", "iris", "--regimes", "full",
            "--taus", "1", "--no-shipped",
            "--results", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"),
            "--bootstrap", "200"]  # fmt: skip
    assert rrd.main(argv) == 0
    import leaderboard

    rows = leaderboard.load(tmp_path / "r.db")
    mine = rows[rows["agent"] == "average_class_probs"]
    assert len(mine) == 6 and set(mine["status"]) == {"ok"}
    row = pd.read_csv(tmp_path / "out" / "correlation.csv").iloc[0]
    assert row["configs"] == 3 and row["n"] == 3 and row["missing"] == 0
    assert abs(row["spearman"]) == pytest.approx(1.0)  # three distinct configs: ranks match or not
    # shipped: the store's jobs of this run, then tabled on a "fresh install" (no store)
    from leaderboard import shipped_files

    c = rrd.choices(rrd.parse(argv))
    said = rrd.ship(str(tmp_path / "r.db"), str(tmp_path / "ours.csv.gz"), rrd.keys_of(**c))
    assert said.endswith("(7 from " + str(tmp_path / "r.db") + ", 0 kept)")  # with uniform's
    monkeypatch.setitem(shipped_files.SOURCES, rrd.SHIPPED, tmp_path / "ours.csv.gz")
    fresh = [a for a in argv if a != "--no-shipped"]
    fresh[fresh.index("--results") + 1] = str(tmp_path / "none.db")
    assert rrd.main(["--report", *fresh]) == 0
    again = pd.read_csv(tmp_path / "out" / "correlation.csv").iloc[0]
    assert again["n"] == 3 and again["spearman"] == pytest.approx(row["spearman"], nan_ok=True)


# ----------------------------------------------------------------------------- Figure 7


def _prior_store(path, nll, *, skip=()) -> dict:
    """A store of Figure 7's jobs on iris and wine (full, tau 1): variant v at agent seed s
    on dataset d scores `nll(v, s, d)`; (variant, seed, dataset) in `skip` not stored."""
    from experiments import prior_functions as pf
    from leaderboard.store import ResultsStore

    real = rrd.real_ids(DATASETS, ("full",), (1,))
    planned = pf.jobs(real)
    with ResultsStore(path) as store:
        for name, jobs in planned.items():
            for j in jobs:
                dataset = j.problem_id.split("/")[1]
                if (name, j.seed, dataset) not in skip:
                    store.record({**j.as_dict(), "status": "ok",
                                  "metrics": {"joint_nll": nll(name, j.seed, dataset)}})
    return real


def _prior_report(tmp_path, db) -> pd.DataFrame:
    argv = ["--prior-functions", "--report", "--results", str(db), "--datasets",
            ",".join(DATASETS), "--regimes", "full", "--taus", "1", "--no-shipped",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main(argv) == 0
    return pd.read_csv(tmp_path / "out" / "prior_functions.csv")


def test_prior_functions_pair_seeds_and_give_the_difference_with_its_standard_error(tmp_path):
    from experiments import prior_functions as pf

    assert set(pf.VARIANTS) == {"mlp", pf.WITHOUT, pf.WITH}
    gap = {0: 0.30, 1: 0.50, 2: 0.40}  # without - with, per seed: mean 0.4, se 0.1/sqrt(3)
    base = {"iris": 1.0, "wine": 2.0}

    def nll(name, seed, dataset):  # a seed effect shared by both variants cancels in pairs
        shared = base[dataset] + 0.7 * seed
        return {"mlp": 3.0, pf.WITHOUT: shared + gap[seed], pf.WITH: shared}[name]

    _prior_store(tmp_path / "r.db", nll)
    table = _prior_report(tmp_path, tmp_path / "r.db")
    assert table["dataset"].tolist() == ["iris", "wine", "all"]
    iris = table.iloc[0]
    assert iris[pf.WITH] == pytest.approx(1.0 + 0.7) and iris["mlp"] == pytest.approx(3.0)
    assert iris["difference"] == pytest.approx(0.4)
    assert iris["difference_se"] == pytest.approx(0.1 / 3**0.5)  # std of (.3, .5, .4) is 0.1
    assert iris["seeds"] == 3 and iris["says"] == "prior helps"  # 0.4 > 4.30 x 0.058
    pooled = table.iloc[2]
    assert pooled[pf.WITH] == pytest.approx(1.5 + 0.7)
    assert pooled["difference"] == pytest.approx(0.4)
    assert "2 prior helps, 0 prior hurts" in (tmp_path / "out" / "prior_functions.md").read_text()


def test_prior_functions_within_noise_hurt_and_missing_are_said(tmp_path):
    from experiments import prior_functions as pf

    # iris: mean 0.3, se 0.115, 2.6 standard errors: inside the t interval (4.30 at 2 df)
    gap = {"iris": {0: 0.1, 1: 0.3, 2: 0.5}, "wine": {0: -0.5, 1: -0.6, 2: -0.4}}

    def nll(name, seed, dataset):
        return 1.0 + (gap[dataset][seed] if name == pf.WITHOUT else 0.0)

    _prior_store(tmp_path / "r.db", nll, skip={(pf.WITH, 2, "wine")})
    table = _prior_report(tmp_path, tmp_path / "r.db").set_index("dataset")
    assert table.loc["iris", "says"] == "no difference within noise"
    assert table.loc["wine", "says"] == "not run" and pd.isna(table.loc["wine", pf.WITH])
    assert table.loc["all", "says"] == "not run"  # a partial mean is never a score
    _prior_store(tmp_path / "s.db", nll)
    table = _prior_report(tmp_path, tmp_path / "s.db").set_index("dataset")
    assert table.loc["wine", "says"] == "prior hurts"  # -0.5 +- 0.058: 8.7 standard errors


def test_prior_functions_plan_and_refusals(tmp_path, capsys):
    argv = ["--prior-functions", "--plan", "--datasets", "iris", "--regimes", "full,low",
            "--taus", "1,10", "--results", str(tmp_path / "none.db")]  # fmt: skip
    names = ("mlp", "ensemble (no prior)", "ensemble+ (prior)")
    assert rrd.main(argv) == 0  # every job ships (real_data_ours): none left to run
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{name}: 12 jobs, 12 stored, 0 to run" for name in names]  # 4 x 3 seeds
    assert rrd.main([*argv, "--no-shipped"]) == 0  # a run that computes them all
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{name}: 12 jobs, 0 stored, 12 to run" for name in names]
    assert rrd.main(["--prior-functions", "--grid", "l2_weight_decay=1", "--plan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["reproduce_real_data: error: --grid: not with --prior-functions; allowed: "
                   "one of the two"]  # fmt: skip


def test_the_docs_prior_functions_table_is_the_report_of_the_shipped_runs(tmp_path):
    """docs/reproductions/real-data.md's Figure 7 table is what `--prior-functions
    --report` prints on a fresh install (our shipped runs, no store)."""
    from pathlib import Path

    from experiments import prior_functions as pf

    argv = ["--prior-functions", "--report", "--results", str(tmp_path / "none.db"),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main(argv) == 0
    table = pd.read_csv(tmp_path / "out" / "prior_functions.csv")
    assert len(table) == 20 and "not run" not in set(table["says"])  # 16 cells + 4 pooled
    docs = (Path(__file__).resolve().parents[1] / "docs/reproductions/real-data.md").read_text()
    assert pf.markdown(table).strip() in docs


SHIPPED = "mlp,ensemble+,ensemble,bbb,epinet,dropout,hypermodel,sgmcmc"  # real-data.md main table


@pytest.mark.slow  # three reports of the shipped runs with 2,000 bootstrap replicates: ~25 s
@pytest.mark.parametrize("agents, side", [("mlp", "2d"), ("mlp", "matched"), (SHIPPED, "2d")])
def test_the_docs_correlation_tables_are_the_report_of_the_shipped_runs(tmp_path, agents, side):
    """docs/reproductions/real-data.md's correlation tables (per agent, each synthetic side,
    and pooled over the agents) are what `--report --agents A` prints on a fresh install
    (our shipped runs, no store)."""
    from pathlib import Path

    argv = ["--report", "--agents", agents, "--synthetic", side, "--results",
            str(tmp_path / "none.db"), "--out", str(tmp_path / "out")]  # fmt: skip
    assert rrd.main(argv) == 0
    text = (tmp_path / "out" / "correlation.md").read_text()
    assert text.endswith(f"synthetic side: {side}\n")  # the tables say which side they rest on
    table = text.split("\n\n")[0].strip()
    docs = (Path(__file__).resolve().parents[1] / "docs/reproductions/real-data.md").read_text()
    names = agents.split(",")
    assert all(table.count(f"| {a} |") == 4 for a in names) and table in docs
    if len(names) > 1:  # the paper's Figure 5(b): over all agent-settings; Figure 11's grid
        assert (tmp_path / "out" / "pooled.md").read_text().strip() in docs
        grids = (tmp_path / "out" / "datasets.md").read_text().split("\n\n")
        assert grids[2].startswith("Spearman per dataset, tau = 10") and grids[3] in docs


def test_the_dataset_grid_bolds_the_cells_whose_interval_excludes_0():
    from experiments.real_data_report import dataset_grid

    table = pd.DataFrame({
        "agent": ["mlp"] * 3 + ["bbb"], "regime": ["full"] * 4, "tau": [10, 10, 10, 1],
        "dataset": ["iris", "wine", "digits", "iris"],
        "spearman": [-0.5, 0.4, float("nan"), 0.9],
        "spearman_low": [-0.8, 0.1, float("nan"), 0.5],
        "spearman_high": [-0.1, 0.7, float("nan"), 1.0],
    })  # fmt: skip
    lines = dataset_grid(table, 10).strip().splitlines()
    assert lines[0] == "| agent | regime | iris | wine | digits |"
    assert lines[2:] == ["| mlp | full | **-0.50** | **0.40** | n/a |"]  # bbb: tau 1 only
    assert "| bbb | full | **0.90** |" in dataset_grid(table, 1)
    table.loc[1, "spearman_low"] = -0.1  # the interval holds 0: plain
    assert "| mlp | full | **-0.50** | 0.40 | n/a |" in dataset_grid(table, 10)
