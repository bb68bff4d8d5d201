"""The plumbing: registries, configs, Quality, evaluate and the coin problem's exact KL."""

import dataclasses
import math

import numpy as np
import pytest
from scipy.special import betaln, gammaln

import agents
import generative
import testbed
from testbed.config import with_overrides
from testbed.errors import InputError


def bernoulli_kl(p, q):
    return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))


def beta_binomial_kl(p, a, b, tau):
    """KL(Bernoulli(p)^tau || Beta(a, b)-mixture) over sequences, by number of heads."""
    total = 0.0
    for k in range(tau + 1):
        log_choose = gammaln(tau + 1) - gammaln(k + 1) - gammaln(tau - k + 1)
        log_p_seq = k * math.log(p) + (tau - k) * math.log(1 - p)
        log_q_seq = betaln(a + k, b + tau - k) - betaln(a, b)
        total += math.exp(log_choose + log_p_seq) * (log_p_seq - log_q_seq)
    return total


def test_public_api_names_import():
    for name in [
        "Data",
        "PriorKnowledge",
        "EpistemicSampler",
        "PosteriorEstimate",
        "Agent",
        "Problem",
        "Quality",
        "evaluate",
        "metrics",
    ]:
        assert hasattr(testbed, name)
    assert callable(generative.load) and callable(generative.sweep_ids)
    assert callable(agents.load)


def test_design_public_api_names_import():
    """Every name of DESIGN.md's public API resolves after `import agents, generative, ...`."""
    import leaderboard

    assert callable(generative.sbi.get_task) and "two_moons" in generative.sbi.task_names()
    for name in ("c2st", "mmd", "LC2ST", "LC2ST_NF"):
        assert callable(getattr(testbed.metrics, name)), name
    for name in ("load", "export", "ResultsStore"):
        assert callable(getattr(leaderboard, name)), name
    assert leaderboard.DEFAULT_PATH == "testbed-results.db"  # DESIGN.md's default file
    task = generative.sbi.get_task("two_moons")
    theta = task.sample_prior(3, seed=0)
    x = task.simulate(theta, seed=1)
    assert theta.shape == (3, 2) and x.shape == (3, 2)
    assert task.reference_posterior(x[0], num_samples=5, seed=0).shape == (5, 2)


def test_registering_a_new_agent_is_one_decorator(scoped_registries):

    @dataclasses.dataclass(frozen=True)
    class HalfConfig:
        p: float = 0.5

    @agents.register("half_coin_test", HalfConfig)
    def make(config):
        """Predicts heads with probability p at every input."""
        logit = math.log(config.p / (1 - config.p))
        return lambda data, prior: lambda x, key: np.tile([0.0, logit], (len(x), 1))

    assert "half_coin_test" in agents.names()
    assert agents.AGENTS.get("half_coin_test").description.startswith("Predicts heads")
    problem = generative.load("coin/1")  # p = 0.2, tau = 1
    quality = testbed.evaluate(agents.load("half_coin_test", p="0.5"), problem)
    assert quality["kl_estimate"] == pytest.approx(bernoulli_kl(0.2, 0.5), rel=1e-5)
    with pytest.raises(InputError, match="p: got 'x'"):
        agents.load("half_coin_test", p="x")
    with pytest.raises(InputError, match="registered twice"):
        agents.register("half_coin_test", HalfConfig)(make)


def test_coin_sweep_and_settings():
    ids = generative.sweep_ids("coin")
    assert len(ids) == 18
    s = generative.problem_settings("coin/16")
    assert s == {
        "family": "coin",
        "p": 0.9,
        "num_train": 10,
        "tau": 5,
        "seed": 8,
        "num_enn_samples": 1000,
    }
    # pairing: index j (tau=1) and j+9 (tau=5) share coin, data and estimator key
    a, b = generative.load("coin/7"), generative.load("coin/16")
    np.testing.assert_array_equal(a.train_data.y, b.train_data.y)


@pytest.mark.parametrize("problem_id", ["coin/4", "coin/13"])
def test_oracle_kl_is_zero(problem_id):
    q = testbed.evaluate(agents.load("oracle"), generative.load(problem_id))
    assert abs(q["kl_estimate"]) < 1e-5
    assert q["train_seconds"] >= 0 and q["evaluation_seconds"] > 0


