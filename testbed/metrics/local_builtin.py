"""The L-C2ST paper's four local diagnostics as registered `LocalData` functions.

Each trains once per estimator (amortized) and is evaluated at every observation; nulls
that depend on the calibration x alone (L-C2ST-NF's, local-HPD's) are kept in
`data.cache` so other estimators tested on the same x reuse them, as the paper does.
"""

from __future__ import annotations

import numpy as np

from testbed.metrics.lc2st import LC2ST, LC2ST_NF
from testbed.metrics.lhpd import LocalHPD, hpd_values
from testbed.metrics.local import LocalData, LocalResult, register_local, result
from testbed.metrics.mlp import MLPConfig, train_many
from testbed.metrics.oracle_c2st import oracle_c2st

HPD_DRAWS = 1_000  # draws of q at each calibration x for its HPD values (the authors')
HPD_LEVELS = 11


def _permuted_halves(a: np.ndarray, b: np.ndarray, seed: int):
    """The paper's null draw of two samples: pooled, permuted, split in halves."""
    pooled = np.concatenate([a, b])
    perm = np.random.default_rng([seed, 7]).permutation(len(pooled))
    return pooled[perm[: len(a)]], pooled[perm[len(a) :]]


@register_local("lc2st", "L-C2ST")
def lc2st(data: LocalData) -> dict[str, LocalResult]:
    """L-C2ST (MSE_0) with its permutation null, evaluated on q's draws at each x_o."""
    if data.under_null:  # the paper's false-positive run: the joint rows permuted
        return _lc2st_on_permuted_rows(data)
    test = LC2ST(data.theta, data.x, data.q_theta, seed=data.seed,
                 num_trials_null=data.num_trials_null)  # fmt: skip
    test.train()
    stats, nulls = [], []
    for k, x_o in enumerate(data.observations):
        stats.append(test.get_statistic_on_observed_data(data.q_at_obs[k], x_o))
        nulls.append(test.get_statistics_under_null_hypothesis(data.q_at_obs[k], x_o).scores)
    return {"mse": result(stats, np.stack(nulls))}


def _lc2st_on_permuted_rows(data: LocalData) -> dict[str, LocalResult]:
    """L-C2ST on the paper's null draw: the rows (theta, x) of both classes pooled,
    permuted and split, so each class has its own x; its permutation null as usual."""
    joint_q = np.concatenate([data.q_theta, data.x], 1).astype(np.float32)
    joint_p = np.concatenate([data.theta, data.x], 1).astype(np.float32)
    joint_q, joint_p = _permuted_halves(joint_q, joint_p, data.seed)
    n = len(joint_q)
    features = np.concatenate([joint_q, joint_p])
    ys = []
    for t in range(-1, data.num_trials_null):
        y = np.ones(2 * n, np.float32)
        rows = np.arange(n) if t < 0 else np.random.default_rng([data.seed, t]).permutation(2 * n)
        y[rows[:n]] = 0.0  # class 0: q
        ys.append(y)
    trained = train_many(
        MLPConfig.sbi(data.theta.shape[1]), features, np.stack(ys),
        [np.arange(2 * n)] * len(ys), init_seeds=[data.seed + 1000 * t for t in range(len(ys))],
        key=data.seed,
        val_seed=data.seed,
    )  # fmt: skip
    stats = []
    for k, x_o in enumerate(data.observations):
        theta_o = data.q_at_obs[k]
        x = np.broadcast_to(np.reshape(x_o, (1, -1)), (len(theta_o), np.size(x_o)))
        p0 = 1.0 - np.asarray(trained.prob_class1(np.concatenate([theta_o, x], 1)), np.float64)
        stats.append(np.mean((p0 - 0.5) ** 2, axis=1))
    stats = np.stack(stats)  # [K, 1 + H]
    return {"mse": result(stats[:, 0], stats[:, 1:])}


