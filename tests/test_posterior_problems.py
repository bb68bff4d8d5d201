"""Posterior problems (`sbi/<task>/<budget>/<k>`) and the posterior adapter.

Ids, settings and sweeps; the simulation budget; what the agent is told; scoring of a
posterior given as our protocol or in the sbi package's shape; bad agent output.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from scipy import stats

import generative
from generative.sbi.problems import PosteriorProblem
from testbed.errors import InputError
from testbed.posterior_adapter import as_posterior, posterior_style
from testbed.simulation import SimulationAccess, SimulatorKnowledge, Support

# ----- ids, settings, sweeps -----


def test_settings_of_an_id():
    s = generative.problem_settings("sbi/two_moons/10000/3")
    assert s["family"] == "sbi"
    assert (s["task"], s["num_simulations"], s["num_observation"]) == ("two_moons", 10000, 3)
    assert s["num_samples"] == 10_000
    # the seed is stable and differs between observations
    assert s["seed"] == generative.problem_settings("sbi/two_moons/10000/3")["seed"]
    assert s["seed"] != generative.problem_settings("sbi/two_moons/10000/4")["seed"]


@pytest.mark.parametrize(
    "pid, names",
    [
        ("sbi/no_such_task/1000/1", ["task", "no_such_task", "two_moons", "lotka_volterra"]),
        ("sbi/two_moons/500/1", ["num_simulations", "500", "1000", "10000", "100000"]),
        ("sbi/two_moons/1000/11", ["observation", "11", "1, 2, 3"]),
        ("sbi/two_moons/1000/01", ["observation", "01"]),
        ("sbi/two_moons/1000", ["sbi/<task>/<num_simulations>/<observation>"]),
    ],
)
def test_bad_ids_list_the_allowed_values(pid, names):
    with pytest.raises(InputError) as e:
        generative.problem_settings(pid)
    for name in names:
        assert name in str(e.value)


def test_sweeps():
    assert len(generative.sweep_ids("sbi_all")) == 10 * 3 * 10
    two_moons = generative.sweep_ids("sbi_two_moons")
    assert len(two_moons) == 30 and len(set(two_moons)) == 30
    assert "sbi/two_moons/100000/10" in two_moons
    for pid in generative.sweep_ids("sbi_test"):
        s = generative.problem_settings(pid)
        assert s["num_simulations"] == 1000


# ----- what the agent gets -----


def test_prior_knowledge_and_observation():
    p = generative.load("sbi/gaussian_mixture/1000/2")
    knowledge = p.prior_knowledge
    assert knowledge == SimulatorKnowledge(
        dim_theta=2,
        dim_x=2,
        support=Support("box", -10.0, 10.0),
        budget=1000,
        task="gaussian_mixture",
        parameter_names=("theta_1", "theta_2"),
    )
    access = p.train_data
    assert isinstance(access, SimulationAccess)
    assert access.budget == 1000 and access.remaining == 1000
    np.testing.assert_array_equal(access.x_o, p.x_o)
    # the task's true parameters are not handed over
    assert not any("theta" in name and "true" in name for name in vars(access))


def test_budget_is_enforced_and_named():
    p = PosteriorProblem("two_moons", 300, 1, num_samples=100)
    access = p.train_data
    theta = access.prior.sample(300, seed=0)
    with pytest.raises(InputError, match=r"theta.*shape \[n, 2\]"):
        access.simulate(np.zeros((400, 3)), seed=1)  # a shape error, not a budget error
    assert access.num_simulations == 0
    access.simulate(theta[:250], seed=1)
    with pytest.raises(InputError, match="budget of 300") as e:
        access.simulate(theta[:60], seed=2)
    assert "at most 50 more" in str(e.value)
    assert access.num_simulations == 250  # the refused call simulated nothing
    access.simulate(theta[:50], seed=3)  # exactly to the budget is fine
    assert access.remaining == 0
    with pytest.raises(InputError, match="budget"):
        access.simulate(theta[:1], seed=4)
    # a fresh training run gets a fresh budget
    assert p.train_data.remaining == 300


def test_prior_access_matches_task():
    task = generative.sbi.get_task("gaussian_linear")
    access = SimulationAccess(task, 10, task.observation(1))
    theta = access.prior.sample(5, seed=3)
    np.testing.assert_array_equal(theta, task.sample_prior(5, seed=3))
    np.testing.assert_allclose(access.prior.log_prob(theta), task.log_prior(theta))


# ----- the adapter -----


class ProtocolPosterior:
    """Our protocol with an exact Gaussian posterior: N(mean, var I)."""

    def __init__(self, mean, var):
        self.mean, self.var = np.asarray(mean, float), float(var)

    def sample(self, x_o, num_samples, seed):
        rng = np.random.default_rng(seed)
        return self.mean + np.sqrt(self.var) * rng.standard_normal((num_samples, self.mean.size))

    def log_prob(self, theta, x_o):
        return stats.multivariate_normal(self.mean, self.var).logpdf(np.atleast_2d(theta))


class FakeSbiPosterior:
    """The sbi package's shape: torch tensors, sample(shape, x=...), log_prob(theta, x=...)."""

    def __init__(self, dim):
        self.dim = dim
        self.calls = []

    def sample(self, sample_shape, x=None, show_progress_bars=True):
        import torch

        self.calls.append(("sample", tuple(x.shape), show_progress_bars))
        return torch.randn(*sample_shape, self.dim) + x.mean()

    def log_prob(self, theta, x=None):
        import torch

        self.calls.append(("log_prob", tuple(x.shape)))
        return -0.5 * (theta**2).sum(-1) - 0.5 * self.dim * torch.log(torch.tensor(2 * np.pi))

    def sample_batched(self, sample_shape, x=None, show_progress_bars=True):
        import torch

        return torch.zeros(*sample_shape, x.shape[0], self.dim) + x[:, :1]


