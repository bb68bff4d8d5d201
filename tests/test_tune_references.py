"""Tuned references, selected honestly: the selection never sees its held-out seeds, the
halving keeps the best third, and the table reports in-sample and held-out scores."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

import pandas as pd
import pytest

import generative
from experiments import tune_references as tune
from testbed.errors import InputError

IDS = generative.sweep_ids("classification_2d")
SELECTION, HELD_OUT = tune.split(IDS, 0)


def _kl(config_key: str, problem_id: str) -> float:
    """A KL that ranks configs by their key's checksum, the same on every problem."""
    return 1.0 + zlib.crc32(config_key.encode()) / 2**32  # no ties between configs


def _frame(jobs) -> pd.DataFrame:
    rows = []
    for j in jobs:
        kl = 10.0 if j.agent == "uniform" else _kl(j.config_key, j.problem_id)
        rows.append(dict(key=j.key, agent=j.agent, config_key=j.config_key,
                         config=j.config_json,
                         problem_id=j.problem_id, status="ok", kl_estimate=kl))  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture
def fake_runs(monkeypatch):
    """Jobs are recorded, not run; their rows come from `_kl`."""
    ran = []
    monkeypatch.setattr(tune, "_run", lambda jobs, *_: ran.append(list(jobs)))
    monkeypatch.setattr(tune, "_rows", lambda results, jobs: _frame(jobs))
    return ran


def test_the_groups_are_the_references_seed_groups():
    assert len(SELECTION) == 42 and len(HELD_OUT) == 378
    assert {tune.seed_group(p) for p in SELECTION} == {0}
    assert 0 not in {tune.seed_group(p) for p in HELD_OUT}


def test_choose_picks_the_lowest_normalised_kl_and_refuses_held_out_rows():
    pair = [SELECTION[0]]  # a tau = 1 problem
    tau10 = [p for p in SELECTION if generative.problem_settings(p)["tau"] == 10][0]
    rows = pd.DataFrame([
        dict(agent="mlp", config_key=k, config=json.dumps({"l2_weight_decay": v}), problem_id=p,
             status="ok", kl_estimate=kl)
        for k, v, kl in (("a", 1.0, 0.5), ("b", 10.0, 0.8)) for p in (pair[0], tau10)
    ])  # fmt: skip
    uniform = pd.DataFrame([dict(agent="uniform", problem_id=p, status="ok", kl_estimate=2.0)
                            for p in (pair[0], tau10)])  # fmt: skip
    assert tune.choose(rows, uniform, SELECTION) == {"mlp": {"l2_weight_decay": 1.0}}
    scores = tune.normalised(rows, uniform)
    assert scores[("mlp", "a")] == pytest.approx(0.25) and scores[("mlp", "b")] == pytest.approx(
        0.4
    )
    # a held-out row where b looks best never decides: it is refused
    held = rows.iloc[:1].assign(config_key="b", problem_id=HELD_OUT[0], kl_estimate=0.0)
    with pytest.raises(InputError, match="outside the selection group"):
        tune.choose(pd.concat([rows, held]), uniform, SELECTION)


def test_selection_runs_only_the_selection_group_and_halving_keeps_a_third(fake_runs):
    import agents

    jobs = tune.select("bbb", SELECTION, "r.db")
    configs = len({a.key for a in agents.sweep("bbb")})  # the sweep repeats a config or two
    first, second = fake_runs[0], fake_runs[2]  # [1] is uniform's first-round problems
    assert {tune.seed_group(j.problem_id) for run in fake_runs for j in run} == {0}
    assert {generative.problem_settings(j.problem_id)["temperature"] for j in first} == {0.1}
    assert len({j.config_key for j in first}) == configs
    kept = {j.config_key for j in second}
    assert len(kept) == -(-configs // 3) and 0.1 not in {
        generative.problem_settings(j.problem_id)["temperature"] for j in second
    }
    # the kept configs are those with the lowest KL in the first round
    best = sorted({j.config_key for j in first}, key=lambda k: _kl(k, ""))[: len(kept)]
    assert kept == set(best) and {j.config_key for j in jobs} == kept


