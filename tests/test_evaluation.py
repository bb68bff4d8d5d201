"""Evaluation as matching: problems offer evidence, metrics need it, evaluate pairs them."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed
from testbed.errors import InputError
from testbed.evaluation import EVIDENCE, MISSING, Evidence, ScoredProblem
from testbed.metrics import METRICS, register
from testbed.posterior_adapter import as_posterior

FAMILY_EXAMPLES = [
    "coin/0",
    "classification_2d/0",
    "real/iris/1/1",
    "sbi/two_moons/1000/1",
    "conjugate/beta_binomial/1",
    "conjugate_sbi/beta_binomial/1/1000",
]


class NeverTrains:
    """An agent that must not be called (metrics are checked before training)."""

    def __call__(self, data, knowledge):
        raise AssertionError("trained although the metrics were bad")


class Gaussian:
    """A posterior of our protocol without a density: N(0, I) draws."""

    dim = 2

    def sample(self, x_o, num_samples, seed):
        return np.random.default_rng(seed).normal(size=(num_samples, self.dim))


class Gaussian1D(Gaussian):
    dim = 1


def test_every_metric_needs_words_of_the_vocabulary():
    for name in METRICS:
        assert set(METRICS.get(name).needs) <= set(EVIDENCE), name


@pytest.mark.parametrize("problem_id", FAMILY_EXAMPLES)
def test_every_family_offers_what_its_default_metrics_need(problem_id):
    problem = generative.load(problem_id)
    assert isinstance(problem, ScoredProblem)
    assert problem.offers <= set(EVIDENCE)
    for name in problem.metrics:
        assert set(METRICS.get(name).needs) <= problem.offers, (problem_id, name)


SEEN = {}


@register("test_mean_shift", needs=("reference_samples", "posterior_samples"))
def mean_shift(reference, samples) -> float:
    """Distance between the means of the reference and the agent's draws (a user's metric)."""
    SEEN["samples"] = samples
    return float(np.linalg.norm(reference.mean(0) - samples.mean(0)))


def test_a_users_metric_runs_on_a_family_it_was_not_written_for():
    """Registered once, it sees the same posterior draws as the problem's own C2ST."""
    seen = SEEN
    problem = generative.load("sbi/two_moons/1000/1", num_samples=300, median_distance=False)
    names = [*problem.metrics, "test_mean_shift"]
    quality = testbed.evaluate(agents.load("oracle"), problem, metrics=names)
    assert {"c2st", "mmd", "test_mean_shift"} <= set(quality)
    reference = problem.reference_samples()
    draws = as_posterior(problem.oracle_predictive()).sample(problem.x_o, 300, problem.seed + 1)
    np.testing.assert_array_equal(seen["samples"], draws)
    want = np.linalg.norm(reference.mean(0) - draws.mean(0))
    assert quality["test_mean_shift"] == pytest.approx(want)
    # only what was asked for
    only = testbed.evaluate(agents.load("oracle"), problem, metrics=["test_mean_shift"])
    assert set(only) == {
        "test_mean_shift",
        "sampling_seconds",
        "train_seconds",
        "evaluation_seconds",
    }


def test_an_agent_that_returns_none_is_named():
    """Was "'NoneType' object is not callable" from inside the joint-KL estimator."""

    def forgets_to_return(train_data, prior_knowledge):
        pass

    with pytest.raises(InputError, match="agent forgets_to_return returned None"):
        testbed.evaluate(forgets_to_return, generative.load("coin/0"))


def test_an_id_or_a_name_where_the_object_goes_is_named():
    """The first mistakes a user types: an InputError saying what to pass instead of an
    AttributeError or a TypeError from deep inside."""
    problem = generative.load("coin/0")
    agent = agents.load("uniform")
    cases = [
        (
            lambda: testbed.evaluate(agent, "coin/0"),
            r"problem: got 'coin/0', an id.*generative.load",
        ),
        (
            lambda: testbed.evaluate("uniform", problem),
            r"agent: got 'uniform', a name.*agents.load",
        ),
        (lambda: testbed.evaluate(object(), problem), r"agent: got object; allowed: a callable"),
        (
            lambda: testbed.evaluate_many(agent, problem),
            r"problems: got CoinProblem; allowed: a list",
        ),
        (lambda: testbed.evaluate_many(agent, [problem, "coin/1"]), r"problems\[1\]: got 'coin/1'"),
        (lambda: testbed.evaluate_many("uniform", [problem]), r"agent: got 'uniform', a name"),
    ]
    for call, message in cases:
        with pytest.raises(InputError, match=message):
            call()


