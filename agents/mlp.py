"""`mlp` and `logistic_regression`: one network trained by the ensemble loop (K = 1).

Deterministic predictives: every key gives the same function (a one-member
`FiniteSampler`). Decay scale l2 * sqrt(T) d / n (adaptive) or l2 / n, zero-bias init.
"""

from __future__ import annotations

import dataclasses

from agents.ensemble import train_ensemble
from agents.registry import register
from agents.training import check_hidden_sizes, scheduled_steps
from testbed.base import Data, PriorKnowledge
from testbed.config import check_at_least, check_nonnegative, check_positive

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    """A single ReLU MLP (reference `MLPConfig` defaults)."""

    adaptive_weight_scale: bool = True
    l2_weight_decay: float = 1.0
    hidden_sizes: tuple[int, ...] = (50, 50)
    num_batches: int = 1000
    batch_strategy: bool = False
    learning_rate: float = 1e-3
    seed: int = 0

    def __post_init__(self):
        check_nonnegative("l2_weight_decay", self.l2_weight_decay)
        check_hidden_sizes("hidden_sizes", self.hidden_sizes)
        check_at_least("num_batches", self.num_batches, 1)
        check_positive("learning_rate", self.learning_rate)


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


@register("mlp", MLPConfig, sweep=mlp_sweep)
def make_mlp_agent(config: MLPConfig):
    """A single MLP with weight decay: a point estimate (the paper's normaliser)."""

    def agent(data: Data, prior: PriorKnowledge):
        return train_ensemble(
            data,
            prior,
            num_members=1,
            hidden=config.hidden_sizes,
            l2_weight_decay=config.l2_weight_decay,
            adaptive=config.adaptive_weight_scale,
            num_steps=scheduled_steps(config.num_batches, config.batch_strategy, prior),
            seed=config.seed,
            learning_rate=config.learning_rate,
        )

    return agent


@dataclasses.dataclass(frozen=True)
class LogisticRegressionConfig:
    """Linear softmax classifier (reference `LogisticRegressionConfig` defaults)."""

    adaptive_weight_scale: bool = True
    l2_weight_decay: float = 1.0
    num_batches: int = 1000
    learning_rate: float = 1e-3
    seed: int = 0

    def __post_init__(self):
        check_nonnegative("l2_weight_decay", self.l2_weight_decay)
        check_at_least("num_batches", self.num_batches, 1)
        check_positive("learning_rate", self.learning_rate)


def logistic_regression_sweep() -> list[LogisticRegressionConfig]:
    """The reference's `testbed_2d` sweep (14): adaptive x l2."""
    return [
        LogisticRegressionConfig(l2_weight_decay=l2, adaptive_weight_scale=adaptive)
        for adaptive in (True, False)
        for l2 in L2_GRID
    ]


@register("logistic_regression", LogisticRegressionConfig, sweep=logistic_regression_sweep)
def make_logistic_regression(config: LogisticRegressionConfig):
    """Softmax regression trained with Adam and weight decay (no hidden layers)."""

    def agent(data: Data, prior: PriorKnowledge):
        return train_ensemble(
            data,
            prior,
            num_members=1,
            hidden=(),
            l2_weight_decay=config.l2_weight_decay,
            adaptive=config.adaptive_weight_scale,
            num_steps=config.num_batches,
            seed=config.seed,
            learning_rate=config.learning_rate,
        )

    return agent
