"""sbi 0.27's newer methods as agents: fmpe, npse, nre_c, bnre and the sequential snre_c,
sbnre. Fast runs use tiny budgets and a few epochs / MCMC steps: they check the wiring
(shapes, budget, seeding, support, densities, what is reported), not accuracy.
"""

from __future__ import annotations

import numpy as np
import pytest
import sbi_runs
from sbi_runs import run_agent, seeded_prior_draws

import agents
from generative.sbi.problems import PosteriorProblem
from testbed.errors import InputError
from testbed.posterior_adapter import as_posterior

pytestmark = pytest.mark.usefixtures("one_torch_thread")


FAST, FAST_MCMC = sbi_runs.fast(2), sbi_runs.fast(2, mcmc=True)
NEW = sbi_runs.wiring_cases(
    ["fmpe", "npse", "nre_c", "bnre", "snre_c", "sbnre"], 2, 200, npse={"sampling_steps": 10}
)


@pytest.mark.parametrize("name, overrides, budget", NEW)
def test_new_agents_wiring(name, overrides, budget):
    problem, post, access = run_agent(name, overrides, budget)
    assert access.num_simulations == budget  # 2 rounds x 100, or 200
    seeded_prior_draws(post, problem, 8)
    vector_field = name in ("fmpe", "npse")
    assert as_posterior(post).has_log_prob == vector_field  # ratio methods: MCMC samples
    assert as_posterior(post).can_sample_many == (not vector_field)
    if vector_field:
        lp = post.log_prob(problem.theta_true, problem.x_o)
        assert lp.shape == (1,) and np.isfinite(lp).all()


def test_default_configs_are_stated():
    """The benchmark's settings where they apply, sbi's defaults for each method's own."""
    shared = {"learning_rate": 5e-4, "validation_fraction": 0.1, "stop_after_epochs": 20}
    shared |= {"clip_max_norm": 5.0, "z_score": True, "num_rounds": 1}
    mcmc = {"mcmc_method": "slice_np_vectorized", "num_chains": 100, "thin": 10}
    mcmc |= {"warmup_steps": 100, "init_strategy": "resample", "num_candidate_samples": 10_000}
    ratio = {**shared, **mcmc, "classifier": "resnet", "hidden_features": 50}
    ratio |= {"training_batch_size": 10_000}
    vector_field = {**shared, "hidden_features": 100, "num_layers": 5}
    vector_field |= {"training_batch_size": 200, "vf_estimator": "mlp"}
    want = {
        "nre_c": {**ratio, "num_classes": 5, "gamma": 1.0},
        "snre_c": {**ratio, "num_classes": 5, "gamma": 1.0, "num_rounds": 10},
        # BNRE at sbi's batch: the benchmark's full batch leaves its ratio flat (its docstring)
        "bnre": {**ratio, "regularization_strength": 100.0, "training_batch_size": 200},
        "sbnre": {
            **ratio,
            "regularization_strength": 100.0,
            "training_batch_size": 200,
            "num_rounds": 10,
        },
        "fmpe": vector_field,
        "npse": {**vector_field, "sde_type": "ve", "sample_with": "sde", "sampling_steps": 500},
    }
    for name, fields in want.items():
        agent = agents.load(name)
        assert {k: getattr(agent.config, k) for k in fields} == fields, name
        assert agent.amortized == (fields["num_rounds"] == 1), name
        assert agent.predicts == frozenset({"posterior"}), name


@pytest.mark.parametrize("name", ["fmpe", "npse"])
def test_vector_field_agents_have_one_round(name):
    """sbi 0.27 has no multi-round FMPE / NPSE: refused by name, before any training."""
    with pytest.raises(InputError, match=r"num_rounds: got 2; allowed: 1 \(sbi 0.27 trains"):
        agents.load(name, num_rounds=2)


def test_npse_sampler_settings_reach_sbi():
    """The SDE's steps go to every sbi `sample` call; an ODE sampler takes none."""
    _, post, _ = run_agent("npse", {**FAST, "sampling_steps": 7}, 100)
    assert post.sample_kwargs == {"steps": 7}
    assert post.posterior.sample_with == "sde"
    _, post, _ = run_agent("npse", {**FAST, "sample_with": "ode"}, 100)
    assert post.sample_kwargs == {} and post.posterior.sample_with == "ode"


def test_sampling_seconds_are_reported():
    """An fmpe run scores a C2ST, and its ODE sampling is timed on its own."""
    import testbed

    problem = PosteriorProblem("two_moons", 100, 1, num_samples=50, median_distance=False)
    quality = testbed.evaluate(agents.load("fmpe", **FAST), problem)
    assert 0.5 <= quality["c2st"] <= 1.0
    assert quality["sampling_seconds"] > 0
    assert quality["evaluation_seconds"] >= quality["sampling_seconds"]
    assert quality["num_simulations_used"] == 100
