"""Executors: run job dicts and hand each result to the driver as it finishes.

`LocalExecutor` (`leaderboard.execution.local_executor`) is a pool of worker processes on
this machine; `RayExecutor` (`leaderboard.execution.ray_executor`) runs the same jobs as
Ray tasks on a cluster; `InlineExecutor` runs them in this process (debugging). Every
executor enforces a per-job timeout (default `DEFAULT_TIMEOUT`, 24 hours: no legitimate
job reaches it) and turns a hung or dead worker into a failed result, so a sweep always
goes on. A group of jobs that share one training (`worker.group_dict`) is one job whose
limit is the timeout per member.

Executors take an iterable of job dicts and pull the next job only when a worker is free:
the sweep driver claims each job just then (see `leaderboard.execution.runner`).

Ctrl-C (`testbed.interrupts`): while an executor runs, SIGINT in the driver
is recorded as well as raised, so a KeyboardInterrupt that Python drops (raised inside a
gc callback, as JAX registers one, or a `__del__`) is raised again at the next safe point;
a result that has arrived is stored before the interrupt stops the sweep. Local workers
hold SIGINT from their first instruction (`leaderboard.execution.processes`), then ignore
it: the driver alone answers Ctrl-C, a Ctrl-C while a worker still imports the stack
prints nothing of it, and one that lands while the driver starts a worker waits for the
driver, never lost.

A job that ends its process (`sys.exit()` in an agent: SystemExit) is a failed job like
any other, in every executor. A job that times out or whose worker dies is stored with
its wall time and, as its traceback, the worker's Python stack when it was stopped (or
when it crashed in native code; faulthandler), or a note of why there is none.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from leaderboard.execution.jobs import JobResult, Unit, failed_results, time_limit
from leaderboard.execution.local_executor import (
    DEFAULT_WORKER_MEMORY_GB,
    LocalConfig,
    LocalExecutor,
)
from leaderboard.execution.processes import MAIN_GUARD_EXIT, main_guard_error
from leaderboard.execution.ray_executor import (
    HeadWatch,
    RayConfig,
    RayExecutor,
    check_reachable,
    ray_endpoint,
)
from leaderboard.execution.timeouts import DEFAULT_TIMEOUT, NO_LIMIT_ABOVE, check_timeout
from leaderboard.execution.worker import run_unit_with_time_limit
from testbed import progress
from testbed.interrupts import Interrupts, recorded_interrupts

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_WORKER_MEMORY_GB",
    "MAIN_GUARD_EXIT",
    "NO_LIMIT_ABOVE",
    "HeadWatch",
    "InlineExecutor",
    "Interrupts",
    "LocalConfig",
    "LocalExecutor",
    "RayConfig",
    "RayExecutor",
    "check_reachable",
    "check_timeout",
    "main_guard_error",
    "ray_endpoint",
    "recorded_interrupts",
]

OnResult = Callable[[list[JobResult]], None]  # a unit's results, one per job


class InlineExecutor:
    """Runs jobs one by one in this process: for debugging (a breakpoint in an agent works)
    and small tests. No isolation; the time limit interrupts the job with SIGALRM (in the
    main thread; a job inside native code is stopped when it returns to Python)."""

    def __init__(self, imports: Sequence[str] = (), timeout: Any = DEFAULT_TIMEOUT):
        self.imports = tuple(imports)
        self.timeout = check_timeout(timeout)

    def run(self, jobs: Iterable[Unit], on_result: OnResult, on_start=None) -> None:
        from leaderboard.execution.worker import prepare

        with recorded_interrupts() as interrupts:
            prepare(None, self.imports)
            for job in jobs:
                interrupts.check()
                if on_start is not None:
                    on_start(job)
                result = _run_inline(job, time_limit(job, self.timeout))
                with interrupts.deferred():  # a finished job is stored, then Ctrl-C stops
                    on_result(result)


def _run_inline(job: Unit, seconds: float | None) -> list[JobResult]:
    """`run_unit_with_time_limit`, with a job that ends the process (`sys.exit()` in an
    agent raises SystemExit, which `run_unit` lets through as it is no Exception) failed
    like any other: the sweep goes on, and the job's reason and traceback are stored.
    The progress activities are left as they were (`testbed.progress.kept`)."""
    start = time.perf_counter()
    try:
        with progress.kept():
            return run_unit_with_time_limit(job, seconds)
    except SystemExit as e:
        code = e.code
        reason = (
            f"SystemExit: the job called sys.exit({code!r}), which would end the sweep "
            "(an agent must return a predictive or raise an Exception)"
        )
        return failed_results(
            job, reason, time.perf_counter() - start, traceback.format_exc()[-4000:]
        )
