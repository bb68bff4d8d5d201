"""Long SBI runs speak: sbi's epoch counter, prints and warnings through one channel."""

from __future__ import annotations

import io
import logging
import os
import time
import warnings

import pytest

import agents
from agents.sbi_progress import TrainingProgress, progress_mode, quiet_sampling
from generative.sbi.problems import PosteriorProblem
from testbed.errors import InputError


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _progress(stream, mode="auto"):
    clock = Clock()
    return TrainingProgress("npe on two_moons", 1000, stream=stream, mode=mode, clock=clock), clock


def test_off_a_terminal_a_line_every_interval_and_at_each_round_end():
    stream = io.StringIO()
    p, clock = _progress(stream)
    assert p.mode == "lines"
    p.begin_round(1, 2, 0)
    for epoch in range(1, 40):
        clock.now = epoch * 1.0  # one epoch a second: a line at 10, 20, 30 s
        p.on_epoch(epoch, 1.0 / epoch)
    p.end_round(500)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 + 3 + 1
    assert lines[0].endswith("npe on two_moons: round 1/2, 0/1000 simulations (0 s)")
    assert "round 1/2, epoch 10, validation loss 0.1, 0/1000 simulations (10 s)" in lines[1]
    assert "epoch 39" in lines[-1] and "500/1000 simulations (39 s)" in lines[-1]
    clock.now = 50.0  # a timed line, then the round ends at once with nothing new: one line
    p.on_epoch(40, 0.025)
    p.end_round(500)
    assert len(stream.getvalue().splitlines()) == 6


def test_on_a_terminal_one_line_rewritten_in_place():
    stream = Terminal()
    p, clock = _progress(stream)
    assert p.mode == "terminal"
    p.begin_round(1, 1, 0)
    clock.now = 1.0
    p.on_epoch(5, 2.5)
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") == 2 and "epoch 5" in text
    p.say("a message")  # clears the status line, then one log line
    p.close()
    assert stream.getvalue().endswith("a message\n")


def test_under_the_commands_status_line_one_writer_draws_the_training(monkeypatch):
    """`testbed run` on a terminal: the command's status line (the heartbeat of its
    activities) and the training's progress shared stderr, each writing over the other
    unaware of its width ('... training npe (8 s)74, 1000/1000 simulations (5 s)'). The
    training is now the innermost activity: every redraw is the whole chain, padded over
    the last, with the training's round and epoch in it."""
    import testbed.progress as progress

    monkeypatch.delenv("TESTBED_PROGRESS", raising=False)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    line = progress.StatusLine(terminal)
    logger = logging.getLogger("testbed.progress")
    old_level = logger.level
    logger.addHandler(line)
    logger.setLevel(logging.INFO)
    monkeypatch.setattr(progress, "TICK", 0.01)
    monkeypatch.setattr(progress, "_last_detail", [float("-inf")])  # no earlier report
    wide = os.terminal_size((200, 24))  # the whole line (`fit` cuts narrower terminals)
    monkeypatch.setattr(progress.shutil, "get_terminal_size", lambda *a, **k: wide)
    try:
        with progress.activity("npe on sbi/two_moons/1000/6"), progress.activity("training npe"):
            p = TrainingProgress("npe on two_moons", 1000)
            assert p.mode == "terminal"
            with p.capture():
                p.begin_round(1, 1, 0)
                for epoch in range(1, 30):
                    p.on_epoch(epoch, 1.0 / epoch)
                    time.sleep(0.005)
                p.end_round(1000)
                time.sleep(0.3)  # ~30 redraws at TICK 0.01, even on a loaded machine
            p.close()
    finally:
        logger.removeHandler(line)
        logger.setLevel(old_level)
    draws = [d for d in terminal.getvalue().split("\r") if d.strip()]
    assert draws, "nothing drawn"
    for d in draws:  # every redraw is the command's whole line, no piece of one over another
        assert d.startswith("npe on sbi/two_moons/1000/6 (") and " · training npe (" in d, repr(d)
    final = "round 1/1, epoch 29, validation loss 0.03448, 1000/1000 simulations"
    assert any(d.rstrip().endswith(" s) · " + final) for d in draws), draws[-3:]


def test_messages_are_said_once_and_off_means_silent():
    stream = io.StringIO()
    p, _ = _progress(stream)
    p.say("Neural network  successfully\nconverged.")
    p.say("Neural network successfully converged.")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("npe on two_moons: Neural network successfully converged.")
    quiet, _ = _progress(io.StringIO(), mode="off")
    quiet.begin_round(1, 1, 0)
    quiet.say("x")
    assert quiet.stream.getvalue() == ""


def test_lines_go_through_logging_where_it_shows_info():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("testbed.progress")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        p = TrainingProgress("nle on slcp", 1000, mode="lines")  # no stream given
        p.begin_round(1, 1, 0)
        p.say("a warning")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert records == ["nle on slcp: round 1/1, 0/1000 simulations (0 s)", "nle on slcp: a warning"]


