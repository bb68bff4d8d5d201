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
from testbed.version import __version__

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
    "__version__",
    "evaluate",
    "evaluate_many",
    "metrics",
    "train",
]