def test_tune_scores_the_chosen_config_held_out_and_in_sample(fake_runs):
    table = tune.tune(["mlp"], 0, "r.db")
    row = table.iloc[0]
    assert row["agent"] == "mlp" and row["tuned_config"]
    tuned_runs = fake_runs[-1]  # the chosen config and the default on the held-out groups
    assert {tune.seed_group(j.problem_id) for j in tuned_runs} == set(range(1, 10))
    assert row["tuned_held_out"] == pytest.approx(row["tuned_in_sample"])  # _kl: same everywhere
    assert row["tuned_held_out"] <= row["default_held_out"]
    assert row["difference"] == pytest.approx(row["tuned_held_out"] - row["default_held_out"])
    assert row["difference_se"] == pytest.approx(0.0, abs=1e-12)  # _kl: no group differs


def test_a_default_chosen_runs_its_held_out_jobs_once(fake_runs, monkeypatch):
    """Tuned and default are the same jobs when the default is chosen: listed once each
    (they were listed twice, and said `378 of 756 jobs taken`)."""
    monkeypatch.setattr(tune, "choose", lambda rows, uniform, selection: {"mlp": {}})
    tune.tune(["mlp"], 0, "r.db")
    held_out = fake_runs[-1]
    assert len(held_out) == len({j.key for j in held_out}) == len(HELD_OUT)


def test_no_shipped_reaches_every_run_of_a_tuning(monkeypatch):
    """`--no-shipped` computes every job: each stage of the tuning (uniform, the halving's
    two rounds, held out) runs with `shipped` False, and by default with True."""
    flags = []
    monkeypatch.setattr(tune, "_run", lambda jobs, results, workers, shipped: flags.append(shipped))
    monkeypatch.setattr(tune, "_rows", lambda results, jobs: _frame(jobs))
    for shipped in (True, False):
        flags.clear()
        tune.tune(["mlp", "bbb"], 0, "r.db", shipped=shipped)  # bbb is halved: 2 rounds
        assert len(flags) == 7 and set(flags) == {shipped}  # uniform x2, mlp 2, bbb 3


def test_difference_se_is_the_standard_error_over_the_seed_groups():
    """Tuned KL = default KL + d_g on every problem of group g (uniform's KL 1, so each
    group's normalised KL is its KL): the SE is the sample SD of d over sqrt(9)."""
    d = {g: 0.01 * g * (-1) ** g for g in range(1, 10)}

    def rows(agent, shift):
        return pd.DataFrame([dict(agent=agent, config_key=agent, problem_id=p, status="ok",
                                  kl_estimate=0.5 + shift * d[tune.seed_group(p)])
                             for p in HELD_OUT])  # fmt: skip

    uniform = rows("uniform", 0).assign(kl_estimate=1.0)
    expected = pd.Series(list(d.values())).std(ddof=1) / 3
    assert tune.difference_se(rows("mlp", 1), rows("mlp", 0), uniform) == pytest.approx(expected)
    assert tune.difference_se(rows("mlp", 0), rows("mlp", 0), uniform) == 0.0


