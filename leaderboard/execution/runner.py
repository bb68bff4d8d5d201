"""The sweep driver: skip finished jobs, run the rest on an executor, commit each result.

Only drivers write the store. A result is committed the moment it arrives, so killing
the driver loses at most the jobs in flight; running the same sweep again resumes
(finished jobs are skipped; failed ones too, unless `retry_failed`). Each job is claimed
(a lease in the store) just before an executor starts it, so two sweeps on one store
share the work; a sweep then waits for the jobs another one is running, and takes over
those whose driver is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from leaderboard.execution.jobs import Job, JobGroup, JobResult, training_groups
from leaderboard.store import CLAIMED, DONE, ResultsStore
from testbed.checkpoints import beside_store
from testbed.errors import EnvironmentFault, InputError
from testbed.progress import activity, held, listening, progress_mode
from testbed.progress import log as progress_log

log = logging.getLogger("testbed.sweep")
STARTUP_ALLOWANCE = 300.0  # seconds a lease outlives the job timeout (a worker's start-up)
POLL_SECONDS = 1.0  # how often a sweep looks at jobs another sweep is running
DEFAULT_LEASE_TIMEOUT = 24 * 3600.0  # for executors that do not say their timeout


@dataclasses.dataclass
class SweepSummary:
    """What a sweep did. `skipped`: stored before it started (ok, or failed and not
    retried: `stored_failed` of them); `ran`, `ok`, `failed`: run by this driver;
    `by_others`: finished by another sweep on the same store meanwhile. `failures` lists
    (key, reason) of this driver's failed jobs, `other_failures` the sweep's other jobs
    stored as failed when it ended (earlier, or by another sweep)."""

    total: int
    skipped: int
    # this driver's jobs
    ran: int = 0
    ok: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # the sweep's other jobs: stored as failed (earlier, or by another sweep), finished by another
    stored_failed: int = 0
    by_others: int = 0
    other_failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def any_failed(self) -> bool:
        """Whether some job of the sweep is stored as failed (the CLI exits 1)."""
        return bool(self.failures or self.other_failures)


def check_data_unchanged(jobs: Sequence[Job], store: ResultsStore) -> None:
    """An InputError when a job's stored results were made from another version of the
    data its problem reads (`generative.data_version`: a data file at the same path with
    other contents): they would be reused as if they were of this one. The stored
    results stay as they are."""
    import generative

    now = {}
    for pid in {j.problem_id for j in jobs}:
        try:
            version = generative.data_version(pid)
        except Exception:  # an unknown id fails in its job
            version = None
        if version is not None:
            now[pid] = version
    ids = set(now)
    if not ids:
        return
    for row in store.rows():
        if row["problem_id"] not in ids:
            continue
        made = row.get("versions") or {}
        made = json.loads(made) if isinstance(made, str) else made
        then = made.get("data_sha256") if isinstance(made, dict) else None
        current = now[row["problem_id"]]
        if then and current and then != current:
            raise InputError(
                f"{row['problem_id']}: its file changed since its results were stored (sha256 "
                f"{then[:12]} then, {current[:12]} now), so they would be reused as this "
                "file's; allowed: a new --results file for the changed data (the stored "
                "results stay as they are), or the file as it was"
            )


def todo(jobs: Sequence[Job], store: ResultsStore, retry_failed: bool = False) -> list[Job]:
    """The jobs still to run: not stored as `ok`, and not `failed` unless retrying."""
    done = store.keys("ok")
    failed = set() if retry_failed else store.keys("failed")
    return [j for j in jobs if j.key not in done and j.key not in failed]


class _Claims:
    """A round's jobs, each claimed in the store when an executor takes it; jobs that
    another live sweep holds go to `busy`, jobs that got finished meanwhile to `done`.
    A group of jobs one training serves (see `training_groups`) is claimed member by
    member (its lease as long as its time limit) and handed out as one job."""

    def __init__(self, units: Sequence[Job | JobGroup], claim):
        self._units = deque(units)
        self._claim = claim
        self.busy: dict[str, tuple[Job, str]] = {}
        self.done: list[str] = []

    def __len__(self) -> int:  # an upper bound: executors size their pools with it
        return len(self._units)

    def __iter__(self) -> Iterator[Job | JobGroup]:
        return self

    def __next__(self) -> Job | JobGroup:
        while self._units:
            unit = self._units.popleft()
            mine = [job for job in unit.jobs if self._take(job, len(unit.jobs))]
            if len(mine) == 1:
                return mine[0]
            if mine:
                return JobGroup(tuple(mine))
        raise StopIteration

    def _take(self, job: Job, members: int) -> bool:
        outcome = self._claim(job, members)
        if outcome == DONE:
            self.done.append(job.key)
        elif outcome != CLAIMED:
            self.busy[job.key] = (job, outcome)
        return outcome == CLAIMED


class Progress:
    """What a sweep says while it runs (when `enabled`): on a terminal a progress bar
    (jobs done / failed / ETA); elsewhere a log line every ~10 s (done, failed, running,
    ETA; `testbed.progress`, when logging listens). Each finished job is a DEBUG line
    (`-v`), each failure an INFO line. TESTBED_PROGRESS=off silences it, `lines` gives
    lines on a terminal too."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.ok, self.failed, self.running = total, 0, 0, 0
        self.start = time.monotonic()
        self._bar = None
        self._stack = contextlib.ExitStack()
        if not (enabled and total) or progress_mode() == "off":
            return
        if progress_mode() == "auto" and sys.stderr.isatty():
            self._start_bar(total)
            self._stack.enter_context(held())  # the bar speaks for the jobs
        elif listening():
            self._stack.enter_context(activity(self.describe, timed=False))

    def _start_bar(self, total: int) -> None:
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

    def describe(self) -> str:
        """`sweep: 12/70 done (1 failed), 2 jobs in progress, 1 min 30 s, ETA 7 min` (jobs
        that share one training run are in progress together)."""
        done = self.ok + self.failed
        elapsed = time.monotonic() - self.start
        eta = (
            "ETA unknown" if not done else f"ETA {_duration(elapsed / done * (self.total - done))}"
        )
        failed = f" ({self.failed} failed)" if self.failed else ""
        jobs = "job" if self.running == 1 else "jobs"
        return (
            f"sweep: {done}/{self.total} done{failed}, {self.running} {jobs} in progress, "
            f"{_duration(elapsed)}, {eta}"
        )

    def claimed(self) -> None:
        self.running += 1

    def update(self, status: str, result: JobResult | None = None) -> None:
        self.running = max(0, self.running - 1)
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)
        if result is not None:
            what = f"{result.job.agent} on {result.job.problem_id}"
            seconds = result.wall_seconds
            took = (
                f" ({seconds:.1f} s)" if isinstance(seconds, float) and seconds == seconds else ""
            )
            if status == "ok":
                progress_log.debug("ok: %s%s", what, took)
            else:
                progress_log.info("failed: %s%s: %s", what, took, result.error)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._stack.close()


