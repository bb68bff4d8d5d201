"""Neural Testbed agents: training loop, configs, sweeps, sampler contract, end-to-end runs."""

import dataclasses
import functools
import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

import agents
import generative
import testbed
from agents.training import (
    DRAW_BLOCK_BYTES,
    Batch,
    WeightedRows,
    _draw_block,
    batch_indices,
    bootstrap_weights,
    decay_factor,
    distinct_rows,
    prior_temperature_scale,
    run_steps,
    scheduled_steps,
)
from generative.classification import ClassificationProblem
from testbed import sampled_functions
from testbed.base import FiniteSampler, PriorKnowledge
from testbed.errors import InputError

NN_AGENTS = ["mlp", "logistic_regression", "ensemble", "ensemble+", "dropout", "sgmcmc", "bbb"]
NN_AGENTS += ["hypermodel", "epinet", "deep_kernel"]
ALL_AGENTS = NN_AGENTS + ["knn", "random_forest"]
DETERMINISTIC = {"mlp", "logistic_regression", "knn", "random_forest"}
SKLEARN = {"knn", "random_forest"}  # plain numpy predictives (looped, not traced)

# Few steps / small ensembles: these tests check plumbing and contracts, not quality.
FAST = {
    "mlp": dict(num_batches=50),
    "logistic_regression": dict(num_batches=50),
    "ensemble": dict(num_batches=50, num_ensemble=5),
    "ensemble+": dict(num_batches=50, num_ensemble=5, distribution="exponential"),
    "dropout": dict(num_batches=50, hidden_sizes=(20, 20)),
    "sgmcmc": dict(num_batches=120, burn_in_time=60, model_saving_frequency=20, num_hidden=20),
    "bbb": dict(num_batches=50, num_index_samples=2),
    "hypermodel": dict(num_batches=50, num_index_samples=2, distribution="bernoulli"),
    "epinet": dict(num_batches=50, index_dim=3),
    "deep_kernel": dict(num_batches=50),
    "knn": dict(),
    "random_forest": dict(num_trees=5),
}


def small(problem_id: str, num: int = 20) -> ClassificationProblem:
    """The problem with N = M = num (fast evaluation; the estimator is unchanged)."""
    settings = generative.load(problem_id).settings
    return ClassificationProblem(
        dataclasses.replace(settings, num_test_seeds=num, num_enn_samples=num)
    )


# --- the training loop -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 100, 1000])
def test_batches_are_a_fresh_permutation_each_epoch(n):
    key = jax.random.PRNGKey(0)
    steps = (3 * n) // 100 + 2
    stream = np.concatenate([np.asarray(batch_indices(key, t, n, 100)) for t in range(steps)])
    epochs = [stream[e * n : (e + 1) * n] for e in range(3)]
    for e in epochs:  # every example exactly once per epoch, batches span epoch boundaries
        assert sorted(e.tolist()) == list(range(n))
    if n >= 7:  # 7! orderings: the three epochs (and another key's) differ
        assert not np.array_equal(epochs[0], epochs[1])
        other = np.asarray(batch_indices(jax.random.PRNGKey(1), 0, n, 100))
        assert not np.array_equal(other, stream[:100])
    again = np.asarray(batch_indices(key, 1, n, 100))
    np.testing.assert_array_equal(again, stream[100:200])  # same (key, step): same batch


def test_loop_split_into_pieces_equals_one_loop():
    """Burn-in + thinning (sgmcmc) must draw the same stream as one long scan."""
    x = jax.random.normal(jax.random.PRNGKey(0), (13, 2))
    y = jnp.arange(13) % 2

    def update(state, batch: Batch, key):
        new = state + batch.x.sum() + batch.y.sum() + jax.random.normal(key)
        return new, new

    key = jax.random.PRNGKey(5)
    whole, _ = run_steps(update, 0.0, x, y, key, 0, 20, 10)
    half, _ = run_steps(update, 0.0, x, y, key, 0, 8, 10)
    half, _ = run_steps(update, half, x, y, key, 8, 12, 10)
    np.testing.assert_allclose(float(whole), float(half), rtol=1e-6)


