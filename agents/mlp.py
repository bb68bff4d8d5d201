"""`mlp` and `logistic_regression`: one network trained by the ensemble loop (K = 1).

Deterministic predictives: every key gives the same function (a one-member
`FiniteSampler`). Decay scale l2 * sqrt(T) d / n (adaptive) or l2 / n, zero-bias init.
"""

from __future__ import annotations

import dataclasses
import functools

import jax

from agents.ensemble import online_ensemble, train_ensemble
from agents.registry import NETWORK, register
from agents.training import (
    RegularizedMLPConfig,
    WeightDecayConfig,
    schedule_sweep,
    weight_decay_sweep,
)
from testbed.base import Data, PriorKnowledge


@dataclasses.dataclass(frozen=True)
class MLPConfig(RegularizedMLPConfig):
    """A single ReLU MLP (reference `MLPConfig` defaults)."""


def mlp_sweep() -> list[MLPConfig]:
    """The reference's `testbed` sweep (18): adaptive x l2 (batch strategy on), then 4 schedules."""
    with_strategy = functools.partial(MLPConfig, batch_strategy=True)
    return weight_decay_sweep(with_strategy) + schedule_sweep(MLPConfig)


def online_single(config: WeightDecayConfig, prior: PriorKnowledge, key: jax.Array):
    """One network learning online (a greedy agent in a bandit: every key, one function)."""
    return online_ensemble(config, prior, key, num_members=1)


@register("mlp", MLPConfig, sweep=mlp_sweep, predicts=NETWORK, online=online_single)
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
    return weight_decay_sweep(LogisticRegressionConfig)


@register(
    "logistic_regression",
    LogisticRegressionConfig,
    sweep=logistic_regression_sweep,
    predicts=NETWORK,
    online=online_single,
)
def make_logistic_regression(config: LogisticRegressionConfig):
    """Softmax regression trained with Adam and weight decay (no hidden layers)."""

    def agent(data: Data, prior: PriorKnowledge):
        return train_ensemble(data, prior, config, num_members=1)

    return agent
