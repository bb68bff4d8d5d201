"""A scikit-learn agent of your own: bagged decision trees through `agents.from_sklearn`.

`agents.from_sklearn(make_estimator, num_members=K)` is an agent whose predictive is K
estimators, each fitted on a bootstrap resample: a `FiniteSampler` of K functions (a key
picks one), so the trees' disagreement is the agent's uncertainty and the joint KL sees
it. It does what scikit-learn models need here: one fake point at x = 0 per class (every
member knows every class), probabilities clipped to [0.01, 0.99] before the log, and a
numpy function marked `traceable = False` (the evaluators call it on all inputs at once,
not once per key). With a regressor it serves regression problems the same way.

The agent is registered as a function with keyword defaults (they become its config) and
a hyper-parameter sweep given as the settings that differ from the defaults. The script
runs that sweep into a results file: with `LocalExecutor` (worker processes) the code that
starts a sweep must sit under `if __name__ == "__main__":`, as here, because every worker
imports this file again.

Run: python examples/my_sklearn_agent.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import agents
import generative
import testbed


@agents.register(
    "bagged_trees",
    predicts=("labels", "real_values"),
    sweep=[{"max_depth": depth} for depth in (2, 4, 8)],
)
def bagged_trees(
    train_data: testbed.Data,
    prior: testbed.PriorKnowledge,
    *,
    num_members: int = 20,
    max_depth: int = 4,
    seed: int = 0,
):
    """Bagged decision trees (scikit-learn): one tree per sampled function."""
    tree = DecisionTreeRegressor if prior.num_classes < 2 else DecisionTreeClassifier
    agent = agents.from_sklearn(
        lambda member_seed: tree(max_depth=max_depth, random_state=member_seed),
        num_members=num_members,
        seed=seed,
    )
    return agent(train_data, prior)


def run_sweep(results: str, problem_ids: list[str]):
    """The agent's whole hyper-parameter sweep over `problem_ids`, stored in `results`."""
    from leaderboard.execution.executors import InlineExecutor
    from leaderboard.execution.jobs import expand
    from leaderboard.execution.runner import run_sweep as run
    from leaderboard.store import ResultsStore

    jobs = expand(["bagged_trees"], problem_ids, configs="sweep")  # default: configs="default"
    with ResultsStore(results, mode="w") as store:
        # InlineExecutor runs the jobs here; LocalExecutor(workers=2, imports=(__file__,))
        # runs them in worker processes (which import this file: hence the __main__ guard)
        return run(jobs, store, InlineExecutor())


if __name__ == "__main__":
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=100)
    for name in ("uniform", "bagged_trees"):
        q = testbed.evaluate(agents.load(name), problem)
        print(f"{name:12s} KL {q['kl_estimate']:.3f}  test accuracy {q['test_acc']:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_sweep(str(Path(tmp) / "results.db"), ["classification_2d_test/3"])
        print(f"sweep of bagged_trees: {summary.ok} ok, {summary.failed} failed")
