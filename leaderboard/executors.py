"""Executors: run job dicts and hand each result to the driver as it finishes.

`LocalExecutor` is a pool of worker processes (spawn start method: JAX is not fork-safe)
on this machine; `RayExecutor` runs the same jobs as Ray tasks on a cluster;
`InlineExecutor` runs them in this process (debugging). Every executor enforces a per-job
timeout (default `DEFAULT_TIMEOUT`, 24 hours: no legitimate job reaches it) and turns a
hung or dead worker into a failed result, so a sweep always goes on. A group of jobs that
share one training (`worker.group_dict`) is one job whose limit is the timeout per member.

Executors take an iterable of job dicts and pull the next job only when a worker is free:
the sweep driver claims each job just then (see `leaderboard.runner`).

Ctrl-C: while an executor runs (or inside `recorded_interrupts()`), SIGINT in the driver is
recorded as well as raised, so a KeyboardInterrupt that Python drops (raised inside a gc
callback, as JAX registers one, or a `__del__`) is raised again at the next safe point;
a result that has arrived is stored before the interrupt stops the sweep. Local workers
hold SIGINT from their first instruction (they start with it blocked, as the driver's mask
is while it forks and execs them; the mask survives both), then ignore it: the driver alone
answers Ctrl-C, a Ctrl-C while a worker still imports the stack prints nothing of it, and
one that lands while the driver starts a worker waits for the driver, never lost.

A job that ends its process (`sys.exit()` in an agent: SystemExit) is a failed job like
any other, in every executor. A job that times out or whose worker dies is stored with
its wall time and, as its traceback, the worker's Python stack when it was stopped (or
when it crashed in native code; faulthandler), or a note of why there is none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import math
import multiprocessing as mp
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any

from leaderboard.jobs import JobResult, Unit, failed_results, time_limit
from leaderboard.worker import (
    compilation_cache_env,
    run_unit_with_time_limit,
    thread_env,
    worker_env,
    worker_main,
)
from testbed.config import check_at_least, check_one_of
from testbed.cores import usable_cores
from testbed.errors import EnvironmentFault, InputError, bad_value

log = logging.getLogger("testbed.sweep")

OnResult = Callable[[list[JobResult]], None]  # a unit's results, one per job
OnStart = Callable[[Unit], None]
STARTUP_SECONDS = 300.0  # importing the stack in a fresh process takes ~4 s; allow slow disks
MAX_START_FAILURES = 3
DEFAULT_TIMEOUT = 24 * 3600.0  # per job; the SBI benchmark's slowest runs took over 6 hours
# a worker holding more than this after a job is replaced: memory builds up over many jobs
# (a worker of the Neural Testbed's 2021 sweep: 0.7 to 5.5 GB in 95 minutes), and a sweep of
# hours would end with the out-of-memory killer taking a job
DEFAULT_WORKER_MEMORY_GB = 4.0
NO_LIMIT_ABOVE = 1e9  # seconds (~30 years): a longer limit is no limit
MAX_WAIT = 60.0  # the longest single wait of an executor's loop
# A worker that finds itself running a sweep while it imports the driver's script (spawn
# re-runs the script's top level in every worker) exits with this code: the driver then
# says what to add instead of "workers cannot start".
MAIN_GUARD_EXIT = 86
STACK_SIGNAL = signal.SIGUSR1  # asks a local worker to write its Python stack (faulthandler)
STACK_WAIT = 2.0  # seconds a timed-out worker gets to write its stack before it is killed


def _importing_main() -> bool:
    """True in a spawned worker while it imports the driver's `__main__` (its bootstrap)."""
    return bool(getattr(mp.current_process(), "_inheriting", False))