def test_refusals(tmp_path, capsys):
    assert tune.main(["--agents", "ensembel"]) == 2
    assert "did you mean 'ensemble'" in capsys.readouterr().err
    assert tune.main(["--group", "10"]) == 2
    assert "--group: got 10; allowed: 0 to 9" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"  # a typed name never overwrites a file of another kind
    notes.write_text("mine")
    assert tune.main(["--out", str(notes), "--results", str(tmp_path / "r.db")]) == 2
    assert "allowed: a file name ending in .csv" in capsys.readouterr().err
    assert notes.read_text() == "mine" and not (tmp_path / "r.db").exists()
    assert tune.main(["--out", str(tmp_path), "--results", str(tmp_path / "r.db")]) == 2
    assert f"such as '{tmp_path / 'report.csv'}'" in capsys.readouterr().err
    assert tune.main(["--out", "", "--results", str(tmp_path / "r.db")]) == 2
    assert "--out: got ''; allowed: a file path such as report.csv" in capsys.readouterr().err
    assert tune.main(["--results", "", "--out", str(tmp_path / "t.csv")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tune_references: error: --results: got '', which is empty; allowed: a results file "
        "such as tuned.db"]  # fmt: skip
    for agents, said in (("epinet,epinet", "which names epinet twice"),
                         ("mlp,,bbb", "which has an empty item")):  # fmt: skip
        assert tune.main(["--agents", agents, "--results", str(tmp_path / "r.db")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--agents: got {agents!r}, {said}" in err[0], err
    assert not (tmp_path / "r.db").exists()


# ----------------------------------------------------------------------------- shipped, ranked


def _store_of(path, agent: str, config: dict, problems, kl: float) -> list:
    """Records `agent` at `config` on `problems` as finished with KL `kl`; its jobs."""
    from leaderboard.execution.sweeping import plan
    from leaderboard.store import ResultsStore

    jobs = plan([agent], list(problems), overrides=config)
    with ResultsStore(path) as store:
        metrics = {"kl_estimate": kl, "test_acc": 0.5}
        store.record_many({**j.as_dict(), "status": "ok", "metrics": metrics} for j in jobs)
    return jobs


def test_ship_writes_each_complete_agents_chosen_config_on_every_problem(tmp_path):
    from leaderboard.shipped_files import shipped

    db, out = tmp_path / "r.db", tmp_path / "tuned.csv.gz"
    chosen = {"l2_weight_decay": 1.0}
    jobs = _store_of(db, "mlp", chosen, IDS, 0.3)
    _store_of(db, "ensemble", {"num_ensemble": 3}, IDS[:-1], 0.2)  # one job short
    table = pd.DataFrame([
        {"agent": "mlp", "config": json.dumps(chosen)},
        {"agent": "ensemble", "config": json.dumps({"num_ensemble": 3})},
    ])  # fmt: skip
    said = tune.ship(table, str(db), out)
    rows = shipped(path=out)
    assert set(rows["key"]) == {j.key for j in jobs} and len(rows) == 420
    assert said.endswith("; not shipped, some job unfinished: ensemble")
    assert "config chosen on seed group 0" in gzip.open(out, "rt").readline()  # provenance
    # shipped again with another chosen config: mlp's rows replaced, not added
    jobs = _store_of(tmp_path / "s.db", "mlp", {"l2_weight_decay": 0.1}, IDS, 0.4)
    tune.ship(table.iloc[:1].assign(config=json.dumps({"l2_weight_decay": 0.1})),
              str(tmp_path / "s.db"), out)  # fmt: skip
    assert set(shipped(path=out)["key"]) == {j.key for j in jobs}


def test_tuned_rows_rank_beside_the_defaults_labelled_apart(tmp_path, monkeypatch, capsys):
    """The shipped tuned config is a row of its own, `mlp tuned (ours, shipped)`, beside
    the default `mlp (ours, shipped)`: never merged into the default's best-of choice."""
    from experiments.cli import main
    from leaderboard import shipped_files

    db, out = tmp_path / "r.db", tmp_path / "tuned.csv.gz"
    _store_of(db, "mlp", {"l2_weight_decay": 1.0}, IDS, 1e-4)  # better than any default
    tune.ship(pd.DataFrame([{"agent": "mlp", "config": json.dumps({"l2_weight_decay": 1.0})}]),
              str(db), out)  # fmt: skip
    monkeypatch.setitem(shipped_files.SOURCES, tune.SHIPPED, out)
    argv = ["leaderboard", "--shipped-only", "--sweep", "classification_2d", "--tau", "10",
            "--format", "csv"]  # fmt: skip
    assert main(argv) == 0
    board = pd.read_csv(io.StringIO(capsys.readouterr().out))
    agents = board["agent"].tolist()
    assert "mlp tuned (ours, shipped)" in agents and "mlp (ours, shipped)" in agents
    assert agents.index("mlp tuned (ours, shipped)") == 0  # KL 1e-4 on every problem: first
    default = board[board["agent"] == "mlp (ours, shipped)"]
    assert float(default["normalized_kl"].iloc[0]) > 0.01  # the default's own runs, unmerged


def test_ship_refusals(tmp_path, capsys):
    argv = ["--ship", str(tmp_path / "x.csv"), "--results", str(tmp_path / "r.db")]
    assert tune.main(argv) == 2
    assert "--ship" in capsys.readouterr().err
    argv = ["--group", "3", "--ship", str(tmp_path / "x.csv.gz"), "--results",
            str(tmp_path / "r.db")]  # fmt: skip
    assert tune.main(argv) == 2
    assert "--group: got 3 with --ship; allowed: 0" in capsys.readouterr().err


def test_ship_with_no_complete_agent_is_one_clear_refusal(tmp_path):
    db = tmp_path / "r.db"
    _store_of(db, "mlp", {"l2_weight_decay": 1.0}, IDS[:-1], 0.3)  # one job short
    table = pd.DataFrame([{"agent": "mlp", "config": json.dumps({"l2_weight_decay": 1.0})}])
    with pytest.raises(InputError, match=r"--ship: no tuned agent has all its 420 jobs .*"
                       r"\(unfinished: mlp\)"):  # fmt: skip
        tune.ship(table, str(db), tmp_path / "t.csv.gz")
    assert not (tmp_path / "t.csv.gz").exists()


def test_the_docs_tuned_table_is_computed_from_the_shipped_runs():
    """docs/reproductions/tuned.md's numbers: each shipped tuned agent's normalised KL held
    out and in-sample, and its default's held out, from the package's shipped runs."""
    from pathlib import Path

    from leaderboard.shipped_files import shipped

    ours, tuned = shipped("neural_testbed"), shipped(tune.SHIPPED)
    tuned = tuned[tuned["problem_id"].isin(set(IDS))]  # not the figure's problems, if shipped
    uniform = ours[ours["agent"] == tune.NORMALISER]
    docs = (Path(__file__).resolve().parents[1] / "docs/reproductions/tuned.md").read_text()
    assert set(tuned["agent"]) >= {"mlp", "ensemble+"}
    for agent in sorted(set(tuned["agent"])):
        mine = tuned[tuned["agent"] == agent]
        default = ours[ours["agent"] == agent]
        assert len(mine) == len(IDS) and len(set(mine["config_key"])) == 1

        def score(rows, ids):
            return tune.normalised(rows[rows["problem_id"].isin(set(ids))], uniform).iloc[0]

        numbers = [score(mine, HELD_OUT), score(mine, SELECTION), score(default, HELD_OUT)]
        held = [rows[rows["problem_id"].isin(set(HELD_OUT))] for rows in (mine, default)]
        gap = f" {numbers[0] - numbers[2]:+.3f} ± {tune.difference_se(*held, uniform):.3f} "
        row = next(line for line in docs.splitlines() if line.startswith(f"| {agent} |"))
        cells = row.split("|")[-5:-1]
        assert cells == [f" {v:.3f} " for v in numbers] + [gap], (row, numbers)


def test_the_shipped_jobs_taken_are_counted_once_each(tmp_path, capsys):
    """A config chosen at its default gives the same held-out jobs twice (tuned and
    default): `378 of 756 jobs taken` was said for 378 jobs, all taken."""
    from experiments.reproduction import take_shipped
    from leaderboard.execution.sweeping import plan

    jobs = plan(["mlp"], HELD_OUT[:3])  # the default's, shipped (neural_testbed)
    assert take_shipped(jobs + jobs, str(tmp_path / "r.db")) == 3
    assert capsys.readouterr().err.startswith("3 of 3 jobs taken from the package's shipped")


def test_a_tuning_on_a_new_machine_takes_the_jobs_real_data_shipped(tmp_path, monkeypatch):
    """The halving's first round is the real-data run's synthetic side: shipped there
    (dropout's), every one of its jobs is in a new store before the sweep runs, so none
    runs again."""
    from leaderboard.execution import sweeping
    from leaderboard.store import ResultsStore

    first = sweeping.plan(["dropout"], tune.first_round(SELECTION), configs="sweep")
    held = []

    def run(jobs, results, executor):
        if not Path(results).exists():  # nothing restored: the sweep makes the store
            return held.append(False)
        with ResultsStore(results, mode="r") as store:
            held.append(store.keys(status="ok") >= {j.key for j in jobs})

    monkeypatch.setattr(sweeping, "make_executor", lambda *a, **k: None)
    monkeypatch.setattr(sweeping, "run", run)
    tune._run(first, str(tmp_path / "new.db"), workers=1)
    assert len(first) == 35 * 14 and held == [True]  # 38 configs, 35 distinct
    tune._run(first, str(tmp_path / "mine.db"), workers=1, shipped=False)  # --no-shipped
    assert held == [True, False]
