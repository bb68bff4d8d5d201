"""Metrics: one registry (`register`, `get`, `names`); each metric module registers itself."""

from testbed.metrics.ddks import ddks_test
from testbed.metrics.one_sample import (
    gaussian_kl,
    joint_predictive_kl,
    mahalanobis_chi2,
    mc_kl,
    pit_ks,
)
from testbed.metrics.registry import METRICS, Metric, get, names, register

__all__ = [
    "METRICS",
    "Metric",
    "ddks_test",
    "gaussian_kl",
    "get",
    "joint_predictive_kl",
    "mahalanobis_chi2",
    "mc_kl",
    "names",
    "pit_ks",
    "register",
]
