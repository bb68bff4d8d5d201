"""Leaderboard: sweeps over (agent config x problem id) into a results store, and the
rankings and report of what a store holds.

Two sides, one sub-package each, that import nothing of each other
(tests/test_architecture.py):
- `leaderboard.execution`: the sweep (`leaderboard.sweep(...)`), jobs, the runner, the
  executors and workers, and reading a results file (`load`, `export`); the results store
  (`leaderboard.store`, `ResultsStore`) is on this side too;
- `leaderboard.ranking`: the board (`rank(df)`), the ranking rules and their scoring, the
  tables, legends, notes and HTML report, published results (`published(...)`) and our
  shipped runs.
The modules at the top level are neutral (what both sides read of a row's form: rows,
outputs, problem_settings, provenance, shipped_files, agent_fit) and import neither side.
`build(results)` (`leaderboard.load_and_rank`) loads a results file and ranks it: the one
place the two meet.
"""

from leaderboard.execution.results import export, load
from leaderboard.execution.sweeping import sweep
from leaderboard.load_and_rank import build
from leaderboard.ranking import rule_neural_testbed, rule_per_cell, rule_regret  # noqa: F401  (registers the built-in rules)
from leaderboard.ranking.literature import published
from leaderboard.store import DEFAULT_PATH, ResultsStore

__all__ = ["DEFAULT_PATH", "ResultsStore", "build", "export", "load", "published", "sweep"]
