"""Agents: a typed config dataclass + a factory per agent, with hyper-parameter sweeps.

`load(name, **overrides)` gives a configured agent; `sweep(name)` its sweep; `names()`.
"""

from agents import baselines, beta_bernoulli, exact, nuts  # noqa: F401  (register the agents)
from agents import abc_agents, sbi_agents  # noqa: F401  (SBI agents; torch imported lazily)
from agents import bbb, deep_kernel, dropout, ensemble, ensemble_plus, epinet  # noqa: F401
from agents import hypermodel, mlp, sgmcmc, sklearn_agents  # noqa: F401  (Neural Testbed)
from agents.registry import AGENTS, ConfiguredAgent, load, names, register, sweep

__all__ = ["AGENTS", "ConfiguredAgent", "load", "names", "register", "sweep"]
