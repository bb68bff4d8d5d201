"""Global calibration of an amortized posterior: SBC ranks, expected coverage and TARP.

All three take N joint draws (theta*_i, x_i) and L posterior draws q(.|x_i) per x_i; a
calibrated q makes the ranks uniform, the coverage equal to the credibility level, and
TARP's expected coverage probability (ECP) the identity. Definitions follow sbi's
`run_sbc` / `check_sbc`, the log-prob coverage of Deistler et al. (2022) and `run_tarp`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from testbed.config import check_at_least
from testbed.errors import InputError
from testbed.metrics.c2st import c2st
from testbed.metrics.inputs import as_samples, to_numpy
from testbed.metrics.one_sample import ks_uniform
from testbed.metrics.registry import register


def _draws(thetas, posterior_samples) -> tuple[np.ndarray, np.ndarray]:
    theta = as_samples(thetas, "thetas", dtype=np.float64)
    post = to_numpy(posterior_samples, np.float64)
    if post.ndim == 2 and theta.shape[1] == 1:
        post = post[..., None]
    if post.ndim != 3 or post.shape[0] != theta.shape[0] or post.shape[2] != theta.shape[1]:
        raise InputError(
            f"posterior_samples: got shape {post.shape}; allowed: [N, L, d] = "
            f"[{theta.shape[0]}, L, {theta.shape[1]}] (L draws for each of the N x's)"
        )
    if not np.all(np.isfinite(post)):
        raise InputError("posterior_samples: got NaN or infinite values; allowed: finite")
    return theta, post


def sbc_ranks(thetas, posterior_samples) -> np.ndarray:
    """[N, d] ranks: how many of the L posterior draws lie below theta*_i, per dimension."""
    theta, post = _draws(thetas, posterior_samples)
    return np.sum(post < theta[:, None, :], axis=1)


@dataclasses.dataclass(frozen=True)
class SBCResult:
    """Per-dimension KS p-values of the ranks against uniform, and C2ST of ranks vs uniform."""

    ks_pvals: np.ndarray
    c2st_ranks: np.ndarray


def _sbc(evidence) -> dict[str, float]:
    """SBC on a problem: the worst dimension's KS p-value and rank C2ST."""
    theta, _ = evidence["prior_simulations"]
    draws = evidence["calibration_draws"]
    result = check_sbc(sbc_ranks(theta, draws), np.shape(draws)[1])
    return {
        "sbc_ks_pvalue_min": float(np.min(result.ks_pvals)),
        "sbc_c2st_max": float(np.max(result.c2st_ranks)),
    }


@register(
    "sbc", ("prior_simulations", "calibration_draws"), _sbc, ("sbc_ks_pvalue_min", "sbc_c2st_max")
)
def check_sbc(
    ranks,
    num_posterior_samples: int,
    *,
    c2st_ranks: bool = True,
    seed: int = 0,
    classifier: str = "mlp",
) -> SBCResult:
    """SBC checks of ranks [N, d] in 0..L: KS vs U(0, L) and C2ST of ranks vs U(0, L) draws.

    KS p-values near 0 flag miscalibration in that dimension; C2ST near 0.5 means the ranks
    look uniform. Ranks are jittered within their unit cell so ties do not bias the KS test
    (sbi 0.27's `check_uniformity_frequentist` tests the integer ranks against U(0, L): its
    KS statistic differs from ours by at most 1 / (L + 1)).

    The C2ST of ranks follows sbi's `check_uniformity_c2st` (each dimension's ranks against
    as many U(0, L) draws, 5 folds) with `classifier` 'mlp' (`c2st`'s MLP), not sbi's
    default random forest: a forest tells integer ranks from continuous uniform draws by
    the integer lattice alone, so ranks that are exactly uniform read far above 0.5 (0.87
    with sbi 0.27 at N = 500, L = 100; 0.5 with the MLP). `classifier='rf'` gives sbi's.
    """
    r = as_samples(ranks, "ranks", min_rows=2, dtype=np.float64)
    check_at_least("num_posterior_samples", num_posterior_samples, 1)
    if np.any(r < 0) or np.any(r > num_posterior_samples):
        raise InputError(f"ranks: got values outside [0, {num_posterior_samples}]")
    rng = np.random.default_rng(seed)
    u = (r + rng.uniform(size=r.shape)) / (num_posterior_samples + 1)
    _, pvals = ks_uniform(u)
    scores = np.full(r.shape[1], np.nan)
    if c2st_ranks:
        n_folds = 5 if r.shape[0] >= 10 else 2
        for j in range(r.shape[1]):
            uniform = rng.uniform(0, num_posterior_samples, size=(r.shape[0], 1))
            column = r[:, j : j + 1]
            scores[j] = c2st(column, uniform, seed=seed, n_folds=n_folds, classifier=classifier)
    return SBCResult(ks_pvals=np.atleast_1d(pvals), c2st_ranks=scores)


@dataclasses.dataclass(frozen=True)
class Coverage:
    """Expected coverage at credibility levels, and a KS p-value of the HPD ranks vs uniform."""

    levels: np.ndarray
    coverage: np.ndarray
    max_deviation: float  # max |coverage - level|; > 0 with coverage > level = conservative
    ks_pvalue: float


