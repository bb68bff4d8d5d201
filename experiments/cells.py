"""A reproduction's cells through the library's sweep driver
(`leaderboard.execution.runner.run_sweep`).

A cell is one stored row of a reproduction that is not an (agent config, problem, seed) job
of `testbed sweep`: a diagnostic's tests in one run (`reproduce_lc2st`), a PPL's measures
on one problem (`reproduce_wyb`), a sampler's trials at one size (`ppl_power`). Its key and
row fields are the reproduction's, and it runs in the reproduction's process, where what
one cell trains or draws serves the next. `run_cells` hands the cells (`CellJob`) to the
driver `testbed sweep` runs its jobs through, so they keep its guarantees by one code path:
a stored cell is skipped (an interrupted run resumes); each cell is leased in the store
just before it runs, so two runs on one store share the work (one waits for the cells the
other holds, and takes over those whose run is gone); each row is committed as it
finishes; a failed cell is stored with its reason in one line and never stops the run,
and runs again only when asked (a failure another run stored meanwhile is not run twice);
Ctrl-C stores a cell that finished before it stops the run, and drops the run's leases.

Only the executor is the reproductions' own (`InThisProcess`): the cells run one by one in
this process, with no time limit (a cell's lease ends when its run is gone), under the
settings the reproduction set (its checkpoints folder: the trainings it keeps as inputs).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True, eq=False)
class CellJob:
    """A reproduction's `cell` (with a `.key`) as the driver runs a job: `compute()` gives
    its metrics; `agent`, `config_key`, `problem_id`, `seed` and `config` (the cell's fields
    unless given) are its stored row's. It is its own unit of work, with no problem options."""

    cell: Any
    compute: Callable[[], dict[str, float]]
    agent: str
    config_key: str
    problem_id: str
    seed: int = 0
    config: dict[str, Any] | None = None
    options_json: ClassVar[str] = ""  # no problem options (`execution.jobs.JobResult.row`)

    @property
    def key(self) -> str:
        return self.cell.key

    @property
    def jobs(self) -> tuple[CellJob, ...]:
        """The jobs of this unit of work: itself (as `leaderboard.execution.jobs.Job.jobs`)."""
        return (self,)

    def as_dict(self) -> dict[str, Any]:
        """The cell's fields as its stored row has them."""
        config = dataclasses.asdict(self.cell) if self.config is None else self.config
        return {"key": self.key, "agent": self.agent, "config": config,
                "config_key": self.config_key, "problem_id": self.problem_id,
                "seed": self.seed}  # fmt: skip

    def run(self) -> Any:
        """Its `JobResult`: ok with the metrics `compute()` returns, or failed with the
        reason in one line and the end of the traceback (a cell's error never stops the
        run); its wall time either way."""
        from leaderboard.execution.jobs import JobResult

        start = time.time()
        try:
            metrics = self.compute()
        except Exception as e:  # noqa: BLE001 (stored, never fatal)
            reason = f"{type(e).__name__}: {e}".replace("\n", " ")[:500]
            trace = traceback.format_exc()[-4000:]
            return JobResult.failed(self, reason, time.time() - start, trace)
        return JobResult(self, metrics=metrics, wall_seconds=time.time() - start)


class InThisProcess:
    """The driver's executor for cells: runs them one by one in this process, with the
    package versions stamped on each result, and says each as it ends (`[i/n] key: status
    (seconds)`, its reason when it failed) on `log`. The cells run under the settings in
    force when it was made (the reproduction's; inside, the driver's say no checkpoints,
    which keep a library job from taking another's training). A Ctrl-C waits while a
    finished cell is stored (`leaderboard.interrupts`)."""

    timeout: ClassVar[None] = None  # no time limit: a lease ends when its run is gone

    def __init__(self, log: logging.Logger, todo: int):
        from leaderboard.provenance import versions
        from testbed import settings

        self.log, self.todo, self.ran = log, todo, 0
        self.versions = versions()
        self.settings = settings.current()

    def run(self, cells: Iterable[CellJob], on_result: Callable[[list[Any]], None]) -> None:
        from leaderboard.execution.executors import recorded_interrupts
        from testbed import settings

        with recorded_interrupts() as interrupts, settings.using(self.settings):
            for cell in cells:
                interrupts.check()
                result = cell.run()
                result.versions = self.versions
                with interrupts.deferred():  # a finished cell is stored, then Ctrl-C stops
                    on_result([result])
                self.ran += 1
                note = "" if result.ok else f": {str(result.error)[:200]}"
                self.log.info("[%d/%d] %s: %s (%.1f s)%s", self.ran, self.todo, result.key,
                              result.status, result.wall_seconds, note)  # fmt: skip


def run_cells(
    cells: Sequence[CellJob], results: str, log: logging.Logger, *, rerun_failed: bool = True
) -> int:
    """Runs the cells not stored as ok (nor as failed, unless `rerun_failed`) into the
    results store `results` through the sweep driver (see the module's docstring), saying
    on `log` how many are stored and each as it ends; returns how many failed here."""
    from leaderboard.execution.runner import run_sweep, todo
    from leaderboard.store import ResultsStore

    with ResultsStore(results, "w") as store:
        left = len(todo(cells, store, retry_failed=rerun_failed))
        log.info("%d cells stored, %d to run", len(cells) - left, left)
        summary = run_sweep(cells, store, InThisProcess(log, left), retry_failed=rerun_failed,
                            progress=False, share_training=False)  # fmt: skip
    return summary.failed
