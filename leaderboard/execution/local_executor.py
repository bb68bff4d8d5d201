"""`LocalExecutor`: a pool of worker processes on this machine, one job per worker at a time.

Each worker is a fresh interpreter (`leaderboard.execution.processes`; JAX is not
fork-safe) started with its thread counts and compilation cache in its environment and its
settings passed explicitly (`leaderboard.execution.worker.worker_settings`). A worker that
crashed, hung past its job's time limit or outgrew `worker_memory_gb` is replaced; the job
it ran fails with the worker's Python stack as its traceback (faulthandler), or a note of
why there is none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any

from leaderboard.execution.jobs import JobResult, Unit, failed_results, time_limit
from leaderboard.execution.processes import (
    MAIN_GUARD_EXIT,
    WorkerProcess,
    importing_main,
    main_guard_error,
)
from leaderboard.execution.timeouts import DEFAULT_TIMEOUT, check_timeout, known_count
from leaderboard.execution.worker import worker_main, worker_process_env, worker_settings
from testbed.config import check_at_least, check_one_of
from testbed.cores import usable_cores
from testbed.errors import InputError, bad_value
from testbed.interrupts import Interrupts, recorded_interrupts

log = logging.getLogger("testbed.sweep")

OnResult = Callable[[list[JobResult]], None]  # a unit's results, one per job
STARTUP_SECONDS = 300.0  # importing the stack in a fresh process takes ~4 s; allow slow disks
MAX_START_FAILURES = 3
# a worker holding more than this after a job is replaced: memory builds up over many jobs
# (a worker of the Neural Testbed's 2021 sweep: 0.7 to 5.5 GB in 95 minutes), and a sweep of
# hours would end with the out-of-memory killer taking a job
DEFAULT_WORKER_MEMORY_GB = 4.0
MAX_WAIT = 60.0  # the longest single wait of an executor's loop
NO_SENTINEL_WAIT = 1.0  # the longest wait where a worker's end cannot be waited on (no pidfd)
STACK_SIGNAL = signal.SIGUSR1  # asks a local worker to write its Python stack (faulthandler)
STACK_WAIT = 2.0  # seconds a timed-out worker gets to write its stack before it is killed


@dataclasses.dataclass(frozen=True)
class LocalConfig:
    """A local process pool. `timeout` is per job, in seconds (None, 0 or inf: no limit);
    a worker whose resident memory exceeds `worker_memory_gb` after a job is replaced by
    a fresh one before the next (0: never). Every worker is a fresh interpreter, whatever
    `start_method` says (checked, for the configurations that name one)."""

    workers: int = 0  # 0: one per core
    timeout: float | None = DEFAULT_TIMEOUT
    threads_per_worker: int = 1
    start_method: str = "spawn"
    imports: tuple[str, ...] = ()
    worker_memory_gb: float = DEFAULT_WORKER_MEMORY_GB

    def __post_init__(self):
        check_at_least("workers", self.workers, 0)
        gb = self.worker_memory_gb
        if isinstance(gb, bool) or not isinstance(gb, int | float) or not 0 <= gb < math.inf:
            raise bad_value("worker_memory_gb", gb, "a finite number of GB >= 0 (0: never)")
        check_at_least("threads_per_worker", self.threads_per_worker, 1)
        check_one_of("start_method", self.start_method, ["spawn", "forkserver"])
        object.__setattr__(self, "timeout", check_timeout(self.timeout))


def _worker_entry(conn, chosen, imports: tuple[str, ...], parent: int, stack: str) -> None:
    """A local worker: `worker_main`, with faulthandler writing the Python stack to the
    file `stack` on a fatal signal (a crash in native code) and on STACK_SIGNAL (the driver
    asks before it kills a worker that ran out of time)."""
    import faulthandler

    try:
        out = open(stack, "w")  # noqa: SIM115  (open for the life of the process)
        faulthandler.enable(file=out, all_threads=True)
        faulthandler.register(STACK_SIGNAL, file=out, all_threads=True)
    except (OSError, RuntimeError, ValueError):  # no stack then; the job still runs
        pass
    worker_main(conn, chosen, imports, parent)


class _Slot:
    """One worker process and the job it is running."""

    def __init__(self, config: LocalConfig):
        fd, self.stack = tempfile.mkstemp(prefix="testbed-worker-", suffix=".stack")
        os.close(fd)
        args = (worker_settings(config.threads_per_worker), tuple(config.imports),
                os.getpid(), self.stack)  # fmt: skip
        try:
            self.process = WorkerProcess(
                _worker_entry, args, worker_process_env(config.threads_per_worker)
            )
        except BaseException:
            self._remove_stack()
            raise
        self.conn = self.process.conn
        self.ready = False
        self.started = time.monotonic()
        self.job: Unit | None = None
        self.deadline: float | None = None
        self.limit: float | None = None
        self.assigned = 0.0

    def assign(self, job: Unit, timeout: float | None) -> None:
        self.job, self.limit = job, timeout
        self.assigned = time.monotonic()
        self.deadline = None if timeout is None else self.assigned + timeout
        self.conn.send(job)

    def failed(self, reason: str, timed_out: bool) -> list[JobResult]:
        """The failed results of the unit this worker was running: its wall time, and as
        traceback the worker's Python stack (asked for when it timed out; written by
        faulthandler when it crashed), or a note of why there is none."""
        seconds = time.monotonic() - self.assigned
        if timed_out and self.process.is_alive():
            self._ask_for_stack()
        stack = self._read_stack()
        if stack and timed_out:
            stack = f"The worker's stack when its time limit ran out ({reason}):\n{stack}"
        elif stack:
            stack = f"The worker's stack when it crashed ({reason}):\n{stack}"
        else:
            stack = f"No Python traceback: {reason} ({_how_it_ended(self.process.exitcode)})."
        return failed_results(self.job, reason, seconds, stack[-4000:])

    def _ask_for_stack(self) -> None:
        try:
            before = os.path.getsize(self.stack)
            os.kill(self.process.pid, STACK_SIGNAL)
        except OSError:
            return
        deadline = time.monotonic() + STACK_WAIT
        size = before
        while time.monotonic() < deadline:  # until the stack is written and stays so
            time.sleep(0.05)
            try:
                now = os.path.getsize(self.stack)
            except OSError:
                return
            if now > before and now == size:
                return
            size = now

    def _read_stack(self) -> str:
        try:
            with open(self.stack, errors="replace") as f:
                return f.read().strip()
        except OSError:
            return ""

    def _remove_stack(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.stack)

    def resident_gb(self) -> float | None:
        """The worker's resident memory (Linux's /proc), None where it cannot be read."""
        try:
            with open(f"/proc/{self.process.pid}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e9

    def ask_to_stop(self) -> bool:
        """Tells an idle worker to exit; False for a busy or starting one (`stop` kills it)."""
        if self.process.is_alive() and self.job is None and self.ready:
            try:
                self.conn.send(None)
                return True
            except OSError:
                pass
        return False

    def stop(self, deadline: float | None = None) -> None:
        """Waits for the worker until `deadline` (monotonic), then kills it."""
        if deadline is not None:
            self.process.join(max(0.0, deadline - time.monotonic()))
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.process.close()
        self._remove_stack()


def _how_it_ended(exitcode: int | None) -> str:
    """Why a worker process ended, in words."""
    if exitcode is None:
        return "it was stopped"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        why = " (the out-of-memory killer sends it, as does kill -9)" if name == "SIGKILL" else ""
        return f"it was killed by {name}{why}"
    return f"it exited with code {exitcode}: sys.exit or os._exit in the job, or native code"


class LocalExecutor:
    """Runs jobs on a pool of worker processes on this machine, one job per worker at a time."""

    def __init__(self, config: LocalConfig | None = None, **kwargs: Any):
        self.config = config or LocalConfig(**kwargs)

    @property
    def workers(self) -> int:
        return self.config.workers or usable_cores()

    @property
    def timeout(self) -> float | None:
        return self.config.timeout

    def run(self, jobs: Iterable[Unit], on_result: OnResult, on_start=None) -> None:
        """Runs `jobs`, calling `on_result(results)` in this process as each one finishes.
        The next job is taken from `jobs` only when a worker is free for it."""
        if importing_main():  # a worker re-running an unguarded script: tell the driver
            raise SystemExit(MAIN_GUARD_EXIT)
        count = known_count(jobs)
        if count == 0:
            return
        with recorded_interrupts() as interrupts:
            self._run(jobs, count, on_result, on_start, interrupts)

    def _run(self, jobs, count, on_result: OnResult, on_start, interrupts: Interrupts) -> None:
        source: Iterator[Unit] | None = iter(jobs)
        slots: list[_Slot] = []
        start_failures = 0
        try:
            for _ in range(min(self.workers, count or self.workers)):
                slots.append(_Slot(self.config))
            while source is not None or any(s.job is not None for s in slots):
                interrupts.check()
                for slot in slots:
                    if source is not None and slot.ready and slot.job is None:
                        job = next(source, None)
                        if job is None:
                            source = None
                            break
                        slot.assign(job, time_limit(job, self.config.timeout))
                        if on_start is not None:
                            on_start(job)
                if source is None and all(s.job is None for s in slots):
                    break
                wait(self._waitables(slots) + [interrupts], timeout=self._next_deadline(slots))
                interrupts.check()
                for i, slot in enumerate(slots):
                    kind, payload = self._poll(slot)
                    if kind == "result":
                        slot.job, slot.deadline = None, None
                        with interrupts.deferred():  # stored first, then Ctrl-C stops
                            on_result(payload)
                        if self._outgrown(slot):
                            slot.stop(time.monotonic() + 5.0 if slot.ask_to_stop() else None)
                            slots[i] = _Slot(self.config)
                    elif kind == "failed":  # dead, hung, or failed to start
                        if slot.job is not None:
                            timed_out = payload.startswith("timed out")
                            result = slot.failed(payload, timed_out)
                            with interrupts.deferred():
                                on_result(result)
                        else:
                            if slot.process.exitcode == MAIN_GUARD_EXIT:
                                raise main_guard_error()
                            start_failures += 1
                            if start_failures > MAX_START_FAILURES:
                                raise InputError(f"workers cannot start: {payload}")
                        slot.job = None
                        slot.stop()
                        slots[i] = _Slot(self.config)
        finally:  # idle workers exit when asked; busy or starting ones (Ctrl-C) are killed
            asked = [slot.ask_to_stop() for slot in slots]
            deadline = time.monotonic() + 2.0
            for slot, exits in zip(slots, asked):
                slot.stop(deadline if exits else None)

    def _outgrown(self, slot: _Slot) -> bool:
        """True when an idle worker holds more memory than `worker_memory_gb`."""
        limit = self.config.worker_memory_gb
        gb = slot.resident_gb() if limit else None
        if gb is None or gb <= limit:
            return False
        log.info("worker %d holds %.1f GB after a job (limit %g GB): replaced by a fresh one",
                 slot.process.pid, gb, limit)  # fmt: skip
        return True

    @staticmethod
    def _waitables(slots: list[_Slot]) -> list[Any]:
        ends = [s.process.sentinel for s in slots if s.process.sentinel is not None]
        return [s.conn for s in slots] + ends

    @staticmethod
    def _next_deadline(slots: list[_Slot]) -> float:
        now = time.monotonic()
        deadlines = [s.deadline for s in slots if s.deadline is not None]
        deadlines += [s.started + STARTUP_SECONDS for s in slots if not s.ready]
        longest = MAX_WAIT
        if any(s.process.sentinel is None for s in slots):
            longest = NO_SENTINEL_WAIT
        return min(longest, max(0.0, min(deadlines) - now) + 0.01) if deadlines else 1.0

    def _poll(self, slot: _Slot) -> tuple[str | None, Any]:
        """What happened to `slot`: ('result', dict), ('ready', None), ('failed', reason)
        or (None, None) when nothing did."""
        message = None
        try:
            if slot.conn.poll():
                message = slot.conn.recv()
        except (EOFError, OSError):  # the worker closed its end: it died
            slot.process.join(1)
        if message is not None and slot.ready:
            return "result", message
        if message is not None:
            if message.get("ready"):
                slot.ready = True
                return "ready", None
            return "failed", f"worker failed to start: {message.get('error')}"
        if not slot.process.is_alive():
            return "failed", f"worker process died (exit code {slot.process.exitcode})"
        now = time.monotonic()
        if slot.deadline is not None and now >= slot.deadline:
            return "failed", f"timed out after {slot.limit:g} s (worker killed)"
        if not slot.ready and now >= slot.started + STARTUP_SECONDS:
            return "failed", f"worker did not start within {STARTUP_SECONDS:g} s"
        return None, None
