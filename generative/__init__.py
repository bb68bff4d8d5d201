"""Problems: classification and GP regression environments, simulator tasks, conjugate
models, real data.

`load(problem_id)` builds a seeded problem; `sweep_ids(name)` lists a sweep's ids;
`problem_settings(problem_id)` gives the settings the leaderboard joins on;
`require_data(problem_ids)` checks their data is at hand (before a sweep starts).
"""

# Importing the family modules registers them; `sbi` also gives generative.sbi.get_task.
from generative import (  # noqa: F401
    bandit,
    classification,
    classification_2021,
    coin,
    conjugate,
    gp_regression,
    real_data,
    sbi,
)
from generative.registry import (
    FAMILIES,
    SWEEPS,
    data_version,
    family_of,
    family_sweeps,
    load,
    problem_settings,
    register_family,
    register_sweep,
    require_data,
    sweep_ids,
    sweep_names,
    training_key,
    training_shared_by,
)

__all__ = [
    "FAMILIES",
    "SWEEPS",
    "data_version",
    "family_of",
    "family_sweeps",
    "load",
    "problem_settings",
    "register_family",
    "register_sweep",
    "require_data",
    "sweep_ids",
    "sweep_names",
    "training_key",
    "training_shared_by",
]
