"""The oracle C2ST at one observation, as the L-C2ST paper scores it beside the local tests.

A classifier tells q(. | x_o) draws (class 0) from reference posterior draws (class 1);
it is trained on `n` draws of each and evaluated on held-out draws of each. Two
statistics: the accuracy (the benchmark's C2ST) and the paper's MSE, the mean over the
held-out draws of both classes of (P(class 0) - 1/2)^2. The null: H classifiers trained on
the pooled training draws with permuted labels, each evaluated on the pooled held-out draws
with permuted labels (as the authors' `permute_data`); each classifier starts from its own
initial weights (a shared start left early-stopped null classifiers near-identical at small
n, and the MSE form without power). The H null classifiers train at once
(`testbed.metrics.mlp.train_many`); the classifier is the paper's (sbi's MLP: hidden
(10 d, 10 d), early stopping), not z-scored, no cross-validation, as the paper's runs.

The observed classifier is trained and evaluated on its own, whether the null is computed
or reused (`null`): a classifier trained or evaluated in one batch with others rounds
otherwise than one alone (XLA's programs for one model and for several differ), so an
observed statistic computed beside its null differed, in its last digits and at times in
its fourth, from the one a reused null gets, and a run resumed from a kept null stored other
rows than one that never stopped. The null's batch still holds the observed classifier
first, unused, so that the null classifiers train as before (the same shuffles, validation
rows and batches: the same null statistics) at a cost of one classifier in 1 + H.
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
    cfg = mlp_config or MLPConfig.sbi(train_x.shape[1])

    def fit(trials: list[int], ys: list[np.ndarray]) -> TrainedMLPs:
        return train_many(
            cfg, train_x, np.stack(ys), [np.arange(2 * n)] * len(trials),
            init_seeds=[seed + 1000 * (t + 1) for t in trials], key=seed, val_seed=seed,
        )  # fmt: skip

    # the observed classifier alone, the same whether the null is computed or reused
    p1 = np.asarray(fit([-1], [labels]).prob_class1(eval_x), np.float64)  # [1, 2m]
    accuracy = float(np.mean((p1[0] > 0.5) == (eval_labels > 0.5)))
    mse = float(np.mean((1.0 - p1[0] - 0.5) ** 2))  # of P(class 0)
    if null is not None:
        return OracleC2STResult(accuracy, mse, *map(np.asarray, null))
    ys, eval_sets = [labels], [eval_labels]  # row 0: the observed classifier, unused
    for t in range(num_trials_null):
        # rows permuted, then the first half is class 0: labels of the pooled rows
        y = np.ones(2 * n, np.float32)
        y[_permutation(2 * n, seed, t)[:n]] = 0.0
        ye = np.ones(2 * m)
        ye[_permutation(2 * m, seed + 1, t)[:m]] = 0.0
        ys.append(y)
        eval_sets.append(ye)
    trials = [-1, *range(num_trials_null)]
    p1 = np.asarray(fit(trials, ys).prob_class1(eval_x), np.float64)[1:]  # [H, 2m]
    p0 = 1.0 - p1
    truth = np.stack(eval_sets[1:])
    null_accuracy = np.mean((p1 > 0.5) == (truth > 0.5), axis=1)
    null_mse = np.mean((p0 - 0.5) ** 2, axis=1)
    return OracleC2STResult(accuracy, mse, null_accuracy, null_mse)