def main_guard_error() -> InputError:
    """What to add when workers re-run the driver's script at import."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or "the script"
    return InputError(
        f"workers cannot start: {script} runs the sweep at import, and each local worker "
        "imports it again (multiprocessing spawn), starting a sweep of its own; allowed: put "
        'the code that runs the sweep under `if __name__ == "__main__":` (or use '
        "InlineExecutor)"
    )


def check_timeout(value: Any) -> float | None:
    """A per-job time limit in seconds, or None for no limit (`0`, `inf`, `none`)."""
    if value is None or str(value).strip().lower() == "none":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if seconds == 0:  # 0, 0.0, -0, 0e0: no limit
        return None
    if not seconds > 0:  # negative, NaN or not a number
        raise InputError(
            f"timeout: got {value!r}; allowed: seconds > 0 (default {DEFAULT_TIMEOUT:g}), or "
            "0, inf or none for no limit"
        )
    return None if seconds >= NO_LIMIT_ABOVE else seconds


class Interrupts:
    """Ctrl-C (SIGINT) in a sweep's driver, recorded so that it cannot be lost.

    Python raises KeyboardInterrupt in whatever the main thread runs when the signal
    arrives; raised inside a gc callback (JAX's `_xla_gc_callback`), a `__del__` or a
    weakref callback, it is printed as "Exception ignored in: ..." and dropped, and a
    sweep used to go on to its end. While installed (`recorded_interrupts`), the handler
    also sets `pending` and writes a byte to a pipe (`fileno`: an executor waits on it
    with its workers, so a dropped interrupt still wakes it); `check()` raises it again.
    Inside `deferred()` (storing a finished job's result) it is only recorded, and raised
    when the block ends. A dropped KeyboardInterrupt is not printed: it is raised again.
    """

    def __init__(self) -> None:
        self.pending = False
        self._deferred = 0
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def handle(self, signum: int, frame: Any) -> None:
        """The SIGINT handler (main thread)."""
        self.pending = True
        try:
            os.write(self._write, b"\0")
        except OSError:  # the pipe is full: it already wakes the waits
            pass
        if not self._deferred:
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raises KeyboardInterrupt when one was recorded (and not raised yet)."""
        if self.pending:
            self.pending = False
            self._drain()
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Ctrl-C waits until the block ends (e.g. while a result is committed)."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1
        self.check()

    def unraisable(self, previous: Callable[[Any], None]) -> Callable[[Any], None]:
        """A `sys.unraisablehook` silent about a KeyboardInterrupt that Python drops
        while one is pending (it is raised again), else `previous`."""

        def hook(unraisable: Any) -> None:
            if self.pending and issubclass(unraisable.exc_type, KeyboardInterrupt):
                return
            previous(unraisable)

        return hook

    def _drain(self) -> None:
        try:
            while os.read(self._read, 4096):
                pass
        except OSError:  # empty (EAGAIN) or closed
            pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


_INTERRUPTS: Interrupts | None = None  # the installed recorder (main thread), if any


@contextlib.contextmanager
def recorded_interrupts() -> Iterator[Interrupts]:
    """Records Ctrl-C while inside (see `Interrupts`); a recorded interrupt that was not
    raised is raised when the block ends. Nested uses share the outer recorder. Installed
    only in the main thread over Python's default handler: a SIGINT that is ignored, or
    has a handler of the caller's, is left as it is (the recorder then records nothing)."""
    global _INTERRUPTS
    if _INTERRUPTS is not None and threading.current_thread() is threading.main_thread():
        yield _INTERRUPTS
        _INTERRUPTS.check()
        return
    interrupts = Interrupts()
    installed = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if not installed:
        try:
            yield interrupts
        finally:
            interrupts.close()
        return
    previous_hook = sys.unraisablehook
    sys.unraisablehook = interrupts.unraisable(previous_hook)
    signal.signal(signal.SIGINT, interrupts.handle)
    _INTERRUPTS = interrupts
    try:
        yield interrupts
        interrupts.check()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = previous_hook
        _INTERRUPTS = None
        interrupts.close()


def _count(jobs: Iterable[Any]) -> int | None:
    try:
        return len(jobs)  # type: ignore[arg-type]
    except TypeError:
        return None


class InlineExecutor:
    """Runs jobs one by one in this process: for debugging (a breakpoint in an agent works)
    and small tests. No isolation; the time limit interrupts the job with SIGALRM (in the
    main thread; a job inside native code is stopped when it returns to Python)."""

    def __init__(self, imports: Sequence[str] = (), timeout: Any = DEFAULT_TIMEOUT):
        self.imports = tuple(imports)
        self.timeout = check_timeout(timeout)

    def run(self, jobs: Iterable[Unit], on_result: OnResult, on_start=None) -> None:
        from leaderboard.worker import prepare

        with recorded_interrupts() as interrupts:
            prepare({}, self.imports)
            for job in jobs:
                interrupts.check()
                if on_start is not None:
                    on_start(job)
                result = _run_inline(job, time_limit(job, self.timeout))
                with interrupts.deferred():  # a finished job is stored, then Ctrl-C stops
                    on_result(result)


@contextlib.contextmanager
def _progress_kept() -> Iterator[None]:
    """testbed.progress's open activities as they were before a job, whatever the job did.

    A job stopped by its time limit while an activity of its cleans up (the alarm lands in
    the activity's `finally`) left that activity open: every later progress line of this
    process carried its label (an sbi training's 'npe on sbi/two_moons/1000/1 (one
    training for 2)' in all that the tests said after the timeout test), and its heartbeat
    spoke on. Put back, the stale activity is no longer innermost and its heartbeat stays
    quiet."""
    from testbed import progress

    with progress._lock:
        before = list(progress._stack)
    try:
        yield
    finally:
        with progress._lock:
            progress._stack[:] = before


def _run_inline(job: Unit, seconds: float | None) -> list[JobResult]:
    """`run_unit_with_time_limit`, with a job that ends the process (`sys.exit()` in an
    agent raises SystemExit, which `run_unit` lets through as it is no Exception) failed
    like any other: the sweep goes on, and the job's reason and traceback are stored.
    The progress activities are left as they were (`_progress_kept`)."""
    start = time.perf_counter()
    try:
        with _progress_kept():
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


@dataclasses.dataclass(frozen=True)
class LocalConfig:
    """A local process pool. `timeout` is per job, in seconds (None, 0 or inf: no limit);
    a worker whose resident memory exceeds `worker_memory_gb` after a job is replaced by
    a fresh one before the next (0: never)."""

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


def _worker_entry(conn, env, imports: tuple[str, ...], parent: int, stack: str) -> None:
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
    worker_main(conn, env, imports, parent)


@contextlib.contextmanager
def _sigint_blocked_in_children() -> Iterator[None]:
    """Processes that multiprocessing starts inside start with SIGINT blocked, from their
    first instruction: it is blocked in this process just around the fork and exec (a
    signal mask survives both), so a terminal's Ctrl-C never interrupts a worker that is
    still importing (it printed its traceback); the worker ignores SIGINT, which drops
    one held for it, then unblocks it (`worker.worker_main`). A Ctrl-C that lands here
    meanwhile waits in this process and is handled when the mask is restored: never lost
    (an ignored disposition lost it). Only in the main thread."""
    from multiprocessing import util

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    spawn = util.spawnv_passfds

    def held_spawn(path, args, passfds):
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return spawn(path, args, passfds)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    util.spawnv_passfds = held_spawn
    try:
        yield
    finally:
        util.spawnv_passfds = spawn


class _Slot:
    """One worker process and the job it is running."""

    def __init__(self, ctx, config: LocalConfig):
        self.conn, child = ctx.Pipe()
        env = worker_env({**thread_env(config.threads_per_worker), **compilation_cache_env()})
        fd, self.stack = tempfile.mkstemp(prefix="testbed-worker-", suffix=".stack")
        os.close(fd)
        self.process = ctx.Process(
            target=_worker_entry,
            args=(child, env, tuple(config.imports), os.getpid(), self.stack),
            daemon=True,
        )
        # spawn copies this environment into the child before it imports anything, so the
        # thread counts hold for numpy/OpenBLAS too (they read them when loaded).
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with _sigint_blocked_in_children():
                self.process.start()
        except BaseException:
            self._remove_stack()
            raise
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
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
        self.conn.close()
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
        if _importing_main():  # a worker re-running an unguarded script: tell the driver
            raise SystemExit(MAIN_GUARD_EXIT)
        count = _count(jobs)
        if count == 0:
            return
        with recorded_interrupts() as interrupts:
            self._run(jobs, count, on_result, on_start, interrupts)

    def _run(self, jobs, count, on_result: OnResult, on_start, interrupts: Interrupts) -> None:
        ctx = mp.get_context(self.config.start_method)
        source: Iterator[Unit] | None = iter(jobs)
        slots: list[_Slot] = []
        start_failures = 0
        try:
            for _ in range(min(self.workers, count or self.workers)):
                slots.append(_Slot(ctx, self.config))
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
                            slots[i] = _Slot(ctx, self.config)
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
                        slots[i] = _Slot(ctx, self.config)
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
        return [s.conn for s in slots] + [s.process.sentinel for s in slots]

    @staticmethod
    def _next_deadline(slots: list[_Slot]) -> float:
        now = time.monotonic()
        deadlines = [s.deadline for s in slots if s.deadline is not None]
        deadlines += [s.started + STARTUP_SECONDS for s in slots if not s.ready]
        return min(MAX_WAIT, max(0.0, min(deadlines) - now) + 0.01) if deadlines else 1.0

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


@dataclasses.dataclass(frozen=True)
class RayConfig:
    """Ray tasks on the cluster at `address` (None: start a local Ray instance).

    At most `workers` jobs run at once (0: the cluster's CPU count / threads_per_worker).
    `init_kwargs` go to `ray.init` (e.g. num_cpus=2, include_dashboard=False for tests).
    """

    address: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    threads_per_worker: int = 1
    workers: int = 0
    imports: tuple[str, ...] = ()
    init_kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        check_at_least("threads_per_worker", self.threads_per_worker, 1)
        check_at_least("workers", self.workers, 0)
        object.__setattr__(self, "timeout", check_timeout(self.timeout))


def _ray_task(job: Unit, env: dict[str, str], imports: tuple[str, ...]) -> list[JobResult]:
    from leaderboard.worker import prepare, run_unit

    prepare(env, imports)
    return run_unit(job)


RAY_CONNECT_SECONDS = 10.0  # how long the driver tries to reach a Ray cluster's address
RAY_DEFAULT_PORT = 6379
# How long the head's GCS may stay silent before the sweep stops as the cluster's fault:
# before Ray's driver ends itself (gcs_rpc_server_reconnect_timeout_s, 60 s) with a line of
# its own, no summary and exit status 1.
RAY_HEAD_LOST_SECONDS = 40.0
RAY_HEAD_PROBE_SECONDS = 2.0  # how often the driver knocks at the GCS's port while it waits


class HeadWatch:
    """Whether a Ray cluster's head (its GCS server) still answers: `check()` knocks at
    its port at most every RAY_HEAD_PROBE_SECONDS and raises an EnvironmentFault once it
    has not answered for RAY_HEAD_LOST_SECONDS."""

    def __init__(self, gcs_address: str | None, lost_seconds: float = RAY_HEAD_LOST_SECONDS):
        self.endpoint = ray_endpoint(gcs_address) if gcs_address else None
        self.address = gcs_address
        self.lost_seconds = lost_seconds
        self.last_answer = self.last_probe = time.monotonic()

    def check(self) -> None:
        if self.endpoint is None:
            return
        now = time.monotonic()
        if now - self.last_probe < RAY_HEAD_PROBE_SECONDS:
            return
        self.last_probe = now
        try:
            with socket.create_connection(self.endpoint, timeout=1.0):
                self.last_answer = now
                return
        except OSError:
            pass
        if now - self.last_answer >= self.lost_seconds:
            raise EnvironmentFault(
                f"ray cluster: its head (GCS at {self.address}) has not answered for "
                f"{now - self.last_answer:.0f} s (it stopped, or the network to it did); the "
                "jobs in flight are lost, every job that finished is stored; the cluster's "
                "fault, not the sweep's: restart it (ray start --head) and run the sweep again"
            )


def _gcs_address(ray) -> str | None:
    """The address of the connected cluster's GCS server (None: unknown)."""
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # an older or newer Ray without it: no watch
        return None


def ray_endpoint(address: str | None) -> tuple[str, int] | None:
    """(host, port) that a Ray address names (`host:port`, `ray://host:port`), or None for
    an address Ray resolves itself (none, `auto`, `local`)."""
    if address is None or address.strip().lower() in ("", "auto", "local"):
        return None
    text = address.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0]
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise InputError(
            f"ray address: got {address!r}; allowed: host:port of a running Ray cluster "
            "(e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001), or none to start a local one"
        )
    if not port:
        return host, RAY_DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"ray address: got {address!r}, whose port {port!r} is no port number; allowed: "
            "host:port with a port in 1..65535"
        )
    return host, int(port)


