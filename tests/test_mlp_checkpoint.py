"""A long batch of MLP trainings is checkpointed and an interrupted one resumes where an
uninterrupted one would end (`testbed.metrics.mlp_checkpoint`)."""

from __future__ import annotations

import logging

import jax
import numpy as np
import pytest

from testbed.checkpoints import CHECKPOINTS_ENV
from testbed.metrics import MLPConfig, mlp_checkpoint
from testbed.metrics.mlp import train_many

CFG = MLPConfig(hidden_layers=(10, 10), max_iter=60, tol=3e-3, n_iter_no_change=3)


class Stopped(Exception):
    """Stands for the process ending mid-training."""


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 3)).astype(np.float32)
    y = (rng.random((13, 600)) < 0.5).astype(np.float32)
    y[:, :300] = x[:300, 0] > 0
    rows = [rng.choice(600, 500, replace=False) for _ in range(13)]
    return x, y, rows


def train(x, y, rows):
    return train_many(CFG, x, y, rows, init_seeds=range(13), key=jax.random.key(3))


def same(a, b) -> None:
    np.testing.assert_array_equal(a.n_iter, b.n_iter)
    for p, q in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params)):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), atol=1e-5)


def stop_once_some_stopped(monkeypatch) -> list:
    """Every scheduler step saves; the first save with some models stopped and some
    training ends the 'process'. Returns the states saved."""
    monkeypatch.setattr(mlp_checkpoint, "CHECKPOINT_SECONDS", 0.0)
    save, saved = mlp_checkpoint.EpochCheckpoint.save, []

    def saving(self, state):
        save(self, state)
        saved.append(state.active.copy())
        if 0 < (~state.active).sum() < len(state.active):
            raise Stopped

    monkeypatch.setattr(mlp_checkpoint.EpochCheckpoint, "save", saving)
    return saved


@pytest.fixture
def directory(tmp_path, monkeypatch):
    d = tmp_path / "ck"
    monkeypatch.setenv(CHECKPOINTS_ENV, str(d))
    return d


def test_an_interrupted_training_resumes_and_ends_as_an_uninterrupted_one(
    directory, monkeypatch, caplog
):
    x, y, rows = data()
    whole = train(x, y, rows)  # short: nothing written at the default interval
    assert not directory.exists()
    saved = stop_once_some_stopped(monkeypatch)
    with pytest.raises(Stopped):
        train(x, y, rows)
    (path,) = directory.glob("mlps-*.npz")
    stopped = int((~saved[-1]).sum())
    monkeypatch.undo()
    monkeypatch.setenv(CHECKPOINTS_ENV, str(directory))
    with caplog.at_level(logging.INFO, logger="testbed.progress"):
        resumed = train(x, y, rows)
    assert f"{stopped} of 13 models had stopped" in caplog.text
    same(resumed, whole)
    assert not path.exists()  # removed once the training ended
    # other inputs: another file, never this one's
    y2 = y.copy()
    y2[:, 300] = 1 - y2[:, 300]
    saved = stop_once_some_stopped(monkeypatch)
    with pytest.raises(Stopped):
        train(x, y2, rows)
    assert [p.name for p in directory.glob("mlps-*.npz")] != [path.name]


@pytest.mark.parametrize("fault", ["unreadable", "other versions"])
def test_a_checkpoint_that_does_not_fit_is_set_aside_and_the_training_starts_afresh(
    directory, monkeypatch, caplog, fault
):
    x, y, rows = data()
    stop_once_some_stopped(monkeypatch)
    with pytest.raises(Stopped):
        train(x, y, rows)
    (path,) = directory.glob("mlps-*.npz")
    monkeypatch.undo()
    monkeypatch.setenv(CHECKPOINTS_ENV, str(directory))
    if fault == "unreadable":
        path.write_bytes(path.read_bytes()[:100])  # truncated mid-write
    else:
        monkeypatch.setattr(mlp_checkpoint, "_versions", lambda: "testbed 9, jax 9")
    with caplog.at_level(logging.INFO, logger="testbed.progress"):
        again = train(x, y, rows)
    said = "cannot be read" if fault == "unreadable" else "was written by testbed"
    assert said in caplog.text and "training from the start" in caplog.text
    assert path.with_name(path.name + ".unused").exists() and not path.exists()
    monkeypatch.delenv(CHECKPOINTS_ENV)
    same(again, train(x, y, rows))


def test_a_checkpoint_that_cannot_be_written_is_said_and_the_training_goes_on(
    tmp_path, monkeypatch, caplog
):
    x, y, rows = data()
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv(CHECKPOINTS_ENV, str(blocked / "ck"))  # under a file: cannot exist
    monkeypatch.setattr(mlp_checkpoint, "CHECKPOINT_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="testbed.progress"):
        kept = train(x, y, rows)
    assert "not written" in caplog.text and "goes on" in caplog.text
    monkeypatch.delenv(CHECKPOINTS_ENV)
    same(kept, train(x, y, rows))


@pytest.mark.parametrize("value", [None, "", "off"])
def test_no_checkpoint_directory_no_checkpoint(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    else:
        monkeypatch.setenv(CHECKPOINTS_ENV, value)
    assert mlp_checkpoint.for_training(("anything",)) is None


def test_the_digest_tells_apart_what_decides_a_training():
    x = np.zeros((3, 2), np.float32)
    base = mlp_checkpoint.training_digest(x, [np.arange(3)], 1)
    assert base == mlp_checkpoint.training_digest(x.copy(), [np.arange(3)], 1)
    others = [
        (x + 1, [np.arange(3)], 1),
        (x.astype(np.float64), [np.arange(3)], 1),
        (x.reshape(2, 3), [np.arange(3)], 1),
        (x, [np.arange(2)], 1),
        (x, [np.arange(3), np.arange(3)], 1),
        (x, [np.arange(3)], 2),
    ]
    assert len({base, *(mlp_checkpoint.training_digest(*o) for o in others)}) == 7