@register_local("lc2st_nf", "L-C2ST-NF", needs=("inverse_transform",))
def lc2st_nf(data: LocalData) -> dict[str, LocalResult]:
    """L-C2ST-NF (MSE_0) in the flow's base space; its null (base draws for both classes,
    independent of the estimator) is trained once per calibration x and reused."""
    inverse = data.inverse_transform
    if data.under_null:  # the joint class replaced by independent base draws
        rng = np.random.default_rng([data.seed, 11])
        z_theta = rng.standard_normal(data.theta.shape).astype(np.float32)
        inverse = _fixed_inverse(data, z_theta)
    key = f"lc2st_nf_null/{data.calibration_id}/{data.seed}/{len(data.x)}"
    test = LC2ST_NF(
        data.theta, data.x, data.q_theta, inverse, seed=data.seed,
        num_trials_null=data.num_trials_null, trained_clfs_null=data.cache.get(key),
    )  # fmt: skip
    test.train()
    data.cache[key] = test.trained_clfs_null
    stats, nulls = [], []
    for x_o in data.observations:
        stats.append(test.get_statistic_on_observed_data(x_o))
        nulls.append(test.get_statistics_under_null_hypothesis(x_o).scores)
    return {"mse": result(stats, np.stack(nulls))}


def _fixed_inverse(data: LocalData, z_theta: np.ndarray):
    """An inverse transform that sends the calibration theta to `z_theta` (the null run)
    and every other input through the estimator's own."""

    def inverse(theta, x):
        if theta is data.theta:
            return z_theta
        return data.inverse_transform(theta, x)

    return inverse


@register_local("lhpd", "local-HPD", needs=("log_prob_pairs", "draws_at"))
def lhpd(data: LocalData) -> dict[str, LocalResult]:
    """Local HPD with uniform-value null regressions (trained once per calibration x)."""
    if data.under_null:
        hpd = np.random.default_rng([data.seed, 13]).uniform(size=len(data.x))
    else:
        truth = data.log_prob_pairs(data.theta, data.x)
        if data.draws_log_prob_at is not None:  # a flow: draws and densities in one pass
            log_q = data.draws_log_prob_at(data.x, HPD_DRAWS, data.seed + 17)[1]
        else:
            log_q = data.log_prob_pairs(data.draws_at(data.x, HPD_DRAWS, data.seed + 17), data.x)
        hpd = hpd_values(truth, log_q)
    key = f"lhpd_null/{data.calibration_id}/{data.seed}/{len(data.x)}"
    test = LocalHPD(
        data.x, hpd, num_levels=HPD_LEVELS, seed=data.seed,
        num_trials_null=data.num_trials_null, trained_null=data.cache.get(key),
    )  # fmt: skip
    test.train()
    data.cache[key] = test.trained_null
    scores = [test.scores(x_o).scores for x_o in data.observations]
    return {"mse": result([s[0] for s in scores], np.stack([s[1:] for s in scores]))}


@register_local("oracle_c2st", "oracle C2ST", ("accuracy", "mse"), needs=("reference_at",))
def oracle(data: LocalData) -> dict[str, LocalResult]:
    """The oracle C2ST at each x_o: q's draws against the true posterior's (n = N_cal to
    train, the N_v draws of q at x_o and as many reference draws to evaluate). Its
    permutation null is computed once per estimator, N_cal and observation and reused by
    later runs, as the paper's (`data.estimator_id` names the estimator)."""
    n, m = len(data.x), data.q_at_obs.shape[1]
    rng = np.random.default_rng([data.seed, 19])
    out = {"accuracy": ([], []), "mse": ([], [])}
    for k in range(len(data.observations)):
        ref = data.reference_at(k, n + m, data.seed + 23)
        q_eval, q_train = data.q_at_obs[k][:m], _q_train(data, k, n, rng)
        p_train, p_eval = ref[:n], ref[n:]
        if data.under_null:
            q_train, p_train = _permuted_halves(q_train, p_train, data.seed + k)
            q_eval, p_eval = _permuted_halves(q_eval, p_eval, data.seed + k)
        key = f"oracle_null/{data.estimator_id}/{n}/{k}/{data.under_null}"
        r = oracle_c2st(
            q_train, p_train, q_eval, p_eval, num_trials_null=data.num_trials_null,
            seed=data.seed, null=data.cache.get(key) if data.estimator_id else None,
        )  # fmt: skip
        data.cache[key] = (r.null_accuracy, r.null_mse)
        for stat, obs, null in (
            ("accuracy", r.accuracy, r.null_accuracy),
            ("mse", r.mse, r.null_mse),
        ):
            out[stat][0].append(obs)
            out[stat][1].append(null)
    return {s: result(obs, np.stack(null)) for s, (obs, null) in out.items()}


def _q_train(data: LocalData, k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of q at observation k for the oracle's training (fresh where the estimator
    draws at any x, else the draws at x_o beyond the evaluation ones)."""
    if data.draws_at is not None:
        return data.draws_at(data.observations[k : k + 1], n, int(rng.integers(2**31)))[:, 0]
    return data.q_at_obs[k][-n:]
