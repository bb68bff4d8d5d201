"""What runs inside a worker: one job -> one result dict, and the worker process loop.

Kept free of JAX imports at module level: a worker sets its thread counts in the
environment *before* JAX, XLA or torch are imported, so parallel workers do not
oversubscribe the cores.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import platform
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_VERSIONS: dict[str, str] | None = None


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
    (`testbed.compilation_cache.compilation_cache_env`, imported when called: it imports
    JAX, which a worker must not before its thread variables are set)."""
    from testbed.compilation_cache import compilation_cache_env as env

    return env(environ)


def enable_compilation_cache() -> dict[str, str]:
    """Testbed's cache for this whole process and its children (the command line's;
    `testbed.compilation_cache.enable_compilation_cache`)."""
    from testbed.compilation_cache import enable_compilation_cache as enable

    return enable()


def versions() -> dict[str, str]:
    """Versions that decide whether numbers are comparable (cached per process)."""
    global _VERSIONS
    if _VERSIONS is None:
        from importlib import metadata

        out = {"python": platform.python_version()}
        for dist in ("testbed", "jax", "jaxlib", "numpy", "dm-haiku", "torch", "sbi"):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        _VERSIONS = out
    return dict(_VERSIONS)


def failed_result(job: Mapping[str, Any], reason: str, seconds: float = math.nan) -> dict:
    """A failed result for `job` (used by executors for timeouts and dead workers)."""
    return {
        **job,
        "status": "failed",
        "error": reason,
        "traceback": None,
        "metrics": {},
        "wall_seconds": seconds,
        "versions": {},
        "host": socket.gethostname(),
    }


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _new_result(job: Mapping[str, Any]) -> dict[str, Any]:
    import generative

    made_with = versions()
    try:
        digest = generative.data_version(job["problem_id"])
    except Exception:  # an unknown id fails in the job, with its own message
        digest = None
    if digest is not None:  # the user's data file as this result saw it
        made_with["data_sha256"] = digest
    return {
        **job,
        "status": "ok",
        "error": None,
        "traceback": None,
        "metrics": {},
        "versions": made_with,
        "host": socket.gethostname(),
    }


def _fail(result: dict[str, Any], exc: BaseException) -> None:
    result["status"] = "failed"
    result["error"] = _one_line(exc)
    result["traceback"] = traceback.format_exc()[-4000:]


def _ranked_score(problem_id: str) -> str | None:
    """The metric the problem's family is ranked on (None: not ranked, or not known)."""
    import generative

    try:
        spec = generative.family_of(problem_id).ranked_by
    except Exception:
        return None
    return None if spec is None else spec.score


def _check_quality(result: dict[str, Any], quality: Mapping[str, float]) -> None:
    """Stores `quality`; a NaN, or an infinite ranked score (the one its family is ranked
    on), fails the result."""
    result["metrics"] = dict(quality)
    score = _ranked_score(result["problem_id"])
    bad = sorted(
        k for k, v in quality.items() if math.isnan(v) or (k == score and not math.isfinite(v))
    )
    if bad:
        result["status"] = "failed"
        result["error"] = "non-finite metrics: " + ", ".join(f"{k}={quality[k]}" for k in bad)


def _agent(job: Mapping[str, Any]) -> Any:
    """The job's configured agent, its seed set from the job's seed."""
    import agents

    entry = agents.AGENTS.get(job["agent"])
    config = dict(job["config"])
    if any(f == "seed" for f in entry.config_cls.__dataclass_fields__):
        config["seed"] = int(job["seed"])
    return agents.load(job["agent"], **config)


def run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """Trains and scores one job; never raises for the job's own errors.

    A job that raises is `failed` with the exception as its reason; one whose Quality
    holds a NaN, or an infinite ranked score, is `failed` with the offending metrics
    named (its metrics are kept, so scoring can apply the non-finite rule). An infinite
    diagnostic (e.g. `kl_estimate_std` when one test batch had infinite KL) is kept as
    data, not a failure. A group of jobs (`members`, see `group_dict`) is `run_group`.
    """
    if "members" in job:
        return run_group(job)
    import generative
    import testbed
    from testbed.evaluate import check_prediction
    from testbed.progress import activity

    start = time.perf_counter()
    result = _new_result(job)
    try:
        with activity(f"{job['agent']} on {job['problem_id']}", timed=False):
            agent, problem = _agent(job), generative.load(job["problem_id"])
            check_prediction(agent, problem, name=job["problem_id"])  # names the id
            _check_quality(result, testbed.evaluate(agent, problem))
    except Exception as exc:  # the job's failure is data, not a crash of the sweep
        _fail(result, exc)
    result["wall_seconds"] = time.perf_counter() - start
    return result


