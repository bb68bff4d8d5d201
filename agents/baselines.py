"""Baseline agents that need no training: uniform, average class probs, prior, and the
floors that read the problem: oracle (the true predictive) and exact (the closed-form
posterior of conjugate problems)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from agents.registry import register, require_classification
from testbed.base import (
    LABELS,
    MODEL_POSTERIOR,
    POSTERIOR,
    REAL_VALUES,
    Data,
    OffersExactPosterior,
    OffersOracle,
    PriorKnowledge,
)
from testbed.config import UNUSED_SEED, check_nonnegative, check_one_of
from testbed.errors import InputError
from testbed.online import OnlineLearner
from testbed.random_mlp import sample_logit_fn


@dataclasses.dataclass(frozen=True)
class NoConfig:
    """No settings (a seed only, for uniform bookkeeping: nothing in these agents is random,
    so a sweep runs seed 0 only)."""

    seed: int = dataclasses.field(default=0, metadata={UNUSED_SEED: "nothing is random"})


def _stay(state, batch, key, t):
    return state


def _uniform_logits(state, x, key):
    return jnp.zeros((x.shape[0], state["num_classes"].shape[0]), jnp.float32)


def online_uniform(config: NoConfig, prior: PriorKnowledge, key) -> OnlineLearner:
    """Uniform in a decision loop: it learns nothing, so it is never refit (every action ties,
    and ties are broken at random: uniformly random actions)."""
    return OnlineLearner({"num_classes": jnp.zeros((prior.num_classes,))}, _stay, _uniform_logits)


@register("uniform", NoConfig, predicts=(LABELS, REAL_VALUES), online=online_uniform)
def make_uniform(config: NoConfig):
    """Uniform class probabilities: the Neural Testbed's normaliser (regression: f = 0)."""

    def agent(data: Data, prior: PriorKnowledge):
        num_classes = prior.num_classes

        def sampler(x, key):
            return jnp.zeros((x.shape[0], num_classes), jnp.float32)

        return sampler

    return agent


@dataclasses.dataclass(frozen=True)
class ProblemReader:
    """An `Oracle`: what the problem offers under `offer` (a protocol of testbed.base: its
    true predictive, its exact posterior). For tests and floors only: it reads the problem
    instead of training."""

    agent: str
    offer: type  # a runtime-checkable protocol with one method, `method`
    method: str
    what: str  # what the problem must offer, in the error message
    allowed: str

    def serves(self, problem) -> bool:
        """Whether `problem` offers what this agent reads."""
        return isinstance(problem, self.offer)

    def predictive_for(self, problem):
        if not self.serves(problem):
            raise InputError(
                f"agent {self.agent}: problem {type(problem).__name__} offers no {self.what}; "
                f"allowed: {self.allowed}"
            )
        return getattr(problem, self.method)()


@register("oracle", NoConfig, predicts=(LABELS, REAL_VALUES, POSTERIOR), reads=OffersOracle)
def make_oracle(config: NoConfig) -> ProblemReader:
    """The true environment's predictive (tests and floors only: it reads the problem)."""
    return ProblemReader(
        "oracle",
        OffersOracle,
        "oracle_predictive",
        "oracle predictive",
        "problems with a known true predictive",
    )


@register("exact", NoConfig, predicts=(POSTERIOR, MODEL_POSTERIOR), reads=OffersExactPosterior)
def make_exact(config: NoConfig) -> ProblemReader:
    """The exact posterior (reads the problem: tests and floors only)."""
    return ProblemReader(
        "exact",
        OffersExactPosterior,
        "exact_posterior",
        "exact posterior",
        "problems with a closed-form posterior (conjugate/...)",
    )


@dataclasses.dataclass(frozen=True)
class AverageClassProbsConfig:
    """Training-label class frequencies. `form='reference'` (default) feeds them in as
    logits, as the Neural Testbed's baseline does (its per-id values); `form='log'` uses
    their logarithm, with `pseudo_count` added to every class (a class never seen then
    keeps a probability above 0)."""

    form: str = "reference"
    pseudo_count: float = 1.0
    seed: int = dataclasses.field(default=0, metadata={UNUSED_SEED: "frequencies are counted"})

    def __post_init__(self):
        check_one_of("form", self.form, ("reference", "log"))
        check_nonnegative("pseudo_count", self.pseudo_count)


@register("average_class_probs", AverageClassProbsConfig, predicts=LABELS)
def make_average_class_probs(config: AverageClassProbsConfig):
    """Training-label class frequencies at every input.

    By default the frequencies are the logits (the reference's baseline: softmax squashes
    them towards uniform, and no class has probability 0). With `form='log'`, the
    predictive is the (pseudo-counted) frequencies themselves; a class never seen with
    pseudo_count 0 has probability 0, and its test batches have infinite KL. With no
    training data both forms are uniform (the reference divides by 0).
    """

    def agent(data: Data, prior: PriorKnowledge):
        require_classification("average_class_probs", prior)
        y = np.asarray(data.y).reshape(-1).astype(int)
        counts = np.bincount(y, minlength=prior.num_classes)[: prior.num_classes]
        if config.form == "reference":
            freqs = counts / max(len(y), 1)
            logits = jnp.asarray(freqs, jnp.float32)
        else:
            total = counts.sum() + config.pseudo_count * prior.num_classes
            freqs = (counts + config.pseudo_count) / total if total else counts + 1.0
            with np.errstate(divide="ignore"):
                logits = jnp.asarray(np.log(freqs / freqs.sum()), jnp.float32)

        def sampler(x, key):
            return jnp.broadcast_to(logits, (x.shape[0], prior.num_classes))

        return sampler

    return agent


@register("prior", NoConfig, predicts=LABELS)
def make_prior(config: NoConfig):
    """A fresh generator MLP per key: the environment's prior, ignoring the data."""

    def agent(data: Data, prior: PriorKnowledge):
        if prior.temperature is None:
            raise InputError(
                "agent prior: prior_knowledge.temperature is None; allowed: problems "
                "generated by a random MLP with a temperature"
            )
        hidden = (50,) * (prior.layers if prior.layers is not None else 2)

        def sampler(x, key):
            fn = sample_logit_fn(key, prior.input_dim, prior.num_classes, prior.temperature, hidden)
            return fn(x)

        return sampler

    return agent
