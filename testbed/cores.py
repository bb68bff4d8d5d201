"""How many cores this process may use, and how many threads our own thread pools start.

Sweeps run several worker processes, each told its share through `TESTBED_THREADS` (set
with the BLAS / XLA thread variables, see leaderboard.execution.worker.thread_env; read by
`testbed.settings`), so code that starts threads of its own (the metric classifiers'
trainer) does not oversubscribe cores.
"""

from __future__ import annotations

import os

from testbed import settings

THREADS_ENV = settings.THREADS


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def thread_budget() -> int:
    """Threads our thread pools may start: the usable cores, capped by $TESTBED_THREADS."""
    threads = settings.current().threads
    return usable_cores() if threads is None else min(threads, usable_cores())
