"""`mlp` and `logistic_regression`: one network trained by the ensemble loop (K = 1).

Deterministic predictives: every key gives the same function (a one-member
`FiniteSampler`). Decay scale l2 * sqrt(T) d / n (adaptive) or l2 / n, zero-bias init.
"""

from __future__ import annotations

import dataclasses
import functools

from agents.ensemble import ensemble_agent, register_ensemble
from agents.training import (
    RegularizedMLPConfig,
    WeightDecayConfig,
    schedule_sweep,
    weight_decay_sweep,
)


@dataclasses.dataclass(frozen=True)
class MLPConfig(RegularizedMLPConfig):
    """A single ReLU MLP (reference `MLPConfig` defaults)."""


def mlp_sweep() -> list[MLPConfig]:
    """The reference's `testbed` sweep (18): adaptive x l2 (batch strategy on), then 4 schedules."""
    with_strategy = functools.partial(MLPConfig, batch_strategy=True)
    return weight_decay_sweep(with_strategy) + schedule_sweep(MLPConfig)


@register_ensemble("mlp", MLPConfig, mlp_sweep)
def make_mlp_agent(config: MLPConfig):
    """A single MLP with weight decay: a point estimate (the paper's normaliser)."""
    return ensemble_agent(config)


@dataclasses.dataclass(frozen=True)
class LogisticRegressionConfig(WeightDecayConfig):
    """Linear softmax classifier (reference `LogisticRegressionConfig` defaults)."""


def logistic_regression_sweep() -> list[LogisticRegressionConfig]:
    """The reference's `testbed_2d` sweep (14): adaptive x l2."""
    return weight_decay_sweep(LogisticRegressionConfig)


@register_ensemble("logistic_regression", LogisticRegressionConfig, logistic_regression_sweep)
def make_logistic_regression(config: LogisticRegressionConfig):
    """Softmax regression trained with Adam and weight decay (no hidden layers)."""
    return ensemble_agent(config)
