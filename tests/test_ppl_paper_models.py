"""The PPL benchmark's own models (generative/conjugate/paper_models.py) and every PPL agent on
its Student-t model.

Fast: `paper_ppl_model` gives the priors "What's your bench" gave its PPLs (read from
patrick-pagni/whats_your_bench), agrees with the problem set's record `paper_ppl_prior`, and
refuses other names; the Student-t model's densities equal scipy's; the PPL programs (Pyro,
PyMC, BlackJAX) write the same model; an unknown family is refused. Slow: Stan's program, and
every PPL agent on `wyb/7`'s paper model against a grid posterior mean.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

import agents
import generative
from agents.ppl import blackjax_agent, pymc_agent, pyro_agent, stan_agent
from agents.ppl.common import quiet
from agents.ppl.spec import FAMILIES, PARAMS, to_theta, translate
from generative.conjugate import PROBLEMS
from generative.conjugate import families as fam
from generative.conjugate.model import model_spec
from generative.conjugate.paper_models import (
    StudentTKnownLoc,
    paper_ppl_knowledge,
    paper_ppl_model,
)
from testbed.base import Data
from testbed.errors import InputError
from testbed.model import ModelKnowledge, ModelSpec

PPLS = ("blackjax", "numpyro", "nutpie", "pymc", "pyro", "stan")
CHECKED = ("blackjax", "nutpie", "pymc", "pyro", "stan")  # read ModelSpec.family
T_MODEL = StudentTKnownLoc(loc=1.5, nu_scale=2.0, sigma_scale=0.7)  # no unit scale


def _problem(pid: str):
    return generative.load(f"conjugate/{pid}", use_c2st=False)


def _t_data(n: int = 9):
    """Data for T_MODEL: x (zeros) [n, 1] and y [n, 1]."""
    y = T_MODEL.simulate(np.array([[3.0, 0.9]]), np.zeros((n, 1)), seed=1)[0]
    return np.zeros((n, 1)), y


def _scipy_log_joint(theta: np.ndarray, y: np.ndarray) -> float:
    """log prior + log likelihood of T_MODEL at theta = (nu, sigma), written with scipy."""
    nu, sigma = theta
    lp = stats.halfnorm.logpdf(nu, scale=2.0) + stats.halfnorm.logpdf(sigma, scale=0.7)
    return float(lp + stats.t.logpdf(y[:, 0], nu, 1.5, sigma).sum())


# ---- fast: the paper's models --------------------------------------------------------------


def test_paper_ppl_model_has_the_papers_priors():
    # whats_your_bench/problem_set.py: ppl_priors=[0, 1] (P1-6), [1, 1] (P7-9), [0.5, 0.5]
    # (P10-12), [0.1, 0.1] (P13-15), [[0]*d, eye(d)] (P16-21); NormalKnownMean(mean=3) is the
    # Student-t's known loc (pymc_models.py normal_mean: StudentT(nu, mu=mean, sigma));
    # stan_models/normalKnownMean.stan: nu ~ normal(0, prior_nu) with nu > 0.
    for k in (1, 4, 6):
        model = paper_ppl_model(f"wyb/{k}")
        assert isinstance(model, fam.NormalKnownVar)
        assert model.prior_mean.tolist() == [0.0] and model.prior_cov.tolist() == [[1.0]]
        assert model.noise_var == 1.0
    scales = {7: 1.0, 9: 1.0, 10: 0.5, 12: 0.5, 13: 0.1, 15: 0.1}
    for k, s in scales.items():
        assert paper_ppl_model(f"wyb/{k}") == StudentTKnownLoc(loc=3.0, nu_scale=s, sigma_scale=s)
    for k, d in ((16, 2), (18, 2), (19, 5), (20, 7), (21, 10)):
        model = paper_ppl_model(f"wyb/{k}")
        assert isinstance(model, fam.MvnKnownCov) and model.prior_mean.tolist() == [0.0] * d
        assert np.array_equal(model.prior_cov, np.eye(d))
        assert np.array_equal(model.noise_cov, np.eye(d))
    assert paper_ppl_model("conjugate/wyb/7") == paper_ppl_model("wyb/7")


def test_paper_models_agree_with_the_problem_sets_record():
    for k in range(1, 22):
        model, record = paper_ppl_model(f"wyb/{k}"), PROBLEMS[f"wyb/{k}"]["paper_ppl_prior"]
        if isinstance(model, StudentTKnownLoc):
            assert record == f"student_t with half_normal({model.nu_scale:g}) hyperpriors"
        elif model.dim == 1:
            assert record == "normal(0, 1)"
        else:
            assert record == f"normal(0, I_{model.dim})"
        assert model.dim_y == PROBLEMS[f"wyb/{k}"]["family"].dim_y


@pytest.mark.parametrize("name", ["wyb/0", "wyb/22", "nig/1", "7", "conjugate/nig/1"])
def test_a_name_not_of_the_papers_problems_is_refused(name):
    with pytest.raises(InputError) as err:
        paper_ppl_model(name)
    message = str(err.value)
    assert "\n" not in message
    assert (
        message == f"problem: got {name!r}; allowed: wyb/1 .. wyb/21 (the PPL benchmark's problems)"
    )


def test_the_student_t_model_densities_are_scipys():
    import jax.numpy as jnp

    x, y = _t_data()
    spec = model_spec(T_MODEL)
    assert (spec.name, spec.param_names, spec.dim_theta, spec.dim_unconstrained) == (
        "student_t_known_loc",
        ("nu", "sigma"),
        2,
        2,
    )
    for theta in ([0.3, 0.2], [3.0, 0.9], [25.0, 4.0]):
        theta = np.array(theta)
        want = _scipy_log_joint(theta, y)
        got = T_MODEL.log_prior(theta[None]) + T_MODEL.log_likelihood(theta[None], x, y)
        assert float(got[0]) == pytest.approx(want, rel=1e-12)
        u = np.log(theta)
        got_jax = spec.log_density_unconstrained(jnp.asarray(u), jnp.asarray(x), jnp.asarray(y))
        assert float(got_jax) == pytest.approx(want + u.sum(), rel=1e-5)  # + log |d theta/du|
        np.testing.assert_allclose(np.asarray(spec.constrain(jnp.asarray(u))), theta, rtol=1e-6)


def test_the_student_t_prior_is_two_half_normals():
    prior = T_MODEL.prior()
    theta = prior.sample(20_000, seed=0)
    assert theta.shape == (20_000, 2) and prior.in_support(theta).all()
    np.testing.assert_allclose(prior.mean, stats.halfnorm.mean(scale=[2.0, 0.7]))
    np.testing.assert_allclose(prior.var, stats.halfnorm.var(scale=[2.0, 0.7]))
    se = np.sqrt(prior.var / theta.shape[0])
    assert np.all(np.abs(theta.mean(0) - prior.mean) < 5 * se)
    want = stats.halfnorm.logpdf(theta[:3], scale=[2.0, 0.7]).sum(1)
    np.testing.assert_allclose(prior.log_prob(theta[:3]), want, rtol=1e-12)
    np.testing.assert_allclose(
        prior.marginal_cdf(theta[:3]), stats.halfnorm.cdf(theta[:3], scale=[2.0, 0.7])
    )
    with pytest.raises(InputError, match="not conjugate"):
        T_MODEL.posterior(*_t_data())


def test_the_paper_knowledge_is_the_problems_with_the_papers_model():
    problem = _problem("wyb/7")
    knowledge = paper_ppl_knowledge(problem)
    ours = problem.prior_knowledge
    assert isinstance(knowledge, ModelKnowledge) and knowledge.model.family == paper_ppl_model(
        "wyb/7"
    )
    assert dataclasses.replace(knowledge, model=ours.model) == ours
    spec = model_spec(paper_ppl_model("wyb/7"))  # the call another module makes
    assert isinstance(spec, ModelSpec)
    np.testing.assert_allclose(spec.initial_theta, np.sqrt(2 / np.pi) * np.ones(2), rtol=1e-6)


# ---- fast: the PPLs' programs --------------------------------------------------------------


def test_the_ppl_model_names_the_student_t_parameters():
    x, y = _t_data()
    model = translate(T_MODEL, x, y)
    assert model.hyper == {"m": 1.5, "s_nu": 2.0, "s_sigma": 0.7} and model.num_obs == 9
    assert "student_t_known_loc" in FAMILIES and PARAMS[model.family] == ("nu", "sigma")
    draws = {"nu": np.full((2, 3), 4.0), "sigma": np.full((2, 3), 0.5)}
    theta = to_theta(model, draws)
    assert theta.shape == (2, 3, 2) and theta[1, 2].tolist() == [4.0, 0.5]
    for agent in (blackjax_agent, pymc_agent, pyro_agent, stan_agent):
        assert "student_t_known_loc" in agent.SERVES


def test_blackjax_log_density_is_the_student_t_with_its_jacobian():
    import jax.numpy as jnp

    x, y = _t_data()
    spec, model = model_spec(T_MODEL), translate(T_MODEL, x, y)
    fn = blackjax_agent.log_density(model.family, model.dim)
    assert blackjax_agent.unconstrained_dim(model) == spec.dim_unconstrained
    hyper = {k: jnp.asarray(v, jnp.float32) for k, v in model.hyper.items()}
    data = {k: jnp.asarray(v, jnp.float32) for k, v in model.data.items()}
    for u in ([-1.0, -1.5], [0.2, 0.3], [2.0, 1.0]):
        u = jnp.asarray(u, jnp.float32)
        got, named = fn(u, hyper, data)
        want = spec.log_density_unconstrained(u, jnp.asarray(x), jnp.asarray(y))
        assert float(got) == pytest.approx(float(want), rel=1e-4, abs=1e-3)
        theta = to_theta(model, {k: np.asarray(v)[None, None] for k, v in named.items()})
        np.testing.assert_allclose(theta[0, 0], np.exp(np.asarray(u)), rtol=1e-5)


def test_the_pyro_program_is_the_student_t_model():
    pyro = pytest.importorskip("pyro")
    import torch

    x, y = _t_data()
    program = pyro_agent.pyro_model(translate(T_MODEL, x, y))
    for theta in T_MODEL.prior().sample(3, seed=3):
        values = {"nu": torch.as_tensor(theta[0]), "sigma": torch.as_tensor(theta[1])}
        trace = pyro.poutine.trace(pyro.poutine.condition(program, data=values)).get_trace()
        assert float(trace.log_prob_sum()) == pytest.approx(_scipy_log_joint(theta, y), rel=1e-9)


def test_the_pymc_model_is_the_student_t_model():
    pytest.importorskip("pymc")
    pm = pymc_agent.import_pymc("pymc")
    x, y = _t_data()
    pm_model = pymc_agent.build_model(pm, translate(T_MODEL, x, y))
    logp = pm_model.compile_logp(jacobian=False, mode="FAST_COMPILE")
    for theta in T_MODEL.prior().sample(3, seed=4):
        point = {"nu_log__": np.log(theta[0]), "sigma_log__": np.log(theta[1])}
        assert set(point) == {v.name for v in pm_model.value_vars}
        assert float(logp(point)) == pytest.approx(_scipy_log_joint(theta, y), rel=1e-9)


@pytest.mark.parametrize("agent", CHECKED)
def test_an_unknown_family_is_refused_in_one_line_naming_those_served(agent):
    @dataclasses.dataclass(frozen=True)
    class Weibull:
        name = "weibull"

    spec = dataclasses.replace(model_spec(T_MODEL), family=Weibull())
    knowledge = ModelKnowledge(input_dim=1, num_train=9, model=spec)
    x, y = _t_data()
    with pytest.raises(InputError) as err:
        agents.load(agent).build()(Data(x, y), knowledge)
    message = str(err.value)
    served = {"blackjax": blackjax_agent, "nutpie": pymc_agent, "pymc": pymc_agent}
    served |= {"pyro": pyro_agent, "stan": stan_agent}
    assert "\n" not in message and "student_t_known_loc" in message
    assert message == (
        f"agent {agent}: family 'weibull' is not served; allowed: "
        + ", ".join(sorted(served[agent].SERVES))
    )


# ---- slow: Stan's program, every PPL on wyb/7's paper model --------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_stan_program_is_the_student_t_model():
    """Stan's log density (no Jacobian) equals scipy's up to a constant (`~` drops the
    half-normals' normalisation and the t's constant terms)."""
    stan = pytest.importorskip("stan")
    x, y = _t_data()
    data = stan_agent.stan_data(translate(T_MODEL, x, y))
    with quiet():
        program = stan.build(stan_agent.PROGRAMS["student_t_known_loc"], data=data)
    got, want = [], []
    for theta in T_MODEL.prior().sample(3, seed=6):
        u = program.unconstrain_pars({"nu": float(theta[0]), "sigma": float(theta[1])})
        got.append(program.log_prob(u, adjust_transform=False))
        want.append(_scipy_log_joint(theta, y))
    np.testing.assert_allclose(np.diff(got), np.diff(want), rtol=1e-8, atol=1e-6)


def _grid_posterior(family, x, y) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and sd of (nu, sigma) on an 801 x 801 grid of (log nu, log sigma)."""
    log_nu, log_sigma = np.meshgrid(
        np.linspace(-10, 3, 801), np.linspace(-6, 3, 801), indexing="ij"
    )
    theta = np.exp(np.stack([log_nu, log_sigma], -1).reshape(-1, 2))
    log_p = family.log_prior(theta) + family.log_likelihood(theta, x, y)
    log_p = log_p + np.log(theta).sum(1)  # the density of (log nu, log sigma)
    w = np.exp(log_p - log_p.max()).reshape(log_nu.shape)
    w /= w.sum()
    edges = w[[0, -1]].sum() + w[:, [0, -1]].sum()
    assert edges < 1e-8  # the grid holds the posterior
    w = w.reshape(-1)
    mean = w @ theta
    return mean, np.sqrt(w @ theta**2 - mean**2)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("agent", PPLS)
def test_each_ppl_samples_the_papers_student_t_model(agent):
    """A short run (100 warm-up steps, 200 draws, 1 chain) on wyb/7's paper model: positive
    draws (nu, sigma) whose mean is the grid posterior's within 5 Monte-Carlo standard
    errors (sd / sqrt(bulk ESS), the smaller ESS of the two: a correct sampler misses by
    more with probability < 1e-5)."""
    pytest.importorskip(agent)  # each agent is named after its module
    problem = _problem("wyb/7")
    knowledge = paper_ppl_knowledge(problem)
    config = dict(num_warmup=100, num_samples=200, num_chains=1)
    predictive = agents.load(agent, **config).build()(problem.train_data, knowledge)
    draws, diag = predictive.draws, predictive.diagnostics
    assert draws.shape == (200, 2) and np.all(draws > 0)
    mean, sd = _grid_posterior(knowledge.model.family, problem.x, problem.y)
    se = sd / np.sqrt(diag["ess_bulk_min"])
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se), (draws.mean(0), mean, se, diag)
