"""Agents learn: each classification agent beats `uniform` where learning is easy, and each
SBI agent reaches a stated C2ST on a conjugate problem at the smallest budget.

The other agent tests check wiring and contracts (an agent that trains nothing passes
them); these check what users rely on. Budgets are small but enough to learn: every agent
here trains its usual loop, with fewer steps than its default.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import agents
import generative
from generative.classification import ClassificationProblem

# --- classification agents -----------------------------------------------------------------
# classification_2d/187: d = 2, 1,000 training points, temperature 0.01 (labels are almost
# a function of x), classes balanced (50.1 % ones). Measured 2026-11-25 (N = M = 100):
# uniform KL 0.630, test accuracy 0.50; the agents below 0.02-0.20 and 0.93-0.98
# (logistic_regression 0.200 / 0.927, the weakest: its boundary is linear).
EASY = "classification_2d/187"
QUALITY = {
    "mlp": dict(num_batches=1000),
    "logistic_regression": dict(num_batches=1000),
    "ensemble": dict(num_batches=1000, num_ensemble=5),
    "ensemble+": dict(num_batches=1000, num_ensemble=5),
    "dropout": dict(num_batches=1000),
    "sgmcmc": dict(num_batches=5000, burn_in_time=2000, model_saving_frequency=100),
    "bbb": dict(num_batches=1000),
    "hypermodel": dict(num_batches=1000),
    "epinet": dict(num_batches=1000),
    "deep_kernel": dict(num_batches=1000),
    "knn": dict(),
    "random_forest": dict(num_trees=20),
}


def easy_problem() -> ClassificationProblem:
    settings = generative.load(EASY).settings
    return ClassificationProblem(
        dataclasses.replace(settings, num_test_seeds=100, num_enn_samples=100)
    )


def scores(problem: ClassificationProblem, name: str, **overrides) -> tuple[float, float]:
    """(joint KL, test accuracy) of agent `name` trained on `problem`."""
    sampler = agents.load(name, **overrides)(problem.train_data, problem.prior_knowledge)
    quality = problem.evaluate(sampler, ["joint_kl", "accuracy"])
    return quality["kl_estimate"], quality["test_acc"]


@pytest.fixture(scope="module")
def uniform_scores():
    return scores(easy_problem(), "uniform")


def test_the_easy_problem_is_balanced_and_uniform_is_poor(uniform_scores):
    problem = easy_problem()
    assert 0.4 < float(np.mean(np.asarray(problem.train_data.y))) < 0.6
    kl, acc = uniform_scores
    assert kl > 0.5 and acc < 0.6, uniform_scores


@pytest.mark.parametrize("name", list(QUALITY))
def test_agent_beats_uniform_where_learning_is_easy(name, uniform_scores):
    """Half uniform's KL or less, and test accuracy above 0.85 (uniform: 0.50)."""
    kl, acc = scores(easy_problem(), name, **QUALITY[name])
    uniform_kl, uniform_acc = uniform_scores
    assert kl < 0.5 * uniform_kl, f"{name}: KL {kl:.3f}, uniform's {uniform_kl:.3f}"
    assert acc > 0.85, f"{name}: test accuracy {acc:.3f}, uniform's {uniform_acc:.3f}"


# --- SBI agents ----------------------------------------------------------------------------
# conjugate_sbi/mvn_known_cov/corr3/1000: a 3-d Gaussian mean with a correlated prior seen
# through its simulator (x = 5 draws, 15 numbers), 1,000 simulations; the agent's 1,000
# draws at x_o scored against the exact posterior: C2ST (1,000 exact draws) and the KL of
# the draws' moment-matched Gaussian. Measured 2026-11-25 with the settings below, C2ST /
# KL: npe 0.602 / 0.25, snpe 0.669 / 0.55, nle 0.679 / 0.50, snle 0.576 / 0.14, nre 0.634 /
# 0.45, snre 0.877 / 3.0, rej_abc 0.911 / 16.7, smc_abc 0.919 / 17.9; the prior in the
# agent's place 0.973 / 31.9. The bounds leave room above these and stay below the prior.
# MCMC and rounds are lighter than the benchmark's (10 chains, 30 warm-up steps, 2 rounds,
# training batches of 100): the neural agents take 0.5-2 minutes each on 2 cores, so they
# are in the slow tier (CI runs it); the ABC agents train in seconds.
SBI_PROBLEM = "conjugate_sbi/mvn_known_cov/corr3/1000"
MCMC = dict(num_chains=10, warmup_steps=30, thin=1, num_candidate_samples=500)
TRAIN = dict(training_batch_size=100)
SBI_QUALITY = {  # agent: (overrides, C2ST bound, moment-KL bound)
    "npe": (TRAIN, 0.70, 1.0),
    "snpe": (dict(TRAIN, num_rounds=2), 0.75, 1.5),
    "nle": (dict(TRAIN, **MCMC), 0.75, 1.5),
    "snle": (dict(TRAIN, **MCMC, num_rounds=2), 0.70, 1.0),
    "nre": (dict(TRAIN, **MCMC), 0.72, 1.5),
    "snre": (dict(TRAIN, **MCMC, num_rounds=2), 0.93, 6.0),
    "rej_abc": ({}, 0.95, 25.0),
    "smc_abc": ({}, 0.95, 25.0),
}
FAST_SBI = ("rej_abc", "smc_abc")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def sbi_scores(posterior_of) -> tuple[float, float]:
    """(C2ST, moment-matched Gaussian KL) of the posterior `posterior_of(problem)` returns."""
    problem = generative.load(SBI_PROBLEM, num_samples=1000)
    problem.conjugate.num_null = 0  # ddKS is tested elsewhere
    quality = problem.evaluate(posterior_of(problem), ["conjugate_posterior"])
    return quality["c2st"], quality["kl_gaussian_moments"]


@pytest.mark.parametrize(
    "name",
    [n if n in FAST_SBI else pytest.param(n, marks=pytest.mark.slow) for n in SBI_QUALITY],
)
def test_sbi_agent_reaches_its_c2st_on_a_conjugate_problem(name):
    overrides, c2st_bound, kl_bound = SBI_QUALITY[name]
    agent = agents.load(name, **overrides)
    c2st, kl = sbi_scores(lambda p: agent(p.train_data, p.prior_knowledge))
    assert c2st < c2st_bound, f"{name}: C2ST {c2st:.3f}, allowed below {c2st_bound}"
    assert kl < kl_bound, f"{name}: moment KL {kl:.2f}, allowed below {kl_bound}"
