"""`exact`: the true posterior of a problem with a known one (conjugate models): the floor.

It reads the problem (like the `oracle` baseline), so it is for tests and floors only; any
honest agent scores at or above it.
"""

from __future__ import annotations

import dataclasses

from agents.registry import register
from testbed.base import OffersExactPosterior
from testbed.errors import InputError


@dataclasses.dataclass(frozen=True)
class ExactConfig:
    """No settings (a seed only, for uniform bookkeeping)."""

    seed: int = 0


class ExactPosterior:
    """An `Oracle`: the problem's closed-form posterior (tests and floors only)."""

    def predictive_for(self, problem):
        if not isinstance(problem, OffersExactPosterior):
            raise InputError(
                f"agent exact: problem {type(problem).__name__} offers no exact posterior; "
                "allowed: problems with a closed-form posterior (conjugate/...)"
            )
        return problem.exact_predictive()


@register("exact", ExactConfig)
def make(config: ExactConfig) -> ExactPosterior:
    """The exact posterior (reads the problem: tests and floors only)."""
    return ExactPosterior()
