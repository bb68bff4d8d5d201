"""The agent registry: name -> (config dataclass, factory, hyper-parameter sweep, and what
a caller may ask before building it).

An agent factory is `make(config) -> Agent`, where the Agent is
`(train_data, prior_knowledge) -> predictive`. `load(name, **overrides)` returns a
`ConfiguredAgent`: the agent with its name and validated config attached, so runners can
record and hash exactly what ran.

Two ways to register (see README, "Write your own agent"):

- a config dataclass and a factory: `@register("centroid", CentroidConfig)` on
  `make(config) -> agent`;
- a plain agent function with keyword defaults: `@register("my_agent")` on
  `def my_agent(train_data, prior_knowledge, *, lr=1e-3, seed=0) -> predictive`. Its
  settings become a frozen config dataclass derived from the signature (types from the
  annotations, else from the defaults), so `load("my_agent", lr=0.01)`, `--set lr=0.01`,
  `--seeds`, job keys and sweeps work as for any agent.

An entry declares what a caller may ask before building the agent (`AgentEntry`):
`predicts=` what it predicts (names of `testbed.base.PREDICTIONS`: `labels`,
`real_values`, `posterior`, `model_posterior`; `testbed.evaluate` refuses a problem that
needs another kind before training and names the agents that fit; an agent that does not
say is not checked); `oracle=` whether it reads the problem instead of training (and
`reads=`, what the problem must offer it); `amortized=` whether its training ignores the
observation. Together they say what its training depends on (`testbed.base.TRAINS_ON`),
so a sweep groups the jobs one training serves from names and ids alone.

Installed packages add agents through the entry-point group `testbed.agents`
(`load_plugins`, run when `agents` is imported): each entry point names a module (importing
it registers its agents) or a callable (`pkg.module:setup`, called with no arguments). A
plugin that fails to load gives one warning and is left out.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from testbed import settings
from testbed.base import (
    LABELS,
    REAL_VALUES,
    TRAINS_ON_DATA,
    TRAINS_ON_PROBLEM,
    TRAINS_ON_SIMULATOR,
    PriorKnowledge,
    parse_predictions,
)
from testbed.config import (
    UNUSED_SEED,
    check_seed,
    field_types,
    key_fields,
    with_overrides,
)
from testbed.errors import InputError, bad_value
from testbed.online import ONLINE, REFIT
from testbed.registry import Registry

log = logging.getLogger("testbed.agents")

# Network agents predict both: a classification and a regression head.
NETWORK = (LABELS, REAL_VALUES)
ENTRY_POINT_GROUP = "testbed.agents"

Sweep = Callable[[], Iterable[Any]] | Iterable[Any]


def config_says_amortized(config: Any) -> bool:
    """Whether `config` says its agent's training ignores the observation: its `amortized`
    field or property (sbi's one-round trainings), else no."""
    return bool(getattr(config, "amortized", False))


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    """A registered agent and what callers may ask of it before building it."""

    name: str
    config_cls: type
    make: Callable[[Any], Any]
    sweep: Callable[[], list[Any]] | None
    description: str
    predicts: frozenset[str] | None = None  # None: not declared (not checked)
    oracle: bool = False  # it reads the problem instead of training (testbed.base.Oracle)
    reads: type | None = None  # an oracle's problems must be of it (a protocol; None: any)
    amortized: Callable[[Any], bool] = config_says_amortized  # of a config
    # (config, prior knowledge, key) -> testbed.online.OnlineLearner: it learns online in a
    # decision loop (a bandit); None: it is refit on the data seen so far
    online: Callable[[Any, Any, Any], Any] | None = None

    @property
    def learns(self) -> str:
        """How it learns in a decision loop (`testbed.online.LEARNS`), known unbuilt."""
        return ONLINE if self.online is not None else REFIT

    def trains_on(self, config: Any) -> str:
        """What its training with `config` depends on (testbed.base.TRAINS_ON)."""
        if self.oracle:
            return TRAINS_ON_PROBLEM
        return TRAINS_ON_SIMULATOR if self.amortized(config) else TRAINS_ON_DATA

    def serves(self, problem: Any) -> bool:
        """Whether it can answer `problem` (a problem or its class): an oracle only a problem
        that offers what it reads."""
        if not self.oracle or self.reads is None or problem is None:
            return True
        try:
            if isinstance(problem, type):
                return issubclass(problem, self.reads)
            return isinstance(problem, self.reads)
        except TypeError:  # a protocol with data members cannot check a class
            return True


AGENTS: Registry[AgentEntry] = Registry("agent")
_REGISTERED: set[int] = set()  # ids of the registered factories and functions (plugins)


def register(
    name: str,
    config_cls: type | None = None,
    sweep: Sweep | None = None,
    *,
    predicts: str | Iterable[str] | None = None,
    oracle: bool | None = None,
    reads: type | None = None,
    amortized: bool | Callable[[Any], bool] | None = None,
    online: Callable[[Any, Any, Any], Any] | None = None,
):
    """Decorator that registers agent `name`.

    With `config_cls`, it decorates a factory `make(config) -> agent`. Without, it
    decorates the agent function itself, `fn(train_data, prior_knowledge, *, setting=default,
    ...) -> predictive`: the settings (keyword parameters with defaults after the first
    two) become a frozen config dataclass derived from the signature.

    `sweep` is the agent's hyper-parameter sweep: `() -> list` or a list, of configs or of
    dicts of settings that differ from the defaults (default: the default config alone).
    `predicts` is what the agent predicts: `"labels"`, `"real_values"`, `"posterior"`,
    `"model_posterior"` or several (default: not declared, not checked).

    `oracle=True` says it reads the problem instead of training (`testbed.base.Oracle`;
    default: whether the factory is annotated to return a class with `predictive_for`);
    `reads` is the protocol a problem must satisfy to serve it (e.g. `OffersOracle`;
    giving it makes an oracle). `amortized` (a bool or `config -> bool`) says its training
    ignores the observation (default: the config's `amortized` field or property).
    `online(config, prior_knowledge, key) -> testbed.online.OnlineLearner` says it learns
    online in a decision loop (SGD steps between a bandit's actions); without it the agent
    is refit on the data seen so far. The decorated object is returned unchanged.
    """
    kinds = parse_predictions(f"agent {name}: predicts", predicts)
    sweep_fn = sweep if sweep is None or callable(sweep) else _fixed(list(sweep))
    says_amortized = _amortized_rule(name, amortized)
    if reads is not None and not isinstance(reads, type):
        raise bad_value(f"agent {name}: reads", reads, "a class or runtime-checkable protocol")

    def add(obj: Callable[..., Any]):
        if config_cls is None:
            cls, make = config_from_signature(name, obj), _function_factory(obj)
        else:
            cls, make = config_cls, obj
        doc = (obj.__doc__ or cls.__doc__ or "").strip().splitlines()
        if oracle is None:  # an agent function trains; a factory may say it builds an oracle
            is_oracle = reads is not None or (config_cls is not None and _builds_oracle(obj))
        else:
            is_oracle = bool(oracle)
        entry = AgentEntry(
            name, cls, make, sweep_fn, doc[0] if doc else "", kinds,
            oracle=is_oracle, reads=reads, amortized=says_amortized, online=online,
        )  # fmt: skip
        AGENTS.register(name, entry)
        _REGISTERED.add(id(obj))
        return obj

    return add


def _amortized_rule(name: str, amortized: Any) -> Callable[[Any], bool]:
    """`config -> bool` from register's `amortized` (None: the config says)."""
    if amortized is None:
        return config_says_amortized
    if isinstance(amortized, bool):
        return functools.partial(_always, amortized)
    if callable(amortized):
        return amortized
    raise InputError(
        f"agent {name}: amortized: got {amortized!r}; allowed: true/false or a function "
        "config -> bool"
    )


def _always(value: bool, config: Any) -> bool:
    return value


def _builds_oracle(factory: Any) -> bool:
    """Whether `factory` is annotated to return an oracle (a class with `predictive_for`)."""
    try:
        returns = typing.get_type_hints(factory).get("return")
    except Exception:  # an annotation that does not resolve says nothing
        return False
    return isinstance(returns, type) and callable(getattr(returns, "predictive_for", None))


def _fixed(configs: list[Any]) -> Callable[[], list[Any]]:
    return lambda: list(configs)


def _function_factory(fn: Callable[..., Any]) -> Callable[[Any], Any]:
    """`make(config)` for an agent function: the function with the config's settings."""

    def make(config: Any):
        settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}

        def agent(train_data: Any, prior_knowledge: Any) -> Any:
            return fn(train_data, prior_knowledge, **settings)

        return agent

    make.__doc__, make.__module__ = fn.__doc__, getattr(fn, "__module__", make.__module__)
    return make


