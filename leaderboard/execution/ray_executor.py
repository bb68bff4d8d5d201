"""`RayExecutor`: the jobs as Ray tasks on a cluster (or a local Ray); results come back
to the driver, which alone writes the store.

Each task gets its worker settings explicitly
(`leaderboard.execution.worker.worker_settings`); the variables native libraries read when
they load (thread counts) go to Ray's workers through its runtime environment. A cluster
whose head stops answering stops the sweep as the cluster's fault (`HeadWatch`), with
every finished job stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from leaderboard.execution.jobs import JobResult, Unit, failed_results, time_limit
from leaderboard.execution.timeouts import DEFAULT_TIMEOUT, check_timeout, known_count
from leaderboard.execution.worker import worker_env, worker_settings
from testbed.config import check_at_least
from testbed.errors import EnvironmentFault, InputError
from testbed.interrupts import Interrupts, recorded_interrupts

log = logging.getLogger("testbed.sweep")

OnResult = Callable[[list[JobResult]], None]  # a unit's results, one per job


@dataclasses.dataclass(frozen=True)
class RayConfig:
    """Ray tasks on the cluster at `address` (None: `RAY_ADDRESS` if set, else a local Ray
    of the sweep's own; `cluster_address`).

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


def _ray_task(job: Unit, chosen: Any, imports: tuple[str, ...]) -> list[JobResult]:
    """One job in a Ray worker: its settings in force, the user's modules imported, run."""
    from leaderboard.execution.worker import prepare, run_unit

    prepare(chosen, imports)
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


ADDRESS_FIELD = "ray address"  # how errors name --address (RayConfig.address)


def cluster_address(address: str | None) -> tuple[str, str]:
    """(the address `ray.init` gets, the name errors give it): the one given (`ray
    address`), else `RAY_ADDRESS` (Ray's own variable, set by the user), else "local", a
    Ray of the sweep's own. Ray's default (None) would join the cluster a `ray start` on
    this machine last left behind, stale or not."""
    if address is not None and address.strip():
        return address, ADDRESS_FIELD
    from testbed import settings

    named = settings.current().ray_address
    return (named, settings.RAY_ADDRESS) if named else ("local", ADDRESS_FIELD)


def _or_local(field: str) -> str:
    """How a user gets a local Ray instead, in the words of the field at fault."""
    return "or unset it for a local Ray" if field != ADDRESS_FIELD else "or none for a local Ray"


def ray_endpoint(address: str | None, field: str = ADDRESS_FIELD) -> tuple[str, int] | None:
    """(host, port) that a Ray address names (`host:port`, `ray://host:port`), or None for
    an address Ray resolves itself (none, `auto`, `local`). `field` names it in errors."""
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
            f"{field}: got {address!r}; allowed: host:port of a running Ray cluster "
            f"(e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001), {_or_local(field)}"
        )
    if not port:
        return host, RAY_DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"{field}: got {address!r}, whose port {port!r} is no port number; allowed: "
            "host:port with a port in 1..65535"
        )
    return host, int(port)


def check_reachable(
    address: str | None, seconds: float = RAY_CONNECT_SECONDS, field: str = ADDRESS_FIELD
) -> None:
    """An EnvironmentFault when nothing answers at the Ray address within `seconds`
    (before Ray itself tries, which retries for minutes and logs every attempt)."""
    endpoint = ray_endpoint(address, field)
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
                f"{field}: got {address!r}, whose host {host!r} is not known ({reason}); "
                f"allowed: the address of a running Ray cluster, {_or_local(field)}"
            ) from None
        if isinstance(e, TimeoutError) or e.errno == errno.ETIMEDOUT:
            reason = f"no answer within {seconds:g} s"
    raise EnvironmentFault(
        f"{field}: cannot reach the Ray cluster at {address!r} ({host}:{port}: {reason}); "
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
        """The variables Ray's worker processes start with (their runtime environment)."""
        from leaderboard.execution.worker import compilation_cache_env, thread_env

        env = thread_env(self.config.threads_per_worker)
        local = ray_endpoint(cluster_address(self.config.address)[0]) is None
        if local:  # a local Ray: this machine's cache
            env.update(compilation_cache_env())
        return worker_env(env)

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
        address, field = cluster_address(self.config.address)
        check_reachable(address, field=field)  # Ray would retry for minutes, logging each
        # Ray's log while it connects to a cluster: shown with -v if it works, never if it
        # fails
        # (a local Ray starts processes that would keep the held stderr: not held then)
        hold = _stderr_held() if ray_endpoint(address) else contextlib.nullcontext()
        with hold as said, _stdout_to_stderr():
            try:
                ray.init(
                    address=address,
                    runtime_env={"env_vars": self._env()},
                    log_to_driver=False,
                    **dict(self.config.init_kwargs),
                )
            except (ConnectionError, ValueError) as e:
                if said is not None:
                    said.drop()
                reason = " ".join(str(e).split())[:300]
                raise InputError(
                    f"{field}: got {address!r} ({reason}); allowed: the address of a "
                    f"running Ray cluster, {_or_local(field)}"
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
        if known_count(jobs) == 0:
            return
        connected_here = not self._started_ray
        ray = self.connect()
        connected_here = connected_here and self._started_ray
        env = worker_settings(self.config.threads_per_worker)
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
