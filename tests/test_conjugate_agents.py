"""Agents on conjugate problems: the exact agent is the floor; NUTS matches the exact posterior.

Tolerances: a mean estimated from draws with effective sample size ESS has standard error
sd / sqrt(ESS); we allow 5 of those. The exact agent's Monte-Carlo joint KL has only the
positive bias of a 1000-sample mixture, well under 0.02 nats here, plus 4 standard errors.
"""

import numpy as np
import pytest

import agents
import generative
import testbed
from experiments.conjugate_power import Perturbed, rejection_rates
from generative.conjugate import PROBLEMS, get_task
from testbed.errors import InputError

ALPHA = 0.05


@pytest.mark.parametrize(
    "pid",
    [
        "wyb/2",
        "wyb/12",
        pytest.param("wyb/21", marks=pytest.mark.slow),
        "niw/2",
        "blr/3",
        "dirichlet_multinomial/4",
    ],
)
def test_exact_agent_scores_zero_kl(pid):
    problem = generative.load(f"conjugate/{pid}")
    problem.use_c2st = False  # C2ST is tested once below (it trains classifiers)
    quality = testbed.evaluate(agents.load("exact"), problem)
    assert quality["kl_q_p"] == 0.0 and quality["kl_q_p_stderr"] == 0.0
    if "kl_gaussian" in quality:
        assert abs(quality["kl_gaussian"]) < 1e-9
        assert abs(quality["joint_kl_gaussian"]) < 1e-9
    se = quality["joint_kl_stderr"]
    assert -4 * se < quality["joint_kl"] < 0.02 + 4 * se
    assert quality["mean_error_sd"] < 5 / np.sqrt(1000) * 1.5  # max over <= 10 coordinates


def _small(name, num_samples=200):
    return generative.load(f"conjugate/{name}", num_samples=num_samples, use_c2st=False)


def test_exact_agent_tests_reject_at_the_nominal_rate():
    """60 seeded exact sample sets: each test rejects at most alpha + 3.5 binomial sds."""
    rates = rejection_rates(_small("mvn_known_cov/corr3"), "none", 0.0, trials=60)
    bound = ALPHA + 3.5 * np.sqrt(ALPHA * (1 - ALPHA) / 60)
    assert set(rates) >= {"pit_ks", "mahalanobis", "ddks"}
    assert all(r <= bound for r in rates.values()), rates


@pytest.mark.parametrize(
    "kind,size,detected_by",
    [
        ("shift", 0.3, ("pit_ks", "ddks")),
        ("inflate", 1.5, ("mahalanobis", "ddks")),
        ("flip", 0.0, ("mahalanobis", "ddks")),
    ],
)
def test_injected_errors_are_detected(kind, size, detected_by):
    """20 trials of 200 samples on a correlated Gaussian posterior: power > 0.9."""
    rates = rejection_rates(_small("mvn_known_cov/corr3"), kind, size, trials=20)
    for test in detected_by:
        assert rates[test] > 0.9, (test, rates)


@pytest.mark.parametrize(
    "given, said",
    [("wyb/18,,niw/2", "which has an empty item"), ("wyb/18,", "which has an empty item"),
     ("wyb/18,wyb/18", "which names wyb/18 twice"), ("wyb/22", "(did you mean")],
)  # fmt: skip
def test_the_power_table_refuses_bad_problems_before_any_trial(capsys, monkeypatch, given, said):
    """`--problems` was not checked: a repeated problem ran twice, an empty or unknown one
    was a traceback after the trials of those before it."""
    from experiments import conjugate_power

    monkeypatch.setattr(conjugate_power, "power_table", lambda *_: pytest.fail("trials ran"))
    with pytest.raises(SystemExit) as ended:
        conjugate_power.main(["--problems", given, "--trials", "1", "--c2st-trials", "0"])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"conjugate_power: error: --problems: got {given!r}")
    assert said in err[0]


