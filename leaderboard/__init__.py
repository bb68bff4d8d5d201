"""Leaderboard: sweeps over (agent config x problem id), the results store, scoring, report.

Submodules: jobs (job keys, sweep expansion), worker and executors (local process pool,
Ray), runner (the sweep driver), store (SQLite results), scoring, literature (published
results shown beside ours: `published("sbibm")`), report (HTML).
"""

from leaderboard import rule_neural_testbed, rule_per_cell  # noqa: F401  (registers the built-in rules)
from leaderboard.literature import published
from leaderboard.load_and_rank import build
from leaderboard.results import export, load
from leaderboard.store import DEFAULT_PATH, ResultsStore
from leaderboard.sweep import sweep  # the package's attribute: the call, not the module

__all__ = ["DEFAULT_PATH", "ResultsStore", "build", "export", "load", "published", "sweep"]