def test_bad_metrics_are_refused_before_training():
    problem = generative.load("classification_2d/0")
    with pytest.raises(InputError, match="metric: got 'no_such'; allowed: one of: accuracy"):
        testbed.evaluate(NeverTrains(), problem, metrics=["no_such"])
    with pytest.raises(
        InputError, match="'c2st' needs posterior_samples, reference_samples.*accuracy"
    ):
        testbed.evaluate(NeverTrains(), problem, metrics=["c2st"])
    with pytest.raises(InputError, match="a list of metric names"):
        testbed.evaluate(NeverTrains(), problem, metrics="joint_kl")
    with pytest.raises(InputError, match=r"metrics: got \[\]; allowed: a list of one or more"):
        testbed.evaluate(NeverTrains(), problem, metrics=[])  # scored nothing, silently


def test_a_metric_the_predictive_cannot_serve_is_left_out(caplog):
    problem = generative.load("sbi/two_moons/1000/1", num_samples=200, median_distance=False)
    quality = problem.evaluate(Gaussian())  # no density: the default NLTP is left out
    assert "c2st" in quality and "nltp" not in quality and not caplog.records
    problem = generative.load("conjugate/wyb/1", num_null=0, use_c2st=False)
    quality = problem.evaluate(Gaussian1D(), ["mc_kl"])  # not a default: said in a warning
    assert "mc_kl_estimate" not in quality
    assert "metric mc_kl left out: this predictive gives no posterior_log_prob" in caplog.text


def test_evidence_computes_each_value_once_and_names_what_it_lacks():
    calls = []

    def costly(_):
        calls.append(1)
        return 42

    evidence = Evidence({"observation": costly, "true_parameters": lambda _: MISSING})
    assert evidence["observation"] == evidence["observation"] == 42 and len(calls) == 1
    assert evidence.missing(["observation", "true_parameters", "simulator"]) == [
        "true_parameters",
        "simulator",
    ]
    with pytest.raises(InputError, match="'simulator' is not offered here; offered: obs"):
        evidence["simulator"]
    with pytest.raises(InputError, match="evidence: got 'samples'; allowed: names of"):
        Evidence({"samples": costly})
    with pytest.raises(InputError, match="needs: got 'posterior_draws'"):
        register("test_bad_needs", needs=("posterior_draws",))


def test_plain_problems_of_users_still_work_without_evidence():
    class Plain:
        train_data = None
        prior_knowledge = None

        def evaluate(self, predictive):
            return {"score": 1.0}

    assert testbed.evaluate(lambda d, k: None, Plain())["score"] == 1.0
    with pytest.raises(InputError, match="offers no evidence"):
        testbed.evaluate(lambda d, k: None, Plain(), metrics=["joint_kl"])


def test_two_metrics_that_write_one_entry_are_refused_before_training():
    problem = generative.load("conjugate/wyb/1", num_null=0, use_c2st=False)
    with pytest.raises(InputError, match="'conjugate_posterior' and 'mc_kl' both give 'kl_q_p'"):
        testbed.evaluate(NeverTrains(), problem, metrics=["conjugate_posterior", "mc_kl"])
    # one name per number: the metric alone gives the entry the family's scores give
    exact = agents.load("exact")
    alone = testbed.evaluate(exact, problem, metrics=["mc_kl", "pit_ks", "gaussian_kl"])
    together = testbed.evaluate(exact, problem)
    for key in ("kl_q_p", "pit_ks_pvalue", "kl_gaussian"):
        assert alone[key] == pytest.approx(together[key])


def test_a_named_metric_left_out_is_said_and_a_default_one_is_not(caplog):
    problem = generative.load("sbi/two_moons/1000/1", num_samples=200, median_distance=False)
    quality = testbed.evaluate(agents.load("oracle"), problem, metrics=["nltp"])
    assert "nltp" not in quality
    assert "metric nltp left out: this predictive gives no posterior_log_prob" in caplog.text
    gaussian_only = generative.load("conjugate/beta_binomial/1", num_null=0, use_c2st=False)
    quality = testbed.evaluate(agents.load("exact"), gaussian_only, metrics=["gaussian_kl"])
    assert "kl_gaussian" not in quality and "gaussian_exact_posterior" in caplog.text


def test_every_metric_says_what_it_gives():
    for name in METRICS:
        assert METRICS.get(name).gives, name


def test_an_oracle_cannot_be_trained_like_an_agent():
    problem = generative.load("coin/0")
    oracle = agents.load("oracle")
    with pytest.raises(InputError, match="agent oracle reads the problem instead of training"):
        oracle(problem.train_data, problem.prior_knowledge)
    assert oracle.predictive_for(problem) is not None


