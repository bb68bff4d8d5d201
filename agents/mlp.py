"""`mlp` and `logistic_regression`: one network trained by the ensemble loop (K = 1).

Deterministic predictives: every key gives the same function (a one-member
`FiniteSampler`). Decay scale l2 * sqrt(T) d / n (adaptive) or l2 / n, zero-bias init.
"""

from __future__ import annotations

import dataclasses

from agents.ensemble import train_ensemble
from agents.registry import NETWORK, register
from agents.training import RegularizedMLPConfig, WeightDecayConfig
from testbed.base import Data, PriorKnowledge

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


@dataclasses.dataclass(frozen=True)
class MLPConfig(RegularizedMLPConfig):
    """A single ReLU MLP (reference `MLPConfig` defaults)."""


def mlp_sweep() -> list[MLPConfig]:
    """The reference's `testbed` sweep (18): adaptive x l2 (batch strategy on), then 4 schedules."""
    sweep = [
        MLPConfig(l2_weight_decay=l2, adaptive_weight_scale=adaptive, batch_strategy=True)
        for adaptive in (True, False)
        for l2 in L2_GRID
    ]
    sweep += [
        MLPConfig(batch_strategy=strategy, num_batches=steps)
        for strategy in (True, False)
        for steps in (500, 1000)
    ]
    return sweep


@register("mlp", MLPConfig, sweep=mlp_sweep, predicts=NETWORK)
def make_mlp_agent(config: MLPConfig):
    """A single MLP with weight decay: a point estimate (the paper's normaliser)."""

    def agent(data: Data, prior: PriorKnowledge):
        return train_ensemble(data, prior, config, num_members=1)

    return agent


@dataclasses.dataclass(frozen=True)
class LogisticRegressionConfig(WeightDecayConfig):
    """Linear softmax classifier (reference `LogisticRegressionConfig` defaults)."""


def logistic_regression_sweep() -> list[LogisticRegressionConfig]:
    """The reference's `testbed_2d` sweep (14): adaptive x l2."""
    return [
        LogisticRegressionConfig(l2_weight_decay=l2, adaptive_weight_scale=adaptive)
        for adaptive in (True, False)
        for l2 in L2_GRID
    ]


@register(
    "logistic_regression",
    LogisticRegressionConfig,
    sweep=logistic_regression_sweep,
    predicts=NETWORK,
)
def make_logistic_regression(config: LogisticRegressionConfig):
    """Softmax regression trained with Adam and weight decay (no hidden layers)."""

    def agent(data: Data, prior: PriorKnowledge):
        return train_ensemble(data, prior, config, num_members=1)

    return agent
