"""`conjugate_sbi/<problem>/<num_simulations>`: a conjugate problem as a simulator task.

SBI agents (npe, nle, rej_abc, ...) run on it unchanged: the training data is the SBI
problems' budgeted `SimulationAccess` to the problem's `ConjugateTask` (x = the whole
dataset of the problem's design, flattened; x_o = the problem's data), and the same
`SimulatorKnowledge` as the `sbi/...` problems, with the support of `ConjugateTask.support`
(exact or a stated superset). The agent's posterior at x_o is scored exactly by the
conjugate problem (`ConjugateProblem.evaluate`); `testbed.evaluate` adds
`num_simulations_used`.
E.g. `conjugate_sbi/beta_binomial/1/1000`, `conjugate_sbi/wyb/16/10000`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from generative.conjugate import problem_set
from generative.conjugate.problem import ConjugateProblem, ExactPosterior
from generative.registry import parse_int, register_family, register_sweep
from generative.sbi.problems import BUDGETS, BudgetedSimulation
from testbed import ranking
from testbed.errors import InputError, bad_value
from testbed.evaluation import Evidence, EvidenceScoring


@dataclasses.dataclass
class ConjugateSimulationProblem(BudgetedSimulation, EvidenceScoring):
    """The conjugate problem `conjugate` seen through a simulator with `num_simulations`:
    trained like an `sbi/...` problem, scored by the conjugate problem's evidence."""

    conjugate: ConjugateProblem
    num_simulations: int

    def __post_init__(self):
        self.simulator = self.conjugate.task
        self.x_o = self.conjugate.x_o
        self.offers, self.metrics = self.conjugate.offers, self.conjugate.metrics

    def exact_posterior(self) -> ExactPosterior:
        """The exact posterior (the `exact` agent's floor)."""
        return self.conjugate.exact_posterior()

    oracle_predictive = exact_posterior

    def evidence(self, predictive: Any) -> Evidence:
        return self.conjugate.evidence(predictive)


def conjugate_sbi_settings(rest: str) -> dict[str, Any]:
    """Settings of `conjugate_sbi/<problem>/<num_simulations>` (InputError lists allowed)."""
    name, _, budget_text = rest.rpartition("/")
    if not name:
        raise InputError(
            f"problem id: got 'conjugate_sbi/{rest}'; allowed: "
            "'conjugate_sbi/<problem>/<num_simulations>' with problem one of: "
            f"{', '.join(problem_set.PROBLEMS)}; num_simulations one of: "
            f"{', '.join(map(str, BUDGETS))}"
        )
    if name not in problem_set.PROBLEMS:
        raise bad_value("conjugate problem", name, list(problem_set.PROBLEMS))
    budget = parse_int(budget_text, "num_simulations", BUDGETS)
    return {**problem_set.conjugate_settings(name), "num_simulations": budget}


@register_family(
    "conjugate_sbi",
    conjugate_sbi_settings,
    "conjugate models as simulators: SBI agents, exact scores",
    id_form="conjugate_sbi/<conjugate problem>/<num_simulations>",
    options=problem_set.OPTIONS,
    prediction="posterior",
    option_types=ConjugateProblem,
    ranked_by=ranking.c2st(
        ("problem", "num_simulations"),  # one observation a problem
        note="C2ST against the exact posterior of the conjugate model (0.5 = perfect).",
    ),
)
def build(settings: dict[str, Any]) -> ConjugateSimulationProblem:
    return ConjugateSimulationProblem(problem_set.build(settings), int(settings["num_simulations"]))


@register_sweep("conjugate_sbi_test")
def test_ids() -> list[str]:
    """A cheap smoke sweep: one bounded, one positive and one Gaussian family at 1000."""
    return [f"conjugate_sbi/{k}/1000" for k in ("beta_binomial/1", "gamma_poisson/1", "wyb/1")]
