"""Conjugate models with exact posteriors and posterior predictives (problem ids `conjugate/...`).

Families (`families.py`; those with an unknown scale in `unknown_scale.py`, their base in
`family_base.py`), exact distributions (`distributions.py`), the JAX model handed to
agents (`model.py`), the problem and its exact scores (`problem.py`), the problem set with
the PPL benchmarking paper's 21 problems (`problem_set.py`), the models that paper gave its
PPLs (`paper_models.py`: mismatched priors, a Student-t likelihood), the simulator-task view
(`task.py`) and its problem ids `conjugate_sbi/...` for SBI agents (`sbi_view.py`).
"""

from generative.conjugate import problem_set, sbi_view  # noqa: F401  (registers ids)
from generative.conjugate.paper_models import paper_ppl_knowledge, paper_ppl_model
from generative.conjugate.problem import ConjugateProblem, ExactPosterior
from generative.conjugate.problem_set import PROBLEMS
from generative.conjugate.task import ConjugateTask


def get_task(name: str) -> ConjugateTask:
    """The simulator task of problem `name` (e.g. 'wyb/16' or 'conjugate/wyb/16')."""
    name = name.removeprefix("conjugate/")
    return problem_set.build(problem_set.conjugate_settings(name)).task


__all__ = [
    "PROBLEMS",
    "ConjugateProblem",
    "ConjugateTask",
    "ExactPosterior",
    "get_task",
    "paper_ppl_knowledge",
    "paper_ppl_model",
]