@pytest.mark.parametrize(
    "argv, said",
    [(["--trials", "0"], "--trials: got 0; allowed: 1 to 100000"),
     (["--trials", "-1"], "--trials: got -1; allowed: 1 to 100000"),
     (["--c2st-trials", "-3"], "--c2st-trials: got -3; allowed: 0 to 100000"),
     (["--num-samples", "1"], "--num-samples: got 1; allowed: 2 to 1000000"),
     (["--trials", "x"], "argument --trials: invalid int value: 'x'")],
)  # fmt: skip
def test_the_power_table_refuses_bad_sizes_in_one_line(capsys, monkeypatch, argv, said):
    """`--trials 0` or a negative size printed a table of dashes (status 0); argparse's own
    errors were its usage and a line (now one line, status 2, as every script)."""
    from experiments import conjugate_power

    monkeypatch.setattr(conjugate_power, "power_table", lambda *_: pytest.fail("trials ran"))
    with pytest.raises(SystemExit) as ended:
        conjugate_power.main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"conjugate_power: error: {said}"]


def test_injected_error_raises_every_kl():
    problem = generative.load("conjugate/mvn_known_cov/corr3")
    problem.use_c2st = False
    exact = testbed.evaluate(agents.load("exact"), problem)
    shifted = problem.evaluate(Perturbed(problem.exact_posterior(), "shift", 0.5))
    post = problem.posterior
    delta = 0.5 * np.sqrt(post.var)
    expected = 0.5 * delta @ np.linalg.solve(post.cov, delta)  # KL of a pure mean shift
    # moment-matched from 1000 samples: sampling error well under 0.05 nats at d = 3
    assert abs(shifted["kl_gaussian_moments"] - expected) < 0.05, (shifted, expected)
    assert shifted["joint_kl"] > exact["joint_kl"] + 4 * (
        exact["joint_kl_stderr"] + shifted["joint_kl_stderr"]
    )


def test_nuts_matches_the_exact_posterior_fast():
    problem = generative.load("conjugate/wyb/2")
    agent = agents.load("nuts", num_warmup=200, num_samples=400, num_chains=2)
    predictive = testbed.train(agent, problem)
    problem.use_c2st = False
    quality = problem.evaluate(predictive)
    assert quality["r_hat_max"] < 1.05
    assert quality["num_divergences"] == 0
    assert quality["ess_per_second"] > 0
    assert quality["kl_gaussian_moments"] < 0.01
    draws = predictive.draws
    sd = np.sqrt(problem.posterior.var)
    ess = quality["ess_min"]
    assert np.all(np.abs(draws.mean(0) - problem.posterior.mean) < 5 * sd / np.sqrt(ess))
    # sd estimated from ESS draws: relative se ~ 1 / sqrt(2 ESS)
    assert np.all(np.abs(draws.std(0) / sd - 1) < 5 / np.sqrt(2 * ess))


@pytest.mark.slow
@pytest.mark.parametrize(
    "pid",
    [
        "wyb/12",
        "wyb/17",
        "wyb/21",
        "nig/1",
        "niw/2",
        "beta_binomial/1",
        "gamma_poisson/1",
        "dirichlet_multinomial/4",
        "blr/10",
    ],
)
def test_nuts_matches_the_exact_posterior(pid):
    problem = generative.load(f"conjugate/{pid}")
    agent = agents.load("nuts")
    predictive = agent.build()(problem.train_data, problem.prior_knowledge)
    diag = predictive.diagnostics
    assert diag["r_hat_max"] < 1.02 and diag["num_divergences"] == 0
    draws, post = predictive.draws, problem.posterior
    sd = np.sqrt(post.var)
    ess = diag["ess_min"]
    assert np.all(np.abs(draws.mean(0) - post.mean) < 5 * sd / np.sqrt(ess))
    assert np.all(np.abs(draws.std(0) / sd - 1) < 6 / np.sqrt(2 * ess))


