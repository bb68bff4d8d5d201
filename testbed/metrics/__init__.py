"""Metrics: one registry (`register`, `get`, `names`); each metric module registers itself."""

from testbed.metrics.registry import METRICS, Metric, get, names, register

__all__ = ["METRICS", "Metric", "get", "names", "register"]
