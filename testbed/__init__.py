"""testbed core: interfaces, estimators, metrics and `evaluate`.

This package imports no other package of the project.
"""

from testbed import accuracy, joint_kl, metrics, regression_kl  # noqa: F401  (register their metrics)
from testbed.base import (
    Agent,
    Data,
    EpistemicSampler,
    FiniteSampler,
    PosteriorEstimate,
    PriorKnowledge,
    Problem,
    Quality,
)
from testbed.errors import InputError
from testbed.evaluate import evaluate, evaluate_many, train

__version__ = "0.2.0"

__all__ = [
    "Agent",
    "Data",
    "EpistemicSampler",
    "FiniteSampler",
    "InputError",
    "PosteriorEstimate",
    "PriorKnowledge",
    "Problem",
    "Quality",
    "evaluate",
    "evaluate_many",
    "metrics",
    "train",
]