def test_capture_turns_sbis_output_into_progress():
    stream = io.StringIO()
    p, clock = _progress(stream)

    class Inference:
        _val_loss = 0.25

    with p.capture(Inference()):
        print("\r", "Training neural network. Epochs trained: 7", end="")
        clock.now = 11.0
        print("\r", "Training neural network. Epochs trained: 8", end="")
        print("\r", "Neural network successfully converged after 8 epochs.", end="")
        warnings.warn("not converged", UserWarning, stacklevel=1)
    lines = stream.getvalue().splitlines()
    assert "epoch 8, validation loss 0.25" in lines[0]
    assert lines[1].endswith(
        "npe on two_moons: Neural network successfully converged after 8 epochs."
    )
    assert lines[2].endswith("npe on two_moons: UserWarning: not converged")


def test_quiet_sampling_says_a_warning_once_per_process(capsys, monkeypatch):
    monkeypatch.setenv("TESTBED_PROGRESS", "lines")
    for _ in range(3):
        with quiet_sampling():
            warnings.warn("a warning of this test", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err.count("UserWarning: a warning of this test") == 1


def _logging_as_a_library_user_has_it(monkeypatch) -> None:
    """The `testbed` logger as in a fresh process (the command line, run in-process by
    other tests, sets it up)."""
    logger = logging.getLogger("testbed")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logging.getLogger("testbed.progress"), "level", logging.NOTSET)
    logging.Logger.manager._clear_cache()  # isEnabledFor caches levels


def test_deprecations_inside_libraries_are_said_only_with_debug(capsys, monkeypatch, caplog):
    _logging_as_a_library_user_has_it(monkeypatch)
    monkeypatch.setenv("TESTBED_PROGRESS", "lines")
    with caplog.at_level(logging.DEBUG, logger="testbed.progress"):
        with quiet_sampling():
            warnings.warn("torch.x is deprecated in favor of y", UserWarning, stacklevel=1)
    assert "torch.x is deprecated" not in capsys.readouterr().err
    debug = [r for r in caplog.records if "torch.x is deprecated" in r.getMessage()]
    assert [r.levelname for r in debug] == ["DEBUG"]


def test_a_library_user_gets_sbis_warnings_as_python_warnings_once(capsys, monkeypatch):
    """A script with no logging and no terminal: nothing is printed, and each warning sbi
    raised during training or sampling is raised again once (not recorded again)."""
    _logging_as_a_library_user_has_it(monkeypatch)
    monkeypatch.setenv("TESTBED_PROGRESS", "auto")
    p = TrainingProgress("npe on two_moons", 1000)
    assert p.mode == "library"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with p.capture():
            print("\r", "Training neural network. Epochs trained: 7", end="")
            warnings.warn("not converged", UserWarning, stacklevel=1)
        with quiet_sampling("npe sampling"):
            warnings.warn("sampling is slow", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["not converged", "sampling is slow"]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_mode_from_the_environment():
    assert progress_mode({}) == "auto"
    assert progress_mode({"TESTBED_PROGRESS": " Lines "}) == "lines"
    with pytest.raises(InputError, match="TESTBED_PROGRESS: got 'loud'.*auto.*lines.*off"):
        progress_mode({"TESTBED_PROGRESS": "loud"})


def test_an_sbi_agent_reports_and_prints_nothing_raw(capfd, monkeypatch):
    pytest.importorskip("sbi")
    monkeypatch.setenv("TESTBED_PROGRESS", "lines")
    problem = PosteriorProblem("two_moons", 300, 1, num_samples=20)
    agent = agents.load("npe", max_num_epochs=3, training_batch_size=100, torch_threads=1)
    post = agent(problem.train_data, problem.prior_knowledge)
    post.sample(problem.x_o, 5, seed=0)
    out, err = capfd.readouterr()
    assert out == ""  # sbi's epoch counter no longer reaches stdout
    assert "npe on two_moons: round 1/1, 0/300 simulations" in err
    assert "epoch 3" in err or "epoch 4" in err  # the round's end line
    assert "300/300 simulations" in err
    assert "Training neural network" not in err


def test_a_bad_setting_stops_the_command_before_any_job(tmp_path, monkeypatch, capsys):
    from experiments.cli import main

    monkeypatch.setenv("TESTBED_PROGRESS", "bogus")
    db = tmp_path / "r.db"
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
            "--results", str(db)]  # fmt: skip
    assert main(argv) == 2
    assert "TESTBED_PROGRESS: got 'bogus'" in capsys.readouterr().err
    assert not db.exists()  # no job stored as failed


def test_workers_default_to_log_lines_and_keep_a_users_choice(monkeypatch):
    from leaderboard.execution.worker import worker_env

    monkeypatch.delenv("TESTBED_PROGRESS", raising=False)
    monkeypatch.delenv("TESTBED_CHECKPOINTS", raising=False)
    assert worker_env({"OMP_NUM_THREADS": "1"}) == {
        "TESTBED_PROGRESS": "lines",
        "TESTBED_WORKER": "1",
        "TESTBED_CHECKPOINTS": "off",  # no sweep gave a directory
        "OMP_NUM_THREADS": "1",
    }
    monkeypatch.setenv("TESTBED_PROGRESS", "off")
    assert worker_env({})["TESTBED_PROGRESS"] == "off"
    assert os.environ["TESTBED_PROGRESS"] == "off"  # the driver's environment is untouched
