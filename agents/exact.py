"""`exact`: the true posterior of a problem with a known one (conjugate models): the floor.

It reads the problem (like the `oracle` baseline), so it is for tests and floors only; any
honest agent scores at or above it.
"""

from __future__ import annotations

import dataclasses

from agents.registry import register
from testbed.errors import InputError


@dataclasses.dataclass(frozen=True)
class ExactConfig:
    """No settings (a seed only, for uniform bookkeeping)."""

    seed: int = 0


@register("exact", ExactConfig)
def make(config: ExactConfig):
    """The exact posterior (reads the problem: tests and floors only)."""

    def from_problem(problem):
        exact = getattr(problem, "exact_predictive", None)
        if exact is None:
            raise InputError(
                f"agent exact: problem {type(problem).__name__} offers no exact posterior; "
                "allowed: problems with a closed-form posterior (conjugate/...)"
            )
        return exact()

    return from_problem


make.uses_problem = True
