"""Classifier two-sample test (C2ST) with the SBI benchmark's (sbibm's) semantics, fast.

By default: z-score both sets with the reference's mean and unbiased std (a zero std is
replaced by 1), label the reference 0 and the samples 1, 5-fold shuffled KFold (the exact
folds of scikit-learn's `KFold(5, shuffle=True, random_state=seed)`), an MLP with sbibm's
settings (`MLPConfig.sbibm`) on each training part, and the mean held-out accuracy. The
folds train at once (vmap) in one jitted loop. A scikit-learn classifier can be passed
instead (e.g. sbi's default random forest) and then runs through scikit-learn itself.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

import numpy as np
from scipy.stats import binom, rankdata

from testbed.compilation_cache import with_library_cache
from testbed.config import check_at_least, check_nonnegative, check_one_of, check_seed
from testbed.errors import InputError
from testbed.metrics.inputs import as_samples, same_dim
from testbed.metrics.mlp import MLPConfig, train_many
from testbed.metrics.registry import register

Scoring = Literal["accuracy", "roc_auc"]


def complement_rows(n: int, rows: np.ndarray) -> np.ndarray:
    """The sorted rows of range(n) not in `rows` (setdiff1d without its sort)."""
    keep = np.ones(n, bool)
    keep[rows] = False
    return np.flatnonzero(keep)


def kfold_test_rows(n: int, n_folds: int, seed: int) -> list[np.ndarray]:
    """Held-out rows of each fold, identical to scikit-learn's shuffled KFold(random_state)."""
    rows = np.arange(n)
    np.random.RandomState(seed).shuffle(rows)
    sizes = np.full(n_folds, n // n_folds)
    sizes[: n % n_folds] += 1
    return np.split(rows, np.cumsum(sizes)[:-1])


def z_score(reference: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """All arrays standardized by the reference's mean and unbiased std (std 0 -> 1)."""
    mean = reference.mean(0)
    std = reference.std(0, ddof=1) if reference.shape[0] > 1 else np.ones(reference.shape[1])
    std = np.where(std < 1e-14, 1.0, std).astype(reference.dtype)
    return [(a - mean) / std for a in (reference, *others)]


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    labels = np.asarray(labels).astype(bool)
    n1, n0 = labels.sum(), (~labels).sum()
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _sklearn_scores(clf: Any, data, target, n_folds: int, seed: int, scoring: str) -> np.ndarray:
    from sklearn.model_selection import KFold, cross_val_score

    if clf == "rf":
        from sklearn.ensemble import RandomForestClassifier

        clf = RandomForestClassifier(random_state=seed)
    elif isinstance(clf, type):
        clf = clf()
    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return np.asarray(cross_val_score(clf, data, target, cv=folds, scoring=scoring), np.float64)


@with_library_cache
def _check_settings(ref, smp, n_folds, scoring, mlp_config) -> None:
    """`c2st_scores`' rules: same dimension, n_folds an integer >= 2 with at least n_folds
    samples a side, a known scoring, an MLPConfig or None."""
    same_dim(ref, smp, "reference", "samples")
    if isinstance(n_folds, bool) or not isinstance(n_folds, int | np.integer):
        raise InputError(f"n_folds: got {n_folds!r}; allowed: an integer >= 2")
    check_at_least("n_folds", n_folds, 2)
    if mlp_config is not None and not isinstance(mlp_config, MLPConfig):
        raise InputError(
            f"mlp_config: got {type(mlp_config).__name__}; allowed: an MLPConfig "
            "(e.g. MLPConfig.sbibm(dim) with dataclasses.replace) or None"
        )
    check_one_of("scoring", scoring, ("accuracy", "roc_auc"))
    for name, x in (("reference", ref), ("samples", smp)):
        if x.shape[0] < n_folds:
            raise InputError(
                f"{name}: got {x.shape[0]} samples; allowed: at least n_folds = {n_folds}"
            )


def c2st_scores(
    reference,
    samples,
    *,
    seed: int = 1,
    n_folds: int = 5,
    scoring: Scoring = "accuracy",
    z_score_data: bool = True,
    noise_scale: float | None = None,
    classifier: Any = "mlp",
    mlp_config: MLPConfig | None = None,
) -> np.ndarray:
    """Held-out score of each fold (see `c2st`)."""
    ref = as_samples(reference, "reference")
    smp = as_samples(samples, "samples")
    seed = check_seed("seed", seed)
    _check_settings(ref, smp, n_folds, scoring, mlp_config)
    if z_score_data:
        ref, smp = z_score(ref, smp)
    if noise_scale is not None:
        check_nonnegative("noise_scale", noise_scale)
        rng = np.random.default_rng(seed)
        ref = ref + noise_scale * rng.standard_normal(ref.shape).astype(np.float32)
        smp = smp + noise_scale * rng.standard_normal(smp.shape).astype(np.float32)
    data = np.concatenate([ref, smp]).astype(np.float32)
    target = np.concatenate([np.zeros(len(ref)), np.ones(len(smp))]).astype(np.float32)
    if not (isinstance(classifier, str) and classifier == "mlp"):
        if isinstance(classifier, str) and classifier != "rf":
            raise InputError(
                f"classifier: got {classifier!r}; allowed: 'mlp', 'rf' or a scikit-learn "
                "classifier (instance or class)"
            )
        return _sklearn_scores(classifier, data, target.astype(int), n_folds, seed, scoring)
    cfg = mlp_config or MLPConfig.sbibm(data.shape[1])
    tests = kfold_test_rows(len(data), n_folds, seed)
    trains = [complement_rows(len(data), t) for t in tests]
    trained = train_many(
        cfg,
        data,
        np.broadcast_to(target, (n_folds, len(target))),
        trains,
        init_seeds=[seed] * n_folds,
        key=seed,  # jax.random.PRNGKey(seed), made on the host
        val_seed=seed,
    )
    out = []
    for i, rows in enumerate(tests):
        prob = trained.prob_class1_host(i, data[rows])  # held-out rows only, no compile
        if scoring == "accuracy":
            out.append(np.mean((prob > 0.5) == target[rows]))
        else:
            out.append(roc_auc(target[rows], prob))
    return np.asarray(out, np.float64)


@register("c2st", ("reference_samples", "posterior_samples"))
def c2st(reference, samples, **kwargs: Any) -> float:
    """C2ST accuracy of a classifier telling samples from reference (0.5 = indistinguishable).

    reference, samples: [n, d] and [m, d] (numpy or torch). Defaults are sbibm's C2ST
    (z-scored by the reference, MLP (10 d, 10 d), 5 folds, seed 1). The keywords are
    `c2st_scores`'s: `seed`, `n_folds`, `scoring="roc_auc"` for the AUC, `z_score_data`,
    `noise_scale`, `classifier` ('mlp', 'rf' (sbi's default random forest) or any
    scikit-learn classifier) and `mlp_config` (the JAX MLP's settings).
    """
    check_keywords("c2st", kwargs, c2st_scores, {"z_score": "z_score_data"})
    return float(np.mean(c2st_scores(reference, samples, **kwargs)))


def check_keywords(name: str, kwargs: dict, target: Any, renamed: dict[str, str]) -> None:
    """An unknown keyword of `name` (passed on to `target`) as an InputError listing the
    allowed ones; `renamed` maps sbibm's names to ours, said in the message."""
    allowed = [
        p.name
        for p in inspect.signature(inspect.unwrap(target)).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    for key in kwargs:
        if key not in allowed:
            hint = f" (sbibm's {key!r} is {renamed[key]!r} here)" if key in renamed else ""
            raise InputError(
                f"{name}: unknown keyword {key!r}{hint}; allowed: {', '.join(allowed)}"
            )


def c2st_pvalue(accuracy: float, num_reference: int, num_samples: int) -> float:
    """One-sided p-value of a C2ST accuracy against chance (balanced classes).

    Under H0 every one of the n = num_reference + num_samples held-out predictions is right
    with probability 1/2, so n * accuracy ~ Binomial(n, 1/2): p = P(Bin >= n * accuracy).
    The folds' classifiers share data, so this is approximate; the conjugate power table
    (`python -m experiments.conjugate_power`) reports its actual level.
    """
    if not 0.0 <= accuracy <= 1.0:
        raise InputError(f"accuracy: got {accuracy!r}; allowed: a number in [0, 1]")
    for name, size in (("num_reference", num_reference), ("num_samples", num_samples)):
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise InputError(f"{name}: got {size!r}; allowed: an integer >= 1")
    n = int(num_reference) + int(num_samples)
    correct = int(np.ceil(accuracy * n - 1e-9))
    return float(binom.sf(correct - 1, n, 0.5))


@register("c2st_auc", ("reference_samples", "posterior_samples"))
def c2st_auc(reference, samples, **kwargs) -> float:
    """C2ST with the area under the ROC curve as the score (sbibm's c2st_auc)."""
    return c2st(reference, samples, scoring="roc_auc", **kwargs)
