"""Metrics: one registry (`register`, `get`, `names`); each metric module registers itself."""

from testbed.evidence import Metric
from testbed.metrics import local_builtin  # noqa: F401 (registers the local diagnostics)
from testbed.metrics.c2st import c2st, c2st_auc, c2st_pvalue, c2st_scores
from testbed.metrics.calibration import check_sbc, expected_coverage, sbc_ranks, tarp
from testbed.metrics.ddks import ddks_test
from testbed.metrics.distances import (
    ksd,
    median_distance,
    nltp,
    posterior_mean_error,
    posterior_variance_ratio,
)
from testbed.metrics.lc2st import LC2ST, LC2ST_NF, LC2STScores, PPPlotData, plot_pp
from testbed.metrics.lhpd import LocalHPD, hpd_values, plot_lhpd
from testbed.metrics.local import LOCAL_DIAGNOSTICS, LocalData, LocalResult, register_local
from testbed.metrics.mlp import MLPConfig
from testbed.metrics.mmd import mmd
from testbed.metrics.one_sample import gaussian_kl, mahalanobis_chi2, mc_kl, pit_ks
from testbed.metrics.oracle_c2st import oracle_c2st
from testbed.metrics.registry import METRICS, get, names, register

__all__ = [
    "LC2ST",
    "LC2ST_NF",
    "LC2STScores",
    "LOCAL_DIAGNOSTICS",
    "LocalData",
    "LocalHPD",
    "LocalResult",
    "METRICS",
    "MLPConfig",
    "Metric",
    "PPPlotData",
    "c2st",
    "c2st_auc",
    "c2st_pvalue",
    "c2st_scores",
    "check_sbc",
    "ddks_test",
    "expected_coverage",
    "gaussian_kl",
    "hpd_values",
    "get",
    "ksd",
    "mahalanobis_chi2",
    "mc_kl",
    "median_distance",
    "mmd",
    "names",
    "nltp",
    "oracle_c2st",
    "pit_ks",
    "plot_lhpd",
    "plot_pp",
    "posterior_mean_error",
    "posterior_variance_ratio",
    "register",
    "register_local",
    "sbc_ranks",
    "tarp",
]
