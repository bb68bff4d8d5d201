"""Injected errors and the power of each test against them (for the docs' power table).

`Perturbed` wraps the exact posterior and shifts its mean, inflates its spread or flips the
correlations of coordinate 0 (marginals unchanged); `power_table` reports, per test, the
rejection rate over seeded trials. With `kind='none'` the rate is the type-I error. C2ST
trains classifiers (about a second a trial), so it gets its own, smaller number of trials.
`trial_scores` and `rejected` score any sampler's trials alike (experiments.ppl_power runs
them on real NUTS with faults).
Run: .venv/bin/python -m experiments.conjugate_power [--trials 200] [--c2st-trials 50]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

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


def trial_scores(
    problem: ConjugateProblem, draw: Callable[[int], np.ndarray], trials: int
) -> Iterator[tuple[int, np.ndarray, dict[str, float]]]:
    """(t, samples, problem.posterior_scores) of trials t = 0 .. trials - 1, where
    `draw(t)` gives trial t's sample set; fresh null/reference draws per trial (rng
    (77, t)): rates over the trials are then unconditional."""
    for t in range(trials):
        samples = draw(t)
        yield t, samples, problem.posterior_scores(samples, np.random.default_rng((77, t)))


def rejected(scores: dict[str, float], test: str, alpha: float = 0.05) -> bool | None:
    """Whether `test` rejected in one trial's scores (None: the test did not run)."""
    if f"{test}_reject" in scores:
        return bool(scores[f"{test}_reject"])
    if f"{test}_pvalue" in scores:
        return bool(scores[f"{test}_pvalue"] < alpha)
    return None


def rejection_rates(
    problem: ConjugateProblem, kind: str, size: float, trials: int, tests=TESTS
) -> dict[str, float]:
    """Fraction of `trials` seeded sample sets (of problem.num_samples) each of `tests`
    rejects (C2ST only where `problem.use_c2st`)."""
    predictive = Perturbed(problem.exact_posterior(), kind, size)

    def draw(t: int) -> np.ndarray:
        return predictive.sample(problem.x_o, problem.num_samples, seed=10_000 + t)

    counts: dict[str, float] = {}
    for _, _, scores in trial_scores(problem, draw, trials):
        for test in tests:
            hit = rejected(scores, test)
            if hit is not None:
                counts[test] = counts.get(test, 0.0) + hit / trials
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


def main(argv: list[str] | None = None) -> None:
    from experiments.console import OneLineParser

    parser = OneLineParser(description=__doc__.splitlines()[0], name="conjugate_power")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--c2st-trials", type=int, default=50, help="0: no C2ST column")
    parser.add_argument("--num-samples", type=int, default=200)
    parser.add_argument("--problems", default="mvn_known_cov/corr3,wyb/18,niw/2")
    args = parser.parse_args(argv)
    from experiments.console import bad_input, check_range, split_choices
    from generative.conjugate import PROBLEMS
    from testbed import threefry_cpu
    from testbed.errors import InputError

    try:  # before any problem's trials
        names = split_choices(args.problems.replace("conjugate/", ""), "--problems", list(PROBLEMS))
        check_range("--trials", args.trials, 1, 100_000)
        check_range("--c2st-trials", args.c2st_trials, 0, 100_000)
        check_range("--num-samples", args.num_samples, 2, 1_000_000)
    except InputError as e:
        sys.exit(bad_input("conjugate_power", e))
    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    print(f"| problem | injected error | {' | '.join(TESTS)} |")
    print("|---|---|" + "---|" * len(TESTS))
    for name in names:
        print("\n".join(power_table(name, args.trials, args.num_samples, args.c2st_trials)))


if __name__ == "__main__":
    main()