@pytest.mark.parametrize("problem_id", ["coin/1", "coin/17"])
def test_uniform_kl_closed_form(problem_id):
    problem = generative.load(problem_id)
    q = testbed.evaluate(agents.load("uniform"), problem)
    expected = problem.tau * bernoulli_kl(problem.p, 0.5)
    assert q["kl_estimate"] == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("problem_id", ["coin/1", "coin/14"])
def test_posterior_mean_agent_exact_kl(problem_id):
    problem = generative.load(problem_id)
    y = problem.train_data.y
    p_hat = (1 + y.sum()) / (2 + len(y))
    q = testbed.evaluate(agents.load("beta_bernoulli", predictive="mean"), problem)
    assert q["kl_estimate"] == pytest.approx(problem.tau * bernoulli_kl(problem.p, p_hat), rel=1e-4)


def test_posterior_agent_matches_beta_binomial():
    problem = generative.load("coin/13")  # p = 0.5, n = 10, tau = 5
    problem.num_enn_samples = 20_000
    y = problem.train_data.y
    a, b = 1 + y.sum(), 1 + len(y) - y.sum()
    q = testbed.evaluate(agents.load("beta_bernoulli"), problem)
    exact = beta_binomial_kl(problem.p, a, b, problem.tau)
    # Monte-Carlo mixture error: the mixture probability of a sequence has relative sd
    # at most sqrt(E[theta^2k (1-theta)^2(tau-k)] / E[.]^2 / M) ~ 2.3 / sqrt(M) here.
    tol = 4 * 2.3 / math.sqrt(problem.num_enn_samples)
    assert q["kl_estimate"] == pytest.approx(exact, abs=tol)
    assert exact > 0.01  # not trivially zero


def test_agent_overrides_are_checked():
    assert agents.load("beta_bernoulli", a="2.5").config.a == 2.5
    with pytest.raises(InputError, match="unknown setting 'c'"):
        agents.load("beta_bernoulli", c=1)
    with pytest.raises(InputError, match="a: got 'x'"):
        agents.load("beta_bernoulli", a="x")
    with pytest.raises(InputError, match="a: got -1"):
        agents.load("beta_bernoulli", a=-1)
    with pytest.raises(InputError, match="predictive: got 'foo'.*posterior, mean"):
        agents.load("beta_bernoulli", predictive="foo")
    with pytest.raises(InputError, match="agent: got 'nope'"):
        agents.load("nope")


def test_typed_overrides_cover_tuples_optionals_and_bools():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        hidden: tuple[int, ...] = (50, 50)
        rate: float | None = None
        flag: bool = False
        steps: int = 10

    c = with_overrides(Cfg(), {"hidden": "100,100", "rate": "0.5", "flag": "true", "steps": "1e3"})
    assert c == Cfg(hidden=(100, 100), rate=0.5, flag=True, steps=1000)
    assert with_overrides(Cfg(), {"rate": "none"}).rate is None
    with pytest.raises(InputError, match="steps: got 1.5"):
        with_overrides(Cfg(), {"steps": 1.5})
    with pytest.raises(InputError, match="flag: got 'maybe'"):
        with_overrides(Cfg(), {"flag": "maybe"})
    assert with_overrides(Cfg(), {"hidden": ""}).hidden == ()  # no hidden layer: a linear net
    allowed = r"allowed: a comma-separated list of integers \(e.g. 50,50\)$"
    for text in ("100,", ",100", "100,,100"):  # an item left out: it was dropped
        with pytest.raises(InputError, match=f"^hidden: got '{text}', which has an empty item; "):
            with_overrides(Cfg(), {"hidden": text})
        with pytest.raises(InputError, match=allowed):
            with_overrides(Cfg(), {"hidden": text})
    assert with_overrides(Cfg(), {"hidden": "(100,)"}).hidden == (100,)  # Python's 1-tuple
    assert with_overrides(Cfg(), {"hidden": "[100, 50]"}).hidden == (100, 50)
    with pytest.raises(InputError, match="^hidden: got '\\(100,,\\)', which has an empty item"):
        with_overrides(Cfg(), {"hidden": "(100,,)"})


def test_agent_key_is_stable_and_config_sensitive():
    assert agents.load("beta_bernoulli").key == agents.load("beta_bernoulli").key
    assert agents.load("beta_bernoulli").key != agents.load("beta_bernoulli", a=2).key


