"""The examples of README's Architecture section run and give the numbers they should."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

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


def test_examples_run_as_scripts():
    """`python examples/<name>.py` for each (one fresh interpreter runs the three)."""
    paths = [str(EXAMPLES / f"{name}.py") for name in ("my_agent", "my_problem", "my_metric")]
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
