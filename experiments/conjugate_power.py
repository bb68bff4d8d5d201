"""Injected errors and the power of each test against them (for the docs' power table).

`Perturbed` wraps the exact posterior and shifts its mean, inflates its spread or flips the
correlations of coordinate 0 (marginals unchanged); `power_table` reports, per test, the
rejection rate over seeded trials. With `kind='none'` the rate is the type-I error. C2ST
trains classifiers (about a second a trial), so it gets its own, smaller number of trials.
Run: .venv/bin/python -m experiments.conjugate_power [--trials 200] [--c2st-trials 50]
"""

from __future__ import annotations

import argparse

import numpy as np

import generative
from generative.conjugate.problem import ConjugateProblem

KINDS = {"none": 0.0, "shift": 0.3, "inflate": 1.3, "flip": 0.0}
TESTS = ("pit_ks", "mahalanobis", "ddks", "c2st")


class Perturbed:
    """The exact posterior with an injected error (a PosteriorEstimate)."""

    def __init__(self, exact, kind: str, size: float):
        self.exact, self.kind, self.size = exact, kind, size
        post = exact.posterior
        self.mean, self.sd = post.mean, np.sqrt(post.var)

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        theta = self.exact.sample(x_o, num_samples, seed)
        if self.kind == "shift":  # every coordinate moved by `size` posterior sds
            return theta + self.size * self.sd
        if self.kind == "inflate":  # spread around the mean scaled by `size`
            return self.mean + self.size * (theta - self.mean)
        if self.kind == "flip":  # reflect coordinate 0 about its mean: its correlations flip
            theta = theta.copy()
            theta[:, 0] = 2 * self.mean[0] - theta[:, 0]
            return theta
        return theta


def rejection_rates(
    problem: ConjugateProblem, kind: str, size: float, trials: int, tests=TESTS
) -> dict[str, float]:
    """Fraction of `trials` seeded sample sets (of problem.num_samples) each of `tests`
    rejects (C2ST only where `problem.use_c2st`)."""
    predictive = Perturbed(problem.exact_posterior(), kind, size)
    counts: dict[str, float] = {}
    for t in range(trials):
        samples = predictive.sample(problem.x_o, problem.num_samples, seed=10_000 + t)
        # fresh null/reference draws per trial: rates are then unconditional
        scores = problem.posterior_scores(samples, np.random.default_rng((77, t)))
        for test in tests:
            if f"{test}_reject" in scores:
                counts[test] = counts.get(test, 0.0) + scores[f"{test}_reject"] / trials
            elif f"{test}_pvalue" in scores:
                counts[test] = counts.get(test, 0.0) + (scores[f"{test}_pvalue"] < 0.05) / trials
    return counts


def power_table(name: str, trials: int, num_samples: int = 200, c2st_trials: int = 0) -> list[str]:
    problem = generative.load(f"conjugate/{name}", num_samples=num_samples, use_c2st=False)
    rows = []
    for kind, size in KINDS.items():
        rates = rejection_rates(problem, kind, size, trials, TESTS[:-1])
        if c2st_trials:
            problem.use_c2st = True
            rates.update(rejection_rates(problem, kind, size, c2st_trials, ("c2st",)))
            problem.use_c2st = False
        cells = " | ".join(f"{rates[t]:.2f}" if t in rates else "-" for t in TESTS)
        rows.append(f"| {name} | {kind} {size if size else ''} | {cells} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--c2st-trials", type=int, default=50, help="0: no C2ST column")
    parser.add_argument("--num-samples", type=int, default=200)
    parser.add_argument("--problems", default="mvn_known_cov/corr3,wyb/18,niw/2")
    args = parser.parse_args()
    print(f"| problem | injected error | {' | '.join(TESTS)} |")
    print("|---|---|" + "---|" * len(TESTS))
    for name in args.problems.split(","):
        print("\n".join(power_table(name, args.trials, args.num_samples, args.c2st_trials)))


if __name__ == "__main__":
    main()
