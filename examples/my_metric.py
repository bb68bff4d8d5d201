"""A metric of your own, on problems written before it: the energy distance.

`testbed.metrics.register(name, needs=...)` adds a function of arrays; `needs` names the
evidence it reads (testbed.evaluation.EVIDENCE), in the order the function takes it. Every
problem that offers that evidence can then compute it, on the same samples and seeds as
its own metrics: `testbed.evaluate(agent, problem, metrics=[...])`.

Run: python examples/my_metric.py
"""

from __future__ import annotations

import numpy as np

import agents
import generative
import testbed


@testbed.metrics.register("energy_distance", needs=("reference_samples", "posterior_samples"))
def energy_distance(reference, samples) -> float:
    """Energy distance 2 E|X - Y| - E|X - X'| - E|Y - Y'| between reference and samples."""
    x, y = np.asarray(reference, np.float64), np.asarray(samples, np.float64)

    def mean_dist(a, b):
        return float(np.mean(np.linalg.norm(a[:, None, :] - b[None, :, :], axis=-1)))

    return 2 * mean_dist(x, y) - mean_dist(x, x) - mean_dist(y, y)


if __name__ == "__main__":
    problem = generative.load("conjugate/wyb/1", num_samples=500)
    for name in ("exact", "nuts"):
        agent = agents.load(name, **({"num_samples": 500} if name == "nuts" else {}))
        quality = testbed.evaluate(agent, problem, metrics=["energy_distance"])
        print(f"{name:6s} energy distance to the exact posterior {quality['energy_distance']:.4f}")