def test_adapter_styles():
    assert posterior_style(ProtocolPosterior([0.0], 1.0)) == "protocol"
    assert posterior_style(FakeSbiPosterior(2)) == "sbi"
    with pytest.raises(InputError, match="sample"):
        as_posterior(object())


def test_adapter_sbi_shape_is_seeded_and_converted():
    fake = FakeSbiPosterior(3)
    post = as_posterior(fake, dim_theta=3)
    x_o = np.array([1.0, 2.0])
    a = post.sample(x_o, 7, seed=5)
    b = post.sample(x_o, 7, seed=5)
    c = post.sample(x_o, 7, seed=6)
    assert a.shape == (7, 3) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # x_o reached the object as a [1, dim_x] tensor; progress bars switched off
    assert fake.calls[0] == ("sample", (1, 2), False)
    lp = post.log_prob(np.zeros((4, 3)), x_o)
    np.testing.assert_allclose(lp, stats.multivariate_normal(np.zeros(3)).logpdf(np.zeros(3)))
    batched = post.sample_batched(np.array([[1.0, 0.0], [2.0, 0.0]]), seed=0)
    np.testing.assert_array_equal(batched, [[1.0] * 3, [2.0] * 3])


def test_adapter_protocol_and_batched_fallback():
    post = as_posterior(ProtocolPosterior([0.0, 1.0], 0.5), dim_theta=2)
    s = post.sample(None, 10, seed=1)
    np.testing.assert_array_equal(s, ProtocolPosterior([0.0, 1.0], 0.5).sample(None, 10, 1))
    # no sample_batched: one call per row, with seeds seed + i
    b = post.sample_batched(np.zeros((3, 4)), seed=10)
    for i in range(3):
        np.testing.assert_array_equal(
            b[i], ProtocolPosterior([0.0, 1.0], 0.5).sample(None, 1, 10 + i)[0]
        )


class UserModel:
    """A user's own posterior whose `sample` arguments are named freely (x, n, seed)."""

    def sample(self, x, n, seed):
        return np.random.default_rng(seed).uniform(-1.0, 1.0, (n, 2))


def test_a_users_model_is_scored_whatever_its_argument_names():
    assert posterior_style(UserModel()) == "protocol"
    p = PosteriorProblem("two_moons", 1000, 1, num_samples=50, median_distance=False)
    q = p.evaluate(UserModel())
    assert 0.5 <= q["c2st"] <= 1.0 and "nltp" not in q


class MCMCPosterior(FakeSbiPosterior):
    """Named as sbi's MCMC posterior, whose log_prob is an unnormalised potential."""


def test_unnormalised_sbi_posteriors_are_scored_without_nltp():
    assert as_posterior(FakeSbiPosterior(2)).has_log_prob
    post = as_posterior(MCMCPosterior(2), dim_theta=2)
    assert post.style == "sbi" and not post.has_log_prob
    with pytest.raises(InputError, match="normalised log_prob"):
        post.log_prob(np.zeros((1, 2)), np.zeros(2))
    p = PosteriorProblem("two_moons", 1000, 1, num_samples=50, median_distance=False)
    q = p.evaluate(MCMCPosterior(2))
    assert "nltp" not in q and 0.5 <= q["c2st"] <= 1.0


