"""`evaluate(agent, problem)`: train, score, time. The one entry point every runner uses."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from testbed.base import Agent, Oracle, Problem, Quality
from testbed.errors import InputError
from testbed.evaluation import ScoredProblem, resolve, score
from testbed.simulation import SimulationAccess


def train(agent: Agent | Oracle, problem: Problem, train_data: Any = None) -> Any:
    """The agent's predictive for the problem.

    An `Oracle` (the oracle and exact agents, for tests and floors) is handed the problem
    itself; every other agent sees only the training data (`train_data`, default the
    problem's) and the prior knowledge.
    """
    if isinstance(agent, Oracle):
        return agent.predictive_for(problem)
    data = problem.train_data if train_data is None else train_data
    return agent(data, problem.prior_knowledge)


def evaluate(
    agent: Agent | Oracle, problem: Problem, metrics: Sequence[str] | None = None
) -> Quality:
    """Trains `agent` on `problem`, scores its predictive, adds train/evaluation seconds.

    `metrics`: registered metric names to compute instead of the problem's defaults (e.g.
    `[*problem.metrics, "my_metric"]`); each must need only evidence the problem offers,
    which is checked before training. On a simulator problem the agent's
    `SimulationAccess` says how many simulations it used (`num_simulations_used`).
    """
    if metrics is not None:
        if not isinstance(problem, ScoredProblem):
            raise InputError(
                f"metrics: got {list(metrics)!r} for {type(problem).__name__}, which offers "
                "no evidence; allowed: metrics=None (its own scores)"
            )
        resolve(problem, metrics)  # unknown or unmatched metrics fail before training
    start = time.perf_counter()
    data = None if isinstance(agent, Oracle) else problem.train_data
    predictive = train(agent, problem, data)
    trained = time.perf_counter()
    if metrics is None:
        quality = Quality(problem.evaluate(predictive))
    else:
        quality = score(problem, predictive, metrics)
    done = time.perf_counter()
    if isinstance(data, SimulationAccess):
        quality["num_simulations_used"] = data.num_simulations
    quality["train_seconds"] = trained - start
    quality["evaluation_seconds"] = done - trained
    return quality
