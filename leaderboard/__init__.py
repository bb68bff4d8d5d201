"""Leaderboard: sweeps over (agent config x problem id) into a results store, and the
rankings and report of what a store holds.

Two sides that import nothing of each other (tests/test_architecture.py):
- execution: sweeping (the library call, `leaderboard.sweep(...)`), jobs (job keys,
  expansion), runner (the driver), executors, local_executor, ray_executor, processes,
  worker, store (SQLite results), results (`load`, `export`), salvage, leases, wal;
- ranking: board (`board.rank(df)`), rules (one object per ranking rule), scoring,
  report (HTML), legend, notes, tables, literature (`published(...)`), shipped.
`build(results)` loads a results file and ranks it: the one place the two meet.
"""

from leaderboard import rule_neural_testbed, rule_per_cell, rule_regret  # noqa: F401  (registers the built-in rules)
from leaderboard.literature import published
from leaderboard.load_and_rank import build
from leaderboard.results import export, load
from leaderboard.store import DEFAULT_PATH, ResultsStore
from leaderboard.sweeping import sweep

__all__ = ["DEFAULT_PATH", "ResultsStore", "build", "export", "load", "published", "sweep"]
