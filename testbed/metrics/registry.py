"""The metric registry: name -> `Metric` (its function, the evidence it needs, how it applies).

`register(name, needs=(...))` on a function of arrays makes it callable directly and, on
any problem that offers the evidence named in `needs` (testbed.evaluation.EVIDENCE), by
name: `testbed.evaluate(agent, problem, metrics=[...])`. By default the metric is `fn` of
the needed values in the order given; `apply` replaces that for metrics that read the
evidence their own way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from testbed.evidence import Evidence, Metric, check_names
from testbed.registry import Registry

METRICS: Registry[Metric] = Registry("metric")


def register(
    name: str,
    needs: Sequence[str] = (),
    apply: Callable[[Evidence], Mapping[str, float]] | None = None,
    gives: Sequence[str] = (),
):
    """Decorator: registers `fn` under `name`; its docstring's first line describes it.

    `needs`: evidence names, in the order `fn` takes them when `apply` is not given.
    `gives`: the Quality entries it writes (default: `name` alone when `fn` returns a
    number); `testbed list metrics` shows them, and two metrics that would write one entry
    are refused together before anything runs.
    """
    check_names(f"metric {name}: needs", needs)

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().splitlines()
        description = doc[0] if doc else ""
        entries = tuple(gives) or ((name,) if apply is None else ())
        METRICS.register(name, Metric(name, fn, tuple(needs), description, apply, entries))
        return fn

    return add


def get(name: str) -> Metric:
    return METRICS.get(name)


def names() -> list[str]:
    return METRICS.names()
