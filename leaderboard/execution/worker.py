"""What runs inside a worker: a job (or a group of jobs sharing a training) -> one
`JobResult` per job, and the worker process loop.

Kept free of JAX imports at module level: the driver imports it to compute a worker's
environment (thread counts, which JAX, XLA and torch read when they load, so parallel
workers do not oversubscribe the cores) without loading the stack.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from leaderboard.execution.jobs import Job, JobResult, Unit, failed_results
from leaderboard.provenance import versions


def thread_env(threads: int = 1) -> dict[str, str]:
    """Environment variables that pin JAX/XLA, BLAS and torch to `threads` threads each."""
    n = str(int(threads))
    xla = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=" + n
    return {
        "XLA_FLAGS": xla,
        "TESTBED_THREADS": n,  # our own pools (testbed.cores.THREADS_ENV; no import: no JAX here)
        "OMP_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "NUMEXPR_NUM_THREADS": n,
        "VECLIB_MAXIMUM_THREADS": n,
        "TF_NUM_INTRAOP_THREADS": n,
        "TF_NUM_INTEROP_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }


def compilation_cache_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that give a worker testbed's persistent compilation cache
    (`testbed.compilation_cache.compilation_cache_env`, imported when called: the driver
    computes a worker's environment without loading JAX)."""
    from testbed.compilation_cache import compilation_cache_env as env

    return env(environ)


def enable_compilation_cache() -> dict[str, str]:
    """Testbed's cache for this whole process and its children (the command line's;
    `testbed.compilation_cache.enable_compilation_cache`)."""
    from testbed.compilation_cache import enable_compilation_cache as enable

    return enable()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _made_with(problem_id: str) -> dict[str, str]:
    """The versions a result is made with, and the version of the data it read."""
    import generative

    made_with = versions()
    try:
        digest = generative.data_version(problem_id)
    except Exception:  # an unknown id fails in the job, with its own message
        digest = None
    if digest is not None:  # the user's data file as this result saw it
        made_with["data_sha256"] = digest
    return made_with


def _traceback_of(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-4000:]


def _ranked_score(problem_id: str) -> str | None:
    """The metric the problem's family is ranked on (None: not ranked, or not known)."""
    import generative

    try:
        spec = generative.family_of(problem_id).ranked_by
    except Exception:
        return None
    return None if spec is None else spec.score


def _result(job: Job, value: Any, seconds: float) -> JobResult:
    """The job's result from its Quality or its error. A Quality holding a NaN, or an
    infinite ranked score, fails with the offending metrics named (the metrics are kept,
    so scoring can apply the non-finite rule); an infinite diagnostic (e.g.
    `kl_estimate_std` when one test batch had infinite KL) is data, not a failure."""
    made_with = _made_with(job.problem_id)
    if isinstance(value, BaseException):
        return JobResult(job, "failed", error=_one_line(value),
                         traceback=_traceback_of(value), wall_seconds=seconds,
                         versions=made_with)  # fmt: skip
    metrics = dict(value)
    score = _ranked_score(job.problem_id)
    bad = sorted(
        k for k, v in metrics.items() if math.isnan(v) or (k == score and not math.isfinite(v))
    )
    error = "non-finite metrics: " + ", ".join(f"{k}={metrics[k]}" for k in bad) if bad else None
    return JobResult(job, "failed" if bad else "ok", metrics, error,
                     wall_seconds=seconds, versions=made_with)  # fmt: skip


def _agent(job: Job) -> Any:
    """The job's configured agent, its seed set from the job's seed."""
    import agents

    entry = agents.AGENTS.get(job.agent)
    config = job.config
    if any(f == "seed" for f in entry.config_cls.__dataclass_fields__):
        config["seed"] = int(job.seed)
    return agents.load(job.agent, **config)


def run_unit(unit: Unit) -> list[JobResult]:
    """Trains and scores a job, or a group of jobs one training serves, through
    `testbed.evaluate_many` (one set of rules: a refused problem or a failed scoring fails
    its job, a failed training every job it served); never raises for the jobs' own
    errors. Each job's wall seconds run from the end of the one before (the first: from
    the start, its training and problem building included)."""
    import generative
    import testbed
    from testbed.progress import activity

    jobs = unit.jobs
    start = [time.perf_counter()]
    out: list[JobResult | None] = [None] * len(jobs)

    def done(i: int, value: Any) -> None:
        now = time.perf_counter()
        out[i] = _result(jobs[i], value, now - start[0])
        start[0] = now

    what = f"{jobs[0].agent} on {jobs[0].problem_id}"
    what += f" (one training for {len(jobs)})" if len(jobs) > 1 else ""
    try:
        with activity(what, timed=False):
            agent = _agent(jobs[0])
            problems = [generative.load(j.problem_id, **j.options) for j in jobs]
            testbed.evaluate_many(agent, problems, errors="keep", on_result=done)
    except Exception as exc:  # before any problem: the agent or a problem cannot be built
        for i in range(len(jobs)):
            if out[i] is None:
                done(i, exc)
    return [r for r in out if r is not None]


def run_job(job: Job) -> JobResult:
    """`run_unit` of one job: its result."""
    return run_unit(job)[0]


class JobTimeout(BaseException):
    """Raised into a job that ran past its time limit (a BaseException: an agent's own
    `except Exception` does not swallow it)."""