def test_draws_made_ahead_in_blocks_equal_draws_made_each_step():
    """`run_steps(draw=...)` (sgmcmc's noise) gives each step the draw it would make itself,
    over several blocks and a partial last block, with per-step outputs in step order."""
    x = jax.random.normal(jax.random.PRNGKey(0), (13, 2))
    y = jnp.arange(13) % 2

    def keyed(state, batch: Batch, key):
        new = 0.9 * state + batch.x.sum() - jax.random.normal(key, (3,))
        return new, new.sum()

    def drawn(state, batch: Batch, noise):
        new = 0.9 * state + batch.x.sum() - noise
        return new, new.sum()

    key, state = jax.random.PRNGKey(5), jnp.zeros(3)
    draw = functools.partial(jax.random.normal, shape=(3,))
    want, want_values = run_steps(keyed, state, x, y, key, 7, 2345, 10)
    got, got_values = run_steps(drawn, state, x, y, key, 7, 2345, 10, draw=draw)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    assert got_values.shape == (2345,)
    np.testing.assert_allclose(np.asarray(got_values), np.asarray(want_values), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 13, 150])
def test_weighted_distinct_rows_give_the_batch_mean_loss(n):
    """`run_steps(weighted=True)` (sgmcmc's batches): a loss weighting the distinct rows
    (n < 100) or the batch's rows (n >= 100) follows the same path as the batch mean."""
    x = jax.random.normal(jax.random.PRNGKey(0), (n, 2))
    y = jnp.arange(n) % 3 - 1.0

    def update(state, batch, key):
        def loss(theta):
            err = jnp.square(batch.x @ theta - batch.y)
            return jnp.sum(batch.weight * err) if isinstance(batch, WeightedRows) else err.mean()

        value, grad = jax.value_and_grad(loss)(state)
        return state - 0.05 * grad + 0.01 * jax.random.normal(key, (2,)), value

    key, state = jax.random.PRNGKey(3), jnp.ones(2)
    want, want_values = run_steps(update, state, x, y, key, 0, 300)
    got, got_values = run_steps(update, state, x, y, key, 0, 300, weighted=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(got_values), np.asarray(want_values), rtol=1e-5, atol=1e-7
    )  # losses near 0: their rounding is absolute
    rows = distinct_rows(x, y, batch_indices(key, 0, n, 100))
    assert rows.x.shape[0] == min(n, 100) and float(rows.weight.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [1, 13, 150])  # 13: rows counted 7 or 8 times a batch
def test_sgmcmc_chain_equals_its_legacy_program(n):
    """sgmcmc's fast chain (noise drawn ahead, distinct rows weighted by their counts)
    gives the snapshots of the legacy one (noise drawn in each step, all 100 rows)."""
    from agents.sgmcmc import SGMCMCConfig, sample_chain

    rng = np.random.default_rng(n)
    data = testbed.Data(rng.normal(size=(n, 2)).astype(np.float32), rng.integers(0, 2, (n, 1)))
    prior = PriorKnowledge(input_dim=2, num_train=n, num_classes=2, temperature=0.1)
    config = SGMCMCConfig(  # no noise: the gradients alone move the chain, so a wrongly
        num_batches=1500,  # weighted batch shows
        burn_in_time=500,
        model_saving_frequency=500,
        alg_temperature=0.0,
        learning_rate=1e-3,
        prior_variance=10.0,  # a weak prior: the data move the weights
    )
    fast, legacy = (np.asarray(sample_chain(config, data, prior, legacy=b)) for b in (False, True))
    assert fast.shape == legacy.shape == (3, legacy.shape[1])
    np.testing.assert_allclose(fast, legacy, atol=1e-4 * np.abs(legacy).max())
    assert not np.allclose(fast[0], fast[-1])  # the chain moved


def test_draw_blocks_are_capped_in_steps_and_bytes():
    key = jax.random.PRNGKey(0)
    small = functools.partial(jax.random.normal, shape=(3,))
    big = functools.partial(jax.random.normal, shape=(2**22,))  # 16 MB a step
    assert _draw_block(small, key, 500_000) == 1000
    assert _draw_block(small, key, 7) == 7
    assert _draw_block(big, key, 500_000) == DRAW_BLOCK_BYTES // 2**24


def test_regularisation_scaling_and_batch_strategy():
    prior = PriorKnowledge(input_dim=2, num_train=10, num_classes=2, temperature=0.01)
    assert decay_factor(prior, True) == pytest.approx(math.sqrt(0.01) * 2 / 10)
    assert decay_factor(prior, False) == pytest.approx(1 / 10)
    assert decay_factor(dataclasses.replace(prior, num_train=0), True) == 0.0

    def ratio(n):
        return dataclasses.replace(prior, num_train=n)

    assert scheduled_steps(1000, True, ratio(1002)) == 5000  # n/d = 501 > 500
    assert scheduled_steps(1000, True, ratio(8)) == 200  # n/d = 4 < 5
    assert scheduled_steps(1000, True, ratio(100)) == 1000
    assert scheduled_steps(1000, False, ratio(8)) == 1000


