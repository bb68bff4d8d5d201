"""Agents: a typed config dataclass + a factory per agent, with hyper-parameter sweeps.

`load(name, **overrides)` gives a configured agent; `sweep(name)` its sweep; `names()`.
`register` adds an agent (a config class and factory, or a function with keyword
defaults); `from_sklearn` turns scikit-learn estimators into an ensemble agent. Installed
packages add agents through the entry-point group `testbed.agents` (loaded on import).
"""

# Importing the agent modules registers them (SBI agents import torch lazily).
from agents import (  # noqa: F401
    abc_agents,
    baselines,
    bbb,
    beta_bernoulli,
    deep_kernel,
    dropout,
    ensemble,
    ensemble_plus,
    epinet,
    gp_posterior,
    hypermodel,
    mlp,
    nuts,
    ppl,
    sbi_agents,
    sgmcmc,
    sklearn_agents,
)
from agents.registry import (
    AGENTS,
    ConfiguredAgent,
    fitting,
    load,
    load_plugins,
    names,
    register,
    sweep,
)
from agents.sklearn_ensemble import from_sklearn

__all__ = [
    "AGENTS",
    "ConfiguredAgent",
    "fitting",
    "from_sklearn",
    "load",
    "load_plugins",
    "names",
    "register",
    "sweep",
]

load_plugins()  # agents of installed packages (entry points `testbed.agents`), last
