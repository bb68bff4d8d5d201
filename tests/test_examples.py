"""The examples of README's Architecture and "Write your own agent" sections run and give
the numbers they should."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import agents
import generative
import testbed

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str):
    """The example module (imported once per process: it registers what it defines)."""
    module_name = f"testbed_examples.{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def test_your_own_agent_beats_uniform_and_is_a_finite_sampler():
    load_example("my_agent")
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=50)
    sampler = agents.load("centroid")(problem.train_data, problem.prior_knowledge)
    assert isinstance(sampler, testbed.FiniteSampler) and sampler.num_functions == 20
    ours = testbed.evaluate(agents.load("centroid"), problem)
    uniform = testbed.evaluate(agents.load("uniform"), problem)
    assert math.isfinite(ours["kl_estimate"]) and ours["kl_estimate"] < uniform["kl_estimate"]
    with pytest.raises(testbed.InputError, match="num_bootstraps"):
        agents.load("centroid", num_bootstraps=0)


def test_your_own_problem_family_scores_oracle_and_uniform_exactly():
    example = load_example("my_problem")
    assert generative.sweep_ids("threshold") == [f"threshold/{i}" for i in range(8)]
    for pid in ("threshold/0", "threshold/3"):  # flip 0 and flip 0.1
        problem = generative.load(pid)
        oracle = testbed.evaluate(agents.load("oracle"), problem)
        assert abs(oracle["kl_estimate"]) < 1e-6
        uniform = problem.evaluate(lambda x, key: np.zeros((len(x), 2), np.float32))
        env_ll = problem.evidence(None)["label_batches"].env_loglik
        assert uniform["kl_estimate"] == pytest.approx(np.mean(env_ll) + math.log(2), rel=1e-6)
    assert isinstance(problem, example.ThresholdProblem)


def test_your_own_metric_runs_on_a_problem_written_before_it():
    example = load_example("my_metric")
    problem = generative.load("conjugate/wyb/1", num_samples=300)
    exact = testbed.evaluate(agents.load("exact"), problem, metrics=["energy_distance"])
    samples = problem.posterior.sample(300, 1)
    shifted = example.energy_distance(problem.posterior.sample(300, 2), samples + 0.5)
    assert exact["energy_distance"] < 0.05 < shifted


def test_haiku_agent_is_a_function_whose_settings_are_its_config():
    example = load_example("my_haiku_agent")
    entry = agents.AGENTS.get("mc_dropout_haiku")
    assert entry.predicts == {"labels", "real_values"}
    default = agents.load("mc_dropout_haiku")
    assert default.config_dict()["dropout_rate"] == 0.1 and default.config.hidden == (50, 50)
    # overrides as the command line gives them (strings) are parsed by the derived types
    agent = agents.load("mc_dropout_haiku", dropout_rate="0.2", num_steps="300", hidden="20,20")
    assert (agent.config.dropout_rate, agent.config.num_steps) == (0.2, 300)
    assert agent.config.hidden == (20, 20) and agent.key != default.key
    with pytest.raises(testbed.InputError, match="num_steps"):
        agents.load("mc_dropout_haiku", num_steps="many")
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=50)
    sampler = agent(problem.train_data, problem.prior_knowledge)
    x = np.asarray(problem.train_data.x[:5])
    key, other = jax.random.PRNGKey(3), jax.random.PRNGKey(4)
    np.testing.assert_array_equal(sampler(x, key), sampler(x, key))  # one key, one function
    assert not np.allclose(sampler(x, key), sampler(x, other))
    # one mask for every row: the function at a row does not depend on the other rows
    np.testing.assert_allclose(sampler(x, key)[:2], sampler(x[:2], key), rtol=1e-5, atol=1e-5)
    ours = testbed.evaluate(agent, problem)
    uniform = testbed.evaluate(agents.load("uniform"), problem)
    assert math.isfinite(ours["kl_estimate"]) and ours["kl_estimate"] < uniform["kl_estimate"]
    with pytest.raises(testbed.InputError, match="dropout_rate: got 1.5"):
        testbed.evaluate(agents.load("mc_dropout_haiku", dropout_rate=1.5), problem)
    assert example.mc_dropout_haiku.__name__ == "mc_dropout_haiku"  # still a plain function


def test_haiku_agent_has_a_regression_head_and_refuses_posteriors():
    load_example("my_haiku_agent")
    problem = generative.load("regression_test/0", num_test_seeds=100)
    agent = agents.load("mc_dropout_haiku", num_steps=200)
    sampler = agent(problem.train_data, problem.prior_knowledge)
    assert sampler(problem.train_data.x, jax.random.PRNGKey(0)).shape == (10, 1)
    assert math.isfinite(testbed.evaluate(agent, problem)["kl_estimate"])
    with pytest.raises(testbed.InputError) as err:
        testbed.evaluate(agent, generative.load("sbi/two_moons/1000/1"))
    assert str(err.value).startswith("agent mc_dropout_haiku predicts labels or real values; ")
    assert "needs a posterior; agents that fit: bnre, fmpe, nle, npe, npse, nre" in str(err.value)


def test_sklearn_ensemble_is_a_finite_sampler_of_bagged_trees():
    load_example("my_sklearn_agent")
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=50)
    data, prior = problem.train_data, problem.prior_knowledge
    sampler = agents.load("bagged_trees", num_members=8)(data, prior)
    assert isinstance(sampler, testbed.FiniteSampler) and sampler.num_functions == 8
    assert sampler.all_logits.traceable is False
    logits = sampler.all_logits(problem.train_data.x[:7])
    assert logits.shape == (8, 7, 2)
    probs = np.exp(logits)
    assert np.all((probs >= 0.01 - 1e-6) & (probs <= 0.99 + 1e-6))
    assert np.ptp(logits, axis=0).max() > 0  # bootstrap: the members differ
    ours = testbed.evaluate(agents.load("bagged_trees"), problem)
    uniform = testbed.evaluate(agents.load("uniform"), problem)
    assert ours["kl_estimate"] < uniform["kl_estimate"]
    sweep = agents.sweep("bagged_trees")
    assert [a.config.max_depth for a in sweep] == [2, 4, 8]
    assert all(a.config.num_members == 20 for a in sweep)


def test_from_sklearn_fake_points_regression_and_clear_errors():
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    # a resample that misses a class still gives every class a column (the fake points)
    data = testbed.Data(np.array([[1.0], [2.0], [3.0]]), np.array([0, 0, 0]))
    prior = testbed.PriorKnowledge(input_dim=1, num_train=3, num_classes=3)
    sampler = agents.from_sklearn(DecisionTreeClassifier(), num_members=3)(data, prior)
    assert sampler.all_logits(np.zeros((4, 1))).shape == (3, 4, 3)
    # the same seed gives the same members; a zero-argument factory works too
    again = agents.from_sklearn(DecisionTreeClassifier(), num_members=3)(data, prior)
    x = np.linspace(-1, 4, 9)[:, None]
    np.testing.assert_array_equal(sampler.all_logits(x), again.all_logits(x))
    plain = agents.from_sklearn(lambda: LogisticRegression(), num_members=2, bootstrap=False)
    assert plain(data, prior).num_functions == 2
    # regression: a regressor's predict, [K, n, 1]
    reg = testbed.PriorKnowledge(input_dim=1, num_train=3, num_classes=1, noise_std=0.1)
    ydata = testbed.Data(data.x, np.array([[1.0], [2.0], [3.0]]))
    out = agents.from_sklearn(LinearRegression(), num_members=4)(ydata, reg).all_logits(x)
    assert out.shape == (4, 9, 1) and out.dtype == np.float32
    with pytest.raises(testbed.InputError, match="classifier .*for a regression problem"):
        agents.from_sklearn(DecisionTreeClassifier())(ydata, reg)
    with pytest.raises(testbed.InputError, match="no predict_proba"):
        agents.from_sklearn(LinearRegression())(data, prior)
    with pytest.raises(testbed.InputError, match="num_members"):
        agents.from_sklearn(LinearRegression(), num_members=0)
    with pytest.raises(testbed.InputError, match="make_estimator"):
        agents.from_sklearn("a tree")


def test_from_sklearn_with_no_training_data_sees_the_fake_points_only():
    """coin/0 has no training flips: each member is fitted on one fake point per class,
    so every member predicts 1/2 (as the Neural Testbed's knn and random forest)."""
    from sklearn.tree import DecisionTreeClassifier

    problem = generative.load("coin/0")
    assert len(problem.train_data.x) == 0
    sampler = agents.from_sklearn(DecisionTreeClassifier(), num_members=3)(
        problem.train_data, problem.prior_knowledge
    )
    probs = np.exp(sampler.all_logits(np.zeros((2, 1))))
    np.testing.assert_allclose(probs, 0.5)
    reg = testbed.PriorKnowledge(input_dim=1, num_train=0, num_classes=1, noise_std=0.1)
    with pytest.raises(testbed.InputError, match="train_data: got no examples"):
        agents.from_sklearn(DecisionTreeClassifier())(
            testbed.Data(np.zeros((0, 1)), np.zeros(0)), reg
        )


def test_a_script_without_main_guard_is_told_what_to_add(tmp_path):
    """The local executor's workers import the driver's script again (spawn): a script
    that starts a sweep at its top level gets one error naming the guard to add."""
    script = tmp_path / "sweep_no_guard.py"
    script.write_text(
        "from leaderboard.execution.executors import LocalExecutor\n"
        "from leaderboard.execution.jobs import expand\n"
        "from leaderboard.execution.runner import run_sweep\n"
        "from leaderboard.store import ResultsStore\n"
        f"with ResultsStore({str(tmp_path / 'r.db')!r}, mode='w') as store:\n"
        "    run_sweep(expand(['uniform'], ['coin/0']), store, LocalExecutor(workers=1))\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "workers cannot start" in last and str(script) in last
    assert 'if __name__ == "__main__":' in last


@pytest.mark.slow  # end to end through fresh processes (12 s); CI runs it
def test_a_script_that_registers_an_agent_may_name_itself_in_imports(tmp_path):
    """A spawned worker has imported the driver's script already (as `__mp_main__`); with
    the script also in `imports` it was imported again and its agent refused as
    'registered twice', so the example's own advice failed."""
    script = tmp_path / "sweep_mine.py"
    script.write_text(
        "import agents\n"
        "from leaderboard.execution.executors import LocalExecutor\n"
        "from leaderboard.execution.jobs import expand\n"
        "from leaderboard.execution.runner import run_sweep\n"
        "from leaderboard.store import ResultsStore\n"
        "@agents.register('constant_half', predicts='labels')\n"
        "def constant_half(train_data, prior_knowledge):\n"
        "    return agents.load('uniform')(train_data, prior_knowledge)\n"
        "if __name__ == '__main__':\n"
        f"    with ResultsStore({str(tmp_path / 'r.db')!r}, mode='w') as store:\n"
        "        s = run_sweep(expand(['constant_half'], ['coin/0']), store,\n"
        "                      LocalExecutor(workers=1, imports=(__file__,)))\n"
        "    print('ok', s.ok, 'failed', s.failed)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "ok 1 failed 0" in proc.stdout


@pytest.mark.slow  # 100 s: every example script end to end
def test_examples_run_as_scripts():
    """`python examples/<name>.py` for each (one fresh interpreter runs them all)."""
    names = ("my_agent", "my_problem", "my_metric", "my_haiku_agent", "my_sklearn_agent")
    paths = [str(EXAMPLES / f"{name}.py") for name in names]
    code = "import runpy, sys\nfor p in sys.argv[1:]:\n    runpy.run_path(p, run_name='__main__')"
    proc = subprocess.run(
        [sys.executable, "-c", code, *paths],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=EXAMPLES.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "centroid" in out and "threshold/0" in out and "energy distance" in out
    assert "mc_dropout_haiku KL" in out and "refused: agent mc_dropout_haiku" in out
    assert "bagged_trees KL" in out and "sweep of bagged_trees: 3 ok, 0 failed" in out