def test_bootstrap_weights():
    key = jax.random.PRNGKey(0)
    assert np.all(np.asarray(bootstrap_weights(key, "none", 3, 4)) == 1.0)
    bern = np.asarray(bootstrap_weights(key, "bernoulli", 100, 1000))
    assert set(np.unique(bern).tolist()) == {0.0, 2.0}
    expo = np.asarray(bootstrap_weights(key, "exponential", 100, 1000))
    # mean of 1e5 weights with sd 1: |mean - 1| < 5 / sqrt(1e5) = 0.016 (5 sigma)
    assert abs(bern.mean() - 1) < 0.016 and abs(expo.mean() - 1) < 0.016
    assert expo.min() > 0


def test_prior_temperature_scaling():
    assert prior_temperature_scale(3.0, "sqrt", 0.01) == pytest.approx(30.0)
    assert prior_temperature_scale(3.0, "linear", 0.01) == pytest.approx(300.0)
    # the reference's sweep wrote 'lin' (a silent no-op there); here it means 'linear'
    assert prior_temperature_scale(3.0, "lin", 0.01) == pytest.approx(300.0)
    assert prior_temperature_scale(3.0, "none", 0.01) == 3.0


# --- configs and sweeps ------------------------------------------------------------------


def test_reference_defaults():
    c = agents.load("ensemble+").config
    assert (c.num_ensemble, c.prior_scale, c.temp_scale_prior, c.distribution) == (
        100,
        3.0,
        "sqrt",
        "none",
    )
    assert agents.load("ensemble+", num_ensemble=30).config.num_ensemble == 30
    s = agents.load("sgmcmc").config
    assert (s.num_batches, s.burn_in_time, s.model_saving_frequency) == (500_000, 100_000, 1000)
    assert s.num_snapshots == 401 and s.learning_rate == 1e-4 and s.momentum_decay == 0.9
    assert agents.load("hypermodel").config.num_batches == 2000
    assert agents.load("bbb").config.learning_rate == 3e-3
    d = agents.load("dropout").config
    assert (d.hidden_sizes, d.dropout_rate, d.length_scale) == ((100, 100), 0.1, 1.0)
    assert agents.load("knn").config.num_neighbors == 3
    for name in ALL_AGENTS:
        config = agents.load(name).config
        assert config.seed == 0
        if name not in ("knn", "random_forest"):
            assert config.num_batches >= 1000


def test_sweeps_match_the_reference():
    sizes = {name: len(agents.sweep(name)) for name in ALL_AGENTS}
    assert sizes == {
        "mlp": 18,
        "logistic_regression": 14,
        "ensemble": 23,
        "ensemble+": 21,
        "dropout": 38,
        "sgmcmc": 36,
        "bbb": 37,
        "hypermodel": 24,
        "epinet": 1,
        "deep_kernel": 30,
        "knn": 12,
        "random_forest": 6,
    }
    # the reference's duplicated SGLD half: ours is vanilla SGLD (momentum 0), all distinct
    sg = [a.config for a in agents.sweep("sgmcmc")]
    assert len(set(sg)) == 36 and sum(c.momentum_decay == 0.0 for c in sg) == 18
    # the reference's inert bbb prior axes: ours use the sample-based KL, so they act
    bbb = [a.config for a in agents.sweep("bbb") if a.config.kl_method == "sample_based"]
    assert len({(c.sigma_1, c.sigma_2, c.mixture_scale) for c in bbb}) == 27
    assert {a.config.temp_scale_prior for a in agents.sweep("ensemble+")} == {"sqrt", "linear"}


# --- samplers ----------------------------------------------------------------------------


def test_knn_closed_form():
    """k = 1 at a training point: its own label with probability 0.99 (the clip)."""
    problem = small("classification_2d_test/2")
    data = problem.train_data
    sampler = agents.load("knn", num_neighbors=1)(data, problem.prior_knowledge)
    assert isinstance(sampler, FiniteSampler) and sampler.num_functions == 1
    logits = np.asarray(sampler(data.x, jax.random.PRNGKey(0)))
    own = logits[np.arange(len(data.y)), np.asarray(data.y)]
    np.testing.assert_allclose(own, np.log(0.99), rtol=1e-6)