def hpd_fractions(log_prob_true, log_prob_samples) -> np.ndarray:
    """[N] fraction of posterior draws with higher density than theta*_i (uniform if calibrated)."""
    lt = to_numpy(log_prob_true, np.float64).reshape(-1)
    ls = to_numpy(log_prob_samples, np.float64)
    if ls.ndim != 2 or ls.shape[0] != lt.shape[0]:
        raise InputError(
            f"log_prob_samples: got shape {ls.shape}; allowed: [N, L] with N = {lt.shape[0]}"
        )
    if not (np.all(np.isfinite(lt)) and np.all(np.isfinite(ls))):
        raise InputError("log_prob_true / log_prob_samples: got NaN or infinite values")
    return np.mean(ls > lt[:, None], axis=1)


def _coverage(evidence) -> dict[str, float]:
    """Expected coverage on a problem: its largest deviation and KS p-value."""
    result = expected_coverage(*evidence["calibration_log_probs"])
    return {
        "expected_coverage_max_deviation": result.max_deviation,
        "expected_coverage_ks_pvalue": result.ks_pvalue,
    }


@register(
    "expected_coverage",
    ("calibration_log_probs",),
    _coverage,
    ("expected_coverage_max_deviation", "expected_coverage_ks_pvalue"),
)
def expected_coverage(log_prob_true, log_prob_samples, num_levels: int = 21, seed: int = 0):
    """Coverage of the highest-density regions of q at each level, from log q ranks.

    theta*_i is inside the level-a HPD region when fewer than a L of the draws of q(.|x_i)
    are denser than it. Calibrated: coverage = level; over-dispersed q: coverage > level
    (conservative); under-dispersed: coverage < level (overconfident).
    """
    check_at_least("num_levels", num_levels, 2)
    f = hpd_fractions(log_prob_true, log_prob_samples)
    levels = np.linspace(0.0, 1.0, num_levels)
    cov = np.mean(f[:, None] < levels[None, :], axis=0)
    num_draws = np.asarray(to_numpy(log_prob_samples)).shape[1]
    jitter = np.random.default_rng(seed).uniform(size=f.shape) / (num_draws + 1)
    _, p = ks_uniform(f * num_draws / (num_draws + 1) + jitter)
    return Coverage(levels, cov, float(np.max(np.abs(cov - levels))), float(p))


@dataclasses.dataclass(frozen=True)
class TARPResult:
    """TARP expected coverage probability curve, area to the curve and KS p-value."""

    alpha: np.ndarray
    ecp: np.ndarray
    atc: float
    ks_pvalue: float


def _tarp(evidence) -> dict[str, float]:
    """TARP on a problem: its area to the curve and KS p-value."""
    theta, _ = evidence["prior_simulations"]
    result = tarp(theta, evidence["calibration_draws"])
    return {"tarp_atc": result.atc, "tarp_ks_pvalue": result.ks_pvalue}


@register("tarp", ("prior_simulations", "calibration_draws"), _tarp, ("tarp_atc", "tarp_ks_pvalue"))
def tarp(
    thetas,
    posterior_samples,
    *,
    references=None,
    num_bins: int | None = None,
    z_score_theta: bool = True,
    seed: int = 0,
) -> TARPResult:
    """TARP (Lemos et al. 2023) as sbi 0.27's run_tarp + check_tarp, L2 distance.

    references: [N, d] reference points; default uniform in the range of thetas per
    dimension. z_score_theta: min-max scale by the thetas' range (as sbi). Returns the ECP
    at alpha = linspace(0, 1, num_bins + 1) (num_bins default N // 10), the area to the
    curve ATC = sum over the upper half of the grid (alpha >= 1/2) of (ECP - alpha) times
    the bin width 1 / num_bins (as sbi 0.27; older sbi, and testbed up to 0.2.0, left out
    the bin width: num_bins times larger) and the two-sample KS p-value of ECP vs alpha.
    sbi bins the coverage values over their own range, ours over [0, 1] (the paper's
    alpha): the two agree when the smallest coverage value is 0 and the largest 1.
    """
    theta, post = _draws(thetas, posterior_samples)
    n = theta.shape[0]
    num_bins = num_bins or max(n // 10, 1)
    check_at_least("num_bins", num_bins, 1)
    lo, hi = theta.min(0), theta.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    if z_score_theta:
        theta, post = (theta - lo) / span, (post - lo) / span
    if references is None:
        low, high = theta.min(0), theta.max(0)
        references = np.random.default_rng(seed).uniform(low, high, size=theta.shape)
    else:
        references = as_samples(references, "references", dtype=np.float64)
        if references.shape != theta.shape:
            raise InputError(f"references: got {references.shape}; allowed: {theta.shape}")
        if z_score_theta:
            references = (references - lo) / span
    d_samples = np.linalg.norm(post - references[:, None, :], axis=-1)
    d_true = np.linalg.norm(theta - references, axis=-1)
    f = np.mean(d_samples < d_true[:, None], axis=1)
    hist, _ = np.histogram(f, bins=num_bins, range=(0.0, 1.0))
    ecp = np.concatenate([[0.0], np.cumsum(hist) / hist.sum()])
    alpha = np.linspace(0.0, 1.0, num_bins + 1)
    mid = len(alpha) // 2
    atc = float(np.sum(ecp[mid:] - alpha[mid:]) * (alpha[1] - alpha[0]))
    p = float(stats.ks_2samp(ecp, alpha).pvalue)
    return TARPResult(alpha, ecp, atc, p)
