"""The metric registry: name -> metric function with a one-line description."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from testbed.registry import Registry


@dataclasses.dataclass(frozen=True)
class Metric:
    """A registered metric: `fn` and what it needs (e.g. 'samples', 'log_prob', 'sampler')."""

    name: str
    fn: Callable[..., Any]
    needs: tuple[str, ...]
    description: str


METRICS: Registry[Metric] = Registry("metric")


def register(name: str, needs: tuple[str, ...] = ("samples",)):
    """Decorator: registers `fn` under `name`; its docstring's first line describes it."""

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().splitlines()
        METRICS.register(name, Metric(name, fn, tuple(needs), doc[0] if doc else ""))
        return fn

    return add


def get(name: str) -> Metric:
    return METRICS.get(name)


def names() -> list[str]:
    return METRICS.names()
