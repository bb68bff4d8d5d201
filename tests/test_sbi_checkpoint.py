"""Checkpoints of sbi trainings: a training interrupted and resumed ends with the weights
of an uninterrupted one; an ended one is not trained again; a checkpoint that does not fit
is set aside; a sweep with a store gives its workers a checkpoint directory and removes it
once every job is stored."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from sbi_runs import fast, run_agent

import agents.sbi_checkpoint as sbi_checkpoint
from agents.sbi_checkpoint import TrainingCheckpoint
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import run_sweep
from leaderboard.store import ResultsStore
from testbed.checkpoints import CHECKPOINTS_ENV, beside_store, checkpoint_dir

BUDGET, EPOCHS, STOP_AT = 200, 6, 3
# each sbi trainer has its own steps before its loop
CASES = ["npe", "nle", "nre", "nre_c", "bnre", "fmpe", "npse"]
MCMC = {"nle", "nre", "nre_c", "bnre"}


class Stop(Exception):
    """Stands for the end of a session: the process stops mid-training."""


def overrides(name: str) -> dict:
    return {**fast(EPOCHS, mcmc=name in MCMC), "seed": 2, "torch_threads": 1}


def draws(name: str) -> np.ndarray:
    problem, post, _ = run_agent(name, overrides(name), BUDGET)
    return post.sample(problem.x_o, 8, seed=3)


@pytest.fixture
def directory(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKPOINTS_ENV, str(tmp_path / "ck"))
    monkeypatch.setattr(sbi_checkpoint, "CHECKPOINT_SECONDS", 0.0)  # after every epoch
    return tmp_path / "ck"


def epochs_run(monkeypatch) -> list[int]:
    """The epochs trained from here on (the counter after each)."""
    seen: list[int] = []
    on_epoch = TrainingCheckpoint.on_epoch

    def counting(self, inference):
        seen.append(int(inference.epoch))
        on_epoch(self, inference)

    monkeypatch.setattr(TrainingCheckpoint, "on_epoch", counting)
    return seen


@contextlib.contextmanager
def stopped_when(monkeypatch, condition):
    """Within: a training raises Stop after the first epoch (its checkpoint saved) where
    `condition(inference)` holds; yields the list that gets that epoch."""
    on_epoch = TrainingCheckpoint.on_epoch
    stopped: list[int] = []

    def stopping(self, inference):
        on_epoch(self, inference)
        if not stopped and condition(inference):
            stopped.append(int(inference.epoch))
            raise Stop("the session ended")

    with monkeypatch.context() as m:
        m.setattr(TrainingCheckpoint, "on_epoch", stopping)
        yield stopped


def at_epoch(epoch: int):
    return lambda inference: inference.epoch == epoch


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in MCMC else n for n in CASES]
)  # the MCMC agents' (50-120 s each) in the slow tier
def test_a_resumed_training_ends_as_an_uninterrupted_one(name, directory, monkeypatch, caplog):
    monkeypatch.delenv(CHECKPOINTS_ENV)
    whole = draws(name)
    assert not directory.exists()  # no directory: no checkpoint
    monkeypatch.setenv(CHECKPOINTS_ENV, str(directory))
    with stopped_when(monkeypatch, at_epoch(STOP_AT)), pytest.raises(Stop):
        draws(name)
    (saved,) = directory.glob("*.pt")
    assert torch.load(saved, weights_only=False)["loop"]["epoch"] == STOP_AT
    seen = epochs_run(monkeypatch)
    with caplog.at_level(logging.INFO, "testbed.progress"):
        resumed = draws(name)
    assert f"at epoch {STOP_AT}" in caplog.text
    assert seen[0] == STOP_AT + 1 and len(seen) < EPOCHS  # only the epochs left
    np.testing.assert_array_equal(resumed, whole)
    state = torch.load(saved, weights_only=False)
    assert state["finished"] and state["loop"]["epoch"] == seen[-1]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) for n in ("npe", "nre")] + ["fmpe", "npse"]
)  # npe's and nre's (40-115 s) in the slow tier
def test_a_training_stopped_after_an_epoch_without_improvement_converges_as_before(
    name, directory, monkeypatch
):
    """Stopped where the early-stopping counter has just counted an epoch without
    improvement: the resumed training stops early at the same epoch, with the same weights."""
    settings = {**overrides(name), "max_num_epochs": 300, "stop_after_epochs": 2}
    monkeypatch.setenv(CHECKPOINTS_ENV, str(directory.with_name("whole")))
    seen = epochs_run(monkeypatch)  # an uninterrupted training, its epochs counted
    problem, post, _ = run_agent(name, settings, BUDGET)
    whole, epochs = post.sample(problem.x_o, 8, seed=3), len(seen)
    assert epochs < 300  # it stopped early: the counter decided
    monkeypatch.setenv(CHECKPOINTS_ENV, str(directory))

    def no_better(inference) -> bool:  # the epoch just trained did not improve
        return inference.epoch > 1 and inference._val_loss >= inference._best_val_loss

    with stopped_when(monkeypatch, no_better) as stopped, pytest.raises(Stop):
        run_agent(name, settings, BUDGET)
    seen.clear()
    problem, post, _ = run_agent(name, settings, BUDGET)
    assert stopped and stopped[0] + len(seen) == epochs
    np.testing.assert_array_equal(post.sample(problem.x_o, 8, seed=3), whole)


def test_an_ended_training_is_not_trained_again(directory, monkeypatch, caplog):
    first = draws("npe")
    seen = epochs_run(monkeypatch)
    with caplog.at_level(logging.INFO, "testbed.progress"):
        again = draws("npe")
    assert seen == [] and "(it had ended)" in caplog.text
    np.testing.assert_array_equal(again, first)
    _, post, _ = run_agent("npe", overrides("npe"), BUDGET)
    (saved,) = directory.glob("*.pt")
    earlier = torch.load(saved, weights_only=False)["seconds"]
    assert earlier > 0 and post.earlier_train_seconds == pytest.approx(earlier, rel=0.5)


@pytest.mark.parametrize(
    "spoil, said",
    [
        (lambda p: p.write_bytes(b"not a checkpoint"), "cannot be read"),
        (lambda p: _edit(p, data="other"), "on other simulations"),
        (lambda p: _edit(p, sbi="0.1"), "written by sbi 0.1"),
        (lambda p: _edit(p, format=0), "not a checkpoint of this version"),
        (lambda p: _edit(p, optimizer={"state": {}}), "does not fit"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_set_aside(spoil, said, directory, caplog):
    first = draws("npe")
    (saved,) = directory.glob("*.pt")
    spoil(saved)
    with caplog.at_level(logging.INFO, "testbed.progress"):
        again = draws("npe")
    assert said in caplog.text and "training from the start" in caplog.text
    assert (directory / (saved.name + ".unused")).exists()
    assert torch.load(saved, weights_only=False)["finished"]  # this training's, written anew
    np.testing.assert_array_equal(again, first)


def _edit(path, **fields):
    state = torch.load(path, weights_only=False)
    state.update(fields)
    torch.save(state, path)


def test_a_checkpoint_that_cannot_be_written_is_logged(tmp_path, monkeypatch, caplog):
    whole = draws("npe")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(CHECKPOINTS_ENV, str(blocked / "ck"))  # under a file: cannot exist
    with caplog.at_level(logging.INFO, "testbed.progress"):
        np.testing.assert_array_equal(draws("npe"), whole)
    assert "not written" in caplog.text


def test_sequential_trainings_keep_no_checkpoint(directory):
    problem, post, _ = run_agent("snpe", {**fast(2), "num_rounds": 2}, BUDGET)
    assert not directory.exists()


@pytest.mark.parametrize("value", ["", "off", "OFF", " off "])
def test_checkpoints_can_be_turned_off(value, monkeypatch):
    monkeypatch.setenv(CHECKPOINTS_ENV, value)
    assert checkpoint_dir() is None


def chosen() -> str | None:
    """TESTBED_CHECKPOINTS in the settings in force (what a sweep's workers get)."""
    from testbed import settings

    return settings.current().get(CHECKPOINTS_ENV)


def test_beside_store_sets_the_directory_and_removes_it_when_finished(tmp_path, monkeypatch):
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    store = tmp_path / "r.db"
    with beside_store(store, finished=lambda: False) as d:
        assert chosen() == str(d) == f"{store}.checkpoints"
        d.mkdir()
        (d / "x.pt").write_bytes(b"")
    assert chosen() is None and d.is_dir()  # jobs left: kept
    with beside_store(store, finished=lambda: 1 / 0):  # cannot say: kept
        pass
    assert d.is_dir()
    (d / "mlps-0a.npz").write_bytes(b"")  # an MLP batch's checkpoint (mlp_checkpoint)
    with beside_store(store, finished=lambda: True):
        pass
    assert not d.exists()
    with beside_store(store, finished=lambda: True) as d:  # someone else's file stays
        d.mkdir()
        (d / "y.pt").write_bytes(b"")
        (d / "notes.txt").write_text("mine")
    assert [f.name for f in d.iterdir()] == ["notes.txt"]
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setenv(CHECKPOINTS_ENV, str(mine))  # the user's: used, never removed
    with beside_store(store, finished=lambda: True) as d:
        assert d == mine
    assert mine.is_dir() and chosen() == str(mine)


def test_a_reproductions_kept_trainings_survive_a_later_sweep(tmp_path, monkeypatch):
    """Without `finished` (a reproduction: its trainings are its inputs) the folder is marked
    KEPT, and a later sweep on the same store (issue 57: `testbed sweep` on reproduce_lc2st's
    store deleted hours of NPE training) finishes without removing any of it."""
    from testbed.checkpoints import KEPT

    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    store = tmp_path / "lc2st.db"
    with beside_store(store) as d:
        (d / "npe-100000.pt").write_bytes(b"an hour of training")
    assert (d / KEPT).exists()
    with beside_store(store, finished=lambda: True):  # a sweep, every job stored as ok
        pass
    assert (d / "npe-100000.pt").read_bytes() == b"an hour of training"


def test_a_write_cut_short_leaves_no_file_for_good(tmp_path):
    """A kill during a checkpoint write left its 0-byte temporary file in the folder for good:
    the next write of the same checkpoint removes temporary files older than STALE_SECONDS,
    and leaves a younger one (a write in progress elsewhere)."""
    import os
    import time

    from testbed.checkpoints import STALE_SECONDS, write_atomically

    path = tmp_path / "npe.pt"
    stale, young = tmp_path / "npe.ptab12.tmp", tmp_path / "npe.ptcd34.tmp"
    stale.write_bytes(b"")
    young.write_bytes(b"")
    old = time.time() - STALE_SECONDS - 5
    os.utime(stale, (old, old))
    assert write_atomically(path, lambda f: f.write(b"weights")) is None
    assert path.read_bytes() == b"weights" and not stale.exists() and young.exists()


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_sweep_stopped_mid_training_resumes_it(tmp_path, monkeypatch, caplog):
    """A job stopped mid-training is stored as failed, its checkpoint kept beside the store;
    retried, it resumes and stores the metrics of an uninterrupted sweep; the directory
    goes once every job is stored."""
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    monkeypatch.setattr(sbi_checkpoint, "CHECKPOINT_SECONDS", 0.0)
    jobs = expand(
        ["npe"], ["sbi/two_moons/1000/1", "sbi/two_moons/1000/2"],
        overrides={**fast(EPOCHS), "training_batch_size": 450, "torch_threads": 1},
        problem_options={"num_samples": 200},
    )  # fmt: skip
    with ResultsStore(tmp_path / "whole.db") as store:
        assert run_sweep(jobs, store, InlineExecutor()).ok == 2
        whole = scores(store)
    path = tmp_path / "r.db"
    with ResultsStore(path) as store:
        with stopped_when(monkeypatch, at_epoch(STOP_AT)):
            assert run_sweep(jobs, store, InlineExecutor()).failed == 2  # one training
        assert len(list(Path(f"{path}.checkpoints").glob("*.pt"))) == 1
        with caplog.at_level(logging.INFO, "testbed.progress"):
            summary = run_sweep(jobs, store, InlineExecutor(), retry_failed=True)
        assert summary.ok == 2 and f"at epoch {STOP_AT}" in caplog.text
        assert scores(store) == whole
    assert not Path(f"{path}.checkpoints").exists()


def scores(store) -> dict:
    """Each stored job's metrics but its times."""
    out = {}
    for row in store.rows():
        metrics = row["metrics"]
        metrics = json.loads(metrics) if isinstance(metrics, str) else metrics
        out[row["key"]] = {k: v for k, v in metrics.items() if not k.endswith("_seconds")}
    return out


def test_a_sweep_that_trains_per_job_keeps_no_checkpoints(tmp_path, monkeypatch):
    """One job must not take another's training: `share_training=False` turns them off,
    even where the user named a directory."""
    seen: list[str] = []

    class Recording:  # an executor that only looks at the settings its workers get
        def run(self, units, on_result):
            for _ in units:
                seen.append(chosen())

    monkeypatch.setenv(CHECKPOINTS_ENV, str(tmp_path / "mine"))
    jobs = expand(["npe"], ["sbi/two_moons/1000/1"])
    with ResultsStore(tmp_path / "r.db") as store:
        run_sweep(jobs, store, Recording(), share_training=False)
        assert seen == ["off"] and chosen() == str(tmp_path / "mine")
        monkeypatch.delenv(CHECKPOINTS_ENV)
        seen.clear()
        run_sweep(jobs, store, Recording())
        assert seen == [str((tmp_path / "r.db.checkpoints").resolve())]
        assert chosen() is None


def test_workers_get_the_sweeps_directory(tmp_path, monkeypatch):
    from leaderboard.execution.worker import worker_env

    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    with beside_store(tmp_path / "r.db", finished=lambda: True) as d:
        assert worker_env({})[CHECKPOINTS_ENV] == str(d)
    assert worker_env({})[CHECKPOINTS_ENV] == "off"


def test_train_seconds_include_those_trained_before_a_resume():
    """`train_timed` adds a resumed predictive's `earlier_train_seconds` (one that did not
    resume has none)."""
    from generative.sbi.problems import PosteriorProblem
    from testbed.evaluate import train_timed

    class Resumed:
        earlier_train_seconds = 1000.0

    problem = PosteriorProblem("two_moons", 1000, 1, num_samples=20)
    resumed = train_timed(lambda data, knowledge: Resumed(), problem)
    fresh = train_timed(lambda data, knowledge: object(), problem)
    assert 1000.0 <= resumed.seconds < 1000.0 + 60 and fresh.seconds < 60
