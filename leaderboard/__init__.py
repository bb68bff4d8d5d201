"""Leaderboard: sweeps over (agent config x problem id), the results store, scoring, report.

Submodules: jobs (job keys, sweep expansion), worker and executors (local process pool,
Ray), runner (the sweep driver), store (SQLite results), scoring, literature (published
results shown beside ours: `published("sbibm")`), report (HTML).
"""

from leaderboard.literature import published
from leaderboard.results import export, load
from leaderboard.store import DEFAULT_PATH, ResultsStore

__all__ = ["DEFAULT_PATH", "ResultsStore", "export", "load", "published"]
