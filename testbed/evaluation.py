"""Evaluation as matching: problems offer evidence, metrics need it, `score` pairs them.

A problem's `evidence(predictive)` is an `Evidence`: named values about one predictive,
each computed once, when a metric first asks for it (the posterior's samples at x_o, the
reference samples, the environment's test batches, ...). The names form one vocabulary
(`EVIDENCE`); a problem also states, before training, which names it can offer
(`offers`). A metric in the registry (`testbed.metrics`) states the names it needs;
`score(problem, predictive, metrics)` runs the problem's default metrics, or others on
the same evidence, so a metric added by a user sees the same samples and seeds.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from testbed.base import Quality
from testbed.compilation_cache import with_library_cache
from testbed.errors import InputError
from testbed.evidence import EVIDENCE, MISSING, Evidence, Metric, check_names
from testbed.metrics.registry import METRICS, get

__all__ = ["EVIDENCE", "MISSING", "Evidence", "Metric", "check_names"]
log = logging.getLogger("testbed.evaluation")


@runtime_checkable
class ScoredProblem(Protocol):
    """A problem scored through evidence: what it can offer before training, its default
    metrics, and the evidence about one predictive."""

    offers: frozenset[str]
    metrics: tuple[str, ...]

    def evidence(self, predictive: Any) -> Evidence: ...


def resolve(problem: ScoredProblem, metrics: Sequence[str] | None) -> list[Metric]:
    """The metrics to run (the problem's defaults when None), checked before anything runs:
    each is registered, needs only what the problem offers, and no two write one entry."""
    if isinstance(metrics, str):
        raise InputError(f"metrics: got {metrics!r}; allowed: a list of metric names")
    chosen = [get(n) for n in (problem.metrics if metrics is None else metrics)]
    for metric in chosen:
        lacking = sorted(set(metric.needs) - problem.offers)
        if lacking:
            fits = [n for n in METRICS if set(get(n).needs) <= problem.offers]
            raise InputError(
                f"metrics: {metric.name!r} needs {', '.join(lacking)}, which "
                f"{type(problem).__name__} does not offer; allowed: {', '.join(fits)}"
            )
    writers: dict[str, str] = {}
    for metric in chosen:
        for entry in metric.gives:
            if entry in writers and writers[entry] != metric.name:
                raise InputError(
                    f"metrics: {writers[entry]!r} and {metric.name!r} both give {entry!r}; "
                    "allowed: one of them"
                )
            writers[entry] = metric.name
    return chosen


@with_library_cache
def score(problem: ScoredProblem, predictive: Any, metrics: Sequence[str] | None = None) -> Quality:
    """The Quality of `predictive` on `problem`: each metric on one shared Evidence.

    A metric whose needs this predictive cannot meet (a density for NLTP, say) is left
    out: quietly for the problem's own defaults, with a warning for metrics named in
    `metrics`. Two metrics may not write one entry.
    """
    chosen = resolve(problem, metrics)
    evidence = problem.evidence(predictive)
    quality = Quality()
    for metric in chosen:
        missing = evidence.missing(metric.needs)
        if missing:
            if metrics is not None:
                log.warning(
                    "metric %s left out: this predictive gives no %s",
                    metric.name,
                    ", ".join(missing),
                )
            continue
        values = metric(evidence)
        clash = sorted(set(values) & set(quality))
        if clash:
            raise InputError(
                f"metrics: {metric.name!r} gives {clash[0]!r}, which another metric gave; "
                "allowed: metrics that write different entries"
            )
        quality.update(values)
    quality.update(evidence.diagnostics)
    return quality


class EvidenceScoring:
    """Base of problems scored through evidence: `evaluate(predictive, metrics=None)` runs
    the default `metrics` (or those named) on `self.evidence(predictive)`."""

    offers: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()

    def evidence(self, predictive: Any) -> Evidence:
        raise NotImplementedError

    def evaluate(self, predictive: Any, metrics: Sequence[str] | None = None) -> Quality:
        return score(self, predictive, metrics)
