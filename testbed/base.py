"""The interfaces every problem, agent and evaluator agrees on.

Every problem is a conditional prediction problem: from pairs drawn from a joint
distribution, learn p(target | input). An agent trains on what the problem gives and
returns a *predictive*; the problem scores the predictive and returns a `Quality`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from testbed.errors import InputError
from testbed.seeding import Seed

Array = Any  # a numpy, JAX or torch array
PRNGKey = jax.Array


class Data(NamedTuple):
    """Examples along the leading axis: x [n, ...] inputs, y [n, ...] targets."""

    x: Array
    y: Array


@dataclasses.dataclass(frozen=True)
class PriorKnowledge:
    """What an agent may know about a prediction problem before it sees the data.

    Agents use it to scale regularisation (e.g. sqrt(temperature) * input_dim / num_train)
    and to size their outputs (num_classes = 1: regression, real outputs [n, 1]). Simulator
    problems give a `SimulatorKnowledge` (testbed.simulation) and model-based ones a
    `ModelKnowledge` (testbed.model) instead.
    `extra` is for problem families of users' own: no built-in family or agent uses it,
    and it must not carry the answer.
    """

    input_dim: int
    num_train: int
    num_classes: int = 1
    tau: int = 1
    temperature: float | None = None
    layers: int | None = None
    noise_std: float | None = None  # regression: the sd of the targets' Gaussian noise
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of_settings(cls, settings: Any, **known: Any) -> PriorKnowledge:
        """A seeded problem's knowledge: input_dim, num_train and tau read from its
        settings, plus what else the family tells agents (`known`)."""
        return cls(
            input_dim=settings.input_dim, num_train=settings.num_train, tau=settings.tau, **known
        )


@runtime_checkable
class EpistemicSampler(Protocol):
    """One sampled function of the agent's predictive: `(x [n, d], key) -> logits [n, C]`.

    One key is one coherent function for *all* rows of x: calling twice with the same key
    returns the same logits, and the rows of one call are the function at each input.
    That is what makes joint predictions meaningful. Any Python callable works (JAX,
    PyTorch, scikit-learn); a JAX-traceable sampler is vmapped over keys by the
    evaluators, any other is looped.
    """

    def __call__(self, x: Array, key: PRNGKey) -> Array: ...


class FiniteSampler:
    """A sampler with K distinct functions (an ensemble, a set of MCMC snapshots).

    `all_logits(x) -> [K, n, C]` gives every function at once; a key selects one member
    uniformly (`index(key)`). Evaluators use the structure: M sampled keys are K function
    evaluations and a histogram of indices, not M evaluations.
    """

    def __init__(self, all_logits: Callable[[Array], Array], num_functions: int):
        if int(num_functions) < 1:
            raise InputError(f"num_functions: got {num_functions!r}; allowed: an integer >= 1")
        self.all_logits = all_logits
        self.num_functions = int(num_functions)

    def index(self, key: PRNGKey) -> jax.Array:
        """The member a key selects: uniform over the K functions."""
        return jax.random.randint(key, (), 0, self.num_functions)

    def __call__(self, x: Array, key: PRNGKey) -> Array:
        return jnp.take(self.all_logits(x), self.index(key), axis=0)


@runtime_checkable
class PosteriorEstimate(Protocol):
    """An approximate posterior q(theta | x).

    `sample(x_o, num_samples, seed) -> [num_samples, dim_theta]` is required;
    `log_prob(theta, x_o)` and `inverse_transform(theta, x)` (flows, for L-C2ST-NF) are
    optional. Objects with the `sbi` package's posterior shape (`sample(shape, x=...)`)
    are accepted as they are through an adapter where posterior problems score them.
    """

    def sample(self, x_o: Array, num_samples: int, seed: Seed) -> Array: ...


@runtime_checkable
class GaussianPosterior(Protocol):
    """A posterior that is Gaussian and says so: its `mean` [d] and `cov` [d, d] (exact
    Gaussian KL scores use them instead of samples)."""

    mean: Any
    cov: Any


Predictive = EpistemicSampler | PosteriorEstimate | Any

# What an agent predicts and what a problem needs: one vocabulary, so a mismatch (a
# classifier on a simulator problem) is refused before training. An agent declares a set
# of kinds (`predicts`); a problem needs one (`prediction`, or derived by
# `testbed.evaluate.needed_prediction` from its prior knowledge and evidence).
LABELS = "labels"  # an EpistemicSampler of logits [n, C]: classification, real data, coin
REAL_VALUES = "real_values"  # an EpistemicSampler of real outputs [n, 1]: regression
POSTERIOR = "posterior"  # a PosteriorEstimate from simulations: sbi, conjugate_sbi
MODEL_POSTERIOR = "model_posterior"  # a PosteriorEstimate from Data + a ModelKnowledge
PREDICTIONS: dict[str, str] = {  # kind -> how messages say it
    LABELS: "labels",
    REAL_VALUES: "real values",
    POSTERIOR: "a posterior",
    MODEL_POSTERIOR: "a posterior of a given model (ModelKnowledge)",
}


def parse_predictions(field: str, kinds: Any) -> frozenset[str] | None:
    """`kinds` (one name or several, None: undeclared) as a frozenset of PREDICTIONS' names,
    else an InputError naming `field`."""
    if kinds is None:
        return None
    out = frozenset([kinds] if isinstance(kinds, str) else kinds)
    unknown = sorted(out - set(PREDICTIONS))
    if unknown or not out:
        got = unknown[0] if unknown else "nothing"
        raise InputError(
            f"{field}: got {got!r}; allowed: one or more of " + ", ".join(map(repr, PREDICTIONS))
        )
    return out


def predictions_in_words(kinds: Any) -> str:
    """`labels or real values`: the kinds in the order of PREDICTIONS, in words."""
    return " or ".join(PREDICTIONS[k] for k in PREDICTIONS if k in kinds)


@runtime_checkable
class Agent(Protocol):
    """Trains on what a problem gives and returns a predictive.

    `agent(train_data, prior_knowledge) -> predictive`: a `Data` and a `PriorKnowledge`
    (classification, real data), a `SimulationAccess` and a `SimulatorKnowledge`
    (simulators), or a `Data` and a `ModelKnowledge` (conjugate models).
    """

    def __call__(self, train_data: Any, prior_knowledge: Any) -> Predictive: ...


@runtime_checkable
class Problem(Protocol):
    """A seeded problem: data for the agent, knowledge for the agent, and a scorer."""

    @property
    def train_data(self) -> Any: ...

    @property
    def prior_knowledge(self) -> Any: ...

    def evaluate(self, predictive: Predictive) -> Quality: ...


@runtime_checkable
class Oracle(Protocol):
    """An agent that reads the problem itself instead of training (the `oracle` and `exact`
    agents: the true predictive, for tests and floors only). `testbed.evaluate` hands such
    an agent the problem; every other agent sees only the training data and knowledge.
    A registered agent declares it (`agents.register(..., oracle=True)`): it is not built
    to find out."""

    def predictive_for(self, problem: Problem) -> Predictive: ...


@runtime_checkable
class Amortized(Protocol):
    """An agent that may say its training does not depend on the observation (amortized
    SBI: NPE, NLE, NRE in one round), so one training serves several observations.
    A registered agent declares it (`agents.register(..., amortized=...)`, by default its
    config's `amortized`)."""

    @property
    def amortized(self) -> bool: ...


@runtime_checkable
class SharesTraining(Protocol):
    """A problem whose training data is that of every problem with the same
    `training_key`. Who may train once for them is `training_shared_by`:
    `SHARED_BY_AMORTIZED` (the default: the problems differ in what the agent is shown,
    e.g. the SBI benchmark's observations, so only agents that ignore it) or
    `SHARED_BY_ANY` (they differ only in how the predictive is scored, e.g. the Neural
    Testbed's tau = 1 / tau = 10 pairs: every agent trains once; the shared training sees
    the first problem's prior knowledge)."""

    @property
    def training_key(self) -> str: ...


SHARED_BY_AMORTIZED = "amortized"
SHARED_BY_ANY = "any"
SHARED_BY = (SHARED_BY_AMORTIZED, SHARED_BY_ANY)

# What an agent's training depends on: a registered agent declares it
# (`agents.register(..., oracle=..., amortized=...)`), so a sweep knows which problems one
# training serves from names and ids alone.
TRAINS_ON_DATA = "data"  # the problem's training data and prior knowledge (most agents)
TRAINS_ON_SIMULATOR = "simulator"  # the prior and simulator only, not the observation
TRAINS_ON_PROBLEM = "problem"  # the problem itself (an Oracle: it does not train)
TRAINS_ON = (TRAINS_ON_DATA, TRAINS_ON_SIMULATOR, TRAINS_ON_PROBLEM)


def training_shared_by(problem: Any) -> str:
    """Who may share a training on `problem` (see SharesTraining)."""
    return getattr(problem, "training_shared_by", SHARED_BY_AMORTIZED)


def trains_on(agent: Any) -> str:
    """What `agent`'s training depends on (TRAINS_ON): what it declares (`trains_on`, as a
    registered agent does), else what it is: an Oracle reads the problem, an agent that
    says it is `amortized` only the simulator, any other the training data."""
    declared = getattr(agent, "trains_on", None)
    if isinstance(declared, str) and declared in TRAINS_ON:
        return declared
    if isinstance(agent, Oracle):
        return TRAINS_ON_PROBLEM
    if isinstance(agent, Amortized) and bool(agent.amortized):
        return TRAINS_ON_SIMULATOR
    return TRAINS_ON_DATA


def may_share_training(depends_on: str, shared_by: str) -> bool:
    """Whether an agent whose training depends on `depends_on` (TRAINS_ON) may train once
    for problems of one training key whose family says `shared_by` (SHARED_BY): never one
    that reads the problem; every other when the problems differ only in scoring; else
    one that ignores the observation."""
    if depends_on == TRAINS_ON_PROBLEM:
        return False
    return shared_by == SHARED_BY_ANY or depends_on == TRAINS_ON_SIMULATOR


def group_by_training(keys: Sequence[Hashable | None]) -> list[list[int]]:
    """Indices of `keys` that one training serves, by first appearance: one group per
    training key, each None (a problem that shares nothing) alone. The one grouping rule
    of `testbed.evaluate.training_groups` (problems) and `leaderboard.execution.jobs`
    (ids)."""
    groups: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(("alone", i) if key is None else ("key", key), []).append(i)
    return list(groups.values())


@runtime_checkable
class OffersOracle(Protocol):
    """A problem that knows its true predictive (the environment, the reference posterior)."""

    def oracle_predictive(self) -> Predictive: ...


@runtime_checkable
class OffersExactPosterior(Protocol):
    """A problem with a closed-form posterior (conjugate models)."""

    def exact_posterior(self) -> PosteriorEstimate: ...


class Quality(dict):
    """A flat `dict[str, float]` of metrics and diagnostics: one leaderboard row.

    Values are converted to Python floats; non-finite values are kept (and flagged by
    the leaderboard's scoring), never silently replaced.
    """

    def __init__(self, mapping: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__()
        for k, v in {**(mapping or {}), **kwargs}.items():
            self[k] = v

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise InputError(f"Quality key: got {key!r}; allowed: a string")
        try:
            value = float(np.asarray(value).item()) if not isinstance(value, bool) else float(value)
        except (TypeError, ValueError) as e:
            raise InputError(f"Quality[{key!r}]: got {value!r}; allowed: a number") from e
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:  # keep the checks of __setitem__
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    @property
    def finite(self) -> bool:
        """True when every value is finite."""
        return all(math.isfinite(v) for v in self.values())
