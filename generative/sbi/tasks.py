"""The ten simulator tasks of the SBI benchmark by name: `get_task(name)`, `task_names()`;
`iid_task_names()`: those with reference posteriors for i.i.d. observation sets."""

from __future__ import annotations

import functools

from generative.sbi.bernoulli_glm import BernoulliGLM, BernoulliGLMRaw
from generative.sbi.gaussian import GaussianLinear, GaussianLinearUniform, GaussianMixture
from generative.sbi.ode_tasks import SIR, LotkaVolterra
from generative.sbi.slcp import SLCP, SLCPDistractors
from generative.sbi.task import Task
from generative.sbi.two_moons import TwoMoons
from testbed.errors import bad_value

_TASKS: dict[str, type[Task]] = {
    cls.name: cls
    for cls in (
        GaussianLinear,
        GaussianLinearUniform,
        SLCP,
        SLCPDistractors,
        BernoulliGLM,
        BernoulliGLMRaw,
        GaussianMixture,
        TwoMoons,
        SIR,
        LotkaVolterra,
    )
}


def task_names() -> list[str]:
    """The ten task names, in the benchmark's order."""
    return list(_TASKS)


def iid_task_names() -> list[str]:
    """The tasks whose reference posterior extends to i.i.d. observation sets, in order."""
    return [name for name, cls in _TASKS.items() if cls.supports_iid]


@functools.cache
def get_task(name: str) -> Task:
    """The task called `name` (one shared instance per name)."""
    if name not in _TASKS:
        raise bad_value("task", name, task_names())
    return _TASKS[name]()