def run_unit_with_time_limit(unit: Unit, seconds: float | None) -> list[JobResult]:
    """`run_unit` in this process, interrupted after `seconds` (None: no limit); a
    timed-out unit fails each of its jobs with the stack where it was stopped.

    Uses SIGALRM, so only in the main thread; elsewhere the unit runs without a limit and
    a warning says so. A unit inside native code is stopped when it returns to Python. An
    alarm raised where Python swallows exceptions (a garbage-collection callback) is
    remembered: the unit still times out when it returns."""
    if seconds is None:
        return run_unit(unit)
    if threading.current_thread() is not threading.main_thread():
        logging.getLogger("testbed.sweep").warning(
            "timeout: the inline executor can enforce %g s only in the main thread; job %s "
            "runs without a limit", seconds, unit.key,
        )  # fmt: skip
        return run_unit(unit)
    state = {"armed": True, "fired": False, "stack": None}

    def interrupt(signum, frame):
        if state["armed"]:
            state["fired"] = True
            state["stack"] = "".join(traceback.format_stack(frame))[-4000:]
            raise JobTimeout

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)  # inside: a tiny limit fires at once
        results = run_unit(unit)
        state["armed"] = False
    except JobTimeout:
        state["armed"] = False
    finally:
        state["armed"] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if state["fired"]:
        reason = f"timed out after {seconds:g} s (interrupted)"
        stack = "the job's stack when it was stopped:\n" + (state["stack"] or "")
        return failed_results(unit, reason, time.perf_counter() - start, stack)
    return results


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the TESTBED_* variables of a worker: progress as log lines (no status
    line under the sweep's bar) unless the user chose otherwise; TESTBED_WORKER marks it a
    worker (what the driver said already, e.g. a broken agent plugin, it does not say
    again); the sweep's checkpoint directory, or 'off' (`testbed.checkpoints`). Taken from
    the settings in force (`testbed.settings`, imported when called: it imports JAX)."""
    from testbed import settings

    chosen = settings.current()
    progress = chosen.get(settings.PROGRESS)
    checkpoints = chosen.get(settings.CHECKPOINTS)
    return {
        settings.PROGRESS: "lines" if progress is None else progress,
        settings.WORKER: "1",
        settings.CHECKPOINTS: "off" if checkpoints is None else checkpoints,
        **env,
    }


def worker_process_env(threads: int) -> dict[str, str]:
    """The variables a local worker process starts with: its thread counts, testbed's
    compilation cache and its TESTBED_* settings (read by native libraries and JAX when
    they load, so set before anything is imported)."""
    return worker_env({**thread_env(threads), **compilation_cache_env()})


def worker_settings(threads: int) -> Any:
    """The settings a worker with `threads` threads runs under (`testbed.settings.Settings`):
    the driver's in force, with those its process environment gives (`worker_process_env`),
    passed to it explicitly."""
    from testbed import settings

    chosen = settings.current()
    names = settings.VARIABLES + settings.CONTEXT
    return chosen.replace(**{k: v for k, v in worker_process_env(threads).items() if k in names})


def prepare(chosen: Any = None, imports: Iterable[str] = ()) -> None:
    """A worker's start: its settings installed (`chosen`, a `testbed.settings.Settings`;
    None: this process's, the inline executor's), testbed's threefry lowering installed
    (once per process), then the stack and the user's modules imported."""
    from testbed import settings, threefry_cpu

    if chosen is not None:
        settings.install(chosen)
    threefry_cpu.ensure_installed()
    import agents  # noqa: F401
    import generative  # noqa: F401
    import testbed  # noqa: F401

    for name in imports:
        import_user_module(name)


def import_user_module(spec: str):
    """Imports a user's module that registers agents or problems: a module name (found
    from the working directory too) or a path to a `.py` file (imported under its stem)."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or os.sep in spec:
        if not path.is_file():
            raise ImportError(f"no such file: {spec}")
        name = path.stem
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(
            path.resolve()
        ):
            return sys.modules[name]
        for main in ("__main__", "__mp_main__"):  # the driver's script, which a spawned
            module = sys.modules.get(main)  # worker has imported already: registering its
            file = getattr(module, "__file__", None)  # agents twice would be refused
            if file and Path(file).resolve() == path.resolve():
                return module
        loader_spec = importlib.util.spec_from_file_location(name, path.resolve())
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(spec)


def _exit_with_parent(parent: int) -> None:
    """Ends this worker when the driver is gone (e.g. SIGKILLed), even mid-job."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def worker_main(conn, chosen: Any, imports: tuple[str, ...], parent: int) -> None:
    """Process loop: say `ready`, then answer each job dict with a result; stop on None.

    Ctrl-C reaches the whole terminal's process group: a worker ignores it and lets the
    driver stop it (the driver stores what finished and kills the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # drops a Ctrl-C held while starting
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # the driver held it blocked
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    try:
        prepare(chosen, imports)
    except Exception as exc:
        conn.send({"ready": False, "error": _one_line(exc)})
        return
    conn.send({"ready": True, "pid": os.getpid()})
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:  # all results are sent: skip the slow interpreter teardown
            conn.close()
            os._exit(0)
        try:
            conn.send(run_unit(job))
        except (BrokenPipeError, OSError):
            return
