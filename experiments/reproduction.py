"""What the reproductions' command lines share around their results store: run unless
`--report`, then `--ship` (`run_unless_report`); a report's rows from the store and our
shipped runs (`stored_and_shipped`), narrowed to the cells asked for (`narrowed`); a
store's finished cells merged into our shipped ones (`merged_cells`). Their cells run
through `experiments.cells` (or the library's sweep)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.errors import InputError


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


def take_shipped(jobs: Sequence, results: str) -> int:
    """Records in `results` the jobs the package ships runs of (every source in
    `shipped_store.RUN_SOURCES`) and `results` lacks, and says how many on stderr, of the
    distinct jobs (a job listed twice, as tuned and as default, is one): a run computes
    only the rest, and resumes on any machine. `--no-shipped` skips this."""
    from leaderboard.execution.shipped_store import RUN_SOURCES, restore_shipped

    keys = {j.key for j in jobs}
    taken = restore_shipped(results, keys)
    if taken:
        print(f"{taken} of {len(keys)} jobs taken from the package's shipped runs "
              f"({', '.join(RUN_SOURCES)})", file=sys.stderr)  # fmt: skip
    return taken


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
