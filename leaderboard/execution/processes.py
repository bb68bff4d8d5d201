"""Local worker processes: started as fresh interpreters with the environment they need,
SIGINT held from their first instruction, connected to the driver by a pipe.

A worker's thread counts and compilation cache are variables that numpy, BLAS and JAX
read when they are loaded, so they go into the new process's environment (`env`), never
into the driver's. The child runs `BOOT`: it takes the driver's import path, imports the
driver's script as multiprocessing's spawn does (`multiprocessing.spawn.prepare`: the
script's agents and problems are registered in the worker too), then runs the function it
is sent. While it imports the script, `importing_main()` is true: a script that runs its
sweep at import (no `if __name__ == "__main__":`) would start one in every worker, and an
executor ends such a worker with MAIN_GUARD_EXIT instead (see `main_guard_error`).

SIGINT is blocked in the driver around the start only (a signal mask survives fork and
exec), so a terminal's Ctrl-C never interrupts a worker that is still importing; the
worker ignores SIGINT, which drops one held for it, then unblocks it (`worker_main`). A
Ctrl-C that lands in the driver meanwhile waits there and is handled when the mask is
restored: never lost.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.spawn
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from testbed import settings
from testbed.errors import InputError

# The exit code of a worker that found itself running a sweep while it imported the
# driver's script: the driver then says what to add instead of "workers cannot start".
MAIN_GUARD_EXIT = 86
# What the child runs: the driver's import path first (it sends it), then `child_main`.
BOOT = (
    "import sys\n"
    "from multiprocessing.connection import Connection\n"
    "conn = Connection(int(sys.argv[1]))\n"
    "try:\n"
    "    sys.path[:0] = conn.recv()\n"
    "except EOFError:\n"  # the driver stopped (a Ctrl-C) before sending: nothing to do
    "    sys.exit(0)\n"
    "from leaderboard.execution.processes import child_main\n"
    "child_main(conn)\n"
)

_importing = [False]  # true in a worker while it imports the driver's script


def importing_main() -> bool:
    """True in a worker while it imports the driver's `__main__` (its bootstrap)."""
    return _importing[0]


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


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread inside (only in the main thread: elsewhere nothing
    changes). Processes started inside start with it blocked; a Ctrl-C that lands
    meanwhile is handled here when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class WorkerProcess:
    """A child interpreter running `target(conn, *args)`; `conn` is the driver's end of
    their pipe. Its environment is this process's with `env` over it."""

    def __init__(self, target: Callable[..., Any], args: tuple, env: Mapping[str, str]):
        self.conn, child = multiprocessing.Pipe()
        try:
            with sigint_blocked():
                self._popen = subprocess.Popen(
                    [sys.executable, "-c", BOOT, str(child.fileno())],
                    env=settings.child_environ(env),
                    stdin=subprocess.DEVNULL,  # a job never reads the terminal's input
                    pass_fds=(child.fileno(),),
                )
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()
        self.pid = self._popen.pid
        self.sentinel = _pidfd(self.pid)
        try:
            self.conn.send(list(sys.path))
            self.conn.send(_preparation())
            self.conn.send((target, args))
        except OSError:  # it died at once: its exit code says why
            pass

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        """Its exit code (negative: the signal that ended it), None while it runs."""
        return self._popen.poll()

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self._popen.kill()

    def close(self) -> None:
        """Closes the driver's handles (the process itself is not stopped)."""
        self.conn.close()
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                os.close(self.sentinel)
            self.sentinel = None


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` ends (Linux), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _preparation() -> dict[str, Any]:
    """What the child needs to import the driver's script as a spawned worker would."""
    data = multiprocessing.spawn.get_preparation_data("testbed-worker")
    data["authkey"] = bytes(data["authkey"])  # the key itself pickles only as bytes
    data.pop("start_method", None)  # the child starts no processes of multiprocessing's
    return data


def child_main(conn: multiprocessing.connection.Connection) -> None:
    """The child's side: imports the driver's script (`importing_main()` true meanwhile),
    then runs the target it is sent. A driver that stops (a Ctrl-C) before sending them
    ends it quietly: its own line is the one a user reads."""
    data = _received(conn)
    if data is _STOPPED:
        return
    _importing[0] = True
    try:
        multiprocessing.spawn.prepare(data)  # the script's own errors are its own: not caught
    finally:
        _importing[0] = False
    work = _received(conn)
    if work is _STOPPED:
        return
    target, args = work
    target(conn, *args)


_STOPPED = object()


def _received(conn: multiprocessing.connection.Connection) -> Any:
    """The driver's next message, or _STOPPED once the driver has gone without sending it."""
    try:
        return conn.recv()
    except EOFError:
        return _STOPPED
