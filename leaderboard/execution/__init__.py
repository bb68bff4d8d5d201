"""Execution: runs (agent config x problem id) jobs and keeps their rows in the results
store; imports nothing of ranking (tests/test_architecture.py).

Offered here: `sweep` (`plan` then `run`), `run_one` (`testbed run`), `expand` (the jobs
of a sweep), `SweepSummary`, and `load` / `export` (a results file as a DataFrame, problem
settings joined). The modules, one thing each:

- sweeping: the library call, every input checked once; jobs: job keys and expansion;
  seeds: `--seeds`; timeouts: the per-job limit;
- runner: the driver (the jobs not yet stored, claimed, run, each result recorded);
- executors: `InlineExecutor` (in this process), local_executor (`LocalExecutor`, worker
  processes), ray_executor (`RayExecutor`, Ray tasks); processes (a fresh interpreter
  per worker), worker (what a worker runs), interrupts (Ctrl-C in the driver);
- results: a results file read into a DataFrame (`load`), written out (`export`);
- shipped_store: shipped runs made from, and restored into, a results store.

The results store itself (`leaderboard.store` and its helpers) is on this side too.
"""

from leaderboard.execution.jobs import expand
from leaderboard.execution.results import export, load
from leaderboard.execution.runner import SweepSummary
from leaderboard.execution.sweeping import plan, run, run_one, sweep

__all__ = ["SweepSummary", "expand", "export", "load", "plan", "run", "run_one", "sweep"]
