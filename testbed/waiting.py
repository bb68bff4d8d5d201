"""Waiting for native work so that Ctrl-C still stops it.

Python raises KeyboardInterrupt only when the main thread runs Python code; a native
call that waits (XLA's wait for a computation: `np.asarray` of a JAX array,
`block_until_ready`) holds the interrupt back until it returns, minutes later for a long
sampler or training. `waited(fn)` runs `fn()` in a worker thread while the main thread
waits on it in Python, so Ctrl-C is raised at once; the abandoned work runs on in the
worker (XLA cannot cancel a computation) until the process ends (a command ends at once
after an interrupt: `experiments.console.end_interrupted`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from testbed.interrupts import safe_point

T = TypeVar("T")
POLL = 0.1  # seconds between the main thread's looks at a signal (a lock wait wakes too)


def waited(fn: Callable[[], T]) -> T:
    """`fn()`, run in a worker thread while this one (the main thread) waits; in any other
    thread `fn()` runs here (only the main thread receives KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    out: list[Any] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 (raised again in the waiting thread)
            failed.append(e)

    worker = threading.Thread(target=work, name="testbed-waited", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL)
        safe_point()  # a Ctrl-C that Python dropped (in a gc callback) while we waited
    if failed:
        raise failed[0]
    return out[0]
