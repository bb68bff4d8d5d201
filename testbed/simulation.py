"""The contract of simulator problems: what an SBI agent is told and what it may call.

A posterior problem gives its agent a `SimulationAccess` as training data (the prior, a
simulator that refuses to run past the budget, the observation x_o) and a
`SimulatorKnowledge` as prior knowledge (dimensions, the prior's support, the budget).
Agents import these types from here, never from the problems' package.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import numpy as np

from testbed.errors import InputError, bad_value
from testbed.seeding import Seed

SUPPORT_KINDS = ("real", "positive", "box")


@dataclasses.dataclass(frozen=True)
class Support:
    """Where the prior lives, the same for every parameter: `kind` is 'real', 'positive'
    or 'box' (with `low`, `high`)."""

    kind: str
    low: float = -np.inf
    high: float = np.inf

    def __post_init__(self):
        if self.kind not in SUPPORT_KINDS:
            raise bad_value("support.kind", self.kind, SUPPORT_KINDS)
        if self.kind == "box" and not self.low < self.high:
            raise bad_value("support.high", self.high, f"a number > low = {self.low}")

    def bounds(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bound per parameter ([dim] each): (low, high) for a box, (0, inf)
        when positive, (-inf, inf) on the real line (`low` and `high` unused there)."""
        low, high = {
            "real": (-np.inf, np.inf),
            "positive": (0.0, np.inf),
            "box": (self.low, self.high),
        }[self.kind]
        return np.full(dim, float(low)), np.full(dim, float(high))


@dataclasses.dataclass(frozen=True)
class SimulatorKnowledge:
    """What an SBI agent knows before it simulates: dimensions, support, budget, and how
    many i.i.d. draws at one theta the observation holds (`num_iid`: x_o is then
    [num_iid, dim_x]; `dim_x` is one draw's dimension)."""

    dim_theta: int
    dim_x: int
    support: Support
    budget: int
    task: str = ""
    parameter_names: tuple[str, ...] = ()
    num_iid: int = 1


@runtime_checkable
class Simulator(Protocol):
    """What a `SimulationAccess` needs of a task (the SBI tasks and conjugate tasks)."""

    dim_parameters: int

    def sample_prior(self, num_samples: int, seed: Seed) -> np.ndarray: ...

    def log_prior(self, theta) -> np.ndarray: ...

    def simulate(self, theta, seed: Seed) -> np.ndarray: ...


class PriorAccess:
    """The task's prior as the agent sees it: `sample(num_samples, seed)`, `log_prob(theta)`."""

    def __init__(self, task: Simulator):
        self._task = task

    def sample(self, num_samples: int, seed: Seed) -> np.ndarray:
        """`num_samples` prior draws, [num_samples, dim_theta] (free: not budgeted). Pass a
        new seed (or one Generator) each call: the same seed gives the same draws."""
        return self._task.sample_prior(num_samples, seed)

    def log_prob(self, theta) -> np.ndarray:
        """Prior log-density per row, [n] (-inf outside the support)."""
        return self._task.log_prior(theta)


class SimulationAccess:
    """What a posterior problem hands its agent: the prior, a budgeted simulator, x_o.

    x_o is [num_iid, dim_x]: one observation, or `num_iid` i.i.d. draws at one theta.
    `simulate(theta, seed)` runs one simulation per row of theta and counts them in
    `num_simulations`; a call that would take the total past `budget` raises an
    InputError naming the budget (and simulates nothing). The evaluation reads
    `num_simulations` after training (`num_simulations_used`).
    """

    def __init__(self, task: Simulator, budget: int, x_o, num_iid: int = 1):
        self._task = task
        self.prior = PriorAccess(task)
        self.budget = int(budget)
        self.x_o = np.array(x_o, dtype=np.float64).reshape(int(num_iid), -1)
        self.num_simulations = 0

    @property
    def remaining(self) -> int:
        """Simulations still allowed."""
        return self.budget - self.num_simulations

    def simulate(self, theta, seed: Seed) -> np.ndarray:
        """x [n, dim_x] for theta [n, dim_theta]; counts n against the budget. Pass a new
        seed (or one Generator) each call: the same seed gives the same noise."""
        theta = np.asarray(theta, np.float64)
        dim = self._task.dim_parameters
        if theta.ndim == 1:
            theta = theta[None, :]
        if theta.ndim != 2 or theta.shape[1] != dim:
            raise InputError(
                f"theta: got an array of shape {list(theta.shape)}; allowed: shape [n, {dim}]"
            )
        n = theta.shape[0]
        if n > self.remaining:
            raise InputError(
                f"simulate: {n} simulations requested with {self.num_simulations} of the budget "
                f"of {self.budget} used; allowed: at most {self.remaining} more simulations "
                f"(num_simulations budget = {self.budget})"
            )
        x = self._task.simulate(theta, seed)
        self.num_simulations += n
        return x


def check_access(access, knowledge) -> tuple[SimulationAccess, SimulatorKnowledge]:
    """The pair an SBI agent was given, or an InputError saying it got something else."""
    if not isinstance(access, SimulationAccess) or not isinstance(knowledge, SimulatorKnowledge):
        raise InputError(
            f"train_data: got {type(access).__name__} and {type(knowledge).__name__}; allowed: "
            "a posterior problem's SimulationAccess and SimulatorKnowledge (sbi/..., "
            "conjugate_sbi/...)"
        )
    return access, knowledge