class BadPosterior:
    def __init__(self, out):
        self.out = out

    def sample(self, x_o, num_samples, seed):
        return self.out(num_samples)


@pytest.mark.parametrize(
    "out, message",
    [
        (lambda n: np.zeros((n, 3)), "shape"),
        (lambda n: np.zeros((n - 1, 2)), "shape"),
        (lambda n: np.zeros(n), "shape"),
        (lambda n: np.where(np.arange(n)[:, None] == 2, np.nan, np.zeros((n, 2))), "NaN"),
        (lambda n: "abc", "non-numeric"),
    ],
)
def test_bad_agent_output_is_an_input_error(out, message):
    p = PosteriorProblem("two_moons", 1000, 1, num_samples=20)
    with pytest.raises(InputError, match=message):
        p.evaluate(BadPosterior(out))


# ----- scoring -----


class PriorAsPosterior:
    def __init__(self, task):
        self.task = task

    def sample(self, x_o, num_samples, seed):
        return self.task.sample_prior(num_samples, seed)


def test_c2st_separates_the_reference_from_the_prior():
    p = PosteriorProblem("two_moons", 1000, 1, num_samples=500)
    exact = p.evaluate(p.oracle_predictive())
    # Reference vs an independent reference draw: accuracy under the null has sd about
    # sqrt(0.25 / 1000) = 0.016 over the 1,000 held-out rows; allow 4 sd.
    assert abs(exact["c2st"] - 0.5) < 0.064
    prior = p.evaluate(PriorAsPosterior(p._task))
    # The crescent covers a small part of the prior box: a classifier tells them apart.
    assert prior["c2st"] > 0.9
    assert prior["mmd"] > exact["mmd"] + 0.01
    # Posterior-predictive simulations sit closer to x_o under the posterior.
    assert exact["median_distance"] < 0.5 * prior["median_distance"]
    assert exact["outside_support_fraction"] == 0.0
    assert "nltp" not in exact  # no density offered, no NLTP (never a NaN)


def test_nltp_of_an_exact_posterior_is_its_closed_form():
    # gaussian_linear: prior N(0, 0.1 I), x | theta ~ N(theta, 0.1 I) -> N(x_o / 2, 0.05 I).
    p = PosteriorProblem("gaussian_linear", 1000, 3, num_samples=200, median_distance=False)
    mean = p.x_o.ravel() / 2.0
    q = p.evaluate(ProtocolPosterior(mean, 0.05))
    want = -stats.multivariate_normal(mean, 0.05).logpdf(p.theta_true.ravel())
    np.testing.assert_allclose(q["nltp"], want, rtol=1e-12)
    assert "median_distance" not in q


def test_an_agent_through_testbed_evaluate_counts_its_simulations():
    import agents
    import testbed

    p = generative.load("sbi/two_moons/1000/2", num_samples=200)
    q = testbed.evaluate(agents.load("rej_abc"), p)
    assert q["num_simulations_used"] == 1000
    assert q["c2st"] > 0.5 and np.isfinite(q["nltp"])
    assert {"train_seconds", "evaluation_seconds", "sampling_seconds", "mmd"} <= set(q)


def test_lc2st_option_scores_an_amortized_posterior():
    class Amortized:
        def sample(self, x_o, num_samples, seed):
            rng = np.random.default_rng(seed)
            return np.reshape(x_o, (1, -1)) / 2 + np.sqrt(0.05) * rng.standard_normal(
                (num_samples, 10)
            )

        def sample_batched(self, xs, seed):
            rng = np.random.default_rng(seed)
            return xs / 2 + np.sqrt(0.05) * rng.standard_normal(xs.shape)

    p = PosteriorProblem(
        "gaussian_linear",
        1000,
        1,
        num_samples=200,
        lc2st=True,
        lc2st_num_calibration=200,
        lc2st_num_null=5,
        median_distance=False,
    )
    q = p.evaluate(Amortized())
    assert 0.0 <= q["lc2st_p_value"] <= 1.0 and q["lc2st_statistic"] >= 0.0
    assert q["lc2st_reject"] in (0.0, 1.0)


def test_an_agent_over_budget_fails_with_the_budget_named():
    import testbed

    def greedy(access, prior):
        theta = access.prior.sample(access.budget + 1, seed=0)
        return access.simulate(theta, seed=1)

    p = PosteriorProblem("two_moons", 1000, 1, num_samples=10)
    with pytest.raises(InputError, match="budget of 1000"):
        testbed.evaluate(greedy, p)