def check_contract(name: str, sampler, x) -> None:
    """Same key: same logits; one key is one function of all rows; keys differ if stochastic."""
    x = jnp.asarray(x[:6])
    k1 = jax.random.PRNGKey(11)
    out = np.asarray(sampler(x, k1))
    assert out.shape == (x.shape[0], 2)
    np.testing.assert_array_equal(out, np.asarray(sampler(x, k1)))
    np.testing.assert_allclose(np.asarray(sampler(x[:3], k1)), out[:3], rtol=1e-5, atol=1e-5)
    differs = any(
        not np.allclose(np.asarray(sampler(x, k)), out)
        for k in jax.random.split(jax.random.PRNGKey(3), 8)
    )
    assert differs == (name not in DETERMINISTIC)
    if name not in SKLEARN:  # JAX agents: traceable, so the evaluators vmap over keys
        keys = jax.random.split(jax.random.PRNGKey(5), 3)
        batched = jax.jit(jax.vmap(lambda k: sampler(x, k)))(keys)
        looped = np.stack([np.asarray(sampler(x, k)) for k in keys])
        np.testing.assert_allclose(np.asarray(batched), looped, rtol=1e-5, atol=1e-5)


# Default run: each agent once, alternating the two test families (compiles dominate the
# cost on a small machine); the slow test runs every agent on both families.
DEFAULT_PROBLEM = {
    name: ("classification_2d_test/2" if i % 2 == 0 else "classification_test/1")
    for i, name in enumerate(ALL_AGENTS)
}


@pytest.mark.parametrize("name", ALL_AGENTS)
def test_agent_trains_and_keeps_the_sampler_contract(name):
    problem = small(DEFAULT_PROBLEM[name])
    sampler = agents.load(name, **FAST[name])(problem.train_data, problem.prior_knowledge)
    kl = problem.evaluate(sampler, ["joint_kl"])
    assert math.isfinite(kl["kl_estimate"]) and kl["pct_finite_kl"] == 1.0
    assert kl["kl_estimate"] > -0.1  # a KL: -0.1 allows the estimator's noise at N = M = 20
    check_contract(name, sampler, problem.train_data.x)
    if name not in SKLEARN:  # trained arrays bound apart: one compiled estimator a sweep
        fn = sampler.all_logits if isinstance(sampler, FiniteSampler) else sampler
        assert isinstance(fn, Partial) and jax.tree.leaves(fn), type(fn)
        assert sampled_functions.traced(fn) is fn  # its arrays are the program's arguments


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_AGENTS)
def test_agent_trains_and_evaluates_on_both_test_families(name):
    for problem_id in ("classification_2d_test/2", "classification_test/1"):
        problem = small(problem_id, num=100)
        sampler = agents.load(name, **FAST[name])(problem.train_data, problem.prior_knowledge)
        quality = problem.evaluate(sampler)
        assert math.isfinite(quality["kl_estimate"]) and quality["pct_finite_kl"] == 1.0
        assert quality["kl_estimate"] > -0.05
        assert 0.0 <= quality["test_acc"] <= 1.0
        check_contract(name, sampler, problem.train_data.x)


# --- the paper's qualitative finding -----------------------------------------------------
# classification_2d problems j (tau = 1) and j + 210 (tau = 10) share environment, training
# data and estimator key, so one trained agent is scored on both (marginal and joint KL).


def marginal_and_joint_kl(name: str, overrides: dict, j: int, num: int) -> tuple[float, float]:
    marginal, joint = (
        small(f"classification_2d/{j}", num),
        small(f"classification_2d/{j + 210}", num),
    )
    sampler = agents.load(name, **overrides)(marginal.train_data, marginal.prior_knowledge)
    metric = ["joint_kl"]
    return (
        marginal.evaluate(sampler, metric)["kl_estimate"],
        joint.evaluate(sampler, metric)["kl_estimate"],
    )


SMALL_FINDING = {"ensemble": dict(num_ensemble=20), "ensemble+": dict(num_ensemble=20)}
SMALL_FINDING["dropout"] = {}  # its default config (1000 steps, hidden (100, 100))


