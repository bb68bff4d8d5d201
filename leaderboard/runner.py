"""The sweep driver: skip finished jobs, run the rest on an executor, commit each result.

Only this process writes the store. A result is committed the moment it arrives, so
killing the driver loses at most the jobs in flight; running the same sweep again
resumes (finished jobs are skipped; failed ones too, unless `retry_failed`).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

from leaderboard.jobs import Job
from leaderboard.store import ResultsStore


@dataclasses.dataclass
class SweepSummary:
    """What a sweep did: jobs asked for, skipped as already stored, run, ok and failed."""

    total: int
    skipped: int
    ran: int = 0
    ok: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def todo(jobs: Sequence[Job], store: ResultsStore, retry_failed: bool = False) -> list[Job]:
    """The jobs still to run: not stored as `ok`, and not `failed` unless retrying."""
    done = store.keys("ok")
    failed = set() if retry_failed else store.keys("failed")
    return [j for j in jobs if j.key not in done and j.key not in failed]


class Progress:
    """A progress bar (jobs done / failed / ETA) on stderr; silent when disabled."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.ok, self.failed = total, 0, 0
        self._bar = None
        if enabled and total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                transient=False,
            )
            self._task = self._bar.add_task("sweep", total=total, failed=0)
            self._bar.start()

    def update(self, status: str) -> None:
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def run_sweep(
    jobs: Sequence[Job],
    store: ResultsStore,
    executor: Any,
    *,
    retry_failed: bool = False,
    progress: bool = False,
) -> SweepSummary:
    """Runs the jobs not yet in `store` on `executor`, committing each result as it lands."""
    start = time.perf_counter()
    remaining = todo(jobs, store, retry_failed)
    summary = SweepSummary(total=len(jobs), skipped=len(jobs) - len(remaining))
    bar = Progress(len(remaining), enabled=progress)

    def on_result(result: dict[str, Any]) -> None:
        store.record(result)
        summary.ran += 1
        if result["status"] == "ok":
            summary.ok += 1
        else:
            summary.failed += 1
            summary.failures.append((result["key"], str(result.get("error"))))
        bar.update(result["status"])

    try:
        executor.run([j.as_dict() for j in remaining], on_result)
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - start
    return summary