# ----- a misbehaving agent is a failed run, with its reason -----


@dataclasses.dataclass(frozen=True)
class FaultConfig:
    """How the fault agent misbehaves: over_budget, wrong_shape or nan_samples."""

    mode: str = "over_budget"


def make_fault_agent(config: FaultConfig):
    def agent(access, prior):
        if config.mode == "over_budget":
            access.simulate(access.prior.sample(access.budget + 1, seed=0), seed=1)
        if config.mode == "wrong_shape":
            return BadPosterior(lambda n: np.zeros((n, 3)))
        return BadPosterior(lambda n: np.full((n, 2), np.nan))

    return agent


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("over_budget", "InputError: simulate: 1001 simulations requested .* budget of 1000"),
        ("wrong_shape", r"InputError: posterior samples: .* allowed: shape \[10000, 2\]"),
        ("nan_samples", "InputError: posterior samples: got 10000 of 10000 rows with NaN"),
    ],
    ids=["over_budget", "wrong_shape", "nan_samples"],
)
def test_a_misbehaving_agent_is_recorded_as_a_failed_run(scoped_registries, mode, reason):
    """What the leaderboard's worker stores for the job: failed, with the one-line reason."""
    import agents
    from agents.registry import AgentEntry
    from leaderboard.execution.jobs import Job
    from leaderboard.execution.worker import run_job

    entry = AgentEntry("sbi_fault", FaultConfig, make_fault_agent, None, "misbehaves")
    agents.AGENTS.register("sbi_fault", entry)  # undone after the test (scoped_registries)
    result = run_job(Job.make("sbi_fault", {"mode": mode}, "sbi/two_moons/1000/1"))
    assert result.status == "failed" and result.metrics == {}
    assert re.match(reason, result.error), result.error


# ----- a custom observation: generative.load(id, x_o=...) -----


def test_custom_x_o_scores_the_posterior_at_that_observation():
    task = generative.sbi.get_task("gaussian_linear")
    x_o = np.full(10, 0.8)  # far from the benchmark's observations
    p = generative.load("sbi/gaussian_linear/1000/1", x_o=x_o, num_samples=2000)
    np.testing.assert_array_equal(p.x_o, x_o[None, :])
    np.testing.assert_array_equal(p.train_data.x_o, x_o[None, :])  # what the agent sees
    # the reference is the task's posterior at x_o: N(x_o / 2, 0.05 I) for this task
    ref = p.reference_samples()
    np.testing.assert_array_equal(ref, task.reference_posterior(x_o, 2000, seed=p.seed))
    np.testing.assert_allclose(ref.mean(axis=0), x_o / 2, atol=4 * np.sqrt(0.05 / 2000))
    # no theta* is behind a custom x_o: NLTP is neither a default nor offered
    assert p.theta_true is None and "nltp" not in p.metrics
    assert "true_parameters" not in p.offers
    with pytest.raises(InputError, match="'nltp' needs true_parameters"):
        p.evaluate(ProtocolPosterior(x_o / 2, 0.05), metrics=["nltp"])
    q = p.evaluate(ProtocolPosterior(x_o / 2, 0.05), metrics=["mmd", "median_distance"])
    assert q["mmd"] < 0.01 and "nltp" not in q
    # x_o = observation k given as [1, dim_x] is the id's own problem
    same = generative.load("sbi/gaussian_linear/1000/1", x_o=task.observation(1), num_samples=50)
    plain = generative.load("sbi/gaussian_linear/1000/1", num_samples=50)
    np.testing.assert_array_equal(same.reference_samples(), plain.reference_samples())
    assert plain.theta_true is not None and "nltp" in plain.metrics


@pytest.mark.parametrize(
    "x_o, message",
    [
        (np.zeros(3), r"x_o: got 'array of shape (3,)'; allowed: shape [2] or [1, 2]"),
        (np.zeros((2, 2)), r"x_o: got 'array of shape (2, 2)'; allowed: shape [2] or [1, 2]"),
        ([0.1, np.nan], "x_o: got [0.1, nan]; allowed: finite values"),
        ("ab", "x_o: got 'a non-numeric str'; allowed: numbers of shape [2]"),
    ],
)
def test_bad_custom_x_o_is_named(x_o, message):
    with pytest.raises(InputError) as e:
        generative.load("sbi/two_moons/1000/1", x_o=x_o)
    assert message in str(e.value)