def check_prior_functions_help_joint_not_marginal(problems: tuple[int, ...]) -> None:
    """ensemble+ beats ensemble and dropout on joint KL (tau = 10) summed over `problems`;
    the marginal KL (tau = 1) barely moves."""
    kls = {
        name: [marginal_and_joint_kl(name, overrides, j, 200) for j in problems]
        for name, overrides in SMALL_FINDING.items()
    }
    good = kls["ensemble+"]
    for bad in ("ensemble", "dropout"):
        joint_gain = sum(b[1] - g[1] for b, g in zip(kls[bad], good))
        marginal_gap = sum(abs(b[0] - g[0]) for b, g in zip(kls[bad], good))
        assert joint_gain > 0.1, (bad, kls)
        assert marginal_gap < joint_gain / 2, (bad, kls)


def test_prior_functions_help_joint_not_marginal_kl_one_problem():
    """The finding below on one problem (j = 61), one training per agent instead of two: the
    default run's check.

    Measured on j = 61: joint gain of ensemble+ 4.77 over ensemble and 5.23 over dropout
    (bound 0.1), marginal gaps 0.19 and 0.21 (bound half the gain)."""
    check_prior_functions_help_joint_not_marginal((61,))


@pytest.mark.slow
def test_prior_functions_help_joint_not_marginal_kl_small():
    """ensemble+ beats ensemble and dropout on joint KL (tau = 10); marginal KL barely moves.

    Problems j = 60, 61: the first two seeds of the (n = 10, T = 0.01) cell, K = 20
    members, N = M = 200 (slow tier; the default run checks j = 61 alone, above).
    Measured (j = 60; j = 61) on the reference's instances, joint / marginal: ensemble
    1.06, 8.86 / 0.078, 0.704; ensemble+ 0.82, 4.09 / 0.065, 0.513; dropout 1.08, 9.32 /
    0.076, 0.726. One cell is not the grid: on the (n = 10, T = 0.1)
    cell (j = 70, 71, this test's problems before ids took the reference's keys) and on
    several seeds of this one, ensemble+ is not better (j = 60..69: joint gain over ensemble
    from -1.85 to +4.77), which is why the slow test below stratifies over every cell.
    sgmcmc is only in the slow test: a chain short enough for the default run (20,000
    steps) has a visibly worse marginal KL.
    """
    check_prior_functions_help_joint_not_marginal((60, 61))


# The paper's finding is an average over the whole classification_2d grid, so the slow test
# takes one problem from every (n, T) cell: the first seed of each, j = 0, 10, ..., 200
# (n in 1..1000 x T in {0.01, 0.1, 0.5}; j + 210 is the same problem at tau = 10). A
# single cell does not represent the grid: on j = 70..79 alone (n = 10, T = 0.1) sgmcmc's
# mean joint KL was 1.93, above ensemble's 1.57 (measured 2026-11-23).
STRATIFIED = tuple(range(0, 210, 10))
GOOD, BAD = ("ensemble+", "sgmcmc"), ("ensemble", "dropout")


@functools.cache
def stratified_means(name: str) -> tuple[float, float]:
    """(marginal, joint) KL of `name` at its default config, mean over STRATIFIED, N = M = 1000."""
    pairs = np.array([marginal_and_joint_kl(name, {}, j, 1000) for j in STRATIFIED])
    return tuple(pairs.mean(axis=0))


def check_paper_finding(good: str) -> dict:
    """`good` beats ensemble and dropout on joint KL by a larger relative margin than on
    marginal KL (the marginal barely separates them)."""
    means = {n: stratified_means(n) for n in (good, *BAD)}
    print(good, {n: tuple(round(float(v), 3) for v in m) for n, m in means.items()})
    (m_good, j_good) = means[good]
    for bad in BAD:
        m_bad, j_bad = means[bad]
        assert j_good < j_bad, means
        assert (m_bad - m_good) / m_bad < (j_bad - j_good) / j_bad, means
    return means


@pytest.mark.slow
@pytest.mark.heavy
def test_paper_finding_ensemble_plus_wins_on_joint_kl():
    """ensemble+ vs ensemble and dropout, default configs, over STRATIFIED (~6 min).

    Measured 2026-11-23, mean marginal / joint KL: ensemble+ 0.157 / 1.397, ensemble
    0.208 / 2.068, dropout 0.215 / 2.123 (joint 32 % and 34 % lower; marginal 25 % and 27 %).
    """
    check_paper_finding("ensemble+")


