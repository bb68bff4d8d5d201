"""Problems that share their training data train once, for every agent that may share
it, and give the numbers of separate trainings."""

from __future__ import annotations

import importlib

import pytest

import agents
import generative
import testbed
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import Job, JobGroup, expand, training_groups
from leaderboard.execution.results import load
from leaderboard.execution.runner import run_sweep
from leaderboard.store import ResultsStore

PAIR = ["classification_2d/0", "classification_2d/210"]  # tau 1 and 10, one seed


def test_tau_pairs_share_training_data_and_key():
    a, b = (generative.load(p, num_test_seeds=10, num_enn_samples=5) for p in PAIR)
    assert (a.settings.tau, b.settings.tau) == (1, 10)
    assert a.training_key == b.training_key == generative.training_key(PAIR[0])
    assert (a.train_data.x == b.train_data.x).all() and (a.train_data.y == b.train_data.y).all()
    other = generative.load("classification_2d/1", num_test_seeds=10, num_enn_samples=5)
    assert other.training_key != a.training_key
    # the 2021 sweep derives its keys otherwise: never grouped with today's ids
    assert generative.training_key("classification_2d_2021/0") != a.training_key


def test_sweep_trains_once_and_gives_separate_numbers(tmp_path):
    path = tmp_path / "r.db"
    jobs = expand(["mlp"], PAIR)
    assert [len(u.jobs) for u in training_groups(jobs) if isinstance(u, JobGroup)] == [2]
    with ResultsStore(path, mode="w") as store:
        summary = run_sweep(jobs, store, InlineExecutor())
    assert summary.ok == 2
    df = load(path).set_index("problem_id")
    assert list(df.loc[PAIR, "shared_training"]) == [2, 2]
    assert df.loc[PAIR[1], "train_seconds"] == 0.0  # the training is counted once
    for pid in PAIR:  # the numbers of a separate training on each problem
        alone = testbed.evaluate(agents.load("mlp"), generative.load(pid))
        assert df.loc[pid, "kl_estimate"] == pytest.approx(alone["kl_estimate"], rel=1e-6)


def test_oracles_never_share_and_real_data_pairs_do():
    jobs = expand(["oracle", "uniform"], [*PAIR, "real/iris/1/0", "real/iris/10/1"])
    units = training_groups(jobs)
    oracle = [u for u in units if isinstance(u, Job) and u.agent == "oracle"]
    assert len(oracle) == 4
    shared = [tuple(j.problem_id for j in u.jobs) for u in units if isinstance(u, JobGroup)]
    assert shared == [tuple(PAIR), ("real/iris/1/0", "real/iris/10/1")]


def test_a_shared_training_checks_each_problem_once(monkeypatch):
    """evaluate_many checks what the agent predicts once a problem, before training, also
    when the problems share one training."""
    evaluate = importlib.import_module("testbed.evaluate")  # the module, not the function
    calls = []
    check = evaluate.check_fit
    monkeypatch.setattr(evaluate, "check_fit", lambda a, p, *n: calls.append(p) or check(a, p, *n))
    problems = [generative.load(p, num_test_seeds=10, num_enn_samples=5) for p in PAIR]
    out = testbed.evaluate_many(agents.load("uniform"), problems)
    assert [q["shared_training"] for q in out] == [2, 2]
    assert calls == problems