_PLAIN = (bool, int, float, str)


def _setting_type(agent: str, param: inspect.Parameter) -> tuple[Any, Any]:
    """The (type, default) of a setting: its annotation, else its default's type."""
    default = param.default
    if isinstance(default, list):  # a list default becomes a tuple (configs are frozen)
        default = tuple(default)
    if param.annotation is not inspect.Parameter.empty:
        return param.annotation, default
    if isinstance(default, _PLAIN):
        return type(default), default
    if isinstance(default, tuple) and default:
        kinds = {type(v) for v in default}
        if len(kinds) == 1 and kinds <= set(_PLAIN):
            return tuple[kinds.pop(), ...], default
    raise InputError(
        f"agent {agent}: setting {param.name!r} has default {default!r} and no type "
        "annotation; allowed: a number, string, true/false or tuple default, or an "
        f"annotation (e.g. {param.name}: float | None = None)"
    )


def _resolved(agent: str, fn: Callable[..., Any], param: inspect.Parameter) -> inspect.Parameter:
    """`param` with its annotation evaluated when it is a string (`from __future__ import
    annotations`); only settings are resolved (the data arguments may name anything)."""
    if not isinstance(param.annotation, str):
        return param
    try:
        annotation = eval(param.annotation, getattr(fn, "__globals__", {}))  # noqa: S307
    except Exception as e:
        raise InputError(
            f"agent {agent}: setting {param.name!r} has annotation {param.annotation!r}, "
            f"which does not resolve ({e}); allowed: a type (float, int, tuple[int, ...], ...)"
        ) from None
    return param.replace(annotation=annotation)


