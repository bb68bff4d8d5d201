"""leaderboard.execution.processes: a worker is a fresh interpreter that gets its environment as an
argument (the driver's stays as it was), starts with SIGINT held, and imports the driver's
script as a spawned process would."""

from __future__ import annotations

import os
import signal

from leaderboard.execution.processes import WorkerProcess, importing_main


def _report(conn, extra):
    """What the child sees of its start (runs in the worker process)."""
    held = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    conn.send({"env": os.environ.get("H46_MARK"), "held": held, "importing": importing_main(),
               "extra": extra})  # fmt: skip


def _die(conn, code):
    os._exit(code)


def test_a_worker_gets_its_environment_and_starts_with_sigint_held():
    before = dict(os.environ)
    process = WorkerProcess(_report, ({"a": 1},), {"H46_MARK": "yes"})
    try:
        got = process.conn.recv()
        process.join(60)
    finally:
        process.kill()
        process.close()
    assert got == {"env": "yes", "held": True, "importing": False, "extra": {"a": 1}}
    assert process.exitcode == 0
    assert dict(os.environ) == before  # nothing set in the driver, not even for a moment
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # unblocked


def test_a_worker_that_dies_says_so():
    process = WorkerProcess(_die, (7,), {})
    try:
        process.join(60)
        assert not process.is_alive() and process.exitcode == 7
    finally:
        process.close()


def test_the_code_that_starts_and_runs_workers_never_opens_the_store():
    """Rows are written by the sweep's driver only (as tests/test_store_guarantees.py checks
    of the worker and the executors): the modules executors are made of never open it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    execution = [f"leaderboard/execution/{name}" for name in
                 ("processes", "local_executor", "ray_executor", "timeouts")]  # fmt: skip
    for name in (*execution, "testbed/interrupts"):
        source = (root / f"{name}.py").read_text()
        for word in ("ResultsStore", "sqlite3", "leaderboard.store", "from .store", ".record("):
            assert word not in source, (name, word)
