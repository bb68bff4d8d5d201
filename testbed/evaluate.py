"""`evaluate(agent, problem)`: train, score, time. The one entry point every runner uses."""

from __future__ import annotations

import time
from typing import Any

from testbed.base import Agent, Problem, Quality


def train(agent: Agent, problem: Problem) -> Any:
    """The agent's predictive for the problem.

    An agent with `uses_problem = True` (the oracle, for tests and floors) is handed the
    problem itself; every other agent sees only the training data and prior knowledge.
    """
    if getattr(agent, "uses_problem", False):
        return agent.from_problem(problem)
    return agent(problem.train_data, problem.prior_knowledge)


def evaluate(agent: Agent, problem: Problem) -> Quality:
    """Trains `agent` on `problem`, scores its predictive, adds train/evaluation seconds."""
    start = time.perf_counter()
    predictive = train(agent, problem)
    trained = time.perf_counter()
    quality = Quality(problem.evaluate(predictive))
    done = time.perf_counter()
    quality["train_seconds"] = trained - start
    quality["evaluation_seconds"] = done - trained
    return quality
