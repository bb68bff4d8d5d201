"""Helpers shared by the SBI agent tests: a small run on a task, checks on its draws."""

from __future__ import annotations

import numpy as np

import agents
from generative.sbi.problems import PosteriorProblem

# a few short chains of MCMC, for the agents that sample through MCMC (nle, nre, ...)
FAST_MCMC = {"num_chains": 2, "warmup_steps": 2, "thin": 1, "num_candidate_samples": 50}


def fast(epochs: int, mcmc: bool = False) -> dict:
    """Overrides for a test-sized training run: `epochs` epochs of batches of 100 (and a
    few short MCMC chains with `mcmc`)."""
    settings = {"max_num_epochs": epochs, "training_batch_size": 100}
    return {**settings, **FAST_MCMC} if mcmc else settings


def wiring_cases(names, epochs: int, budget: int, **extra) -> list[tuple[str, dict, int]]:
    """(agent, overrides, budget) of test-sized runs: `epochs` epochs, short MCMC chains for
    the agents that sample by MCMC, 2 rounds for the sequential ones; `extra` maps an agent
    to more overrides."""
    cases = []
    for name in names:
        config = agents.load(name).config
        overrides = fast(epochs, mcmc=hasattr(config, "num_chains"))
        if config.num_rounds > 1:
            overrides["num_rounds"] = 2
        cases.append((name, {**overrides, **extra.get(name, {})}, budget))
    return cases


def run_agent(name, overrides, budget, task="two_moons", num_samples=20):
    """(problem, posterior, simulator access) of agent `name` trained on observation 1."""
    problem = PosteriorProblem(task, budget, 1, num_samples=num_samples)
    access = problem.train_data
    post = agents.load(name, **overrides)(access, problem.prior_knowledge)
    return problem, post, access


def seeded_prior_draws(post, problem, num: int) -> np.ndarray:
    """`num` draws at x_o, checked finite, inside the U(-1, 1)^2 prior and seeded."""
    s = post.sample(problem.x_o, num, seed=3)
    assert s.shape == (num, 2) and np.isfinite(s).all()
    assert np.all(np.abs(s) <= 1.0)  # inside the U(-1, 1)^2 prior
    np.testing.assert_array_equal(s, post.sample(problem.x_o, num, seed=3))  # seeded
    return s
