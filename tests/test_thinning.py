"""MCMC chains thinned to their effective sample size: the ESS against ArviZ and against an
autoregressive chain's closed form, and the exact tests' level on correct but
autocorrelated draws (testbed.metrics.thinning, ConjugateProblem.independent_rows)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import agents
import generative
from agents.nuts import DrawsPosterior
from experiments.cli import main
from testbed.evaluation import score
from testbed.metrics.one_sample import pit_ks, rejection_notes
from testbed.metrics.thinning import (
    bulk_tail_ess,
    smallest_ess,
    split_chains,
    thin_to_ess,
    thinning_step,
)


def ar1_chains(rng, trials: int, chains: int, draws: int, rho: float, dim: int = 1):
    """[trials, chains, draws, dim] stationary AR(1) chains with N(0, 1) marginals: a
    correct sampler of N(0, 1) whose draws are correlated rho at lag 1."""
    x = np.empty((trials, chains, draws, dim))
    x[:, :, 0] = rng.standard_normal((trials, chains, dim))
    noise = np.sqrt(1 - rho**2) * rng.standard_normal((trials, chains, draws, dim))
    for t in range(1, draws):
        x[:, :, t] = rho * x[:, :, t - 1] + noise[:, :, t]
    return x


def test_bulk_and_tail_ess_are_arviz():
    az = pytest.importorskip("arviz")
    chains = ar1_chains(np.random.default_rng(0), 1, 2, 1000, 0.6, dim=3)[0]
    chains[..., 2] = np.exp(chains[..., 2])  # a skewed coordinate: rank normalisation matters
    bulk, tail = bulk_tail_ess(chains)
    data = az.convert_to_dataset(chains)
    np.testing.assert_allclose(bulk, np.asarray(az.ess(data, method="bulk")["x"]), rtol=1e-6)
    # ArviZ's tail quantiles interpolate a little differently: within 3%
    np.testing.assert_allclose(tail, np.asarray(az.ess(data, method="tail")["x"]), rtol=0.03)


def test_ess_of_an_autoregressive_chain_is_its_closed_form():
    """N (1 - rho) / (1 + rho) for AR(1) with lag-1 correlation rho; 4 chains of 5,000."""
    for rho in (0.0, 0.5, 0.8):
        chains = ar1_chains(np.random.default_rng(1), 1, 4, 5000, rho)[0]
        want = chains.shape[0] * chains.shape[1] * (1 - rho) / (1 + rho)
        bulk, _ = bulk_tail_ess(chains)
        assert bulk[0] == pytest.approx(want, rel=0.15), rho


def test_split_chains_and_the_thinning_step():
    x = np.arange(2 * 7).reshape(2, 7, 1)
    assert split_chains(x)[:, :, 0].tolist() == [[0, 1, 2], [7, 8, 9], [3, 4, 5], [10, 11, 12]]
    assert thinning_step(2000, 2500.0) == 1  # anticorrelated draws: all of them
    assert thinning_step(2000, 2000.0) == 1
    assert thinning_step(2000, 500.0) == 7  # tau 4: correlation 0.6 at lag 1, 0.03 at 7
    assert thinning_step(2000, 700.0) == 5
    assert thinning_step(2000, 1900.0) == 2
    with pytest.raises(ValueError, match="ess"):
        thinning_step(2000, float("nan"))


def test_a_series_that_mixes_slower_than_the_coordinates_sets_the_step():
    rng = np.random.default_rng(2)
    fast = ar1_chains(rng, 1, 2, 2000, 0.0)[0]
    slow = ar1_chains(rng, 1, 2, 2000, 0.9)[0, ..., 0]
    assert smallest_ess(fast, slow) < smallest_ess(fast) / 5
    rows, step = thin_to_ess(fast, slow)
    assert step > 10 and rows.shape == (2 * len(range(0, 2000, step)), 1)
    assert thin_to_ess(fast)[1] <= 2  # independent draws: an ESS estimate near their number


def test_thinned_draws_keep_the_tests_level_where_pooled_draws_do_not():
    """A correct but autocorrelated sampler (rho 0.8, 2 chains of 1,000): PIT/KS on all
    2,000 draws rejects far above 5%; on the draws thinned to their ESS the rejections
    stay inside Binomial(400, 0.05)'s 99.9% interval."""
    trials = 400
    chains = ar1_chains(np.random.default_rng(3), trials, 2, 1000, 0.8)
    pooled = [pit_ks(stats.norm.cdf(c.reshape(-1, 1)))["p_value"] for c in chains]
    thinned = [pit_ks(stats.norm.cdf(thin_to_ess(c)[0]))["p_value"] for c in chains]
    low, high = stats.binom.ppf([0.0005, 0.9995], trials, 0.05)
    assert np.sum(np.array(pooled) < 0.05) > 3 * high  # dependence read as misfit
    assert low <= np.sum(np.array(thinned) < 0.05) <= high