def check_reachable(address: str | None, seconds: float = RAY_CONNECT_SECONDS) -> None:
    """An EnvironmentFault when nothing answers at the Ray address within `seconds`
    (before Ray itself tries, which retries for minutes and logs every attempt)."""
    endpoint = ray_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return
    except OSError as e:
        reason = e.strerror or ("no answer" if isinstance(e, TimeoutError) else type(e).__name__)
        if isinstance(e, socket.gaierror):
            raise InputError(
                f"ray address: got {address!r}, whose host {host!r} is not known ({reason}); "
                "allowed: the address of a running Ray cluster, or none to start a local one"
            ) from None
        if isinstance(e, TimeoutError) or e.errno == errno.ETIMEDOUT:
            reason = f"no answer within {seconds:g} s"
    raise EnvironmentFault(
        f"ray address: cannot reach the Ray cluster at {address!r} ({host}:{port}: {reason}); "
        "start it (ray start --head) or check the address and the network, then run the "
        "sweep again (nothing was stored)"
    )


class RayExecutor:
    """Runs jobs as Ray tasks; results come back to the driver, which alone writes the store.

    `connect()` reaches the cluster (or starts a local Ray) before anything else happens:
    the command line calls it before it opens the results file, so an address that does
    not answer is one line and leaves no file behind; `close()` ends what `connect()`
    started. `run()` connects by itself when nobody did."""

    def __init__(self, config: RayConfig | None = None, **kwargs: Any):
        if "init_kwargs" in kwargs and isinstance(kwargs["init_kwargs"], dict):
            kwargs["init_kwargs"] = tuple(sorted(kwargs["init_kwargs"].items()))
        self.config = config or RayConfig(**kwargs)
        self._started_ray = False
        self._undo_notes: Callable[[], None] | None = None

    @property
    def timeout(self) -> float | None:
        return self.config.timeout

    def _env(self) -> dict[str, str]:
        return worker_env(thread_env(self.config.threads_per_worker))

    def connect(self):
        """Connects to the cluster at `address` (or starts a local Ray) unless Ray is
        connected already; returns the `ray` module."""
        try:
            import ray
        except ImportError:
            raise InputError(
                "executor: got 'ray' but Ray is not installed; allowed: 'local', or "
                "pip install 'testbed[ray]'"
            ) from None
        if ray.is_initialized():
            return ray
        check_reachable(self.config.address)  # Ray would retry for minutes, logging each
        # Ray's log while it connects to a cluster: shown with -v if it works, never if it
        # fails
        # (a local Ray starts processes that would keep the held stderr: not held then)
        hold = _stderr_held() if ray_endpoint(self.config.address) else contextlib.nullcontext()
        with hold as said, _stdout_to_stderr():
            try:
                ray.init(
                    address=self.config.address,
                    runtime_env={"env_vars": self._env()},
                    log_to_driver=False,
                    **dict(self.config.init_kwargs),
                )
            except (ConnectionError, ValueError) as e:
                if said is not None:
                    said.drop()
                reason = " ".join(str(e).split())[:300]
                raise InputError(
                    f"ray address: got {self.config.address!r} ({reason}); allowed: the "
                    "address of a running Ray cluster, or none to start a local one"
                ) from None
            except BaseException:
                if said is not None:
                    said.drop()
                raise
            if said is not None and not log.isEnabledFor(logging.DEBUG):
                said.drop()  # Ray's own lines ("Connecting to ...") only with -v
        self._started_ray = True
        if not log.isEnabledFor(logging.DEBUG):
            self._undo_notes = _cluster_notes_logged(ray)
        return ray

    def close(self) -> None:
        """Shuts down the Ray connection that `connect()` made (if it made one)."""
        if self._started_ray:
            import ray

            self._started_ray = False
            with _stdout_to_stderr():
                ray.shutdown()
            if self._undo_notes is not None:
                self._undo_notes()
                self._undo_notes = None

    def run(self, jobs: Iterable[Unit], on_result: OnResult, on_start=None) -> None:
        if _count(jobs) == 0:
            return
        connected_here = not self._started_ray
        ray = self.connect()
        connected_here = connected_here and self._started_ray
        env = self._env()
        with _stdout_to_stderr():  # Ray's own messages must not mix into our stdout
            try:
                with recorded_interrupts() as interrupts:
                    self._run(ray, jobs, env, on_result, on_start, interrupts)
            finally:
                if connected_here:
                    self.close()

    def _limit(self, ray) -> int:
        """Jobs in flight at once: `workers`, else as many as the cluster's CPUs hold."""
        if self.config.workers:
            return self.config.workers
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, cpus // self.config.threads_per_worker)

    def _run(self, ray, jobs, env, on_result: OnResult, on_start, interrupts: Interrupts) -> None:
        task = ray.remote(num_cpus=self.config.threads_per_worker, max_retries=0)(_ray_task)
        limit = self._limit(ray)
        source: Iterator[Unit] | None = iter(jobs)
        flight: dict[Any, tuple[Unit, float]] = {}
        head = HeadWatch(_gcs_address(ray))
        try:
            while source is not None or flight:
                interrupts.check()
                head.check()
                while source is not None and len(flight) < limit:
                    job = next(source, None)
                    if job is None:
                        source = None
                        break
                    ref = task.remote(job, env, tuple(self.config.imports))
                    flight[ref] = (job, time.monotonic())
                    if on_start is not None:
                        on_start(job)
                ready, _ = ray.wait(list(flight), num_returns=1, timeout=0.5)
                for ref in ready:
                    job, t0 = flight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        reason = " ".join(str(e).split())[:1000]
                        result = failed_results(  # Ray's account of the task as traceback
                            job,
                            f"ray task failed: {type(e).__name__}: {reason}",
                            time.monotonic() - t0,
                            str(e)[-4000:],
                        )
                    with interrupts.deferred():  # stored first, then Ctrl-C stops
                        on_result(result)
                if self.config.timeout is None:
                    continue
                now = time.monotonic()
                for ref, (job, t0) in list(flight.items()):
                    seconds = time_limit(job, self.config.timeout)
                    if now - t0 > seconds:
                        ray.cancel(ref, force=True)
                        flight.pop(ref)
                        reason = f"timed out after {seconds:g} s (task cancelled)"
                        result = failed_results(
                            job, reason, now - t0,
                            f"No Python traceback: {reason}; Ray cancels a task without "
                            "reporting its stack (run it with --executor local for one).",
                        )  # fmt: skip
                        with interrupts.deferred():
                            on_result(result)
        finally:  # Ctrl-C or an error: tasks still running stop (on a cluster too)
            for ref in flight:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)


