"""Parity with the SBI benchmark (sbibm): its published observations, its API names, a torch
prior per task, amortized training shared across observations, the paper's results beside ours.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import agents
import generative
import leaderboard
from experiments.cli import main
from generative import sbi
from generative.sbi.problems import SBIBM, PosteriorProblem
from generative.sbi.task import OBSERVATIONS
from leaderboard import build as lb_build
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import Job, JobGroup, failed_results, time_limit, training_groups
from leaderboard.execution.runner import run_sweep
from leaderboard.ranking.tables import fmt_value
from leaderboard.store import ResultsStore
from testbed import evaluate, evaluate_many
from testbed.errors import InputError

ALL = sbi.task_names()


# ----------------------------------------------------------------- published observations
def test_two_moons_observation_one_is_the_benchmarks():
    task = sbi.get_task("two_moons")
    np.testing.assert_allclose(task.observation(1), [[-0.6396706, 0.16234657]], rtol=1e-7)
    assert task.observation(1).shape == (1, 2)
    # ours stay available under their own name, and differ
    assert not np.allclose(task.seeded_observation(1), task.observation(1))
    np.testing.assert_array_equal(task.seeded_observation(1), task.observation(1, "seeded"))
    with pytest.raises(InputError, match="observation source: got 'paper'.*sbibm.*seeded"):
        task.observation(1, "paper")


@pytest.mark.parametrize("name", ALL)
def test_every_task_ships_ten_published_observations_with_provenance(name):
    task = sbi.get_task(name)
    data = json.loads((OBSERVATIONS / f"{name}.json").read_text())
    assert data["task"] == name and "sbibm 1.1.0 wheel" in data["source"]
    assert "sha256" in data["source"] and data["generated_by"].startswith("python -m")
    x = np.array(data["observations"])
    theta = np.array(data["true_parameters"])
    assert x.shape == (10, task.dim_data) and theta.shape == (10, task.dim_parameters)
    for k in (1, 10):
        np.testing.assert_array_equal(task.observation(k)[0], x[k - 1])
        np.testing.assert_array_equal(task.true_parameters(k)[0], theta[k - 1])
    # the published true parameters are inside the prior's support and explain their data
    assert np.isfinite(task.log_prior(theta)).all()
    assert np.isfinite(task.log_likelihood(theta[:1], x[:1])).all()
    assert len({tuple(row) for row in x}) == 10  # ten distinct observations


def test_missing_package_data_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    from generative.sbi import task as task_module

    monkeypatch.setattr(task_module, "OBSERVATIONS", tmp_path / "nowhere")
    task_module.published.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="observations are missing"):
            sbi.get_task("gaussian_mixture").observation(3)
    finally:
        task_module.published.cache_clear()


def test_slcp_distractors_observations_share_slcps_true_parameters():
    # The benchmark built slcp_distractors' observations from slcp's true parameters.
    slcp, dis = sbi.get_task("slcp"), sbi.get_task("slcp_distractors")
    np.testing.assert_allclose(slcp.true_parameters(3), dis.true_parameters(3), rtol=1e-6)


def test_sbibm_names():
    task = sbi.get_task("two_moons")
    np.testing.assert_array_equal(task.get_observation(num_observation=4), task.observation(4))
    np.testing.assert_array_equal(task.get_true_parameters(4), task.true_parameters(4))
    ref = task.get_reference_posterior_samples(4, num_samples=50, seed=2)
    np.testing.assert_array_equal(ref, task.reference_posterior(task.observation(4), 50, seed=2))
    prior = task.get_prior(seed=7)
    a, b = prior(num_samples=3), prior()
    assert a.shape == (3, 2) and b.shape == (1, 2)
    both = task.sample_prior(4, np.random.default_rng(7))  # one stream, continued
    np.testing.assert_array_equal(np.vstack([a, b]), both)
    simulator = task.get_simulator(seed=1)
    assert simulator(a).shape == (3, 2)
    np.testing.assert_array_equal(
        task.get_simulator(seed=1)(a), task.simulate(a, np.random.default_rng(1))
    )
    assert task.num_observations == 10
    assert task.get_labels_parameters() == list(task.labels)
    torch = pytest.importorskip("torch")
    dist = task.get_prior_dist()
    assert isinstance(dist, torch.distributions.Distribution)
    assert dist.event_shape == (2,)


@pytest.mark.parametrize(
    "task",
    [sbi.get_task("gaussian_linear"), generative.conjugate.get_task("wyb/1")],
    ids=["gaussian_linear", "conjugate"],
)
def test_unseeded_prior_and_simulator_draw_afresh(task):
    """sbibm's calls carry no seed: each draws afresh, as sbibm's do, and the prior's and
    the simulator's draws are not the same numbers (with both at seed 0, gaussian_linear
    gave x = 2 theta exactly); a seed reproduces."""
    assert not np.array_equal(task.sample_prior(5), task.sample_prior(5))
    assert not np.array_equal(task.get_prior()(5), task.get_prior()(5))
    theta = task.sample_prior(5, seed=3)
    np.testing.assert_array_equal(theta, task.sample_prior(5, seed=3))
    np.testing.assert_array_equal(task.simulate(theta, seed=4), task.simulate(theta, seed=4))
    assert not np.array_equal(task.simulate(theta), task.simulate(theta))


def test_gaussian_linear_noise_is_independent_of_the_prior_draw():
    task = sbi.get_task("gaussian_linear")  # x = theta + N(0, 0.1 I), theta ~ N(0, 0.1 I)
    prior, simulator = task.get_prior(), task.get_simulator()
    for draw, simulate in ((prior, simulator), (task.sample_prior, task.simulate)):
        theta = draw(1000)
        x = simulate(theta)
        r = np.corrcoef(theta.ravel(), (x - theta).ravel())[0, 1]
        assert abs(r) < 6 / np.sqrt(theta.size), r  # 10,000 pairs: sd 0.01; the same: 1


@pytest.mark.parametrize("name", ALL)
def test_torch_prior_is_the_prior(name):
    torch = pytest.importorskip("torch")
    task = sbi.get_task(name)
    prior = task.torch_prior()
    assert prior.event_shape == (task.dim_parameters,)
    theta = task.sample_prior(200, seed=0)
    ours = task.log_prior(theta)
    theirs = prior.log_prob(torch.as_tensor(theta, dtype=torch.float32)).double().numpy()
    np.testing.assert_allclose(theirs, ours, rtol=1e-4, atol=1e-3)  # float32 densities
    torch.manual_seed(0)
    draws = prior.sample((500,)).double().numpy()
    assert np.isfinite(task.log_prior(draws)).all()  # torch's draws lie in our support
    # the same distribution: means agree within 5 standard errors
    se = theta.std(0) / math.sqrt(200) + draws.std(0) / math.sqrt(500)
    assert np.all(np.abs(draws.mean(0) - theta.mean(0)) < 5 * se)


@pytest.mark.parametrize("name", ["two_moons", "sir"])
def test_sbi_accepts_the_torch_prior_as_written(name, tmp_path, monkeypatch):
    pytest.importorskip("sbi")
    monkeypatch.chdir(tmp_path)  # sbi's default tracker writes ./sbi-logs
    import torch
    from sbi.inference import NPE

    task = sbi.get_task(name)
    theta = task.sample_prior(60, seed=0)
    x = task.simulate(theta, seed=1)
    inference = NPE(prior=task.torch_prior(), density_estimator="mdn")
    inference.append_simulations(torch.as_tensor(theta).float(), torch.as_tensor(x).float())
    torch.manual_seed(0)
    inference.train(max_num_epochs=2, training_batch_size=20, show_train_summary=False)
    draws = inference.build_posterior().sample((5,), x=torch.as_tensor(task.observation(1)))
    assert np.isfinite(task.log_prior(draws.double().numpy())).all()


# ----------------------------------------------------------------- problem ids
def test_problem_ids_use_the_published_observation_and_say_when_seeded():
    p = generative.load("sbi/two_moons/1000/1")
    np.testing.assert_array_equal(p.x_o, sbi.get_task("two_moons").observation(1))
    assert p.observation_source == "sbibm"
    s = generative.load("sbi/two_moons/1000/1/seeded")
    np.testing.assert_array_equal(s.x_o, sbi.get_task("two_moons").seeded_observation(1))
    assert s.seed == p.seed  # the same evaluation draws: only the observation differs
    with pytest.raises(InputError, match="seeded"):
        generative.load("sbi/two_moons/1000/1/ours")
    with pytest.raises(InputError, match="observation_source: got 'x'"):
        PosteriorProblem("two_moons", 1000, 1, observation_source="x")
    keys = {generative.load(f"sbi/two_moons/1000/{k}").training_key for k in range(1, 11)}
    assert keys == {"sbi/two_moons/1000/sbibm"}
    assert p.training_key != generative.load("sbi/two_moons/10000/1").training_key
    assert p.training_key != s.training_key


# ----------------------------------------------------------------- amortized training
FAST = {"max_num_epochs": 3, "training_batch_size": 100, "torch_threads": 1}


def _problems(ks, num_simulations=300):
    return [PosteriorProblem("two_moons", num_simulations, k, num_samples=300) for k in ks]


@pytest.mark.slow  # trains sbi networks (13 s); CI runs it
def test_amortized_agent_trains_once_and_scores_as_one_by_one():
    agent = agents.load("npe", **FAST)
    assert agent.amortized and not agents.load("snpe", num_rounds=2).amortized
    problems = _problems([1, 2])
    shared = evaluate_many(agent, problems, metrics=["c2st"])
    alone = [evaluate(agent, p, metrics=["c2st"]) for p in problems]
    for s, a in zip(shared, alone):
        assert s["c2st"] == a["c2st"]  # the same numbers as separate trainings
        assert s["shared_training"] == 2 and s["num_simulations_used"] == 300
    assert shared[0]["train_seconds"] > 0 and shared[1]["train_seconds"] == 0.0
    assert shared[0]["c2st"] != shared[1]["c2st"]  # scored at two observations


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_sequential_agents_train_per_problem_and_mixed_budgets_per_budget():
    from testbed.evaluate import shares_training

    npe, snpe = agents.load("npe", **FAST), agents.load("snpe", **FAST, num_rounds=2)
    assert shares_training(npe, _problems([1, 2]))
    assert not shares_training(snpe, _problems([1, 2]))
    assert not shares_training(npe, _problems([1]))
    assert not shares_training(npe, _problems([1]) + _problems([2], num_simulations=400))
    seeded = PosteriorProblem("two_moons", 300, 2, observation_source="seeded")
    assert not shares_training(npe, _problems([1]) + [seeded])
    out = evaluate_many(snpe, _problems([1, 2]), metrics=["c2st"])
    assert all("shared_training" not in q for q in out)
    assert all(q["train_seconds"] > 0 for q in out)
    # mixed budgets: one training per budget, as a sweep groups them, results in order
    mixed = _problems([1]) + _problems([1], num_simulations=400) + _problems([2])
    out = evaluate_many(npe, mixed, metrics=["c2st"])
    assert [q.get("shared_training") for q in out] == [2, None, 2]
    assert [q["num_simulations_used"] for q in out] == [300, 400, 300]
    assert out[0]["train_seconds"] > 0 and out[2]["train_seconds"] == 0


def test_evaluate_many_checks_metrics_before_training():
    with pytest.raises(InputError, match="metric: got 'no_such'"):
        evaluate_many(agents.load("npe", **FAST), _problems([1, 2]), metrics=["no_such"])


# ----------------------------------------------------------------- the paper beside us
def test_published_sbibm_results_are_the_papers_grid():
    df = leaderboard.published("sbibm")
    assert list(df.columns) == [
        "task",
        "num_simulations",
        "num_observation",
        "algorithm",
        "c2st",
        "mmd",
        "median_distance",
        "nltp",
        "runtime_minutes",
    ]
    assert len(df) == 10 * 8 * 3 * 10  # tasks x algorithms x budgets x observations
    assert not df.duplicated(["task", "num_simulations", "num_observation", "algorithm"]).any()
    assert set(df["task"]) == set(ALL)
    assert set(df["algorithm"]) == {paper for _, paper in SBIBM.agents}
    assert set(df["num_simulations"]) == {1_000, 10_000, 100_000}
    assert df["c2st"].between(0.45, 1.0).all()
    # NPE learns two_moons with more simulations (the paper's figure 2)
    npe = df[(df.task == "two_moons") & (df.algorithm == "NPE")]
    means = npe.groupby("num_simulations")["c2st"].mean()
    assert means[1_000] > means[10_000] > means[100_000]
    df.loc[0, "c2st"] = -1.0  # a copy: the package data is not changed
    assert leaderboard.published("sbibm").loc[0, "c2st"] != -1.0
    with pytest.raises(InputError, match="published results: got 'nope'.*sbibm"):
        leaderboard.published("nope")


@pytest.fixture
def sbi_results(tmp_path):
    """npe and an agent the paper never ran, at observations 1..3 of two_moons / 1,000."""
    db = tmp_path / "r.db"
    with ResultsStore(db) as s:
        for agent, c2st in (("npe", 0.7), ("my_agent", 0.6)):
            for k in (1, 2, 3):
                job = Job.make(agent, {}, f"sbi/two_moons/1000/{k}").as_dict()
                metrics = {"c2st": c2st + 0.01 * k}
                s.record({**job, "status": "ok", "error": None, "metrics": metrics,
                          "wall_seconds": 1.0})  # fmt: skip
    return db


def _paper(algorithm="NPE", task="two_moons", budget=1000):
    df = leaderboard.published("sbibm")
    cell = (df.task == task) & (df.num_simulations == budget) & (df.algorithm == algorithm)
    return df[cell].set_index("num_observation")["c2st"]


SHARED_RESULTS = Path(__file__).resolve().parents[2] / "shared/reference/sbibm_published"


@pytest.mark.skipif(
    not (SHARED_RESULTS / "main_paper.csv").exists(),
    reason="the paper's result files (shared/reference/sbibm_published) are not beside the repo",
)
def test_shipped_paper_results_are_what_the_script_makes_of_the_source():
    from experiments.sbibm_results import build

    made = build(SHARED_RESULTS).reset_index(drop=True)
    pd.testing.assert_frame_equal(made, leaderboard.published("sbibm"), check_dtype=False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tau": 0}, "tau: got 0; allowed: an integer >= 1"),
        ({"tau": -3}, "tau: got -3"),
        ({"tau": 1.5}, "tau: got 1.5"),
        ({"normalize": "nobody"}, "normalize: got 'nobody', but these results have no ranking"),
    ],
)
def test_settings_that_mean_nothing_for_c2st_are_refused(sbi_results, kwargs, message):
    """On SBI results these were accepted and ignored; on KL results they are checked."""
    with pytest.raises(InputError, match=message):
        lb_build(sbi_results, **kwargs)
    assert len(lb_build(sbi_results, normalize=None).observed())  # 'none' still ranks C2ST


def test_a_sweeps_problems_without_a_job_are_said(sbi_results, capsys):
    """Results of observations 1..3 at 1,000 read against the whole two_moons sweep: the
    C2ST table shows what ran, and one line says what did not (it was silent)."""
    argv = ["leaderboard", "--results", str(sbi_results), "--sweep", "sbi_two_moons"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "27 of sweep sbi_two_moons's 30 problems have no stored job yet" in out
    assert "(first: sbi/two_moons/1000/4); testbed sweep --sweep sbi_two_moons" in out
    assert main(["leaderboard", "--results", str(sbi_results)]) == 0  # no sweep: no line
    assert "no stored job" not in capsys.readouterr().out


def test_beside_adds_the_papers_mean_and_range(sbi_results):
    board = lb_build(sbi_results)
    out = board.observed().set_index("agent")
    paper = _paper()[[1, 2, 3]]  # the paper at the observations we ran, not all ten
    assert paper.mean() != pytest.approx(_paper().mean())  # (so the test can tell)
    assert out.loc["npe", "paper_c2st"] == pytest.approx(paper.mean())
    assert (out.loc["npe", "paper_min"], out.loc["npe", "paper_max"]) == (paper.min(), paper.max())
    assert math.isnan(out.loc["my_agent", "paper_c2st"])  # the paper never ran it
    assert out.loc["npe", "mean_c2st"] == pytest.approx(0.72)
    assert board.per_observation == {}  # only on request


def test_per_observation_pairs_each_run_with_the_papers(sbi_results, capsys):
    obs = lb_build(sbi_results, per_observation=True).per_observation["sbi"]
    npe = obs[obs.agent == "npe"].set_index("observation")
    assert sorted(npe.index) == [1, 2, 3]
    for k in (1, 2, 3):
        assert npe.loc[k, "c2st"] == pytest.approx(0.7 + 0.01 * k)
        assert npe.loc[k, "paper_c2st"] == _paper()[k]
    assert obs[obs.agent == "my_agent"]["paper_c2st"].isna().all()
    assert main(["leaderboard", "--results", str(sbi_results), "--per-observation"]) == 0
    out = capsys.readouterr().out
    assert "paper C2ST" in out and "per observation" in out
    # the legend under the tables explains the paper's columns and the per-observation C2ST
    assert "paper C2ST: the published C2ST for this agent: the SBI benchmark paper's" in out
    assert "C2ST (per observation table): C2ST at this observation" in out
    assert fmt_value(float(_paper()[2])) in out  # as the table shows it
    args = ["leaderboard", "--results", str(sbi_results), "--per-observation", "--format", "csv"]
    assert main(args) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    per_obs = [r for r in rows if r["observation"] and "(ours, shipped)" not in r["label"]]
    # one CSV of both tables: integer columns stay integers ('1', not '1.0') where the
    # other table lacks them
    assert len(per_obs) == 6 and {r["observation"] for r in per_obs} == {"1", "2", "3"}
    ranked = [r["rank"] for r in rows if r["rank"]]
    assert ranked and all(x.isdigit() for x in ranked), ranked


# ----------------------------------------------------------------- amortized sweeps
def _sweep_jobs(agent="npe", ks=(1, 2, 3), seeds=(0,), budget=1000, **config):
    return [
        Job.make(agent, {**FAST, **config}, f"sbi/two_moons/{budget}/{k}", seed)
        for seed in seeds
        for k in ks
    ]


def test_training_groups_gather_what_one_training_serves():
    npe = _sweep_jobs(ks=(1, 2), seeds=(0, 1))  # two seeds: two trainings
    other_budget = _sweep_jobs(ks=(1,), budget=10000)
    snpe = _sweep_jobs("snpe", ks=(1, 2), num_rounds=2)  # sequential: one training a job
    coin = [Job.make("uniform", {}, "coin/0")]
    units = training_groups(coin + npe + snpe + other_budget)
    assert units == [
        coin[0],
        JobGroup((npe[0], npe[1])),
        JobGroup((npe[2], npe[3])),
        snpe[0],
        snpe[1],
        other_budget[0],  # alone in its group: a plain job
    ]
    bad = Job.make("npe", {"no_such_field": 1}, "sbi/two_moons/1000/1")
    assert training_groups([bad, bad]) == [bad, bad]  # fails in its worker, named there


TRAININGS = []  # one entry per training of the counting agent


@dataclasses.dataclass(frozen=True)
class CountingConfig:
    amortized: bool = True
    seed: int = 0


@dataclasses.dataclass
class SharedDataProblem:
    """`sharetest/<k>`: observations k of one training key; scores say which training."""

    k: int
    training_key = "sharetest"
    prior_knowledge = None

    @property
    def train_data(self):
        return object()

    def evaluate(self, predictive):
        return {"c2st": 0.6 + self.k / 100, "training": float(predictive)}


if "sharetest" not in generative.FAMILIES:

    @generative.register_family(
        "sharetest", lambda rest: {"k": int(rest)}, training_key=lambda s: "sharetest"
    )
    def _build(settings):
        return SharedDataProblem(settings["k"])

    @agents.register("counting", CountingConfig)
    def _make_counting(config):
        def agent(data, prior):
            TRAININGS.append(config.seed)
            return len(TRAININGS)

        return agent


def test_a_sweep_shares_training_where_the_agent_is_amortized(tmp_path):
    for amortized, share, trainings in ((True, True, 2), (False, True, 6), (True, False, 6)):
        jobs = [
            Job.make("counting", {"amortized": amortized}, f"sharetest/{k}", seed)
            for seed in (0, 1)
            for k in (1, 2, 3)
        ]
        before = len(TRAININGS)
        with ResultsStore(tmp_path / f"{amortized}{share}.db") as store:
            summary = run_sweep(jobs, store, InlineExecutor(), share_training=share)
            rows = {(r["problem_id"], r["agent_seed"]): r["metrics"] for r in store.rows()}
        assert (summary.ran, summary.ok, len(rows)) == (6, 6, 6)
        assert len(TRAININGS) - before == trainings
        for (pid, _), metrics in rows.items():
            assert metrics["c2st"] == pytest.approx(0.6 + int(pid[-1]) / 100)
            assert metrics.get("shared_training", 1) == (3 if trainings == 2 else 1)
        if trainings == 2:  # one training a seed, its time on observation 1 only
            assert (
                len({rows[("sharetest/1", 0)]["training"], rows[("sharetest/1", 1)]["training"]})
                == 2
            )
            for seed in (0, 1):
                assert {rows[(f"sharetest/{k}", seed)]["training"] for k in (1, 2, 3)} == {
                    rows[("sharetest/1", seed)]["training"]
                }
                assert rows[("sharetest/2", seed)]["train_seconds"] == 0.0


@pytest.mark.slow
def test_a_sweep_trains_npe_once_per_budget_with_the_same_numbers(tmp_path):
    jobs = _sweep_jobs(ks=(1, 2, 3))
    shared, alone = {}, {}
    for name, share, out in (("shared", True, shared), ("alone", False, alone)):
        with ResultsStore(tmp_path / f"{name}.db") as store:
            summary = run_sweep(jobs, store, InlineExecutor(), share_training=share)
            assert (summary.ran, summary.ok) == (3, 3)
            out.update({r["problem_id"]: r for r in store.rows()})
    assert len(shared) == 3
    for pid, row in shared.items():
        assert row["metrics"]["c2st"] == alone[pid]["metrics"]["c2st"]  # the same numbers
        assert row["metrics"]["shared_training"] == 3
        assert "shared_training" not in alone[pid]["metrics"]
    train = [shared[f"sbi/two_moons/1000/{k}"]["metrics"]["train_seconds"] for k in (1, 2, 3)]
    assert train[0] > 0 and train[1:] == [0.0, 0.0]  # counted once


def test_a_group_that_times_out_fails_each_member(tmp_path):
    jobs = _sweep_jobs(ks=(1, 2))
    with ResultsStore(tmp_path / "r.db") as store:
        summary = run_sweep(jobs, store, InlineExecutor(timeout=1e-3))
        assert (summary.ran, summary.failed) == (2, 2)
        reasons = store.failures()
    assert set(reasons) == {j.key for j in jobs}
    assert all("timed out after 0.002 s" in r for r in reasons.values())  # 2 members x limit


def test_an_executor_failure_fails_every_job_of_a_group():
    members = tuple(_sweep_jobs(ks=(1, 2)))
    group = JobGroup(members)
    assert "+1 sharing its training" in group.key
    failed = failed_results(group, "worker process died (exit code -9)", 3.0, "no stack")
    assert [r.key for r in failed] == [m.key for m in members]
    assert all(r.status == "failed" and "died" in r.error for r in failed)
    assert all(r.traceback == "no stack" and r.wall_seconds == 3.0 for r in failed)
    assert time_limit(group, 10.0) == 20.0 and time_limit(members[0], 10.0) == 10.0
    assert time_limit(group, None) is None


# ----------------------------------------------------------------- against the wheel itself
@pytest.fixture(scope="module")
def sbibm_wheel(tmp_path_factory):
    """The sbibm 1.1.0 wheel, downloaded with pip (skips when the index is unreachable)."""
    from experiments.sbibm_wheel import Wheel, WheelError, download_wheel

    try:
        return Wheel(download_wheel(tmp_path_factory.mktemp("wheel")))
    except (WheelError, OSError) as e:  # no network, no index: not our defect
        pytest.skip(f"the sbibm wheel cannot be downloaded here ({e})")


@pytest.mark.slow
def test_shipped_observations_are_the_wheels_and_references_agree(sbibm_wheel):
    from experiments.check_sbibm_references import check_task
    from experiments.sbibm_wheel import SOURCES, observation_file

    for task in SOURCES:  # the package data is exactly what the script makes of the wheel
        shipped = json.loads((OBSERVATIONS / f"{task}.json").read_text())
        assert observation_file(sbibm_wheel, task) == shipped, task
    # our exact sampler against the benchmark's stored draws, 2,000 a side: identical
    # distributions give 0.5 +- 4 sd = 0.5 + 4 * sqrt(1 / (8 * 2000)) = 0.532
    values = check_task(sbibm_wheel, "two_moons", observations=(1, 2), num_samples=2000)
    assert all(v < 0.532 for v in values.values()), values


# ----------------------------------------------------------------- reproduce_sbibm
def test_reproduce_sbibm_refuses_bad_input(capsys, tmp_path):
    from experiments import reproduce_sbibm

    out, store = tmp_path / "out", tmp_path / "out" / "table.md"

    for args, message in (
        (["--tasks", "two_moon"], "--tasks: got 'two_moon' (did you mean 'two_moons'?)"),
        (["--tasks", "two_moon"], "allowed: a comma-separated list of gaussian_linear"),
        (["--budgets", "500"], "--budgets: got '500'; allowed: a comma-separated list of 1000, "),
        (["--budgets", "1e3"], "--budgets: got '1e3'; allowed: a comma-separated list of 1000"),
        (["--agents", "npe,mlp"], "--agents: got 'npe,mlp', which names 'mlp'; allowed: a "
                                  "comma-separated list of "),
        (["--tasks", "slcp,two_moon"], "--tasks: got 'slcp,two_moon', which names 'two_moon' "
                                       "(did you mean 'two_moons'?); allowed: "),
        (["--observations", "0"], "--observations: got '0'; allowed: a comma-separated list of "),
        (["--set", "max_num_epochs=3"], "--set: got 'max_num_epochs=3'; allowed: agent.field"),
        (["--agents", "npe", "--set", "nep.max_num_epochs=3"], "agent 'nep', which this run"),
        (["--out", __file__], "--out: got"),
        # the table would have been written over the results store
        (["--results", str(store), "--out", str(out)], "which would overwrite results"),
        (["--workers", "-1", "--results", str(tmp_path / "new.db")], "workers: got -1"),
        (["--report", "--results", str(tmp_path / "new.db")], "--results: got"),  # no store
    ):
        assert reproduce_sbibm.main(args) == 2, args
        assert message in capsys.readouterr().err
    assert not (tmp_path / "new.db").exists() and not store.exists()  # refused before a store


@pytest.mark.parametrize(
    "option, given, said",
    [
        ("--tasks", "two_moons,,slcp", "which has an empty item"),
        ("--tasks", "two_moons,", "which has an empty item"),
        ("--budgets", "1000,1000", "which names 1000 twice"),
        ("--agents", "npe,npe", "which names npe twice"),
        ("--observations", "1,,2", "which has an empty item"),
        ("--paper-agents", "npe,,nle", "which has an empty item"),
    ],
)
def test_reproduce_sbibm_refuses_an_empty_or_repeated_item(
    tmp_path, capsys, monkeypatch, option, given, said
):
    """They were dropped or run twice: `--tasks two_moons,,slcp` ran two tasks."""
    from experiments import console, reproduce_sbibm

    monkeypatch.setattr(console, "run_jobs", lambda *_: pytest.fail("jobs ran"))
    argv = [option, given, "--results", str(tmp_path / "r.db"), "--out", str(tmp_path / "out")]
    assert reproduce_sbibm.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"reproduce_sbibm: error: {option}: got"), err
    assert f"got {given!r}, {said}; allowed: " in err[0]
    if option == "--paper-agents":  # its two words are allowed too
        assert err[0].endswith("; or none, or auto"), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "given, said",
    [("two_moons,,slcp", "which has an empty item"), ("slcp,slcp", "which names slcp twice"),
     ("two_moon", "(did you mean 'two_moons'?)")],
)  # fmt: skip
def test_check_sbibm_references_refuses_bad_tasks_before_any_download(
    tmp_path, capsys, monkeypatch, given, said
):
    """Its tasks were not checked: an empty one failed after hours of checks of the others."""
    from experiments import check_sbibm_references

    downloaded = lambda *_: pytest.fail("the wheel was downloaded")  # noqa: E731
    monkeypatch.setattr(check_sbibm_references, "download_wheel", downloaded)
    with pytest.raises(SystemExit) as ended:
        check_sbibm_references.main(["--tasks", given, "--out", str(tmp_path / "c.json")])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("check_sbibm_references: error: --tasks: got"), err
    assert said in err[0]


def test_check_sbibm_references_refuses_a_wheel_it_cannot_read(tmp_path, capsys, monkeypatch):
    """A `--wheel` that is missing, no zip or another zip was a traceback (status 1)."""
    import zipfile

    from experiments import check_sbibm_references

    monkeypatch.setattr(check_sbibm_references, "check_task", lambda *_: pytest.fail("ran"))
    (tmp_path / "text.whl").write_text("not a zip")
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as other:
        other.writestr("other/__init__.py", "")
    for name, why in [("missing.whl", "no such file"), ("text.whl", "not a readable wheel"),
                      ("other.whl", "a zip without sbibm's tasks")]:  # fmt: skip
        wheel = str(tmp_path / name)
        with pytest.raises(SystemExit) as ended:
            check_sbibm_references.main(["--wheel", wheel, "--out", str(tmp_path / "c.json")])
        assert ended.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"check_sbibm_references: error: --wheel: got {wheel!r}, {why}; allowed: "
                       "the sbibm-1.1.0-py2.py3-none-any.whl file (pip download --no-deps "
                       "sbibm==1.1.0)"]  # fmt: skip
    with pytest.raises(SystemExit) as ended:
        check_sbibm_references.main(["--num-samples", "0", "--out", str(tmp_path / "c.json")])
    assert ended.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "check_sbibm_references: error: --num-samples: got 0; allowed: 1 to 10000"
    )


def test_check_sbibm_references_without_a_package_index_is_one_line_status_3(
    tmp_path, capsys, monkeypatch
):
    """pip's download failing or hanging (no index here) is the machine's fault: one line,
    status 3, never a traceback (a hang of 600 s was a TimeoutExpired traceback)."""
    import subprocess

    from experiments import check_sbibm_references

    def hangs(*_, **__):
        raise subprocess.TimeoutExpired("pip", 600)

    monkeypatch.setattr(subprocess, "run", hangs)
    monkeypatch.setattr(check_sbibm_references, "check_task", lambda *_: pytest.fail("ran"))
    with pytest.raises(SystemExit) as ended:
        check_sbibm_references.main(["--tasks", "slcp", "--out", str(tmp_path / "c.json")])
    assert ended.value.code == 3
    assert capsys.readouterr().err.strip().splitlines() == [
        "check_sbibm_references: error: pip could not download sbibm==1.1.0 in 600 s"
    ]


@pytest.mark.slow
def test_reproduce_sbibm_end_to_end_on_a_tiny_grid(tmp_path, capsys):
    from experiments import reproduce_sbibm

    args = [
        "--tasks", "two_moons", "--budgets", "1000", "--agents", "rej_abc,npe",
        "--observations", "1,2", "--results", str(tmp_path / "r.db"),
        "--out", str(tmp_path / "out"), "--workers", "1", "--set", "npe.max_num_epochs=20",
    ]  # fmt: skip
    assert reproduce_sbibm.main(args) == 0
    captured = capsys.readouterr()
    assert "4 runs: 0 already stored, 4 ok" in captured.err
    table = (tmp_path / "out" / "table.md").read_text()
    rows = {line.split(" | ")[2]: line for line in table.splitlines()[2:]}
    assert set(rows) == {"npe", "rej_abc"}
    paper = _paper("REJ-ABC")[[1, 2]]  # the paper at the observations we ran
    assert f"| {paper.mean():.3f} | {paper.min():.3f}-{paper.max():.3f} |" in rows["rej_abc"]
    assert (tmp_path / "out" / "c2st_vs_budget.png").stat().st_size > 10_000
    with ResultsStore(tmp_path / "r.db") as store:  # npe trained once for both observations
        npe = [r["metrics"] for r in store.rows() if r["agent"] == "npe"]
    assert sorted(m["shared_training"] for m in npe) == [2, 2]
    assert reproduce_sbibm.main(args) == 0  # resumes: nothing to run again
    assert "4 runs: 4 already stored" in capsys.readouterr().err
    (tmp_path / "out" / "table.md").unlink()
    assert reproduce_sbibm.main([*args, "--report"]) == 0  # runs nothing, the same table
    assert "2 cells finished, 0 not yet" in capsys.readouterr().err
    assert (tmp_path / "out" / "table.md").read_text() == table
    # a cell with an observation not stored is left out; none left: refused in one line
    assert reproduce_sbibm.main([*args, "--report", "--observations", "1,2,3"]) == 2
    assert "has no cell (task, budget, agent) whose every observation" in capsys.readouterr().err
    with pytest.raises(InputError, match="several configs of npe"):  # never mixed silently
        with ResultsStore(tmp_path / "r.db") as store:
            job = Job.make("npe", {"max_num_epochs": 3}, "sbi/two_moons/1000/1").as_dict()
            store.record({**job, "status": "ok", "error": None, "wall_seconds": 1.0,
                          "metrics": {"c2st": 0.9, "train_seconds": 1.0}})  # fmt: skip
        reproduce_sbibm.summary_table(tmp_path / "r.db")


def test_report_uses_the_cells_whose_every_observation_is_stored():
    from experiments import reproduce_sbibm

    jobs = reproduce_sbibm.jobs_for(["two_moons"], [1000], ["npe", "nle"], [1, 2], {})
    npe = {j.key for j in jobs if j.agent == "npe"}
    one_nle = {next(j.key for j in jobs if j.agent == "nle")}
    assert reproduce_sbibm.finished_cells(jobs, npe | one_nle) == [("two_moons", "1000", "npe")]
    assert reproduce_sbibm.finished_cells(jobs, set()) == []


def test_seeded_observations_are_a_task_of_their_own(sbi_results):
    with ResultsStore(sbi_results) as s:
        job = Job.make("npe", {}, "sbi/two_moons/1000/1/seeded").as_dict()
        s.record({**job, "status": "ok", "error": None, "metrics": {"c2st": 0.99},
                  "wall_seconds": 1.0})  # fmt: skip
    board = lb_build(sbi_results, per_observation=True)
    table = board.observed()
    npe = table[table.agent == "npe"].set_index("task")
    assert npe.loc["two_moons", "mean_c2st"] == pytest.approx(0.72)  # not pooled with 0.99
    assert npe.loc["two_moons (seeded)", "mean_c2st"] == 0.99
    assert math.isnan(npe.loc["two_moons (seeded)", "paper_c2st"])  # not the paper's k = 1
    obs = board.per_observation["sbi"]
    seeded = obs[obs.task == "two_moons (seeded)"]
    assert len(seeded) == 1 and seeded["paper_c2st"].isna().all()