def _duration(seconds: float) -> str:
    """`45 s`, `3 min 10 s`, `2 h 05 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def run_sweep(
    jobs: Sequence[Job],
    store: ResultsStore,
    executor: Any,
    *,
    retry_failed: bool = False,
    progress: bool = False,
    share_training: bool = True,
) -> SweepSummary:
    """Runs the jobs not yet in `store` on `executor`, committing each result as it lands
    (the results of a group that shares one training in one transaction: all or none).

    An amortized agent config trains once for the jobs it serves (`training_groups`;
    `share_training=False` trains once per job, and keeps no checkpoints). Workers keep
    checkpoints of long trainings in `<results>.checkpoints`
    (`testbed.checkpoints.beside_store`), removed once every job is stored as ok. Returns
    when every job of the sweep is stored (by this driver or another one).
    """
    start = time.perf_counter()
    check_data_unchanged(jobs, store)
    attempts = store.attempts("failed") if retry_failed else {}
    remaining = todo(jobs, store, retry_failed)
    summary = SweepSummary(total=len(jobs), skipped=len(jobs) - len(remaining))
    if not retry_failed:
        earlier = store.keys("failed")
        summary.stored_failed = sum(j.key in earlier for j in jobs)
    bar = Progress(len(remaining), enabled=progress)
    timeout = getattr(executor, "timeout", DEFAULT_LEASE_TIMEOUT)

    def claim(job: Job, members: int = 1) -> str:
        rerun = attempts.get(job.key, 0) if retry_failed else None
        seconds = None if timeout is None else timeout * members + STARTUP_ALLOWANCE
        outcome = store.claim(job.key, rerun_failed=rerun, seconds=seconds)
        if outcome == CLAIMED:
            bar.claimed()
        return outcome

    def on_result(results: list[JobResult]) -> None:
        # a training group's rows in one transaction: a kill never stores a part of it
        store.record_many(result.row() for result in results)
        for result in results:
            summary.ran += 1
            if result.ok:
                summary.ok += 1
            else:
                summary.failed += 1
                summary.failures.append((result.key, str(result.error)))
            bar.update(result.status, result)

    def finished() -> bool:  # every job stored as ok: the trainings' checkpoints are spent
        return not todo(jobs, store, retry_failed=True)

    stopped: EnvironmentFault | None = None  # the machine or a cluster failed
    try:
        batch = training_groups(remaining) if share_training else remaining
        with beside_store(store.file, finished, enabled=share_training):  # beside the file itself
            while batch:
                claims = _Claims(batch, claim)
                executor.run(claims, on_result)
                summary.by_others += len(claims.done)
                batch = _wait_for_others(store, claims.busy, summary, claim)
    except EnvironmentFault as e:  # said with what is stored, once the leases are dropped
        stopped = e
    finally:
        bar.close()
        _release(store, stopped)
        summary.seconds = time.perf_counter() - start
    if stopped is not None:
        raise EnvironmentFault(f"{stopped} ({_stored_so_far(jobs, store, summary)})") from None
    _stored_failures(jobs, store, summary)
    return summary


def _release(store: ResultsStore, stopped: EnvironmentFault | None) -> None:
    """Drops this driver's leases; failing to (the same full disk) is not said over the
    fault that stopped the sweep."""
    try:
        store.release()
    except EnvironmentFault:
        if stopped is None:
            raise


def _stored_so_far(jobs: Sequence[Job], store: ResultsStore, summary: SweepSummary) -> str:
    """What a sweep stopped by a fault leaves: the jobs this run stored, and how many of
    the sweep's are stored in all (`run the sweep again` resumes from there)."""
    try:
        stored = store.keys()
        held = sum(j.key in stored for j in jobs)
    except Exception:  # the store itself failed: what this run counted
        return f"{summary.ran} jobs stored by this run before it stopped"
    return (
        f"{summary.ran} jobs stored by this run ({summary.ok} ok, {summary.failed} failed); "
        f"{held} of the sweep's {summary.total} are stored: run it again to resume"
    )