def test_training_clock_waits_for_the_predictives_arrays():
    """JAX returns before the work is done: a training that is one long device computation
    is timed as training, not as evaluation (it waits for the arrays the sampler holds)."""

    @jax.jit
    def long_training(x):
        return jax.lax.fori_loop(0, 300, lambda i, a: jnp.tanh(a @ a) / 64.0, x)

    x = jnp.ones((512, 512))
    jax.block_until_ready(long_training(x))  # compiled
    start = time.perf_counter()
    jax.block_until_ready(long_training(x))
    duration = time.perf_counter() - start

    def agent(data, prior):
        params = {"w": [long_training(x)]}  # nested in containers and a closure
        return lambda xs, key: jnp.zeros((xs.shape[0], 2)) + 0.0 * params["w"][0][0, 0]

    problem = generative.load("classification_2d_test/0", num_test_seeds=10, num_enn_samples=4)
    q = testbed.evaluate(agent, problem)
    assert q["train_seconds"] > 0.5 * duration, (q, duration)


# --- what an agent predicts and what a problem needs -----------------------------------


@pytest.mark.parametrize(
    "problem_id, need",
    [
        ("coin/0", "labels"),
        ("classification_2d/0", "labels"),
        ("real/iris/1/1", "labels"),
        ("regression_test/0", "real_values"),
        ("sbi/two_moons/1000/1", "posterior"),
        ("conjugate_sbi/beta_binomial/1/1000", "posterior"),
        ("conjugate/beta_binomial/1", "model_posterior"),
    ],
)
def test_every_family_says_what_it_needs(problem_id, need):
    from generative.registry import split_id
    from testbed.evaluate import needed_prediction

    assert needed_prediction(generative.load(problem_id)) == need
    assert split_id(problem_id)[0].prediction == need  # what sweeps check without loading


def test_every_builtin_family_declares_what_its_problems_need():
    from generative.registry import FAMILIES

    builtin = [FAMILIES.get(n) for n in FAMILIES]
    builtin = [f for f in builtin if f.build.__module__.startswith("generative.")]
    assert len(builtin) >= 11
    assert not [f.name for f in builtin if f.prediction is None]
    kinds = {f.name: f.prediction for f in builtin}
    for name, kind in kinds.items():
        if name.startswith("classification") or name in ("coin", "real"):
            assert kind == "labels", name
        elif name.startswith("regression"):
            assert kind == "real_values", name
    assert (kinds["sbi"], kinds["conjugate_sbi"]) == ("posterior", "posterior")
    assert kinds["conjugate"] == "model_posterior"


def test_a_mismatch_is_refused_before_training_naming_the_agents_that_fit(scoped_registries):

    @agents.register("never_trains_test", predicts="posterior")
    def never(train_data, prior, *, k: int = 1):
        raise AssertionError("trained although the problem needs labels")

    with pytest.raises(InputError) as err:
        testbed.evaluate(agents.load("never_trains_test"), generative.load("coin/0"))
    message = str(err.value)
    assert message.startswith("agent never_trains_test predicts a posterior; problem ")
    assert "needs labels; agents that fit: " in message
    fits = message.split("agents that fit: ")[1].split(", ")
    assert {"uniform", "mlp", "knn", "beta_bernoulli"} <= set(fits)
    assert not {"npe", "rej_abc", "nuts", "never_trains_test"} & set(fits)
    with pytest.raises(InputError, match="agent never_trains_test predicts"):
        testbed.evaluate_many(agents.load("never_trains_test"), [generative.load("coin/0")])


@pytest.mark.parametrize(
    "agent, problem_id, says",
    [
        ("uniform", "sbi/two_moons/1000/1", "predicts labels or real values; problem "),
        ("rej_abc", "classification_2d/0", "predicts a posterior; problem "),
        ("npe", "conjugate/beta_binomial/1", "needs a posterior of a given model"),
        ("knn", "regression_test/0", "needs real values; agents that fit: .*gp_posterior"),
        ("gp_posterior", "coin/0", "needs labels"),
    ],
)
def test_builtin_mismatches_are_one_clear_error(agent, problem_id, says):
    with pytest.raises(InputError, match=f"^agent {agent} .*{says}"):
        testbed.evaluate(agents.load(agent), generative.load(problem_id))