@pytest.mark.slow
@pytest.mark.heavy
def test_paper_finding_sgmcmc_wins_on_joint_kl():
    """sgmcmc (default: 500,000 SGHMC steps a problem) vs ensemble and dropout (~15 min more).

    Measured 2026-11-23, mean marginal / joint KL: sgmcmc 0.195 / 1.474 (joint 29 % and
    31 % below ensemble's and dropout's; marginal 6 % and 9 %).
    """
    check_paper_finding("sgmcmc")


# --- registering agents: functions, kinds, sweeps, plugins --------------------------------


@pytest.fixture
def registry():
    """The agent registry: what a test registers is undone after it."""
    with agents.AGENTS.scope():
        yield agents.AGENTS


def test_existing_job_keys_do_not_change():
    """The hash of (name, config) of built-in agents, as before kinds and function agents."""
    from leaderboard.execution.jobs import Job

    keys = {
        "uniform": ("8db1e7432e7bb7f2", "a6733a4607c8a39b"),
        "mlp": ("bbd600af2c3c8a0a", "7fbc2899d58f21ae"),
        "ensemble+": ("7124bc4aa28269cc", "5972c5e01dc4b130"),
        "knn": ("84d889d6b0d8aaf4", "069d1d22b988ffa7"),
        "npe": ("5d4568f7fb5264df", "80d34e19c557ea1e"),
        "nuts": ("50a390c1029b6a6b", "264b15f5317030bc"),
    }
    for name, (key, config_key) in keys.items():
        agent = agents.load(name)
        assert agent.key == key, name
        assert Job.make(name, agent.config_dict(), "coin/0").config_key == config_key, name


def test_a_setting_added_later_keeps_the_keys_at_its_default():
    """nuts' `step_size` and `adapt` (marked ADDED): left out of the key and stored config
    at their defaults (the key above is unchanged), in both when set."""
    default, fixed = agents.load("nuts"), agents.load("nuts", step_size=0.5, adapt=False)
    assert "step_size" not in default.config_dict() and default.config.step_size == 1.0
    assert fixed.config_dict()["step_size"] == 0.5 and fixed.config_dict()["adapt"] is False
    assert fixed.key != default.key
    rebuilt = agents.load("nuts", **fixed.config_dict())
    assert rebuilt.key == fixed.key and rebuilt.config == fixed.config


def test_every_builtin_agent_says_what_it_predicts():
    entries = [agents.AGENTS.get(n) for n in agents.names()]
    kinds = {e.name: e.predicts for e in entries if e.make.__module__.startswith("agents.")}
    assert len(kinds) >= 28 and all(kinds.values()), [n for n, k in kinds.items() if not k]
    for name in NN_AGENTS + ["uniform"]:
        assert kinds[name] == {"labels", "real_values"}, name
    assert kinds["knn"] == kinds["average_class_probs"] == kinds["beta_bernoulli"] == {"labels"}
    assert kinds["gp_posterior"] == {"real_values"} and kinds["nuts"] == {"model_posterior"}
    for name in ("npe", "snpe", "nle", "snle", "nre", "snre", "rej_abc", "smc_abc"):
        assert kinds[name] == {"posterior"}, name
    ppl = ["blackjax", "exact", "numpyro", "nutpie", "nuts", "pymc", "pyro", "stan"]
    assert agents.fitting("model_posterior") == ppl
    sbi = generative.load("sbi/two_moons/1000/1")  # the oracle reads it, exact cannot
    assert "oracle" in agents.fitting("posterior", sbi)
    assert "exact" not in agents.fitting("posterior", sbi)
    with pytest.raises(InputError, match="predicts: got 'logits'; allowed: one or more of"):
        agents.register("bad_kind_test", predicts="logits")


