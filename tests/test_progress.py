"""Long work speaks: `testbed run` and `testbed sweep` say what runs, through logging."""

from __future__ import annotations

import io
import logging
import re
import threading
import time
import types

import pytest

import testbed.progress as progress
from experiments.cli import main
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import Progress, _duration, run_sweep
from leaderboard.store import ResultsStore


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.changed = threading.Condition()

    def emit(self, record):
        with self.changed:
            self.records.append(record)
            self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = 120.0) -> bool:
        """Waits until predicate(records) holds (event order, not a time budget: a loaded
        machine only makes it slower); False after `timeout` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self.records), timeout)

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


def _info(records) -> list[logging.LogRecord]:
    return [r for r in records if r.levelno == logging.INFO]


def test_an_activity_speaks_every_interval_with_those_around_it(heard):
    """Three heartbeats heard, then the activity ends: every line names the chain, the
    outer activity keeps quiet, and the phase's time (DEBUG) comes after them all."""
    with progress.activity("npe on sbi/two_moons/1000/1", timed=False, interval=0.05):
        with progress.activity("training npe", interval=0.05):
            assert heard.wait_for(lambda records: len(_info(records)) >= 3)
    lines = [r.getMessage() for r in _info(heard.records)]
    assert len(lines) >= 3
    assert all(t.startswith("npe on sbi/two_moons/1000/1 · training npe (") for t in lines)
    last = heard.records[-1]
    assert last.levelno == logging.DEBUG and re.fullmatch(
        r"training npe: \d+\.\d s", last.getMessage()
    )


class CountingLock:
    """progress._lock, counting how often it was taken (the heartbeat takes it each tick)."""

    def __init__(self, lock):
        self.lock, self.taken, self.changed = lock, 0, threading.Condition()

    def __enter__(self):
        self.lock.__enter__()
        with self.changed:
            self.taken += 1
            self.changed.notify_all()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


class AlwaysNow:
    """progress._last_detail whose report is always this instant: a reporter that never
    stops speaking (an sbi training reporting its epochs), whatever the scheduler does."""

    def __getitem__(self, i):
        return time.monotonic()

    def __setitem__(self, i, value):
        pass


def test_a_more_specific_report_holds_the_heartbeat(heard, monkeypatch):
    """Five heartbeat ticks while a more specific report is always fresh: nothing said."""
    lock = CountingLock(progress._lock)
    monkeypatch.setattr(progress, "_lock", lock)
    monkeypatch.setattr(progress, "_last_detail", AlwaysNow())
    with progress.activity("training npe", interval=0.05):
        with lock.changed:  # the activity took the lock once; then one take a tick
            assert lock.changed.wait_for(lambda: lock.taken >= 6, timeout=120)
    assert _info(heard.records) == []


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

    def sweep_lines(records):
        return [r.getMessage() for r in records if r.getMessage().startswith("sweep: ")]

    # the 'clock' job ends once a sweep line was said while it ran (event order, not a
    # sleep that a loaded machine may outlast before the heartbeat's first tick)
    waits = types.SimpleNamespace(sleep=lambda _: heard.wait_for(sweep_lines), time=time.time)
    monkeypatch.setattr(leaderboard_faults, "time", waits)
    jobs = expand(["uniform"], ["lbfault/clock", "lbfault/raise"])
    with ResultsStore(tmp_path / "r.db", mode="w") as store:
        summary = run_sweep(jobs, store, InlineExecutor(timeout=None), progress=True)
    assert (summary.ok, summary.failed) == (1, 1)
    sweep = sweep_lines(heard.records)
    assert sweep and sweep[0].startswith("sweep: 0/2 done, 1 job in progress, ")
    assert " · uniform on lbfault/clock · scoring (" in sweep[0]  # the job in this process
    assert any(re.match(r"ok: uniform on lbfault/clock \(\d", t) for t in heard.texts)
    failed = [t for t in heard.texts if t.startswith("failed: uniform on lbfault/raise")]
    assert failed and "deliberate failure" in failed[0]


def test_progress_summary_text():
    p = Progress(70, enabled=False)
    p.running, p.ok, p.failed = 2, 11, 1
    p.start -= 90
    text = p.describe()
    assert text.startswith(
        "sweep: 12/70 done (1 failed), 2 jobs in progress, 1 min 30 s, ETA 7 min"
    )
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


def test_long_classifier_trainings_and_bandit_runs_say_what_they_do(heard):
    """A batch of classifiers (the oracle C2ST's null: 86 s without a word) and a bandit run
    are activities: each is said while it runs and timed when it ends."""
    import numpy as np

    import agents
    from generative.bandit import BanditProblem, BanditSettings
    from testbed.metrics.oracle_c2st import oracle_c2st

    rng = np.random.default_rng(0)
    q, p = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    oracle_c2st(q[:20], p[:20], q[20:], p[20:], num_trials_null=4)
    BanditProblem(BanditSettings(num_steps=30)).interact(agents.load("uniform"))
    texts = heard.texts
    assert any(re.fullmatch(r"training 5 classifiers on 40 rows: \d+\.\d s", t) for t in texts)
    assert any(re.fullmatch(r"bandit step 30 of 30: \d+\.\d s", t) for t in texts), texts