def test_the_command_line_names_the_problem_id_and_exits_2(capsys):
    from experiments.cli import main

    assert main(["run", "--agent", "uniform", "--problem", "sbi/two_moons/1000/1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        "testbed: error: agent uniform predicts labels or real values; problem "
        "sbi/two_moons/1000/1 needs a posterior; agents that fit: "
    )
    fits = set(err.split("agents that fit: ")[1].split(", "))
    assert {"nle", "npe", "nre", "oracle", "rej_abc", "smc_abc", "snle", "snpe", "snre"} <= fits
    assert not {"exact", "uniform", "nuts"} & fits  # exact reads closed forms sbi lacks
    assert main(["run", "--agent", "rej_abc", "--problem", "classification_2d/0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("testbed: error: agent rej_abc predicts a posterior; problem ")
    assert "classification_2d/0 needs labels; agents that fit: average_class_probs" in err


def test_agents_that_declare_nothing_and_oracles_are_not_checked():
    problem = generative.load("coin/0")
    q = testbed.evaluate(lambda data, prior: lambda x, key: np.zeros((len(x), 2)), problem)
    assert q["kl_estimate"] > 0
    # an oracle reads the problem and says itself what the problem lacks
    with pytest.raises(InputError, match="agent exact: problem CoinProblem offers no exact"):
        testbed.evaluate(agents.load("exact"), problem)
    # a plain callable may declare what it predicts
    agent = lambda data, prior: None  # noqa: E731
    agent.predicts = ("posterior",)
    with pytest.raises(InputError, match="agent <lambda> predicts a posterior; .*needs labels"):
        testbed.evaluate(agent, problem)


def _problem_loads(monkeypatch) -> list[str]:
    """The ids of the problems loaded from now on: a sweep's check reads what families
    declare (its refusal loads one problem, to name the oracles that serve it)."""
    loaded, load = [], generative.registry.load

    def counted(problem_id, **options):
        loaded.append(problem_id)
        return load(problem_id, **options)

    monkeypatch.setattr(generative.registry, "load", counted)
    monkeypatch.setattr(generative, "load", counted)
    return loaded


def test_a_sweep_refuses_an_agent_that_does_not_fit_before_any_job(monkeypatch):
    from leaderboard.execution.jobs import expand, sweep_jobs

    loaded = _problem_loads(monkeypatch)
    with pytest.raises(InputError) as err:
        sweep_jobs(["npe"], "classification_2d_test")
    assert len(loaded) <= 1
    message = str(err.value)
    assert message.startswith(
        "agent npe predicts a posterior; 7 problems of family classification_2d_test "
        "(classification_2d_test/0, ..., classification_2d_test/6) need labels; agents "
        "that fit: "
    )
    fits = set(message.split("agents that fit: ")[1].split(", "))
    assert {"uniform", "mlp", "knn", "average_class_probs"} <= fits
    assert not {"npe", "nuts", "exact"} & fits
    # the first agent that does not fit is named, among several
    with pytest.raises(InputError, match="^agent rej_abc predicts a posterior; 2 problems of"):
        expand(["uniform", "rej_abc"], ["coin/0", "coin/1"])
    # an oracle declares what it reads: conjugate problems give it nothing
    with pytest.raises(InputError, match="^agent oracle predicts .*; problem conjugate/"):
        expand(["oracle"], ["conjugate/beta_binomial/1"])
    assert len(expand(["npe", "rej_abc", "exact"], ["conjugate_sbi/beta_binomial/1/1000"])) == 3


def test_a_sweeps_refusal_says_what_evaluate_says_for_one_problem():
    from leaderboard.execution.jobs import expand
    from testbed.evaluate import check_fit

    for agent, problem_id in [("uniform", "sbi/two_moons/1000/1"), ("npe", "coin/0")]:
        with pytest.raises(InputError) as swept:
            expand([agent], [problem_id])
        with pytest.raises(InputError) as evaluated:
            check_fit(agents.load(agent), generative.load(problem_id), problem_id)
        assert str(swept.value) == str(evaluated.value)


def test_families_and_agents_that_declare_nothing_are_not_checked(scoped_registries, monkeypatch):
    from generative.registry import register_family
    from leaderboard.execution.jobs import expand

    register_family("quiet_test", lambda rest: {"rest": rest})(lambda s: None)
    agents.register("quiet_agent_test")(lambda data, prior, *, k=1: None)
    loaded = _problem_loads(monkeypatch)
    assert len(expand(["npe", "uniform"], ["quiet_test/a", "quiet_test/b"])) == 4
    assert len(expand(["quiet_agent_test"], ["coin/0", "sbi/two_moons/1000/1"])) == 2
    assert len(expand(["mlp"], generative.sweep_ids("classification_2d"))) == 420
    assert loaded == []  # a sweep that fits loads no problem


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--agent", "npe", "--sweep", "classification_2d_test"],
         "agent npe predicts a posterior; 7 problems of family classification_2d_test "),
        (["--agent", "uniform", "--problem", "sbi/two_moons/1000/1"],
         "agent uniform predicts labels or real values; problem sbi/two_moons/1000/1 needs a "
         "posterior; agents that fit: bnre, fmpe, nle, npe"),
    ],
)  # fmt: skip
def test_the_command_line_refuses_such_a_sweep_in_one_line_before_any_job(
    argv, says, tmp_path, capsys, monkeypatch
):
    from experiments.cli import main

    loaded = _problem_loads(monkeypatch)
    results = tmp_path / "r.db"
    assert main(["sweep", *argv, "--results", str(results), "--quiet"]) == 2
    assert len(loaded) <= 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"testbed: error: {says}")
    assert not results.exists() and not captured.out  # no store, no job
