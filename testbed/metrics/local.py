"""Local diagnostics of an amortized posterior estimator q: one registry, one data record.

A local diagnostic tests H0(x_o): q(. | x_o) = p(. | x_o) at each observation x_o from
one run's calibration data (`LocalData`) and returns, per statistic it computes, the
statistic and both p-values at every observation (`LocalResult`). The built-ins are the
four methods of the L-C2ST paper: `lc2st`, `lc2st_nf`, `lhpd` and the `oracle_c2st`
(which needs reference draws at x_o). A new diagnostic is a function of `LocalData` and
one `register_local` line; `python -m experiments.reproduce_lc2st --diagnostic NAME`
(with `--import FILE`) runs it through the paper's experiments beside them.

`LocalData.under_null` asks for the paper's false-positive run: the diagnostic replaces
its data by a draw of its own null (L-C2ST permutes the joint rows, L-C2ST-NF draws the
base distribution for both classes, local-HPD draws uniform HPD values, the oracle permutes
the two samples) and tests that as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from testbed.errors import InputError
from testbed.registry import Registry


@dataclasses.dataclass(frozen=True)
class LocalData:
    """One run's data for the local diagnostics of one estimator q.

    theta, x: [N, d_theta], [N, d_x] joint draws (the calibration set); q_theta [N, d_theta]:
    one draw of q(. | x_i) at each x_i; observations [K, d_x]; q_at_obs [K, N_v, d_theta]:
    draws of q at each observation. Optional, where the estimator offers them:
    `log_prob_pairs(theta [..., N, d], x [N, d_x]) -> [..., N]` (log q at paired rows),
    `draws_at(x [N, d_x], L, seed) -> [L, N, d_theta]`, `draws_log_prob_at` (the same
    draws and their log q, [L, N], in one pass), `inverse_transform(theta, x) -> z`
    (a flow's base space, N(0, I)), and `reference_at(k, num, seed) -> [num, d_theta]`
    (draws of the true posterior at observation k; oracle only). `cache` keeps what
    diagnostics share across runs and estimators, keyed by `calibration_id` (the same
    calibration x) or `estimator_id` (the same estimator).
    """

    theta: np.ndarray
    x: np.ndarray
    q_theta: np.ndarray
    observations: np.ndarray
    q_at_obs: np.ndarray
    seed: int = 0
    num_trials_null: int = 100
    calibration_id: str = ""  # names the calibration x (nulls on x alone are shared by it)
    estimator_id: str = ""  # names the estimator (nulls of one estimator are shared by it)
    under_null: bool = False
    log_prob_pairs: Callable[..., np.ndarray] | None = None
    draws_at: Callable[..., np.ndarray] | None = None
    draws_log_prob_at: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
    inverse_transform: Callable[..., np.ndarray] | None = None
    reference_at: Callable[..., np.ndarray] | None = None
    cache: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def need(self, name: str, diagnostic: str) -> Callable[..., np.ndarray]:
        """The optional callable `name`, or an InputError saying `diagnostic` needs it."""
        fn = getattr(self, name)
        if fn is None:
            raise InputError(
                f"{diagnostic}: the estimator offers no {name}; allowed: an estimator with "
                f"{name} (e.g. a normalizing flow for inverse_transform)"
            )
        return fn


@dataclasses.dataclass(frozen=True)
class LocalResult:
    """One statistic at the K observations: its values and both p-values ('sbi': share of
    null statistics above; 'exact': (1 + #{null >= T}) / (1 + H))."""

    statistic: np.ndarray
    p_sbi: np.ndarray
    p_exact: np.ndarray

    def check(self, name: str, k: int) -> LocalResult:
        """This result, checked to hold K finite values of each field in range."""
        for field in ("statistic", "p_sbi", "p_exact"):
            value = np.asarray(getattr(self, field), np.float64)
            if value.shape != (k,) or not np.all(np.isfinite(value)):
                raise InputError(
                    f"{name}: returned {field} of shape {value.shape} with "
                    f"{int(np.sum(~np.isfinite(value)))} non-finite values; allowed: {k} "
                    "finite values (one an observation)"
                )
        if np.any((self.p_sbi < 0) | (self.p_sbi > 1) | (self.p_exact < 0) | (self.p_exact > 1)):
            raise InputError(f"{name}: returned p-values outside [0, 1]; allowed: [0, 1]")
        return self


Diagnostic = Callable[[LocalData], dict[str, LocalResult]]


@dataclasses.dataclass(frozen=True)
class LocalDiagnostic:
    """A registered local diagnostic: its function, label, statistics and what it needs."""

    name: str
    fn: Diagnostic
    label: str
    statistics: tuple[str, ...]
    needs: tuple[str, ...] = ()


LOCAL_DIAGNOSTICS: Registry[LocalDiagnostic] = Registry("local diagnostic")


def register_local(
    name: str, label: str, statistics: tuple[str, ...] = ("mse",), needs: tuple[str, ...] = ()
):
    """Decorator: registers a local diagnostic `fn(data: LocalData) -> {statistic: result}`
    under `name` (`label` in tables; `needs`: the optional LocalData fields it uses)."""

    def add(fn: Diagnostic) -> Diagnostic:
        LOCAL_DIAGNOSTICS.register(name, LocalDiagnostic(name, fn, label, statistics, needs))
        return fn

    return add


def run_local(name: str, data: LocalData) -> dict[str, LocalResult]:
    """Runs the registered diagnostic `name` on `data`; its results checked."""
    diag = LOCAL_DIAGNOSTICS.get(name)
    for field in diag.needs:
        data.need(field, name)
    out = diag.fn(data)
    if not isinstance(out, dict) or not all(isinstance(v, LocalResult) for v in out.values()):
        raise InputError(
            f"{name}: returned {type(out).__name__}; allowed: a dict of statistic name -> "
            "LocalResult"
        )
    k = len(data.observations)
    missing = [s for s in diag.statistics if s not in out]
    if missing:
        raise InputError(f"{name}: returned no {', '.join(missing)}; allowed: {diag.statistics}")
    return {s: out[s].check(f"{name} ({s})", k) for s in diag.statistics}


def p_values(observed: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both p-values of K observed statistics [K] against their nulls [K, H]."""
    observed = np.asarray(observed, np.float64)[:, None]
    null = np.asarray(null, np.float64)
    p_sbi = np.mean(null > observed, axis=1)
    p_exact = (1.0 + np.sum(null >= observed, axis=1)) / (1.0 + null.shape[1])
    return p_sbi, p_exact


def result(observed, null) -> LocalResult:
    """A LocalResult from K observed statistics and their nulls [K, H]."""
    observed = np.asarray(observed, np.float64)
    return LocalResult(observed, *p_values(observed, null))