def _wait_for_others(
    store: ResultsStore, busy: dict[str, tuple[Job, str]], summary: SweepSummary, claim
) -> list[Job]:
    """Waits while other sweeps run the jobs in `busy`; returns those to run here (their
    lease was dropped or its owner is gone), or [] when all are stored."""
    said = 0.0
    while busy:
        free = []
        for key, (job, _) in list(busy.items()):
            outcome = claim(job)
            if outcome == DONE:
                summary.by_others += 1
                del busy[key]
            elif outcome == CLAIMED:  # ours now; the next round's claim keeps it
                free.append(job)
                del busy[key]
            else:
                busy[key] = (job, outcome)
        if free:
            return free
        if busy and time.monotonic() - said > 10:
            owners = sorted({owner for _, owner in busy.values()})
            log.info(
                "waiting for %d job(s) that another sweep is running (%s); this sweep runs "
                "them itself if that one stops or its lease ends",
                len(busy),
                "; ".join(owners),
            )
            said = time.monotonic()
        if busy:
            time.sleep(POLL_SECONDS)
    return []


def _stored_failures(jobs: Sequence[Job], store: ResultsStore, summary: SweepSummary) -> None:
    """Lists the sweep's jobs stored as failed that this driver did not run."""
    mine = {key for key, _ in summary.failures}
    reasons = store.failures()
    summary.other_failures = [
        (j.key, reasons[j.key]) for j in jobs if j.key in reasons and j.key not in mine
    ]
