"""The oracle C2ST at one observation, as the L-C2ST paper scores it beside the local tests.

A classifier tells q(. | x_o) draws (class 0) from reference posterior draws (class 1);
it is trained on `n` draws of each and evaluated on held-out draws of each. Two
statistics: the accuracy (the benchmark's C2ST) and the paper's MSE, the mean over the
held-out draws of both classes of (P(class 0) - 1/2)^2. The null: H classifiers trained on
the pooled training draws with permuted labels, each evaluated on the pooled held-out draws
with permuted labels (as the authors' `permute_data`); each classifier starts from its own
initial weights (a shared start left early-stopped null classifiers near-identical at small
n, and the MSE form without power). All 1 + H classifiers train at once
(`testbed.metrics.mlp.train_many`); the classifier is the paper's (sbi's MLP: hidden
(10 d, 10 d), early stopping), not z-scored, no cross-validation, as the paper's runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from testbed.config import check_at_least
from testbed.errors import InputError
from testbed.metrics.inputs import as_samples, same_dim
from testbed.metrics.lc2st import p_value_from
from testbed.metrics.mlp import MLPConfig, TrainedMLPs, train_many


@dataclasses.dataclass(frozen=True)
class OracleC2STResult:
    """Observed and null statistics of both forms, and the p-values of both forms."""

    accuracy: float
    mse: float
    null_accuracy: np.ndarray  # [H]
    null_mse: np.ndarray  # [H]

    def p_values(self) -> dict[str, float]:
        """'sbi' (share of null statistics above) and 'exact' p-values of both forms."""
        return {
            f"p_{form}_{stat}": p_value_from(obs, null, form)
            for form in ("sbi", "exact")
            for stat, obs, null in (
                ("accuracy", self.accuracy, self.null_accuracy),
                ("mse", self.mse, self.null_mse),
            )
        }


def _permutation(n: int, seed: int, trial: int) -> np.ndarray:
    return np.random.default_rng([seed, trial]).permutation(n)


def oracle_c2st(
    q_train, p_train, q_eval, p_eval, *, num_trials_null: int = 100, seed: int = 1,
    mlp_config: MLPConfig | None = None,
    null: tuple[np.ndarray, np.ndarray] | None = None,
) -> OracleC2STResult:  # fmt: skip
    """Oracle C2ST of q against the reference p at one x_o (see the module docstring).

    q_train, p_train: [n, d] draws of q and of the reference (same n); q_eval, p_eval:
    [m, d] held-out draws of each (same m). `null`: (accuracies, MSEs) of an earlier
    call's null to reuse (the paper computes it once per estimator and N_cal): then only
    the observed classifier is trained.
    """
    qt, pt = as_samples(q_train, "q_train", min_rows=2), as_samples(p_train, "p_train", min_rows=2)
    qe, pe = as_samples(q_eval, "q_eval"), as_samples(p_eval, "p_eval")
    for name, a in (("p_train", pt), ("q_eval", qe), ("p_eval", pe)):
        same_dim(qt, a, "q_train", name)
    check_at_least("num_trials_null", num_trials_null, 1)
    if len(qt) != len(pt) or len(qe) != len(pe):
        raise InputError(
            f"p_train / p_eval: got {len(pt)} / {len(pe)} draws for q_train / q_eval's "
            f"{len(qt)} / {len(qe)}; allowed: as many draws of p as of q, in each pair"
        )
    n, m = len(qt), len(qe)
    train_x = np.concatenate([qt, pt]).astype(np.float32)
    eval_x = np.concatenate([qe, pe]).astype(np.float32)
    labels = np.concatenate([np.zeros(n), np.ones(n)]).astype(np.float32)
    eval_labels = np.concatenate([np.zeros(m), np.ones(m)])
    trials = [-1] if null is not None else [-1, *range(num_trials_null)]
    ys, eval_sets = [], []
    for t in trials:
        if t < 0:
            ys.append(labels)
            eval_sets.append(eval_labels)
            continue
        # rows permuted, then the first half is class 0: labels of the pooled rows
        y = np.ones(2 * n, np.float32)
        y[_permutation(2 * n, seed, t)[:n]] = 0.0
        ye = np.ones(2 * m)
        ye[_permutation(2 * m, seed + 1, t)[:m]] = 0.0
        ys.append(y)
        eval_sets.append(ye)
    cfg = mlp_config or MLPConfig.sbi(train_x.shape[1])
    trained: TrainedMLPs = train_many(
        cfg, train_x, np.stack(ys), [np.arange(2 * n)] * len(trials),
        init_seeds=[seed + 1000 * (t + 1) for t in trials], key=seed, val_seed=seed,
    )  # fmt: skip
    p1 = np.asarray(trained.prob_class1(eval_x), np.float64)  # [1 + H, 2m]
    p0 = 1.0 - p1
    truth = np.stack(eval_sets)
    accuracy = np.mean((p1 > 0.5) == (truth > 0.5), axis=1)
    mse = np.mean((p0 - 0.5) ** 2, axis=1)
    if null is not None:
        return OracleC2STResult(float(accuracy[0]), float(mse[0]), *map(np.asarray, null))
    return OracleC2STResult(float(accuracy[0]), float(mse[0]), accuracy[1:], mse[1:])
