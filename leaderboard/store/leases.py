"""Who is running a job: the lease a sweep's driver takes on a job before it runs it.

Two sweeps on one results file then share the work instead of both doing all of it.
A lease names its owner (host, pid, the process's start time) and may expire; it is
taken over when its owner is gone (same host: the process is dead or the pid was reused)
or it has expired (the job timeout plus the worker start-up allowance).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import uuid
from pathlib import Path


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (Linux), else None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


@dataclasses.dataclass(frozen=True)
class Owner:
    """A sweep driver: one per results-store connection (`tag` separates two in a process).
    `start`: its process's start time in clock ticks since boot (tells a reused pid apart)."""

    host: str
    pid: int
    start: str | None
    tag: str

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        fields = _proc_stat(pid)
        start = fields[19] if fields and len(fields) > 19 else None
        return cls(socket.gethostname(), pid, start, uuid.uuid4().hex[:8])

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}:{self.tag}"

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def alive(self) -> bool | None:
        """False when this owner's process is gone; None when it cannot be told (another host)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        fields = _proc_stat(self.pid)
        if fields is None:  # no /proc (not Linux): the pid exists, reuse cannot be told
            return True
        if fields[0] in ("Z", "X"):  # killed, not yet reaped
            return False
        return self.start is None or fields[19] == self.start

    def holds(self, expires_at: float | None, now: float | None = None) -> bool:
        """Whether its lease still holds: not expired, and this owner not known to be gone."""
        now = time.time() if now is None else now
        return (expires_at is None or now < expires_at) and self.alive() is not False
