"""Simulator tasks of the SBI benchmark, in numpy, with reference posteriors for any x_o,
and the `sbi/<task>/<budget>/<k>` posterior problems built on them.

`get_task(name)` returns a `Task` (see `generative.sbi.task`); `task_names()` lists them.
"""

from __future__ import annotations

from generative.sbi import problems  # noqa: F401  (registers the sbi/... family and sweeps)
from generative.sbi.task import Task
from generative.sbi.tasks import get_task, task_names

__all__ = ["Task", "get_task", "task_names"]
