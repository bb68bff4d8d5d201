"""Long work speaks: `testbed run` and `testbed sweep` say what runs, through logging."""

from __future__ import annotations

import io
import logging
import threading
import time

import pytest

import testbed.progress as progress
from experiments.cli import main
from leaderboard.executors import InlineExecutor
from leaderboard.jobs import expand
from leaderboard.runner import Progress, _duration, run_sweep
from leaderboard.store import ResultsStore


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    @property
    def texts(self) -> list[str]:
        return [r.getMessage() for r in self.records]


@pytest.fixture
def heard(monkeypatch):
    """INFO and DEBUG of `testbed.progress` collected (as the command line shows them)."""
    monkeypatch.delenv("TESTBED_PROGRESS", raising=False)
    handler = Records()
    logger = logging.getLogger("testbed.progress")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_an_activity_speaks_every_interval_with_those_around_it(heard):
    with progress.activity("npe on sbi/two_moons/1000/1", timed=False, interval=0.05):
        with progress.activity("training npe", interval=0.05):
            time.sleep(0.32)
    lines = [t for r, t in zip(heard.records, heard.texts) if r.levelno == logging.INFO]
    assert 3 <= len(lines) <= 7, lines  # ~6 ticks; the outer one keeps quiet
    assert all(t.startswith("npe on sbi/two_moons/1000/1 · training npe (") for t in lines)
    assert heard.texts[-1].startswith("training npe: 0.3")  # DEBUG: the phase and its time


def test_a_more_specific_report_holds_the_heartbeat(heard):
    stop = threading.Event()

    def epochs():  # an sbi training reporting its epochs all the time
        while not stop.wait(0.01):
            progress.said()

    thread = threading.Thread(target=epochs)
    thread.start()
    try:
        with progress.activity("training npe", interval=0.05):
            time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
    assert [r for r in heard.records if r.levelno == logging.INFO] == []


def test_silent_when_nobody_listens_or_progress_is_off(heard, monkeypatch):
    monkeypatch.setenv("TESTBED_PROGRESS", "off")
    with progress.activity("training", interval=0.02):
        time.sleep(0.1)
    monkeypatch.delenv("TESTBED_PROGRESS")
    with progress.held(), progress.activity("under a bar", interval=0.02):
        time.sleep(0.1)
    assert [r for r in heard.records if r.levelno == logging.INFO] == []
    logging.getLogger("testbed.progress").setLevel(logging.WARNING)  # e.g. --quiet
    assert not progress.listening()
    before = threading.active_count()
    with progress.activity("nobody listens", interval=0.02):
        assert threading.active_count() == before  # no heartbeat thread at all
        time.sleep(0.1)
    assert not any("nobody listens" in t for t in heard.texts)


def test_status_line_rewrites_one_line_and_clears_it():
    stream = io.StringIO()
    line = progress.StatusLine(stream)
    record = logging.LogRecord("testbed.progress", logging.INFO, "", 0, "training (3 s)", (), None)
    record.status = True
    line.emit(record)
    record.msg = "training (4 s)"
    line.emit(record)
    plain = logging.LogRecord("testbed", logging.WARNING, "", 0, "a warning", (), None)
    line.emit(plain)  # another record: the status line is cleared first, then a line
    text = stream.getvalue()
    assert text.startswith("\rtraining (3 s)\rtraining (4 s)\r")
    assert text.endswith("\r" + " " * 14 + "\ra warning\n")


def test_a_long_status_line_is_cut_in_the_middle():
    """The start (what runs) and the end (the innermost activity's epoch and loss) stay."""
    text = "npe on sbi/two_moons/1000/6 (5 s) · training npe (5 s) · round 1/1, epoch 29, "
    text += "validation loss 0.03448, 1000/1000 simulations"
    cut = progress.fit(text, 79)
    assert len(cut) == 79 and cut.startswith("npe on sbi/two_moons/1000/6 (5 s) …")
    assert cut.endswith("loss 0.03448, 1000/1000 simulations")
    assert progress.fit("short", 79) == "short"
    assert len(progress.fit("x" * 200, 60)) == 60  # no separator: a third kept in front


def test_sweep_lines_say_done_failed_running_and_eta(heard, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.05)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal: lines, no bar
    import leaderboard_faults  # noqa: F401  (registers the misbehaving lbfault problems)

    monkeypatch.setenv("LBFAULT_SLEEP", "0.3")
    jobs = expand(["uniform"], ["lbfault/clock", "lbfault/raise"])
    with ResultsStore(tmp_path / "r.db", mode="w") as store:
        summary = run_sweep(jobs, store, InlineExecutor(timeout=None), progress=True)
    assert (summary.ok, summary.failed) == (1, 1)
    sweep = [t for t in heard.texts if t.startswith("sweep: ")]
    assert sweep and sweep[0].startswith("sweep: 0/2 done, 1 running, ")
    assert " · uniform on lbfault/clock · scoring (" in sweep[0]  # the job in this process
    assert any(t.startswith("ok: uniform on lbfault/clock (0.") for t in heard.texts)
    failed = [t for t in heard.texts if t.startswith("failed: uniform on lbfault/raise")]
    assert failed and "deliberate failure" in failed[0]


def test_progress_summary_text():
    p = Progress(70, enabled=False)
    p.running, p.ok, p.failed = 2, 11, 1
    p.start -= 90
    text = p.describe()
    assert text.startswith("sweep: 12/70 done (1 failed), 2 running, 1 min 30 s, ETA 7 min")
    assert [_duration(s) for s in (4.4, 75, 7260)] == ["4 s", "1 min 15 s", "2 h 01 min"]


def test_cli_run_quiet_and_verbose(capsys):
    argv = ["run", "--agent", "uniform", "--problem", "coin/4"]
    assert main([*argv, "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "-v"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(" debug: training uniform: " in e for e in err), err
    assert any(" debug: scoring: " in e for e in err), err
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "-q", "-v"])
    assert exit_.value.code == 2
    assert "-v/--verbose: not allowed with argument -q/--quiet" in capsys.readouterr().err
