"""Ctrl-C in a command or a sweep's driver, recorded so that it cannot be lost.

While an executor runs (or inside `recorded_interrupts()`), SIGINT in the driver is
recorded as well as raised, so a KeyboardInterrupt that Python drops (raised inside a gc
callback, as JAX registers one, or a `__del__`) is raised again at the next safe point:
an executor's next look at its workers, or `safe_point()`, which long work in this
process calls (an sbi training's epochs, a wait for a JAX computation); a result that has
arrived is stored before the interrupt stops the sweep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Interrupts:
    """Ctrl-C (SIGINT) in a sweep's driver, recorded so that it cannot be lost.

    Python raises KeyboardInterrupt in whatever the main thread runs when the signal
    arrives; raised inside a gc callback (JAX's `_xla_gc_callback`), a `__del__` or a
    weakref callback, it is printed as "Exception ignored in: ..." and dropped, and a
    sweep would go on to its end. While installed (`recorded_interrupts`), the handler
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


def safe_point() -> None:
    """Raises KeyboardInterrupt when a Ctrl-C was recorded and Python dropped it (see
    `Interrupts`); nothing otherwise, or outside `recorded_interrupts()` and the main
    thread. Called where long work in the main thread can stop: without it, a training
    whose interrupt landed in JAX's gc callback ran on to its end."""
    if _INTERRUPTS is not None and threading.current_thread() is threading.main_thread():
        _INTERRUPTS.check()
