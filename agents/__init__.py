"""Agents: a typed config dataclass + a factory per agent, with hyper-parameter sweeps.

`load(name, **overrides)` gives a configured agent; `sweep(name)` its sweep; `names()`.
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
    sbi_agents,
    sgmcmc,
    sklearn_agents,
)
from agents.registry import AGENTS, ConfiguredAgent, load, names, register, sweep

__all__ = ["AGENTS", "ConfiguredAgent", "load", "names", "register", "sweep"]
