"""Problems: classification environments, simulator tasks, conjugate models, real data.

`load(problem_id)` builds a seeded problem; `sweep_ids(name)` lists a sweep's ids;
`problem_settings(problem_id)` gives the settings the leaderboard joins on.
"""

from generative import classification, coin, conjugate  # noqa: F401  (register the families)
from generative import real_data  # noqa: F401  (register the real-data family)
from generative import sbi  # noqa: F401  (simulator tasks: generative.sbi.get_task)
from generative import sbi_problems  # noqa: F401  (posterior problems sbi/<task>/<budget>/<k>)
from generative.registry import (
    FAMILIES,
    SWEEPS,
    load,
    problem_settings,
    register_family,
    register_sweep,
    sweep_ids,
    sweep_names,
)

__all__ = [
    "FAMILIES",
    "SWEEPS",
    "load",
    "problem_settings",
    "register_family",
    "register_sweep",
    "sweep_ids",
    "sweep_names",
]