def group_dict(members: list[dict[str, Any]]) -> dict[str, Any]:
    """One unit of work for jobs an amortized agent trains for once: the executor runs
    it as one job (its time limit scaled by the number of members)."""
    return {"key": f"{members[0]['key']} (+{len(members) - 1} sharing its training)",
            "members": members}  # fmt: skip


def run_group(group: Mapping[str, Any]) -> dict[str, Any]:
    """Trains once for all members (same agent config, seed and training key) and scores
    each: one result per member in `results`. A failed training fails every member; a
    failed scoring only its own. A posterior that can draw at several observations in one
    call (NLE / NRE's MCMC) draws at all members' before scoring (`testbed.evaluate.presample`)."""
    import generative
    from testbed.evaluate import presample, score_trained, train_shared
    from testbed.progress import activity

    members = group["members"]
    results = [_new_result(m) for m in members]
    start = time.perf_counter()
    agent, first = members[0]["agent"], members[0]["problem_id"]
    try:
        with activity(f"{agent} on {first} (one training for {len(members)})", timed=False):
            problems = [generative.load(m["problem_id"]) for m in members]
            trained = presample(train_shared(_agent(members[0]), problems), problems)
    except Exception as exc:
        for result in results:
            _fail(result, exc)
            result["wall_seconds"] = time.perf_counter() - start
        return {**group, "results": results}
    for i, (result, problem) in enumerate(zip(results, problems)):
        try:
            with activity(f"{agent} on {members[i]['problem_id']}", timed=False):
                _check_quality(result, score_trained(problem, trained.for_problem(i)))
        except Exception as exc:
            _fail(result, exc)
        result["wall_seconds"] = time.perf_counter() - start  # the first: training, presample
        start = time.perf_counter()
    return {**group, "results": results}


def member_results(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-job results inside `result`: a group's results (or, when the executor
    failed the whole group, e.g. on a timeout, that failure for each member), else itself."""
    if "members" not in result:
        return [dict(result)]
    if "results" in result:
        return list(result["results"])
    reason, seconds = str(result.get("error")), result.get("wall_seconds", math.nan)
    return [failed_result(m, reason, seconds) for m in result["members"]]


def time_limit(job: Mapping[str, Any], seconds: float | None) -> float | None:
    """A job's time limit: `seconds` per member of a group."""
    return None if seconds is None else seconds * len(job.get("members", (job,)))


class JobTimeout(BaseException):
    """Raised into a job that ran past its time limit (a BaseException: an agent's own
    `except Exception` does not swallow it)."""


def run_job_with_time_limit(job: Mapping[str, Any], seconds: float | None) -> dict[str, Any]:
    """`run_job` in this process, interrupted after `seconds` (None: no limit).

    Uses SIGALRM, so only in the main thread; elsewhere the job runs without a limit and
    a warning says so. A job inside native code is stopped when it returns to Python.
    """
    if seconds is None:
        return run_job(job)
    if threading.current_thread() is not threading.main_thread():
        logging.getLogger("testbed.sweep").warning(
            "timeout: the inline executor can enforce %g s only in the main thread; job %s "
            "runs without a limit",
            seconds,
            job.get("key"),
        )
        return run_job(job)

    armed = [True]  # the one-shot alarm interrupts only while the job runs

    def interrupt(signum, frame):
        if armed[0]:
            raise JobTimeout

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)  # inside: a tiny limit fires at once
        result = run_job(job)
        armed[0] = False
    except JobTimeout:
        armed[0] = False
        result = failed_result(
            job, f"timed out after {seconds:g} s (interrupted)", time.perf_counter() - start
        )
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return result


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a worker process: progress as log lines (no status line under the
    sweep's bar) unless the user chose otherwise; TESTBED_WORKER marks it a worker (what
    the driver said already, e.g. a broken agent plugin, it does not say again)."""
    progress = os.environ.get("TESTBED_PROGRESS", "lines")
    return {"TESTBED_PROGRESS": progress, "TESTBED_WORKER": "1", **env}


def prepare(env: Mapping[str, str], imports: Iterable[str] = ()) -> None:
    """Sets the worker's environment, then imports the stack and the user's modules."""
    os.environ.update(env)
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


def worker_main(conn, env: Mapping[str, str], imports: tuple[str, ...], parent: int) -> None:
    """Process loop: say `ready`, then answer each job dict with a result; stop on None.

    Ctrl-C reaches the whole terminal's process group: a worker ignores it and lets the
    driver stop it (the driver stores what finished and kills the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    try:
        prepare(env, imports)
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
            conn.send(run_job(job))
        except (BrokenPipeError, OSError):
            return