def config_from_signature(name: str, fn: Callable[..., Any]) -> type:
    """A frozen config dataclass from `fn(train_data, prior_knowledge, *, a=1, ...)`: one
    field per keyword setting, with its default and type (annotation, else the default's)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as e:
        raise InputError(f"agent {name}: cannot read the signature of {fn!r} ({e})") from None
    params = [_resolved(name, fn, p) if i >= 2 else p for i, p in enumerate(params)]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    data_args = [p for p in params[:2] if p.kind in positional and p.default is p.empty]
    if len(data_args) < 2:
        raise InputError(
            f"agent {name}: got {getattr(fn, '__name__', fn)}{inspect.signature(fn)}; allowed: "
            "a function (train_data, prior_knowledge, *, setting=default, ...), or "
            "register(name, ConfigClass) on a factory make(config)"
        )
    fields = []
    for p in params[2:]:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            stars = "*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise InputError(
                f"agent {name}: setting {stars}{p.name}; allowed: named settings with "
                "defaults (they become the agent's config)"
            )
        if p.default is p.empty:
            raise InputError(
                f"agent {name}: setting {p.name!r} has no default; allowed: keyword "
                f"settings with defaults ({p.name}=...), which become the agent's config"
            )
        tp, default = _setting_type(name, p)
        fields.append((p.name, tp, dataclasses.field(default=default)))
    camel = "".join(w.capitalize() for w in re.split(r"[^0-9a-zA-Z]+", name) if w)
    cls = dataclasses.make_dataclass(f"{camel or 'Agent'}Config", fields, frozen=True)
    cls.__module__ = getattr(fn, "__module__", None) or __name__
    cls.__doc__ = f"Settings of agent {name}: the keyword defaults of {fn.__qualname__}."
    field_types(cls)  # an annotation that does not resolve fails here, not at load
    return cls


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
        """Whether its training does not depend on the observation (its entry says so)."""
        return bool(self.entry.amortized(self.config))

    @property
    def trains_on(self) -> str:
        """What its training depends on (testbed.base.TRAINS_ON), as its entry declares."""
        return self.entry.trains_on(self.config)

    @property
    def predicts(self) -> frozenset[str] | None:
        """What it predicts (its registration says; None: not declared)."""
        return self.entry.predicts

    @property
    def learns(self) -> str:
        """How it learns in a decision loop: `online` or `refit` (its entry says)."""
        return self.entry.learns

    def online_learner(self, prior_knowledge: Any, key: Any) -> Any:
        """Its `testbed.online.OnlineLearner` for a decision loop (initial parameters from
        `key` mixed with its config's seed)."""
        if self.entry.online is None:
            raise InputError(
                f"agent {self.name} learns by refitting; allowed: online_learner on agents "
                "registered with online=... (" + ", ".join(online_agents()) + ")"
            )
        return self.entry.online(self.config, prior_knowledge, key)

    def agents_that_fit(self, kind: str, problem: Any = None) -> list[str]:
        """The registered agents that predict `kind` (for the mismatch message)."""
        return fitting(kind, problem)

    def __call__(self, train_data: Any, prior_knowledge: PriorKnowledge) -> Any:
        agent = self.build()
        if not callable(agent) and callable(getattr(agent, "predictive_for", None)):
            raise InputError(
                f"agent {self.name}: its factory built an oracle (it reads the problem), "
                "which its registration does not declare; allowed: "
                f"register({self.name!r}, ..., oracle=True) or a factory annotated to "
                "return the oracle's class"
            )
        return agent(train_data, prior_knowledge)

    def config_dict(self) -> dict[str, Any]:
        """The config as stored and hashed (settings added later left out at their
        default: `testbed.config.key_fields`)."""
        return key_fields(self.config)

    @property
    def key(self) -> str:
        """A stable hash of (name, config): the same config always gives the same key."""
        text = json.dumps({"agent": self.name, "config": self.config_dict()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class ConfiguredOracle(ConfiguredAgent):
    """A registered agent declared an oracle (`testbed.base.Oracle`): it reads the
    problem (the true predictive), so `testbed.evaluate` hands it the problem."""

    def predictive_for(self, problem: Any) -> Any:
        return self.build().predictive_for(problem)

    def __call__(self, train_data: Any, prior_knowledge: Any) -> Any:
        raise InputError(
            f"agent {self.name} reads the problem instead of training on data; allowed: "
            f"testbed.evaluate(agent, problem) or agent.predictive_for(problem)"
        )


def configured(name: str, config: Any) -> ConfiguredAgent:
    """`name` with `config`, as a ConfiguredOracle when its entry declares an oracle (the
    agent is not built)."""
    return _kind(AGENTS.get(name))(name, config)


def _kind(entry: Any) -> type[ConfiguredAgent]:
    """What a configured agent of `entry` is: a ConfiguredOracle when it declares one."""
    return ConfiguredOracle if entry.oracle else ConfiguredAgent


def load(name: str, **overrides: Any) -> ConfiguredAgent:
    """The agent `name` with its default config and `overrides` (checked by field and type),
    not built: its entry says whether it is an oracle (its factory runs when it trains).

    A seed is an integer >= 0; an agent whose config has no `seed` takes seed 0 only (every
    agent's default seed: `run --seed 0` is what `sweep --seeds 0` runs)."""
    entry = AGENTS.get(name)
    overrides = dict(overrides)
    if "seed" in overrides:
        seed = check_seed(f"agent {name}: seed", overrides.pop("seed"))
        if "seed" in field_types(entry.config_cls):
            overrides["seed"] = seed
        elif seed != 0:
            raise InputError(
                f"seed: got {seed!r} for agent {name}, whose config has no 'seed' "
                "field (nothing in it is random); allowed: no seed for this agent, settings: "
                + (", ".join(sorted(field_types(entry.config_cls))) or "(none)")
            )
    config = with_overrides(entry.config_cls(), overrides, where=f"agent {name}")
    return _kind(entry)(name, config)


def takes_seed(name: str) -> bool:
    """Whether agent `name`'s results depend on its seed: its config has a `seed` field that
    is not marked `testbed.config.UNUSED_SEED` (uniform's is bookkeeping only). A sweep runs
    an agent that takes none at seed 0 only."""
    fields = {f.name: f for f in dataclasses.fields(AGENTS.get(name).config_cls)}
    return "seed" in fields and UNUSED_SEED not in fields["seed"].metadata


def sweep(name: str) -> list[ConfiguredAgent]:
    """The agent's hyper-parameter sweep (its default config alone if it has none)."""
    entry = AGENTS.get(name)
    if entry.sweep is None:
        return [configured(name, entry.config_cls())]
    where = f"agent {name}: sweep"
    configs = [
        with_overrides(entry.config_cls(), c, where=where) if isinstance(c, Mapping) else c
        for c in entry.sweep()
    ]
    return [configured(name, c) for c in configs]


def names() -> list[str]:
    return AGENTS.names()


def fitting(kind: str, problem: Any = None) -> list[str]:
    """The registered agents that predict `kind`; with `problem` (a problem, or the class
    its family builds), an oracle only when the problem offers what it declares it reads.
    Read from the entries: no agent is built."""
    out = []
    for name in names():
        entry = AGENTS.get(name)
        if entry.predicts and kind in entry.predicts and entry.serves(problem):
            out.append(name)
    return out


def require_classification(agent: str, prior: PriorKnowledge) -> None:
    """A clear error when a classification-only agent meets a regression problem."""
    if prior.num_classes < 2:
        raise InputError(
            f"agent {agent}: got a regression problem (num_classes = {prior.num_classes}); "
            "allowed: classification problems (num_classes >= 2)"
        )


# ----- plugins: agents of installed packages -----

_PLUGINS_SEEN: set[tuple[str, str]] = set()


def load_plugins(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Loads the agents of installed packages: each entry point of `group` names a module
    (imported: its `register` calls run) or a callable (`pkg.mod:setup`, called with no
    arguments unless it is itself a registered agent). Returns the entry points loaded now;
    one that fails is left out with one warning (a broken plugin never stops the testbed).
    Each entry point is loaded once per process."""
    try:
        points = importlib.metadata.entry_points(group=group)
    except Exception as e:  # damaged package metadata: say so, go on
        log.warning("agent plugins: cannot read the %s entry points (%s)", group, _one_line(e))
        return []
    loaded = []
    for point in points:
        if (point.name, point.value) in _PLUGINS_SEEN:
            continue
        _PLUGINS_SEEN.add((point.name, point.value))
        try:
            obj = point.load()
            if not isinstance(obj, types.ModuleType) and id(obj) not in _REGISTERED:
                if not callable(obj):
                    raise TypeError(f"{point.value} is neither a module nor a callable")
                obj()
        except Exception as e:
            dist = getattr(getattr(point, "dist", None), "name", None) or "an installed package"
            # a sweep's driver has said it; its workers say it only with -v
            say = log.debug if settings.current().worker else log.warning
            say(
                "agent plugin %r (%s, from %s) left out: %s",
                point.name,
                point.value,
                dist,
                _one_line(e),
            )
            continue
        loaded.append(point.name)
    return loaded


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def online_agents() -> list[str]:
    """The registered agents that learn online in a decision loop (the rest are refit)."""
    return [name for name in AGENTS.names() if AGENTS.get(name).online is not None]
