"""The agent registry: name -> (config dataclass, factory, hyper-parameter sweep).

An agent factory is `make(config) -> Agent`, where the Agent is
`(train_data, prior_knowledge) -> predictive`. `load(name, **overrides)` returns a
`ConfiguredAgent`: the agent with its name and validated config attached, so runners can
record and hash exactly what ran.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

from testbed.base import Amortized, Oracle, PriorKnowledge
from testbed.config import config_as_dict, with_overrides
from testbed.errors import InputError
from testbed.registry import Registry


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    name: str
    config_cls: type
    make: Callable[[Any], Any]
    sweep: Callable[[], list[Any]] | None
    description: str


AGENTS: Registry[AgentEntry] = Registry("agent")


def register(name: str, config_cls: type, sweep: Callable[[], list[Any]] | None = None):
    """Decorator on `make(config) -> Agent`: registers agent `name` with its config class.

    `sweep() -> list[config]` is the agent's hyper-parameter sweep (default: one config).
    """

    def add(make: Callable[[Any], Any]):
        doc = (make.__doc__ or config_cls.__doc__ or "").strip().splitlines()
        AGENTS.register(name, AgentEntry(name, config_cls, make, sweep, doc[0] if doc else ""))
        return make

    return add


@dataclasses.dataclass(frozen=True)
class ConfiguredAgent:
    """A registered agent with one config: call it like any agent."""

    name: str
    config: Any

    @property
    def entry(self) -> AgentEntry:
        return AGENTS.get(self.name)

    def build(self) -> Any:
        return self.entry.make(self.config)

    @property
    def amortized(self) -> bool:
        """Whether its training does not depend on the observation (its config says so)."""
        return isinstance(self.config, Amortized) and bool(self.config.amortized)

    def __call__(self, train_data: Any, prior_knowledge: PriorKnowledge) -> Any:
        return self.build()(train_data, prior_knowledge)

    def config_dict(self) -> dict[str, Any]:
        return config_as_dict(self.config)

    @property
    def key(self) -> str:
        """A stable hash of (name, config): the same config always gives the same key."""
        text = json.dumps({"agent": self.name, "config": self.config_dict()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class ConfiguredOracle(ConfiguredAgent):
    """A registered agent whose factory builds a `testbed.base.Oracle`: it reads the
    problem (the true predictive), so `testbed.evaluate` hands it the problem."""

    def predictive_for(self, problem: Any) -> Any:
        return self.build().predictive_for(problem)

    def __call__(self, train_data: Any, prior_knowledge: Any) -> Any:
        raise InputError(
            f"agent {self.name} reads the problem instead of training on data; allowed: "
            f"testbed.evaluate(agent, problem) or agent.predictive_for(problem)"
        )


def configured(name: str, config: Any) -> ConfiguredAgent:
    """`name` with `config`, as a ConfiguredOracle when its factory builds an Oracle."""
    agent = ConfiguredAgent(name, config)
    return ConfiguredOracle(name, config) if isinstance(agent.build(), Oracle) else agent


def load(name: str, **overrides: Any) -> ConfiguredAgent:
    """The agent `name` with its default config and `overrides` (checked by field and type)."""
    entry = AGENTS.get(name)
    return configured(name, with_overrides(entry.config_cls(), overrides, where=f"agent {name}"))


def sweep(name: str) -> list[ConfiguredAgent]:
    """The agent's hyper-parameter sweep (its default config alone if it has none)."""
    entry = AGENTS.get(name)
    configs = entry.sweep() if entry.sweep is not None else [entry.config_cls()]
    return [configured(name, c) for c in configs]


def names() -> list[str]:
    return AGENTS.names()


def require_classification(agent: str, prior: PriorKnowledge) -> None:
    """A clear error when a classification-only agent meets a regression problem."""
    if prior.num_classes < 2:
        raise InputError(
            f"agent {agent}: got a regression problem (num_classes = {prior.num_classes}); "
            "allowed: classification problems (num_classes >= 2)"
        )
