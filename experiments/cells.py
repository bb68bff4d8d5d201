"""A reproduction's cells through a results store: one row a cell, committed as it finishes.

A cell already stored is skipped (so an interrupted run resumes), and one whose lease another
run on the same store holds is left to it (so two runs share the work); a failed cell runs
again only when asked. Used by `reproduce_lc2st`, `reproduce_wyb` and `ppl_power`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any


def run_cells(
    cells: Sequence[Any],
    results: str,
    run_one: Callable[[Any], dict[str, Any]],
    log: logging.Logger,
    *,
    rerun_failed: bool = True,
) -> int:
    """Runs `run_one(cell) -> row` for each cell (with a `.key`) not stored as ok (nor as
    failed, unless `rerun_failed`), records each row with the package versions, logs
    progress; returns the number of cells that failed."""
    from leaderboard.store import CLAIMED, ResultsStore
    from leaderboard.worker import versions

    failed = 0
    with ResultsStore(results, "w") as store:
        done = store.keys("ok") if rerun_failed else store.keys()
        todo = [c for c in cells if c.key not in done]
        log.info("%d cells stored, %d to run", len(cells) - len(todo), len(todo))
        stamp = versions()
        for i, cell in enumerate(todo):
            again = 10**9 if rerun_failed else None
            if store.claim(cell.key, rerun_failed=again, seconds=None) != CLAIMED:
                continue  # finished or running elsewhere
            row = run_one(cell)
            row["versions"] = stamp
            store.record(row)
            failed += row["status"] != "ok"
            note = "" if row["status"] == "ok" else f": {str(row.get('error'))[:200]}"
            log.info(
                "[%d/%d] %s: %s (%.1f s)%s",
                i + 1,
                len(todo),
                cell.key,
                row["status"],
                row["wall_seconds"],
                note,
            )
    return failed
