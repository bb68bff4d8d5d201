"""A problem family of your own: a noisy threshold on the line, scored like the Neural Testbed.

A family maps the rest of an id (`threshold/3`) to settings and builds a seeded problem;
`generative.register_family` adds it, `generative.register_sweep` names a list of ids.
The problem gives the agent its training data and prior knowledge, and offers evidence
(here the environment's labelled test batches with their true log-likelihood) to the
registered metrics it lists: the joint KL and the accuracy work on it unchanged.

Run: python examples/my_problem.py
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

import agents
import generative
import testbed
from testbed.accuracy import LabelledInputs
from testbed.evaluation import Evidence, EvidenceScoring
from testbed.joint_kl import TestBatches, estimator_keys, sample_keys


@dataclasses.dataclass
class ThresholdProblem(EvidenceScoring):
    """x ~ N(0, 1); y = [x > threshold], flipped with probability `flip`."""

    threshold: float
    flip: float
    num_train: int
    seed: int
    tau: int = 1
    num_test_seeds: int = 1000
    num_enn_samples: int = 100

    offers = frozenset({"sampler", "label_batches", "labelled_inputs"})
    metrics = ("joint_kl", "accuracy")

    def __post_init__(self):
        self.train_data = testbed.Data(*self.draw(self.num_train, self.seed))
        self.prior_knowledge = testbed.PriorKnowledge(
            input_dim=1, num_train=self.num_train, num_classes=2, tau=self.tau
        )

    def log_probs(self, x: np.ndarray) -> np.ndarray:
        """The environment's log p(y | x) for y = 0, 1: [n, 2]."""
        high = (x[:, 0] > self.threshold).astype(float)
        p1 = high * (1 - self.flip) + (1 - high) * self.flip
        with np.errstate(divide="ignore"):  # flip 0: the other label has probability 0
            return np.log(np.stack([1 - p1, p1], axis=1))

    def draw(self, num_samples: int, seed):
        """(x, y) of `num_samples` draws (the testbed's sample order: count, then seed)."""
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((num_samples, 1)).astype(np.float32)
        y = (rng.random(num_samples) < np.exp(self.log_probs(x)[:, 1])).astype(np.int32)
        return x, y

    def evidence(self, sampler) -> Evidence:
        x, y = self.draw(self.num_test_seeds * self.tau, (self.seed, 1))
        env_ll = self.log_probs(x)[np.arange(len(y)), y].reshape(-1, self.tau).sum(axis=1)
        _, keys = estimator_keys(jax.random.PRNGKey(self.seed), self.num_enn_samples)
        batches = TestBatches(x.reshape(-1, self.tau, 1), y.reshape(-1, self.tau), keys, env_ll)
        inputs = LabelledInputs(
            {"test": (x, y)}, sample_keys(jax.random.PRNGKey(0), self.num_enn_samples), 2
        )
        return Evidence(
            {
                "sampler": lambda _: sampler,
                "label_batches": lambda _: batches,
                "labelled_inputs": lambda _: inputs,
            }
        )

    def oracle_predictive(self):
        """The environment as a sampler (so the `oracle` agent scores KL 0 here too)."""
        return lambda x, key: self.log_probs(np.asarray(x))


SETTINGS = [
    {"threshold": t, "flip": f, "num_train": n, "seed": i}
    for i, (t, f, n) in enumerate(
        (t, f, n) for t in (0.0, 1.0) for f in (0.0, 0.1) for n in (10, 100)
    )
]


def threshold_settings(rest: str) -> dict:
    return generative.registry.index_settings("threshold", rest, SETTINGS)


@generative.register_family("threshold", threshold_settings, "a noisy threshold on the line")
def build(settings: dict) -> ThresholdProblem:
    return ThresholdProblem(**{k: v for k, v in settings.items() if k != "family"})


@generative.register_sweep("threshold")
def threshold_ids() -> list[str]:
    return [f"threshold/{i}" for i in range(len(SETTINGS))]


if __name__ == "__main__":
    for pid in generative.sweep_ids("threshold")[:2]:
        for name in ("uniform", "oracle", "logistic_regression"):
            quality = testbed.evaluate(agents.load(name), generative.load(pid))
            print(f"{pid:12s} {name:20s} KL {quality['kl_estimate']:.3f}")