def test_a_function_with_keyword_defaults_is_an_agent(registry):
    @agents.register("fn_agent_test", predicts="labels", sweep=[{"scale": 2.0}, {"scale": 3.0}])
    def fn_agent(train_data, prior, *, scale: float = 1.0, widths=[4, 4], tag="a", seed=0):  # noqa: B006
        """Constant logits, scaled: a test agent."""
        return lambda x, key: np.full((len(x), prior.num_classes), scale * (seed + 1))

    assert fn_agent.__name__ == "fn_agent" and "fn_agent_test" in agents.names()
    entry = registry.get("fn_agent_test")
    assert entry.description == "Constant logits, scaled: a test agent."
    assert entry.config_cls.__name__ == "FnAgentTestConfig"
    default = agents.load("fn_agent_test")
    assert default.config_dict() == {"scale": 1.0, "widths": [4, 4], "tag": "a", "seed": 0}
    agent = agents.load("fn_agent_test", scale="0.5", widths="8,8", seed=2)  # as --set gives
    assert (agent.config.scale, agent.config.widths, agent.config.seed) == (0.5, (8, 8), 2)
    with pytest.raises(InputError, match="agent fn_agent_test: scale: got 'big'"):
        agents.load("fn_agent_test", scale="big")
    with pytest.raises(InputError, match="unknown setting 'lr'; allowed: scale, seed, tag"):
        agents.load("fn_agent_test", lr=1)
    problem = generative.load("coin/1")
    sampler = agent(problem.train_data, problem.prior_knowledge)
    assert np.all(np.asarray(sampler(np.zeros((3, 1)), None)) == 1.5)
    assert [a.config.scale for a in agents.sweep("fn_agent_test")] == [2.0, 3.0]
    # the job key is the hash of name + config, as for any agent; jobs, sweeps and seeds
    from leaderboard.execution.jobs import expand

    jobs = expand(["fn_agent_test"], ["coin/1"], seeds=[0, 1], configs="sweep")
    assert len(jobs) == 4 and {j.config["scale"] for j in jobs} == {2.0, 3.0}
    assert len({j.config_key for j in jobs}) == 2
    assert testbed.evaluate(agents.load("fn_agent_test"), problem)["kl_estimate"] >= 0


def test_function_agents_refuse_settings_that_cannot_be_a_config(registry):
    with pytest.raises(InputError, match="setting 'lr' has no default"):
        agents.register("no_default_test")(lambda data, prior, *, lr: None)
    with pytest.raises(InputError, match=r"setting \*\*kw"):
        agents.register("var_kw_test")(lambda data, prior, **kw: None)
    with pytest.raises(InputError, match="'f' has default None and no type annotation"):
        agents.register("none_default_test")(lambda data, prior, *, f=None: None)
    with pytest.raises(InputError, match=r"allowed: a function \(train_data, prior_knowledge"):
        agents.register("one_arg_test")(lambda data: None)

    def unresolved(data: "OnlyForTypeCheckers", prior, *, k: "NoSuchType" = 1):  # noqa: F821
        return None

    with pytest.raises(InputError, match="setting 'k' has annotation 'NoSuchType', which"):
        agents.register("unresolved_test")(unresolved)

    @agents.register("annotated_none_test")
    def annotated(data, prior, *, rate: float | None = None):
        return None

    assert agents.load("annotated_none_test", rate="0.5").config.rate == 0.5
    assert agents.load("annotated_none_test", rate="none").config.rate is None


def test_seeds_on_an_agent_without_a_seed_field_say_so(registry):
    from leaderboard.execution.jobs import expand

    agents.register("seedless_test")(lambda data, prior, *, k=3: None)
    # a sweep runs it at seed 0 only (a warning says so: tests/test_fast_answers.py)
    assert [j.seed for j in expand(["seedless_test"], ["coin/0"], seeds=[0, 1])] == [0]
    with pytest.raises(InputError, match="^seed: got 1 for agent seedless_test, whose config"):
        agents.load("seedless_test", seed=1)
    assert len(expand(["seedless_test"], ["coin/0"])) == 1
    # seed 0 is every agent's seed: run --seed 0 is what sweep --seeds 0 is
    assert agents.load("seedless_test", seed=0).config_dict() == {"k": 3}
    assert agents.load("seedless_test", seed="0").config_dict() == {"k": 3}


@pytest.mark.parametrize("seeds", [["a"], [1.5], [True], [0, None]])
def test_seeds_that_are_not_integers_get_one_clear_error(seeds):
    from leaderboard.execution.jobs import expand, parse_seeds

    with pytest.raises(InputError, match="^seeds: got .*; allowed: integers >= 0"):
        parse_seeds(seeds)
    with pytest.raises(InputError, match="^seeds: got .*; allowed: integers >= 0"):
        expand(["mlp"], ["coin/0"], seeds=seeds)
    assert parse_seeds([2, 0, 2]) == [2, 0]


