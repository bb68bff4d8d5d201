"""The results store: one SQLite file of finished jobs, written only by sweep drivers.

- `ResultsStore` (`results_store`): opens a results file (checked first: `checks`),
  takes a job's lease (`leases`), commits its row, reads rows as dicts or a DataFrame.
- `checks`: what a results file must be before it is opened: a path, one name, a WAL of
  its own that hides no committed row (`wal`: the one check SQLite does not make).
- `salvage`: `testbed salvage`, the readable rows of a damaged file into a new one.

A row's layout (its columns, their SQL types, which hold JSON) is defined once in
`leaderboard.rows`, outside the store: the ranking side reads it too.
"""

from leaderboard.rows import DEFAULT_PATH
from leaderboard.store.results_store import CLAIMED, DONE, ResultsStore

__all__ = ["CLAIMED", "DEFAULT_PATH", "DONE", "ResultsStore"]
