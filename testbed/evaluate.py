"""`evaluate(agent, problem)`: train, score, time. The one entry point every runner uses.

`evaluate_many(agent, problems)` trains once for problems that give the same training
data (the tau = 1 / tau = 10 pairs of the Neural Testbed, for every agent; the SBI
benchmark's ten observations of one task and budget, for amortized agents) and scores
its predictive on each; other problems are evaluated one by one.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import jax

from testbed import threefry_cpu
from testbed.base import (
    LABELS,
    MODEL_POSTERIOR,
    POSTERIOR,
    PREDICTIONS,
    REAL_VALUES,
    Agent,
    Oracle,
    PriorKnowledge,
    Problem,
    Quality,
    SharesTraining,
    group_by_training,
    may_share_training,
    predictions_in_words,
    training_shared_by,
    trains_on,
)
from testbed.errors import InputError
from testbed.evaluation import ScoredProblem, resolve, score
from testbed.model import ModelKnowledge
from testbed.online import Interactive
from testbed.posterior_adapter import as_posterior
from testbed.progress import activity
from testbed.simulation import SimulationAccess, SimulatorKnowledge


def train(agent: Agent | Oracle, problem: Problem, train_data: Any = None) -> Any:
    """The agent's predictive for the problem.

    An `Oracle` (the oracle and exact agents, for tests and floors) is handed the problem
    itself; every other agent sees only the training data (`train_data`, default the
    problem's) and the prior knowledge. In an `Interactive` problem (a bandit) the agent
    acts and learns from what it observes: its "training" is the run, scored after.
    """
    if isinstance(problem, Interactive):
        return problem.interact(agent)
    if isinstance(agent, Oracle):
        return agent.predictive_for(problem)
    data = problem.train_data if train_data is None else train_data
    predictive = agent(data, problem.prior_knowledge)
    if predictive is None and isinstance(problem, ScoredProblem):  # our scorers need one
        # (else a TypeError deep inside them); a user's own problem may take None
        raise InputError(
            f"agent {_name(agent)} returned None; allowed: a predictive (a sampler "
            "`(x, key) -> logits`, a posterior with `sample`, ...; see testbed.base)"
        )
    return predictive


@dataclasses.dataclass(frozen=True)
class Trained:
    """A trained predictive with what its training used: the data it was given (a
    SimulationAccess counts simulations) and the seconds it took."""

    predictive: Any
    data: Any
    seconds: float
    shared: int = 1  # the number of problems this training serves
    sampling_seconds: float = 0.0  # each problem's share of draws taken before scoring

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
        elif isinstance(o, functools.partial):  # a jax.tree_util.Partial: its bound arrays
            items = [o.func, *o.args, *o.keywords.values()]
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
    predictive's arrays are ready; a predictive whose training resumed one that ran before
    (`agents.sbi_checkpoint`) adds those seconds (`earlier_train_seconds`)."""
    start = time.perf_counter()
    with activity(f"training {_name(agent)}"):
        data = None if isinstance(agent, Oracle) else problem.train_data
        predictive = train(agent, problem, data)
        block_until_ready(predictive)
    earlier = float(getattr(predictive, "earlier_train_seconds", 0.0))
    return Trained(predictive, data, time.perf_counter() - start + earlier)


def _name(agent: Any) -> str:
    """How progress names an agent: its registered name, else its type."""
    for attribute in ("name", "__name__"):  # a registered agent's name, a function's
        name = getattr(agent, attribute, None)
        if isinstance(name, str):
            return name
    return type(agent).__name__


def needed_prediction(problem: Problem) -> str | None:
    """What `problem` needs an agent to predict (a name of `testbed.base.PREDICTIONS`), or
    None when it does not say and cannot be told (then agents are not checked).

    A problem may declare it (`prediction = "labels"`); otherwise its prior knowledge and
    evidence tell: a `ModelKnowledge` (conjugate) needs a model posterior, a
    `SimulatorKnowledge` (sbi, conjugate_sbi) a posterior, a `PriorKnowledge` with
    num_classes >= 2 (classification, real data, coin) labels, and one with num_classes = 1
    real values when the problem scores a `sampler` (regression).
    """
    declared = getattr(problem, "prediction", None)
    if isinstance(declared, str) and declared in PREDICTIONS:
        return declared
    try:
        knowledge = problem.prior_knowledge
    except Exception:  # a problem that cannot say; its agent's own errors speak
        return None
    if isinstance(knowledge, ModelKnowledge):
        return MODEL_POSTERIOR
    if isinstance(knowledge, SimulatorKnowledge):
        return POSTERIOR
    if not isinstance(knowledge, PriorKnowledge):
        return None
    if knowledge.num_classes >= 2:
        return LABELS
    offers = getattr(problem, "offers", None) or ()
    return REAL_VALUES if "sampler" in offers else None


def problem_name(problem: Problem) -> str:
    """The problem's id when it carries one (`problem_id`), else its class (and task)."""
    pid = getattr(problem, "problem_id", None)
    if isinstance(pid, str) and pid:
        return pid
    task = getattr(getattr(problem, "prior_knowledge", None), "task", "")
    return type(problem).__name__ + (f" ({task})" if task else "")


def check_fit(agent: Any, problem: Problem, name: str | None = None) -> None:
    """Refuses, before training, an agent that declares what it predicts (`predicts`) when
    `problem` needs another kind, naming the registered agents that fit (an agent offering
    `agents_that_fit(kind, problem)` says which). Agents that declare nothing and oracles
    (they read the problem and say themselves what it lacks) are not checked. `name` is the
    problem's id in the message (default: `problem_name(problem)`)."""
    predicts = getattr(agent, "predicts", None)
    if not predicts or isinstance(agent, Oracle):
        return
    need = needed_prediction(problem)
    if need is None or need in predicts:
        return
    label = getattr(agent, "name", None) or getattr(agent, "__name__", type(agent).__name__)
    fits = getattr(agent, "agents_that_fit", None)
    others = list(fits(need, problem)) if callable(fits) else []
    raise InputError(
        f"agent {label} predicts {predictions_in_words(predicts)}; problem "
        f"{name or problem_name(problem)} needs {PREDICTIONS[need]}; agents that fit: "
        + (", ".join(others) if others else "(none registered)")
    )


def check_agent_and_problem(agent: Any, problem: Any, field: str = "problem") -> None:
    """The mistakes a user types first, named: a problem id or an agent name where the
    object goes, an agent that cannot be called."""
    if isinstance(problem, str):
        raise InputError(
            f"{field}: got {problem!r}, an id; allowed: a problem, e.g. "
            f"generative.load({problem!r})"
        )
    if isinstance(agent, str):
        raise InputError(
            f"agent: got {agent!r}, a name; allowed: an agent, e.g. agents.load({agent!r})"
        )
    if not callable(agent) and not isinstance(agent, Oracle):
        raise InputError(
            f"agent: got {type(agent).__name__}; allowed: a callable "
            "agent(train_data, prior_knowledge) -> predictive, e.g. agents.load('mlp')"
        )


def check_metrics(problem: Problem, metrics: Sequence[str] | None) -> None:
    """Unknown or unmatched metrics fail here, before any training."""
    if metrics is None:
        return
    if not isinstance(metrics, str) and not list(metrics):  # a str: `resolve` says so
        raise InputError(
            f"metrics: got {metrics!r}; allowed: a list of one or more registered metric "
            "names (testbed list metrics), or None for the problem's own"
        )
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
    with activity("scoring"):
        if metrics is None:
            quality = Quality(problem.evaluate(trained.predictive))
        else:
            quality = score(problem, trained.predictive, metrics)
    if isinstance(trained.data, SimulationAccess):
        quality["num_simulations_used"] = trained.data.num_simulations
    if trained.shared > 1:
        quality["shared_training"] = trained.shared
    quality["train_seconds"] = trained.seconds
    # draws `presample` took before scoring: this problem's share of that call
    quality["evaluation_seconds"] = time.perf_counter() - start + trained.sampling_seconds
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
    threefry_cpu.ensure_installed()  # the lowering the command line uses, once per process
    check_agent_and_problem(agent, problem)
    check_metrics(problem, metrics)
    check_fit(agent, problem)
    return score_trained(problem, train_timed(agent, problem), metrics)


def may_share(agent: Any, problem: Problem) -> bool:
    """Whether `agent` may train once for `problem` and others of its training key: every
    agent but an oracle when the problems differ only in scoring, else amortized ones
    (`testbed.base.may_share_training`, the rule a sweep applies to ids)."""
    if not isinstance(problem, SharesTraining):
        return False
    return may_share_training(trains_on(agent), training_shared_by(problem))


def shares_training(agent: Any, problems: Sequence[Problem]) -> bool:
    """Whether one training of `agent` serves all `problems`: they give the same training
    data (the same training key) and the agent may share it (`may_share`)."""
    if len(problems) < 2 or not all(may_share(agent, p) for p in problems):
        return False
    return len({p.training_key for p in problems}) == 1


RAISE, KEEP = "raise", "keep"


def evaluate_many(
    agent: Agent | Oracle,
    problems: Sequence[Problem],
    metrics: Sequence[str] | None = None,
    *,
    errors: str = RAISE,
    on_result: Callable[[int, Quality | Exception], None] | None = None,
) -> list[Quality | Exception]:
    """`evaluate` on each problem, in order; an agent is trained once per training key where
    it may share the training (`may_share`: the Neural Testbed's tau pairs; an amortized
    agent on one SBI task and budget) and scored at each of that key's problems, as a
    sweep groups them. Its training time is on the first Quality of its group (the others
    have train_seconds 0), and every Quality records `shared_training`, the number of
    problems the training served. A posterior that can draw at several observations in one
    call (NLE / NRE's MCMC) draws at all of its group's before scoring (`presample`).

    `errors='raise'` (default): every problem is checked before any training, and the
    first error raises. `errors='keep'`: a problem's error is its entry of the list (a
    refused problem or a failed scoring fails that problem; a failed training every
    problem it served) and the others go on. `on_result(i, quality_or_error)` is called as
    each problem is done (a sweep's worker times and stores each one as it comes)."""
    threefry_cpu.ensure_installed()  # the lowering the command line uses, once per process
    if isinstance(problems, str) or not isinstance(problems, Sequence):
        raise InputError(
            f"problems: got {type(problems).__name__}; allowed: a list of problems "
            "(evaluate(agent, problem) takes one)"
        )
    if errors not in (RAISE, KEEP):
        raise InputError(f"errors: got {errors!r}; allowed: {RAISE!r} or {KEEP!r}")
    out: list[Quality | Exception | None] = [None] * len(problems)

    def done(i: int, value: Quality | Exception) -> None:
        if isinstance(value, Exception) and errors == RAISE:
            raise value
        out[i] = value
        if on_result is not None:
            on_result(i, value)

    ready = []
    for i, problem in enumerate(problems):  # before any training
        try:
            check_agent_and_problem(agent, problem, f"problems[{i}]")
            check_metrics(problem, metrics)
            check_fit(agent, problem)
            ready.append(i)
        except Exception as exc:
            done(i, exc)
    for members in training_groups(agent, [problems[i] for i in ready]):
        _evaluate_group(agent, problems, [ready[m] for m in members], metrics, done)
    return out  # type: ignore[return-value]


def _evaluate_group(agent, problems, members: list[int], metrics, done) -> None:
    """Trains once for the problems `members` (or each alone) and scores each, handing
    each problem's Quality, or its error, to `done` as it comes."""
    group = [problems[i] for i in members]
    if not shares_training(agent, group):
        for i, problem in zip(members, group):
            try:
                value = score_trained(problem, train_timed(agent, problem), metrics)
            except Exception as exc:
                value = exc
            done(i, value)
        return
    try:  # checked in evaluate_many: trained here without train_shared's checks
        trained = presample(_train_once(agent, group), group)
    except Exception as exc:  # a failed training fails every problem it was to serve
        for i in members:
            done(i, exc)
        return
    for j, (i, problem) in enumerate(zip(members, group)):
        try:
            value = score_trained(problem, trained.for_problem(j), metrics)
        except Exception as exc:
            value = exc
        done(i, value)


def training_groups(agent: Any, problems: Sequence[Problem]) -> list[list[int]]:
    """Indices of `problems` that one training of `agent` serves, by first appearance: one
    group per training key where the agent may share it (`may_share`), else one problem a
    group (`testbed.base.group_by_training`, as a sweep groups jobs)."""
    return group_by_training([p.training_key if may_share(agent, p) else None for p in problems])


def train_shared(agent: Agent, problems: Sequence[Problem]) -> Trained:
    """One training for all `problems` (which `shares_training` allows), on the first's data."""
    if not shares_training(agent, problems):
        raise InputError(
            f"problems: {len(problems)} problem(s) whose training data differ, or an agent "
            "that may not share their training; allowed: problems with one training_key and "
            "an agent that may share it (amortized, unless the problems differ only in "
            "scoring)"
        )
    for problem in problems:
        check_fit(agent, problem)
    return _train_once(agent, problems)


def _train_once(agent: Agent, problems: Sequence[Problem]) -> Trained:
    """One training on the first problem's data, recorded as shared by all `problems`."""
    return dataclasses.replace(train_timed(agent, problems[0]), shared=len(problems))


def presample(trained: Trained, problems: Sequence[Problem]) -> Trained:
    """`trained` holding the posterior draws every problem will ask for, taken in one call
    when all problems say what they draw (`sample_request`) and the posterior can draw at
    several observations at once (`can_sample_many`: sbi's vectorized MCMC of NLE / NRE);
    else `trained` as it is (NPE, one problem, other families).

    The call's seconds are spread evenly: each problem records its share as
    `sampling_seconds` and in `evaluation_seconds`. Its draws differ from one observation
    at a time (other chains, one seed derived from the problems' sampling seeds) but are
    reproducible. A failed call is logged and each problem then samples on its own.
    """
    requests = [getattr(p, "sample_request", None) for p in problems]
    if len(problems) < 2 or any(r is None for r in requests):
        return trained
    try:
        posterior = as_posterior(trained.predictive)
    except InputError:  # not a posterior: its scoring says so
        return trained
    if not posterior.can_sample_many:
        return trained
    try:
        with activity(f"sampling at {len(problems)} observations in one call"):
            seconds = posterior.presample(requests)
    except Exception as exc:  # each problem then samples (and fails) on its own
        logging.getLogger("testbed.evaluate").warning(
            "batched sampling failed (%s: %s); sampling one observation at a time",
            type(exc).__name__,
            exc,
        )
        return trained
    return dataclasses.replace(
        trained, predictive=posterior, sampling_seconds=seconds / len(problems)
    )