def test_quality_is_flat_floats():
    q = testbed.Quality(a=np.float32(1.5), b=np.array(2))
    assert q == {"a": 1.5, "b": 2.0} and all(type(v) is float for v in q.values())
    with pytest.raises(InputError, match="Quality\\['c'\\]"):
        testbed.Quality(c="text")


@pytest.mark.parametrize(
    "problem_id, option, value, expect",
    [
        ("sbi/two_moons/1000/1", "c2st_z_score", "no", False),  # was kept as 'no': truthy
        ("sbi/two_moons/1000/1", "median_distance", "false", False),
        ("sbi/two_moons/1000/1", "num_samples", "1e3", 1000),
        ("conjugate/wyb/1", "use_c2st", "yes", True),
        ("classification_test/0", "num_test_seeds", 7.0, 7),
        ("sbi/two_moons/1000/1", "lc2st", 1.5, "true or false"),
        ("sbi/two_moons/1000/1", "num_samples", 2.5, "an integer"),
        ("conjugate_sbi/beta_binomial/1/1000", "use_c2st", "maybe", "true or false"),
        ("classification_test/0", "num_test_seeds", "x", "an integer"),  # was a TypeError
        ("regression_test/0", "num_enn_samples", 2.5, "an integer"),
        ("real/iris/1/1", "num_test_seeds", "many", "an integer"),
    ],
)
def test_problem_options_are_typed_like_agent_settings(problem_id, option, value, expect):
    if isinstance(expect, str):
        with pytest.raises(InputError, match=f"option of .* problems: {option}: .*{expect}"):
            generative.load(problem_id, **{option: value})
        return
    problem = generative.load(problem_id, **{option: value})
    settings = getattr(problem, "settings", problem)
    got = getattr(settings, option, getattr(problem, option, None))
    assert got == expect and type(got) is type(expect)


def test_unknown_problem_ids():
    with pytest.raises(InputError, match="problem family: got 'nofamily'"):
        generative.load("nofamily/1")
    with pytest.raises(InputError, match="coin/i' with i in 0..17"):
        generative.load("coin/18")
    with pytest.raises(InputError, match="family/"):
        generative.load("coin")


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999", float("inf"), float("nan")])
def test_non_finite_numbers_are_refused_naming_the_field(text):
    with pytest.raises(InputError, match="^agent mlp: learning_rate: got .*; allowed: a finite"):
        agents.load("mlp", learning_rate=text)
    with pytest.raises(InputError, match="^agent beta_bernoulli: a: got .*finite"):
        agents.load("beta_bernoulli", a=text)

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        rate: float | None = None
        widths: tuple[float, ...] = (1.0,)

    for field, value in (("rate", text), ("widths", text), ("widths", [1.0, text])):
        if field == "widths" and not isinstance(value, str | list):
            continue  # a bare float is no list (a type error of its own)
        with pytest.raises(InputError, match=f"^{field}: got .*; allowed: .*finite"):
            with_overrides(Cfg(), {field: value})


def test_validators_refuse_non_finite_numbers():
    from testbed.config import check_at_least, check_nonnegative, check_positive

    for check in (check_positive, check_nonnegative):
        for bad in (math.inf, -math.inf, math.nan):
            with pytest.raises(InputError, match="^lr: got .*; allowed: a finite number"):
                check("lr", bad)
        check("lr", 0.5)
    with pytest.raises(InputError, match="^steps: got inf; allowed: an integer >= 1"):
        check_at_least("steps", math.inf, 1)


def test_a_field_that_documents_inf_takes_it():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        max_norm: float = dataclasses.field(default=5.0, metadata={"inf": "no clipping"})

    assert with_overrides(Cfg(), {"max_norm": "inf"}).max_norm == math.inf
    with pytest.raises(InputError, match="max_norm: got 'nan'; allowed: .*inf: no clipping"):
        with_overrides(Cfg(), {"max_norm": "nan"})


def test_a_family_declares_what_its_problems_need(scoped_registries):
    from generative.registry import FAMILIES, register_family

    with pytest.raises(InputError, match="family f_test: prediction: got 'logits'; allowed: "):
        register_family("f_test", lambda rest: {}, prediction="logits")(lambda s: None)
    register_family("f_test", lambda rest: {}, prediction="labels")(lambda s: None)
    assert FAMILIES.get("f_test").prediction == "labels"
    assert FAMILIES.get("coin").prediction == "labels"