class _Held:
    """What `_stderr_held` caught; `drop()` discards it instead of showing it."""

    def __init__(self) -> None:
        self.keep = True

    def drop(self) -> None:
        self.keep = False


@contextlib.contextmanager
def _stderr_held() -> Iterator[_Held]:
    """Holds what this process (and its threads and children, file descriptor 2) writes to
    stderr inside, then writes it out, unless `drop()` was called (a failure said in one
    line instead)."""
    held = _Held()
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):  # no real stderr: nothing to hold
        yield held
        return
    with tempfile.TemporaryFile() as buffer:
        os.dup2(buffer.fileno(), 2)
        try:
            yield held
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if held.keep:
                buffer.seek(0)
                with contextlib.suppress(OSError):
                    os.write(2, buffer.read())


def _cluster_notes_logged(ray) -> Callable[[], None] | None:
    """Ray's driver prints the cluster's notes to stdout as they come (a raylet that died,
    with 20 lines of its log, up to 30 s after a node is lost): while connected they are
    DEBUG lines (`-v`), as the sweep says the fault itself. Returns what undoes it (None:
    a Ray without that printer, whose notes are printed as Ray prints them)."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None:
        return None

    def to_log(data: Any, ignore_prefix: bool = False) -> None:
        for line in data.get("lines", ()) if isinstance(data, dict) else ():
            log.debug("ray (%s): %s", data.get("pid"), line)

    worker.print_to_stdstream = to_log

    def undo() -> None:
        worker.print_to_stdstream = printer

    return undo


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Points file descriptor 1 at stderr (for this process and the processes it starts)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (AttributeError, OSError, ValueError):  # no real stdout: nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)
