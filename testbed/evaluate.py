"""`evaluate(agent, problem)`: train, score, time. The one entry point every runner uses.

`evaluate_many(agent, problems)` trains an amortized agent once for problems that give
the same training data (the SBI benchmark's ten observations of one task and budget) and
scores its predictive on each; other agents are evaluated problem by problem.
"""

from __future__ import annotations

import dataclasses
import time
import types
from collections.abc import Sequence
from typing import Any

import jax

from testbed.base import Agent, Amortized, Oracle, Problem, Quality, SharesTraining
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


@dataclasses.dataclass(frozen=True)
class Trained:
    """A trained predictive with what its training used: the data it was given (a
    SimulationAccess counts simulations) and the seconds it took."""

    predictive: Any
    data: Any
    seconds: float
    shared: int = 1  # the number of problems this training serves

    def for_problem(self, i: int) -> Trained:
        """What problem `i` of those it serves records: the training's seconds on the
        first only (so sums over rows count it once)."""
        return self if i == 0 else dataclasses.replace(self, seconds=0.0)


def block_until_ready(obj: Any, depth: int = 12) -> None:
    """Waits for every JAX array a predictive holds (in its closures, attributes and
    containers, `depth` levels down). JAX returns before the work is done (a 500,000-step
    chain), so without this the training would be timed as evaluation."""
    seen: set[int] = set()

    def visit(o: Any, d: int) -> None:
        if d < 0 or id(o) in seen or isinstance(o, str | bytes | type | types.ModuleType):
            return
        seen.add(id(o))
        if isinstance(o, jax.Array):
            o.block_until_ready()
            return
        if isinstance(o, list | tuple | set | frozenset):
            items = list(o)
        elif isinstance(o, dict):
            items = list(o.values())
        else:
            items = [c.cell_contents for c in getattr(o, "__closure__", None) or () if _full(c)]
            if hasattr(o, "__self__"):  # a bound method: its object
                items.append(o.__self__)
            attrs = getattr(o, "__dict__", None)
            if isinstance(attrs, dict):
                items += list(attrs.values())
        for item in items:
            visit(item, d - 1)

    visit(obj, depth)


def _full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def train_timed(agent: Agent | Oracle, problem: Problem) -> Trained:
    """Trains `agent` on `problem` (an Oracle reads the problem instead), timed until the
    predictive's arrays are ready."""
    start = time.perf_counter()
    data = None if isinstance(agent, Oracle) else problem.train_data
    predictive = train(agent, problem, data)
    block_until_ready(predictive)
    return Trained(predictive, data, time.perf_counter() - start)


def check_metrics(problem: Problem, metrics: Sequence[str] | None) -> None:
    """Unknown or unmatched metrics fail here, before any training."""
    if metrics is None:
        return
    if not isinstance(problem, ScoredProblem):
        raise InputError(
            f"metrics: got {list(metrics)!r} for {type(problem).__name__}, which offers "
            "no evidence; allowed: metrics=None (its own scores)"
        )
    resolve(problem, metrics)


def score_trained(
    problem: Problem, trained: Trained, metrics: Sequence[str] | None = None
) -> Quality:
    """The Quality of a trained predictive on `problem`, with its training's seconds and
    simulations and the seconds of this evaluation."""
    start = time.perf_counter()
    if metrics is None:
        quality = Quality(problem.evaluate(trained.predictive))
    else:
        quality = score(problem, trained.predictive, metrics)
    if isinstance(trained.data, SimulationAccess):
        quality["num_simulations_used"] = trained.data.num_simulations
    if trained.shared > 1:
        quality["shared_training"] = trained.shared
    quality["train_seconds"] = trained.seconds
    quality["evaluation_seconds"] = time.perf_counter() - start
    return quality


def evaluate(
    agent: Agent | Oracle, problem: Problem, metrics: Sequence[str] | None = None
) -> Quality:
    """Trains `agent` on `problem`, scores its predictive, adds train/evaluation seconds.

    `metrics`: registered metric names to compute instead of the problem's defaults (e.g.
    `[*problem.metrics, "my_metric"]`); each must need only evidence the problem offers,
    which is checked before training. On a simulator problem the agent's
    `SimulationAccess` says how many simulations it used (`num_simulations_used`).
    """
    check_metrics(problem, metrics)
    return score_trained(problem, train_timed(agent, problem), metrics)


def shares_training(agent: Any, problems: Sequence[Problem]) -> bool:
    """Whether one training of `agent` serves all `problems`: the agent is amortized and
    the problems give the same training data (the same training key)."""
    if not (isinstance(agent, Amortized) and agent.amortized) or len(problems) < 2:
        return False
    keys = {p.training_key if isinstance(p, SharesTraining) else None for p in problems}
    return len(keys) == 1 and None not in keys


def evaluate_many(
    agent: Agent | Oracle, problems: Sequence[Problem], metrics: Sequence[str] | None = None
) -> list[Quality]:
    """`evaluate` on each problem; an amortized agent on problems with one training key is
    trained once, on the first problem's data, and scored at each. Its training time is
    on the first Quality (the others have train_seconds 0), and every Quality records
    `shared_training`, the number of problems the training served."""
    for problem in problems:
        check_metrics(problem, metrics)
    if not shares_training(agent, problems):
        return [evaluate(agent, p, metrics) for p in problems]
    trained = train_shared(agent, problems)
    return [score_trained(p, trained.for_problem(i), metrics) for i, p in enumerate(problems)]


def train_shared(agent: Agent, problems: Sequence[Problem]) -> Trained:
    """One training for all `problems` (which `shares_training` allows), on the first's data."""
    if not shares_training(agent, problems):
        raise InputError(
            f"problems: {len(problems)} problem(s) whose training data differ, or an agent "
            "that is not amortized; allowed: problems with one training_key and an agent "
            "whose `amortized` is true"
        )
    trained = train_timed(agent, problems[0])
    return dataclasses.replace(trained, shared=len(problems))