def test_nuts_needs_a_model_and_valid_settings():
    with pytest.raises(InputError, match="agent nuts predicts a posterior of a given model.*"
                       "needs labels; agents that fit: "):  # fmt: skip
        testbed.evaluate(agents.load("nuts"), generative.load("coin/0"))
    with pytest.raises(InputError, match="without a model.*ModelKnowledge"):  # no declaration
        agents.load("nuts").build()(generative.load("coin/0").train_data, None)
    with pytest.raises(InputError, match="chain_method"):
        agents.load("nuts", chain_method="parallel_magic")
    with pytest.raises(InputError, match="exact posterior"):
        testbed.evaluate(agents.load("exact"), generative.load("coin/0"))


def test_sample_shape_errors_name_the_field():
    problem = generative.load("conjugate/wyb/1")

    class Bad:
        def sample(self, x_o, num_samples, seed):
            return np.zeros((num_samples, 3))

    with pytest.raises(InputError, match="posterior samples"):
        problem.evaluate(Bad())


def test_enumerated_joint_kl_equals_brute_force_over_sequences():
    """Beta-binomial, tau = 10: KL over s = 0..10 equals KL over all 1024 label sequences."""
    import itertools

    from scipy.special import logsumexp

    problem = generative.load("conjugate/beta_binomial/1")
    samples = Perturbed(problem.exact_posterior(), "shift", 0.5).sample(problem.x_o, 300, 0)
    log_p, log_q = problem.updated.sum_statistic_log_pmfs(samples, problem.tau)
    enumerated = np.sum(np.exp(log_p) * (log_p - log_q))
    seqs = np.array(list(itertools.product([0.0, 1.0], repeat=problem.tau)))[..., None]
    lp = problem.updated.log_evidence(np.zeros((1024, 10, 1)), seqs)
    lq = logsumexp(problem.family.log_likelihood(samples[:, None, :], 0, seqs[None]), axis=0)
    brute = np.sum(np.exp(lp) * (lp - (lq - np.log(300))))
    assert abs(np.exp(lp).sum() - 1) < 1e-12
    assert enumerated == pytest.approx(brute, rel=1e-9, abs=1e-12)
    assert enumerated > 0.01  # a 0.5 sd shift: ~0.02 nats; the exact agent scores ~1e-4
    problem.use_c2st = False
    quality = problem.evaluate(Perturbed(problem.exact_posterior(), "shift", 0.5))
    # the MC estimate (over futures) agrees with the enumeration within 4 standard errors
    assert abs(quality["joint_kl"] - quality["joint_kl_exact"]) < 4 * quality["joint_kl_stderr"]


def _no_c2st(problem_id):
    problem = generative.load(problem_id)
    problem.conjugate.use_c2st = False  # C2ST trains classifiers: tested elsewhere
    return problem


def test_sbi_agents_run_unchanged_on_a_conjugate_problem():
    """Rejection ABC trains on `conjugate_sbi/...` through the budgeted simulation access and
    is scored exactly. Its kernel density leaks outside [0, 1]: KL(q || p) is then infinite,
    the joint predictive KL mixes the draws inside."""
    problem = _no_c2st("conjugate_sbi/beta_binomial/1/10000")
    quality = testbed.evaluate(agents.load("rej_abc"), problem)
    exact = testbed.evaluate(agents.load("exact"), _no_c2st("conjugate_sbi/beta_binomial/1/10000"))
    assert quality["num_simulations_used"] == 10_000  # rejection ABC spends the whole budget
    assert "num_simulations_used" not in exact  # the floor reads the problem, simulates nothing
    assert (quality["kl_q_p"] == np.inf) == (quality["outside_support_fraction"] > 0)
    assert exact["outside_support_fraction"] == 0.0 and exact["kl_q_p"] == 0.0
    # enumerated joint KL (no noise over futures): ABC's 100 accepted draws vs the floor ~1e-4
    assert np.isfinite(quality["joint_kl_exact"])
    assert quality["joint_kl_exact"] > exact["joint_kl_exact"] + 0.01