def _chains_of(problem, rho: float, seed: int) -> np.ndarray:
    """2 chains of 1,000 of the problem's 1-d exact posterior, AR(1)-correlated."""
    z = ar1_chains(np.random.default_rng(seed), 1, 2, 1000, rho)[0]
    post = problem.posterior
    return post.mean + np.sqrt(post.var) * z


def test_the_conjugate_tests_read_chains_thinned_and_say_so():
    problem = generative.load("conjugate/wyb/1")
    chains = _chains_of(problem, 0.8, 4)
    quality = score(problem, DrawsPosterior.of_chains(chains, {}))
    step = thinning_step(2000, smallest_ess(chains, problem.posterior.log_prob(
        chains.reshape(-1, 1)).reshape(2, -1)))  # fmt: skip
    assert step > 1 and quality["tests_thinning"] == step
    assert quality["tests_num_draws"] == 2 * len(range(0, 1000, step))
    pooled = score(problem, DrawsPosterior(chains.reshape(-1, 1), {}))  # no chains
    assert pooled["tests_thinning"] == 1 and pooled["tests_num_draws"] == problem.num_samples
    # the moments and the joint KL read the posterior's draws, chains or not: the same values
    for key in ("mean_error_sd", "log_std_ratio", "joint_kl"):
        assert quality[key] == pooled[key], key


def test_a_rejection_says_what_it_means():
    quality = {"pit_ks_reject": True, "pit_ks_pvalue": 0.003, "tests_num_draws": 400.0,
               "tests_thinning": 5.0, "ddks_reject": False, "ddks_pvalue": 0.4}  # fmt: skip
    (line,) = rejection_notes(quality)
    assert line.startswith("pit_ks_reject 1: the PIT/KS test")
    assert "400 draws" in line and "5-fold" in line and "5% of runs" in line
    assert rejection_notes({"c2st_reject": False, "c2st_pvalue": 0.5}) == []
    (strict,) = rejection_notes(quality, alpha=0.01)  # the problem's level, not always 5%
    assert "< alpha = 0.01" in strict and "1% of runs" in strict


def test_testbed_run_prints_the_note_under_a_rejection(capsys):
    """An agent whose posterior is one posterior sd off: `testbed run` prints the table,
    then a line for each rejection."""
    problem = generative.load("conjugate/wyb/1")
    post = problem.posterior

    def shifted(data, knowledge):
        rng = np.random.default_rng(0)
        draws = post.mean + np.sqrt(post.var) * (1 + rng.standard_normal((2, 1000, 1)))
        return DrawsPosterior.of_chains(draws, {})

    with agents.AGENTS.scope():
        agents.register("shifted_sampler", predicts="model_posterior")(shifted)
        assert main(["run", "--agent", "shifted_sampler", "--problem", "conjugate/wyb/1"]) == 0
    out = capsys.readouterr().out
    assert "pit_ks_reject 1: the PIT/KS test says the 1000 draws it read" in out
    assert "a correct sampler gets this in 5% of runs" in out
