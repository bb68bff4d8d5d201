"""Leaderboard: sweeps over (agent config x problem id), the results store, scoring, report.

Submodules: jobs (job keys, sweep expansion), worker and executors (local process pool,
Ray), runner (the sweep driver), store (SQLite results), scoring, report (HTML).
"""

from leaderboard.store import DEFAULT_PATH, ResultsStore, export, load

__all__ = ["DEFAULT_PATH", "ResultsStore", "export", "load"]
