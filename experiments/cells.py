"""A reproduction's cells through a results store: one row a cell, committed as it finishes.

A cell already stored is skipped (so an interrupted run resumes), and one whose lease another
run on the same store holds is left to it (so two runs share the work); a failed cell runs
again only when asked. Used by `reproduce_lc2st`, `reproduce_wyb` and `ppl_power`.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.errors import InputError


def stored_row(
    compute: Callable[[], dict[str, float]],
    cell: Any,
    *,
    agent: str,
    config_key: str,
    problem_id: str,
    seed: int = 0,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A cell's row (its key, and its fields as the config unless `config` is given) with
    the metrics `compute()` returns, or its failure with the reason in one line and the
    traceback (a cell's error never stops the run), and its wall time."""
    start = time.time()
    config = dataclasses.asdict(cell) if config is None else config
    row = {"key": cell.key, "agent": agent, "config_key": config_key, "config": config,
           "problem_id": problem_id, "seed": seed, "host": socket.gethostname(),
           "metrics": {}}  # fmt: skip
    try:
        row["metrics"] = compute()
        row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 (stored, never fatal)
        row.update(
            status="failed",
            error=f"{type(e).__name__}: {e}".replace("\n", " ")[:500],
            traceback=traceback.format_exc()[-4000:],
        )
    row["wall_seconds"] = time.time() - start
    return row


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
    from leaderboard.provenance import versions
    from leaderboard.store import CLAIMED, ResultsStore

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


def stored_and_shipped(stored, shipped, keys: Sequence[str], results: str, what: str):
    """One frame of a store's rows (`stored`, None when the store does not exist) and our
    shipped ones (`shipped`, None when left out) of the cells the store does not hold: a
    cell run here replaces ours. An InputError naming `results` when both are empty."""
    import pandas as pd

    parts = [p for p in (stored,) if p is not None and len(p)]
    if shipped is not None:
        if parts:
            held = set(parts[0][list(keys)].itertuples(index=False, name=None))
            shipped = shipped[[k not in held for k in shipped[list(keys)].itertuples(
                index=False, name=None)]]  # fmt: skip
        parts.append(shipped)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not len(frame):
        raise InputError(
            f"--results: {results!r} holds no finished {what} cell"
            + ("" if shipped is not None else " (and --no-shipped leaves out ours)")
            + "; allowed: a store this experiment wrote"
        )
    return frame


def merged_cells(new, keys: Sequence[str], path: Path, results: str, read: Callable | None = None):
    """Our shipped rows at `path` (when it exists; `read(path)`, default a CSV under `#`
    lines) with the store's finished rows `new` merged in: the rows of a cell `new` holds
    (same `keys`) replace that cell's shipped rows and every other shipped row is kept, so a
    small run never drops the cells shipped before. Returns the rows and the line that says
    what they are; an InputError naming `results` when it holds no finished cell."""
    import pandas as pd

    if not len(new):
        raise InputError(
            f"--results: {results!r} holds no finished cell to ship; allowed: a store this "
            "experiment ran into"
        )
    read = read or (lambda p: pd.read_csv(p, comment="#"))

    def cells(frame) -> list[tuple]:
        return list(frame[list(keys)].itertuples(index=False, name=None))

    ran = set(cells(new))
    old = read(path) if Path(path).exists() else new.iloc[:0]
    kept = old.loc[[c not in ran for c in cells(old)]]  # (an empty list: no rows)
    frame = pd.concat([f for f in (kept, new) if len(f)] or [new], ignore_index=True)
    said = f"{path}: {len(set(cells(frame)))} cells ({len(ran)} from {results}, "
    return frame, said + f"{len(set(cells(kept)))} kept)"


def run_unless_report(
    name: str, args: Any, run: Callable[[], int], ship: Callable[[str, Path], str], note=True
) -> int:
    """A reproduction's cells run (`run()`, the number that failed) unless `args.report`,
    then `--ship`ped (`ship(results, path)`, the line that says what it wrote); a report
    without a store says (when `note`) that our shipped runs alone are tabled. Returns the
    failures."""
    failed = 0
    if not args.report:
        failed = run()
    elif note and not Path(args.results).exists():
        print(
            f"{name}: note: --results {args.results!r} does not exist; our "
            "shipped runs alone are tabled",
            file=sys.stderr,
        )
    if args.ship:
        print(ship(args.results, Path(args.ship)), file=sys.stderr)
    return failed


def narrowed(frame, masks: Mapping[str, Any], what: str = "cell"):
    """The rows of a report's `frame` that every mask keeps (`masks`: each selection flag
    given -> a boolean mask over the rows; none given: every row); an InputError naming
    those flags when no row is left."""
    import numpy as np

    if not masks:
        return frame
    keep = np.logical_and.reduce([np.asarray(m, bool) for m in masks.values()])
    if not keep.any():
        raise InputError(
            f"{', '.join(masks)}: no stored or shipped {what} matches; allowed: a selection "
            "of the cells run (see --report alone)"
        )
    return frame[keep]