def test_conjugate_sbi_prior_knowledge_is_the_sbi_problems_type():
    from testbed.simulation import SimulatorKnowledge, Support

    knowledge = generative.load("conjugate_sbi/beta_binomial/1/1000").prior_knowledge
    assert isinstance(generative.load("sbi/two_moons/1000/1").prior_knowledge, SimulatorKnowledge)
    assert knowledge == SimulatorKnowledge(
        dim_theta=1,
        dim_x=20,  # 20 Bernoulli draws
        support=Support("box", 0.0, 1.0),
        budget=1000,
        task="conjugate/beta_binomial/1",
        parameter_names=("p",),
    )
    assert generative.problem_settings("conjugate_sbi/wyb/16/100000")["num_simulations"] == 100_000
    for pid in generative.sweep_ids("conjugate_sbi_test"):
        assert generative.load(pid).num_simulations == 1000


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stated_support_holds_the_prior(name):
    """The support SBI agents are told is exact or a superset: it holds every prior draw."""
    task = get_task(name)
    theta = task.sample_prior(2000, seed=1)
    s = task.support
    low = {"real": -np.inf, "positive": 0.0, "box": s.low}[s.kind]
    assert np.all((theta > low) & (theta < s.high)), (name, s)


def test_npe_runs_unchanged_on_a_gaussian_conjugate_problem():
    """NPE (3 epochs: wiring, not accuracy) on wyb/1; its density gives KL(q || p); the bare
    sbi posterior, scored through the adapter, gets the same scores."""
    problem = _no_c2st("conjugate_sbi/wyb/1/1000")
    # one torch thread: torch's default oversubscribes busy cores (36 s instead of 4 s here)
    agent = agents.load("npe", max_num_epochs=3, training_batch_size=100, torch_threads=1)
    access = problem.train_data
    predictive = testbed.train(agent, problem, access)
    quality = problem.evaluate(predictive)
    assert access.num_simulations == 1000
    assert np.isfinite(quality["kl_q_p"]) and np.isfinite(quality["kl_gaussian_moments"])
    assert quality["outside_support_fraction"] == 0.0  # a real-valued mean
    assert problem.evaluate(predictive.posterior) == quality


@pytest.mark.slow
def test_c2st_against_exact_samples_sees_a_flipped_correlation():
    """C2ST (testbed.metrics.c2st) with 1000 exact reference samples: ~0.5 for the exact
    posterior (sd of a 2000-point accuracy ~0.011), clearly above for a flipped correlation."""
    problem = generative.load("conjugate/mvn_known_cov/corr3")
    exact = problem.evaluate(problem.exact_posterior())
    flipped = problem.evaluate(Perturbed(problem.exact_posterior(), "flip", 0.0))
    assert abs(exact["c2st"] - 0.5) < 0.05
    assert flipped["c2st"] > 0.65
    assert flipped["c2st_reject"] and flipped["c2st_pvalue"] < 1e-6


def test_mcmc_posteriors_keep_their_chains_and_give_arviz_inference_data():
    """A PPL user reaches for per-chain draws and ArviZ first: `nuts` (as every PPL agent)
    keeps its chains, pools them chain after chain, and gives an InferenceData whose R-hat
    is ArviZ's own; pooled draws without chains say what they lack."""
    import arviz as az

    from agents.nuts import DrawsPosterior

    problem = generative.load("conjugate/wyb/1")
    nuts = agents.load("nuts", num_warmup=100, num_samples=150, num_chains=2)
    post = testbed.train(nuts, problem)
    assert post.chains.shape == (2, 150, 1)
    np.testing.assert_array_equal(post.draws, post.chains.reshape(-1, 1))
    idata = post.to_inference_data()
    assert dict(idata.posterior.sizes)["chain"] == 2 and dict(idata.posterior.sizes)["draw"] == 150
    rhat = float(az.rhat(idata)["theta"].values.max())
    assert rhat == pytest.approx(post.diagnostics["r_hat_max"], rel=0.05)
    with pytest.raises(InputError, match="do not keep their chains"):
        DrawsPosterior(post.draws, {}).to_inference_data()
