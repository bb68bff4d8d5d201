"""`knn` and `random_forest`: scikit-learn classifiers as deterministic predictives.

As the reference: one fake point at x = 0 per class is added so every class is known to
the classifier, probabilities are clipped to [0.01, 0.99] (else a 0 gives infinite KL)
and the logits are their logs. Every key gives the same function, so each predictive is
a one-member `FiniteSampler` whose function is plain numpy (marked not traceable): the
evaluators call scikit-learn once per input set, never once per key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier

from agents.registry import register, require_classification
from testbed.base import LABELS, Data, FiniteSampler, PriorKnowledge
from testbed.config import check_at_least, check_one_of
from testbed.errors import InputError

PROB_CLIP = (0.01, 0.99)


def with_fake_points(data: Data, prior: PriorKnowledge) -> tuple[np.ndarray, np.ndarray]:
    """Training data plus one x = 0 example of each class."""
    x = np.asarray(data.x, np.float64).reshape(-1, prior.input_dim)
    y = np.asarray(data.y).reshape(-1).astype(int)
    fake_x = np.zeros((prior.num_classes, prior.input_dim))
    return np.concatenate([x, fake_x]), np.concatenate([y, np.arange(prior.num_classes)])


def as_sampler(classifier, num_classes: int) -> FiniteSampler:
    """A fitted classifier as a one-function sampler: log of clipped probabilities."""

    def all_logits(x):
        probs = classifier.predict_proba(np.asarray(x, np.float64))
        if probs.shape[1] != num_classes:  # a class absent from the fit (should not happen)
            raise InputError(
                f"classifier classes: got {probs.shape[1]} probability columns; allowed: "
                f"{num_classes} (prior_knowledge.num_classes)"
            )
        return np.log(np.clip(probs, *PROB_CLIP)).astype(np.float32)[None]

    all_logits.traceable = False  # scikit-learn: the evaluators call it directly
    return FiniteSampler(all_logits, 1)


def classifier_agent(name: str, make_classifier: Callable[[int], Any]):
    """The agent `name` of a scikit-learn classifier: `make_classifier(num_rows)` fitted on
    the data plus the fake points, as a one-function sampler (classification only)."""

    def agent(data: Data, prior: PriorKnowledge):
        require_classification(name, prior)
        x, y = with_fake_points(data, prior)
        return as_sampler(make_classifier(len(y)).fit(x, y), prior.num_classes)

    return agent


@dataclasses.dataclass(frozen=True)
class KnnConfig:
    """k nearest neighbours (reference `KnnConfig` defaults)."""

    num_neighbors: int = 3
    weighting: str = "uniform"
    seed: int = 0

    def __post_init__(self):
        check_at_least("num_neighbors", self.num_neighbors, 1)
        check_one_of("weighting", self.weighting, ("uniform", "distance"))


def knn_sweep() -> list[KnnConfig]:
    """The reference's `testbed_2d` sweep (12): k x weighting."""
    return [
        KnnConfig(num_neighbors=k, weighting=w)
        for k in (1, 5, 10, 30, 50, 100)
        for w in ("uniform", "distance")
    ]


@register("knn", KnnConfig, sweep=knn_sweep, predicts=LABELS)
def make_knn(config: KnnConfig):
    """k-nearest-neighbour class frequencies (deterministic)."""

    def knn(num_rows: int) -> KNeighborsClassifier:
        k = min(num_rows, config.num_neighbors)
        return KNeighborsClassifier(n_neighbors=k, weights=config.weighting)

    return classifier_agent("knn", knn)


@dataclasses.dataclass(frozen=True)
class RandomForestConfig:
    """Random forest (reference defaults: 100 trees, gini)."""

    num_trees: int = 100
    criterion: str = "gini"
    seed: int = 0

    def __post_init__(self):
        check_at_least("num_trees", self.num_trees, 1)
        check_one_of("criterion", self.criterion, ("gini", "entropy"))


def random_forest_sweep() -> list[RandomForestConfig]:
    """The reference's `testbed_2d` sweep (6): trees x criterion."""
    return [
        RandomForestConfig(num_trees=t, criterion=c)
        for t in (10, 100, 1000)
        for c in ("gini", "entropy")
    ]


@register("random_forest", RandomForestConfig, sweep=random_forest_sweep, predicts=LABELS)
def make_random_forest(config: RandomForestConfig):
    """Random-forest class probabilities (deterministic given the seed)."""

    def forest(num_rows: int) -> RandomForestClassifier:
        return RandomForestClassifier(
            n_estimators=config.num_trees, criterion=config.criterion, random_state=config.seed
        )

    return classifier_agent("random_forest", forest)
