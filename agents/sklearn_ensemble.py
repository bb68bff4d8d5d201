"""`from_sklearn`: any scikit-learn estimator as an agent, an ensemble of K fitted copies.

    agent = agents.from_sklearn(lambda seed: DecisionTreeClassifier(max_depth=4,
                                                                   random_state=seed),
                                num_members=10)
    sampler = agent(train_data, prior_knowledge)   # a FiniteSampler of 10 functions

Each member is a fresh estimator (`make_estimator(seed)`, or a clone of an estimator you
pass, its `random_state` set when it has one) fitted on a bootstrap resample of the
training data (`bootstrap=False`: on all of it, then only the seed varies). A key picks one
member: the members are the agent's sampled functions, so the spread between them is its
epistemic uncertainty and joint predictions see it.

Classification (prior_knowledge.num_classes >= 2) needs a classifier with
`predict_proba`. As the Neural Testbed's scikit-learn agents do, every member is also fitted
on one fake point at x = 0 of each class, so every class is known to it (a resample of a
small data set misses classes: `predict_proba` would have fewer columns), and its
probabilities are clipped to `prob_clip` ([0.01, 0.99]; a 0 gives an infinite KL) before
the log gives logits. Regression (num_classes = 1) needs a regressor; its `predict` is the
real output [n, 1]. The members' function is plain numpy, marked `traceable = False`: the
evaluators call it once per set of inputs (all K members at once), never once per key.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone, is_classifier, is_regressor

from agents.sklearn_agents import PROB_CLIP, with_fake_points
from testbed.base import LABELS, REAL_VALUES, Data, FiniteSampler, PriorKnowledge
from testbed.config import check_at_least
from testbed.errors import InputError

MAX_SEED = 2**31 - 1  # scikit-learn's random_state range


def _estimator_factory(make_estimator: Any) -> Callable[[int], Any]:
    """`make_estimator` as `seed -> fresh estimator`: a callable of a seed or of nothing,
    or an estimator (cloned, with `random_state=seed` when it takes one)."""
    if hasattr(make_estimator, "fit") and hasattr(make_estimator, "get_params"):
        template = make_estimator

        def fresh(seed: int) -> Any:
            est = clone(template)
            if "random_state" in est.get_params(deep=False):
                est.set_params(random_state=seed)
            return est

        return fresh
    if not callable(make_estimator):
        raise InputError(
            f"make_estimator: got {make_estimator!r}; allowed: a function seed -> unfitted "
            "scikit-learn estimator, or an estimator"
        )
    try:
        takes_seed = bool(inspect.signature(make_estimator).parameters)
    except (TypeError, ValueError):
        takes_seed = True
    return make_estimator if takes_seed else (lambda seed: make_estimator())


def from_sklearn(
    make_estimator: Any,
    *,
    num_members: int = 10,
    bootstrap: bool = True,
    seed: int = 0,
    prob_clip: tuple[float, float] = PROB_CLIP,
) -> Callable[[Data, PriorKnowledge], FiniteSampler]:
    """An agent `(train_data, prior_knowledge) -> FiniteSampler` of `num_members` fitted
    scikit-learn estimators (see the module doc).

    `make_estimator(seed) -> unfitted estimator` is called once per member with its own
    seed (use it as `random_state`); an estimator instance is cloned per member instead.
    `bootstrap`: fit each member on a resample with replacement of the training data.
    `seed` fixes the members' seeds and resamples. `prob_clip`: classification
    probabilities are clipped to this range before the log.
    """
    check_at_least("num_members", num_members, 1)
    low, high = (float(v) for v in prob_clip)
    if not 0 < low < high <= 1:
        raise InputError(f"prob_clip: got {prob_clip!r}; allowed: (low, high), 0 < low < high <= 1")
    fresh = _estimator_factory(make_estimator)

    def agent(train_data: Data, prior_knowledge: PriorKnowledge) -> FiniteSampler:
        regression = prior_knowledge.num_classes < 2
        n = len(train_data.x)  # may be 0 (coin/0): the fake points are then all it sees
        x = np.asarray(train_data.x, np.float64).reshape(n, prior_knowledge.input_dim)
        y = np.asarray(train_data.y).reshape(n, -1)[:, 0] if n else np.zeros(0)
        y = y.astype(np.float64) if regression else y.astype(int)
        if regression and not n:
            raise InputError("train_data: got no examples; allowed: a regression problem "
                             "with at least one training example")  # fmt: skip
        rng = np.random.default_rng(seed)
        members = []
        for _ in range(num_members):
            estimator = fresh(int(rng.integers(MAX_SEED)))
            _check_estimator(estimator, regression)
            rows = rng.integers(0, len(y), len(y)) if bootstrap and len(y) else np.arange(len(y))
            fx, fy = x[rows], y[rows]
            if not regression:
                fx, fy = with_fake_points(Data(fx, fy), prior_knowledge)
            members.append(estimator.fit(fx, fy))
        if regression:
            return FiniteSampler(_regression_outputs(members), num_members)
        return FiniteSampler(
            _class_logits(members, prior_knowledge.num_classes, low, high), num_members
        )

    agent.predicts = (LABELS, REAL_VALUES)  # what testbed.evaluate checks before training
    return agent


def _check_estimator(estimator: Any, regression: bool) -> None:
    name = type(estimator).__name__
    if regression and is_classifier(estimator):
        raise InputError(
            f"make_estimator: got a classifier ({name}) for a regression problem "
            "(num_classes = 1); allowed: a regressor (e.g. DecisionTreeRegressor)"
        )
    if not regression and (is_regressor(estimator) or not hasattr(estimator, "predict_proba")):
        raise InputError(
            f"make_estimator: got {name}, which has no predict_proba, for a classification "
            "problem; allowed: a classifier with predict_proba (e.g. DecisionTreeClassifier)"
        )


def _class_logits(members: list[Any], num_classes: int, low: float, high: float):
    def all_logits(x):  # [K, n, C]: every member at once
        x = np.asarray(x, np.float64)
        out = np.empty((len(members), len(x), num_classes), np.float32)
        for k, member in enumerate(members):
            probs = member.predict_proba(x)
            if probs.shape[1] != num_classes:
                raise InputError(
                    f"classifier classes: got {probs.shape[1]} probability columns; allowed: "
                    f"{num_classes} (prior_knowledge.num_classes)"
                )
            out[k] = np.log(np.clip(probs, low, high))
        return out

    all_logits.traceable = False  # scikit-learn: the evaluators call it directly
    return all_logits


def _regression_outputs(members: list[Any]):
    def all_outputs(x):  # [K, n, 1]
        x = np.asarray(x, np.float64)
        return np.stack([np.asarray(m.predict(x)).reshape(len(x), 1) for m in members]).astype(
            np.float32
        )

    all_outputs.traceable = False
    return all_outputs