@pytest.mark.parametrize("seed", [-1, "-1", -5])
def test_negative_seeds_are_refused_everywhere(seed, capsys):
    from experiments.cli import main
    from leaderboard.execution.jobs import expand, parse_seeds

    for name in ("mlp", "knn", "npe"):
        allowed = f"^agent {name}: seed: got .*; allowed: an integer >= 0"
        with pytest.raises(InputError, match=allowed):
            agents.load(name, seed=seed)
    with pytest.raises(InputError, match="^seeds: got .*; allowed: integers >= 0"):
        parse_seeds([int(seed)])
    with pytest.raises(InputError, match="^seeds: got .*; allowed: integers >= 0"):
        expand(["mlp"], ["coin/0"], seeds=[0, int(seed)])
    argv = ["run", "--agent", "mlp", "--problem", "coin/0", "--seed", str(seed)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("testbed: error: agent mlp: seed: got ")


def test_expand_runs_the_default_config_by_default_as_the_command_line():
    from leaderboard.execution.jobs import expand, sweep_jobs

    jobs = expand(["knn"], ["classification_2d_test/0"])
    assert len(jobs) == 1 and jobs[0].config == {
        k: v for k, v in agents.load("knn").config_dict().items() if k != "seed"
    }
    assert len(expand(["knn"], ["classification_2d_test/0"], configs="sweep")) == 12
    assert len(sweep_jobs(["knn"], "classification_2d_test")) == 7


PLUGIN_MODULE = '''
import agents

@agents.register("plugin_agent_test", predicts="labels")
def plugin_agent(train_data, prior, *, c: float = 0.0):
    """An agent from an installed package."""
    return lambda x, key: [[c, c]] * len(x)
'''

SETUP_MODULE = """
import agents

def setup():
    agents.register("plugin_setup_test")(lambda data, prior, *, c=1.0: None)
"""


def fake_distribution(root, entry_points: str) -> None:
    """An installed package as importlib.metadata sees it: a dist-info with entry points."""
    info = root / "testbed_plugin_test-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: testbed-plugin-test\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    (root / "plugin_mod_test.py").write_text(PLUGIN_MODULE)
    (root / "plugin_setup_test.py").write_text(SETUP_MODULE)
    (root / "plugin_broken_test.py").write_text("raise ImportError('no module named torchy')\n")


ENTRY_POINTS = """[testbed.agents]
good = plugin_mod_test
setup = plugin_setup_test:setup
broken = plugin_broken_test
"""


def _installed_plugins(tmp_path, monkeypatch) -> None:
    """The fake package's entry points on the path, none of them loaded yet."""
    fake_distribution(tmp_path, ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("agents.registry._PLUGINS_SEEN", set())
    for name in ("plugin_mod_test", "plugin_setup_test", "plugin_broken_test"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_installed_packages_add_agents_through_entry_points(
    tmp_path, monkeypatch, caplog, registry
):
    _installed_plugins(tmp_path, monkeypatch)
    with caplog.at_level("WARNING", logger="testbed.agents"):
        loaded = agents.load_plugins()
    assert sorted(loaded) == ["good", "setup"]
    assert {"plugin_agent_test", "plugin_setup_test"} <= set(agents.names())
    assert agents.AGENTS.get("plugin_agent_test").predicts == {"labels"}
    assert agents.load("plugin_agent_test", c=2).config.c == 2.0
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "broken" in warnings[0].getMessage()
    assert "no module named torchy" in warnings[0].getMessage()
    assert agents.load_plugins() == []  # once per process


def test_a_sweeps_workers_do_not_repeat_the_drivers_plugin_warning(
    tmp_path, monkeypatch, caplog, registry
):
    from leaderboard.execution.worker import worker_env

    _installed_plugins(tmp_path, monkeypatch)
    monkeypatch.setenv("TESTBED_WORKER", worker_env({})["TESTBED_WORKER"])
    with caplog.at_level("DEBUG", logger="testbed.agents"):
        assert sorted(agents.load_plugins()) == ["good", "setup"]
    said = [r for r in caplog.records if "plugin 'broken'" in r.getMessage()]
    assert [r.levelname for r in said] == ["DEBUG"]


def test_testbed_list_agents_shows_installed_plugins_without_flags(tmp_path):
    fake_distribution(tmp_path, ENTRY_POINTS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "list", "agents", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    listed = {row["agent"] for row in json.loads(proc.stdout)}
    assert {"plugin_agent_test", "plugin_setup_test", "uniform"} <= listed
    warned = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and "plugin 'broken'" in warned[0], proc.stderr
