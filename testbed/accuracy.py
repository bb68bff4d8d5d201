"""Accuracy, expected calibration error and marginal NLL of an agent's mean predictive."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from testbed.metrics.registry import register
from testbed.sampled_functions import apply_functions


def _probs(log_probs: jax.Array, aux: None) -> jax.Array:
    return jnp.exp(log_probs)


def mean_probs(
    sampler: Callable, x: jax.Array, keys: jax.Array, num_classes: int | None = None
) -> jax.Array:
    """The agent's mean predictive probabilities [n, C] over the sampled functions."""
    funcs = apply_functions(sampler, jnp.asarray(x), keys, _probs, num_classes=num_classes)
    return jnp.einsum("f,fnc->nc", jnp.exp(funcs.log_weights), funcs.values)


def accuracy(probs: np.ndarray, y: np.ndarray) -> float:
    """Fraction of argmax predictions equal to the labels."""
    return float(np.mean(np.argmax(np.asarray(probs), axis=-1) == np.asarray(y)))


def expected_calibration_error(probs: np.ndarray, y: np.ndarray, num_bins: int = 10) -> float:
    """ECE with equal-width confidence bins on [0, 1] (TFP's definition, 10 bins default).

    sum_b (n_b / n) |accuracy_b - mean confidence_b| over bins of the top-class probability.
    """
    probs = np.asarray(probs, np.float64)
    y = np.asarray(y)
    confidence = probs.max(axis=-1)
    correct = (probs.argmax(axis=-1) == y).astype(np.float64)
    bins = np.clip((confidence * num_bins).astype(int), 0, num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    acc_sum = np.bincount(bins, weights=correct, minlength=num_bins)
    conf_sum = np.bincount(bins, weights=confidence, minlength=num_bins)
    filled = counts > 0
    gaps = np.abs(acc_sum[filled] - conf_sum[filled])
    return float(gaps.sum() / len(y))


@dataclasses.dataclass(frozen=True)
class LabelledInputs:
    """Inputs and labels per split (e.g. 'test', 'train') and the sampler keys whose mean
    predictive is scored (M = 100 in the reference)."""

    splits: Mapping[str, tuple[Any, Any]]
    keys: jax.Array
    num_classes: int


def mean_predictive_scores(probs: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Accuracy, ECE and marginal NLL of mean predictive probabilities [n, C] at labels y."""
    probs = np.asarray(probs, np.float64)
    y = np.asarray(y)
    with np.errstate(divide="ignore"):
        nll = float(-np.log(probs[np.arange(len(y)), y]).mean())
    return {
        "acc": accuracy(probs, y),
        "ece": expected_calibration_error(probs, y),
        "marginal_nll": nll,
    }


def _accuracy(evidence) -> dict[str, float]:
    inputs = evidence["labelled_inputs"]
    out = {}
    for split, (x, y) in inputs.splits.items():
        if len(y) == 0:
            continue
        probs = mean_probs(evidence["sampler"], x, inputs.keys, inputs.num_classes)
        for name, value in mean_predictive_scores(probs, y).items():
            out[f"{split}_{name}"] = value
    return out


register(
    "accuracy",
    needs=("labelled_inputs", "sampler"),
    apply=_accuracy,
    gives=tuple(f"{s}_{k}" for s in ("test", "train") for k in ("acc", "ece", "marginal_nll")),
)(mean_predictive_scores)
