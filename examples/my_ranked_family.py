"""A problem family ranked on a score of its own: the Brier skill of the mean predictive.

A family says how the leaderboard ranks it when it registers (`ranked_by`): which metric,
which way is better, which agent (if any) normalises it. Here the Neural Testbed's
2-d problems are ranked on a new metric, the Brier skill score of the agent's mean
predictive on the test inputs (1 = perfect, 0 = as good as predicting 1/2, higher is
better). `testbed leaderboard` and `testbed report` rank it with no other change.

Run: python examples/my_ranked_family.py
Sweep: testbed sweep --agent uniform,mlp --sweep brier_2d --import examples/my_ranked_family.py
"""

from __future__ import annotations

import numpy as np

import agents
import generative
import testbed
from generative.classification import (
    ClassificationProblem,
    ClassificationSettings,
    classification_2d_grid,
)
from testbed.accuracy import mean_probs
from testbed.ranking import RankedBy


def brier_skill(probs: np.ndarray, y: np.ndarray) -> float:
    """Brier skill score of mean predictive probabilities [n, C] at labels y [n]:
    1 - Brier / Brier of the uniform 1/C (higher is better)."""
    onehot = np.eye(probs.shape[1])[np.asarray(y)]
    brier = np.mean(np.sum((probs - onehot) ** 2, axis=1))
    return float(1.0 - brier / np.mean(np.sum((1.0 / probs.shape[1] - onehot) ** 2, axis=1)))


def _on_test_inputs(evidence) -> dict[str, float]:
    """The metric on a problem: the agent's mean predictive at the test inputs."""
    inputs = evidence["labelled_inputs"]
    x, y = inputs.splits["test"]
    probs = np.asarray(mean_probs(evidence["sampler"], x, inputs.keys, inputs.num_classes))
    return {"brier_skill": brier_skill(probs, y)}


class BrierProblem(ClassificationProblem):
    """A Neural Testbed problem that also scores the Brier skill."""

    metrics = (*ClassificationProblem.metrics, "brier_skill")


BRIER_SKILL = RankedBy(  # higher is better; no agent normalises it; a negative skill is real
    score="brier_skill", name="Brier skill", short="skill", lower_is_better=False,
    clip_negative=False,
    note="Brier skill of the mean predictive on 1,000 test inputs: 1 is perfect, 0 is 1/2.",
)  # fmt: skip
TABLE = [s for s in classification_2d_grid(1) if s["tau"] == 1 and s["temperature"] == 0.1]

if "brier_2d" not in generative.FAMILIES:  # registered once, however often imported
    testbed.metrics.register(
        "brier_skill", needs=("labelled_inputs", "sampler"), apply=_on_test_inputs,
        gives=("brier_skill",),
    )(brier_skill)  # fmt: skip
    generative.registry.register_table(
        "brier_2d",
        TABLE,
        ClassificationSettings,
        BrierProblem,
        "the 2-d Neural Testbed problems at T = 0.1, ranked on the Brier skill",
        options=("num_test_seeds", "num_enn_samples"),
        prediction="labels",
        ranked_by=BRIER_SKILL,
    )

if __name__ == "__main__":
    for name in ("uniform", "mlp"):
        quality = testbed.evaluate(agents.load(name), generative.load("brier_2d/3"))
        print(f"{name:8s} Brier skill {quality['brier_skill']:.3f}")
