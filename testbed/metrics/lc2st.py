"""Local C2ST (L-C2ST) and L-C2ST-NF (Linhart et al., 2023) with sbi's semantics, fast.

A classifier on the joint space tells class 0, (theta_q ~ q(.|x), x), from class 1,
(theta, x) ~ p(theta, x). At an observation x_o it is evaluated on theta_o ~ q(.|x_o): the
statistic is T = mean((P(class 0 | theta_o, x_o) - 1/2)^2), which is 0 in expectation
when q is the true posterior. The null distribution of T comes from H classifiers trained
on the pooled data with permuted labels (L-C2ST), or, for a normalizing-flow q, on pairs
of independent base-distribution draws (L-C2ST-NF: the null depends neither on the
estimator nor on x_o, so it is trained once and reused). All 1 + H classifiers (times
folds and ensemble members) train at once in one vmapped, jitted loop.

p-values: 'sbi' (default, as sbi and the paper) = mean over trials of 1[T_null > T_obs];
'exact' = (1 + #{T_null >= T_obs}) / (1 + H), exactly valid for exchangeable trials.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import numpy as np

from testbed.compilation_cache import with_library_cache
from testbed.config import check_at_least, check_in_range, check_one_of
from testbed.errors import InputError
from testbed.metrics.c2st import complement_rows, kfold_test_rows
from testbed.metrics.inputs import as_samples, to_numpy
from testbed.metrics.mlp import MLPConfig, TrainedMLPs, train_many
from testbed.metrics.registry import register

PValue = Literal["sbi", "exact"]


@dataclasses.dataclass(frozen=True)
class LC2STScores:
    """Statistics (one per trial, or one) and class-0 probabilities at the evaluation points."""

    scores: np.ndarray
    probabilities: np.ndarray


@dataclasses.dataclass(frozen=True)
class PPPlotData:
    """PP-plot of the class-0 probabilities at x_o with the null's (1 - alpha) band."""

    levels: np.ndarray  # [L] thresholds in [0, 1]
    observed: np.ndarray  # [L] fraction of probabilities <= level (trained classifier)
    null_low: np.ndarray  # [L] alpha/2 quantile over the null trials
    null_high: np.ndarray  # [L] 1 - alpha/2 quantile
    alpha: float


def p_value_from(stat: float, null: np.ndarray, method: PValue = "sbi") -> float:
    """'sbi': mean(null > stat); 'exact': (1 + #(null >= stat)) / (1 + H)."""
    null = np.asarray(null, np.float64)
    if method == "sbi":
        return float(np.mean(stat < null))
    return float((1.0 + np.sum(null >= stat)) / (1.0 + null.size))


def _standardizer(theta: np.ndarray, x: np.ndarray):
    """Mean and unbiased std (as torch.std in sbi; 0 -> 1) of the class-0 theta and of x."""

    def stats(a):
        s = a.std(0, ddof=1)
        return a.mean(0), np.where(s == 0, 1.0, s).astype(np.float32)

    return stats(theta), stats(x)


class LC2ST:
    """L-C2ST of a posterior estimator from calibration triples (theta_i, x_i, theta_q,i).

    prior_samples [N, d_theta] and xs [N, d_x] are joint draws; posterior_samples [N, d_theta]
    holds one draw of q(.|x_i) per x_i. The classifier is the JAX MLP with sbi's settings
    (`MLPConfig.sbi(d_theta)`: hidden (10 d_theta, 10 d_theta), early stopping, patience 50,
    max_iter 1000) unless `mlp_config` says otherwise. Rows with non-finite x are dropped.
    """

    def __init__(
        self,
        prior_samples,
        xs,
        posterior_samples,
        *,
        seed: int = 1,
        num_folds: int = 1,
        num_ensemble: int = 1,
        z_score: bool = False,
        mlp_config: MLPConfig | None = None,
        num_trials_null: int = 100,
        permutation: bool = True,
        p_value_method: PValue = "sbi",
    ):
        theta = to_numpy(prior_samples)
        x = to_numpy(xs)
        theta = theta[:, None] if theta.ndim == 1 else theta
        x = x[:, None] if x.ndim == 1 else x
        post = to_numpy(posterior_samples)
        post = post[:, None] if post.ndim == 1 else post
        if theta.ndim != 2:
            raise InputError(f"prior_samples: got shape {theta.shape}; allowed: [N, d_theta]")
        if x.ndim != 2 or x.shape[0] != theta.shape[0] or post.shape != theta.shape:
            raise InputError(
                f"xs / posterior_samples: got shapes {x.shape} and {post.shape} for "
                f"prior_samples {theta.shape}; allowed: [N, d_x] and [N, d_theta] (same N)"
            )
        keep = np.all(np.isfinite(x), axis=1)
        theta, x, post = theta[keep], x[keep], post[keep]
        as_samples(theta, "prior_samples", min_rows=2)
        as_samples(post, "posterior_samples", min_rows=2)
        check_at_least("num_folds", num_folds, 1)
        check_at_least("num_ensemble", num_ensemble, 1)
        check_at_least("num_trials_null", num_trials_null, 1)
        check_one_of("p_value_method", p_value_method, ("sbi", "exact"))
        if num_folds > 1 and theta.shape[0] < num_folds:
            raise InputError(
                f"prior_samples: got {theta.shape[0]} rows; allowed: at least num_folds = "
                f"{num_folds}"
            )
        self.theta_p, self.theta_q, self.x = post, theta, x
        self.dim_theta = theta.shape[1]
        self.seed = seed
        self.num_folds = num_folds
        self.num_ensemble = num_ensemble
        self.z_score = z_score
        self.mlp_config = mlp_config or MLPConfig.sbi(self.dim_theta)
        self.num_trials_null = num_trials_null
        self.permutation = permutation
        self.p_value_method = p_value_method
        self._norm = _standardizer(post, x) if z_score else None
        self.trained_clfs: TrainedMLPs | None = None
        self.trained_clfs_null: TrainedMLPs | None = None

    # -- data of each trial -------------------------------------------------------------

    def _features(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        if self._norm is not None:
            (mt, st), (mx, sx) = self._norm
            theta, x = (theta - mt) / st, (x - mx) / sx
        return np.concatenate([theta, x], axis=1).astype(np.float32)

    def _fold_rows(self, n: int) -> list[np.ndarray]:
        if self.num_folds == 1:
            return [np.arange(n)]
        tests = kfold_test_rows(n, self.num_folds, self.seed)
        return [complement_rows(n, t) for t in tests]

    def _null_draw(self, trial: int) -> tuple[np.ndarray, np.ndarray]:
        raise InputError("permutation: got False; allowed: True (LC2ST_NF has a base null)")

    @with_library_cache
    def _train(self, trials: list[int], seed: int | None) -> TrainedMLPs:
        """Trains trials (-1 = observed data, t >= 0 = null trial t) x folds x ensemble."""
        n = self.x.shape[0]
        folds = self._fold_rows(n)
        shared = self.permutation or all(t < 0 for t in trials)
        base = self._features(
            np.concatenate([self.theta_p, self.theta_q]), np.concatenate([self.x, self.x])
        )
        xs, labels, rows, seeds = [], [], [], []
        for t in trials:
            if t < 0:
                perm = np.arange(2 * n)
                data = base
            elif self.permutation:
                perm = np.random.default_rng([self.seed, t]).permutation(2 * n)
                data = base
            else:
                theta_p, theta_q = self._null_draw(t)
                data = self._features(
                    np.concatenate([theta_p, theta_q]), np.concatenate([self.x, self.x])
                )
                perm = np.arange(2 * n)
            y = np.ones(2 * n, np.float32)
            y[perm[:n]] = 0.0
            for train in folds:
                fold_rows = np.concatenate([perm[train], perm[n + train]])
                for e in range(self.num_ensemble):
                    xs.append(data)
                    labels.append(y)
                    rows.append(fold_rows)
                    # sbi seeds classifiers only when a seed is given (ensembles offset it)
                    base_seed = seed if seed is not None else 1000 * (t + 1) + self.seed
                    seeds.append(base_seed + e)
        x_all = base if shared else np.stack(xs)
        key = jax.random.PRNGKey(self.seed if seed is None else seed)
        key = jax.random.fold_in(key, 0 if trials[0] < 0 else 1)
        return train_many(
            self.mlp_config,
            x_all,
            np.stack(labels),
            rows,
            init_seeds=seeds,
            key=key,
            val_seed=self.seed,
        )

    # -- training ---------------------------------------------------------------------

    def train_on_observed_data(self, seed: int | None = None) -> LC2ST:
        """Trains the classifier(s) on the calibration data (labels 0 = q, 1 = joint)."""
        self.trained_clfs = self._train([-1], seed)
        return self

    def train_under_null_hypothesis(self) -> LC2ST:
        """Trains the H null classifiers at once (permuted labels, or base-distribution draws)."""
        if self.trained_clfs_null is not None:
            raise InputError(
                "train_under_null_hypothesis: null classifiers are already trained; make a "
                "new instance to retrain"
            )
        self.trained_clfs_null = self._train(list(range(self.num_trials_null)), None)
        return self

    def train(self) -> LC2ST:
        """Both trainings (observed and null) in one run of 1 + H classifiers (one compile)."""
        if self.trained_clfs_null is not None:
            return self.train_on_observed_data()
        if not self.permutation:  # base-distribution draws differ per trial: separate data
            return self.train_on_observed_data().train_under_null_hypothesis()
        both = self._train([-1, *range(self.num_trials_null)], None)
        k = self.num_folds * self.num_ensemble
        self.trained_clfs, self.trained_clfs_null = both.take(0, k), both.take(k, None)
        return self

    # -- evaluation -------------------------------------------------------------------

    def _probs(self, trained: TrainedMLPs, theta_o: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        """[trials, folds, N_v] class-0 probabilities (ensemble members averaged)."""
        feats = self._features(theta_o, np.broadcast_to(x_o, (theta_o.shape[0], x_o.shape[1])))
        p0 = 1.0 - np.asarray(trained.prob_class1(feats))
        return p0.reshape(-1, self.num_folds, self.num_ensemble, feats.shape[0]).mean(axis=2)

    def _eval_points(
        self, trained: TrainedMLPs | None, untrained: str, theta_o, x_o
    ) -> tuple[np.ndarray, np.ndarray]:
        """theta_o [N_v, d] and x_o [1, dim_x], checked, for the classifiers `trained` (an
        InputError saying `untrained` when they are not trained yet)."""
        if trained is None:
            raise InputError(untrained)
        theta_o = as_samples(theta_o, "theta_o")
        x_o = as_samples(np.reshape(to_numpy(x_o), (1, -1)), "x_o")
        if theta_o.shape[1] != self.dim_theta or x_o.shape[1] != self.x.shape[1]:
            raise InputError(
                f"theta_o / x_o: got dims {theta_o.shape[1]} / {x_o.shape[1]}; allowed: "
                f"{self.dim_theta} / {self.x.shape[1]}"
            )
        return theta_o, x_o

    @staticmethod
    def _scores(probs: np.ndarray) -> np.ndarray:
        return np.mean((probs - 0.5) ** 2, axis=-1).mean(axis=-1)

    def get_statistic_on_observed_data(self, theta_o, x_o) -> float:
        """T at x_o: mean squared distance of the class-0 probabilities on theta_o to 1/2."""
        return float(self._observed(theta_o, x_o).scores[0])

    def get_scores(self, theta_o, x_o) -> LC2STScores:
        """Observed statistic and probabilities at (theta_o ~ q(.|x_o), x_o)."""
        return self._observed(theta_o, x_o)

    def _observed(self, theta_o, x_o) -> LC2STScores:
        untrained = "get_scores: call train_on_observed_data() first"
        theta_o, x_o = self._eval_points(self.trained_clfs, untrained, theta_o, x_o)
        probs = self._probs(self.trained_clfs, theta_o, x_o)
        return LC2STScores(self._scores(probs), probs.mean(axis=1)[0])

    def get_statistics_under_null_hypothesis(self, theta_o, x_o) -> LC2STScores:
        """[H] null statistics (and probabilities [H, N_v]) at x_o."""
        return self._null(theta_o, x_o)

    def _null(self, theta_o, x_o) -> LC2STScores:
        untrained = "get_statistics_under_null_hypothesis: train the null first"
        theta_o, x_o = self._eval_points(self.trained_clfs_null, untrained, theta_o, x_o)
        probs = self._null_probs(theta_o, x_o)
        return LC2STScores(self._scores(probs), probs.mean(axis=1))

    def _null_probs(self, theta_o: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        return self._probs(self.trained_clfs_null, theta_o, x_o)

    def p_value(self, theta_o, x_o, method: PValue | None = None) -> float:
        """p-value at x_o ('sbi' by default; 'exact' = (1 + #) / (1 + H))."""
        return self._p_value(theta_o, x_o, method)

    def _p_value(self, theta_o, x_o, method: PValue | None) -> float:
        method = method or self.p_value_method
        check_one_of("method", method, ("sbi", "exact"))
        stat = float(self._observed(theta_o, x_o).scores[0])
        return p_value_from(stat, self._null(theta_o, x_o).scores, method)

    def reject_test(self, theta_o, x_o, alpha: float = 0.05, method: PValue | None = None) -> bool:
        """True when the p-value at x_o is below alpha (q rejected at x_o)."""
        check_in_range("alpha", alpha, 0.0, 1.0)
        return bool(self._p_value(theta_o, x_o, method) < alpha)

    def pp_plot_data(self, theta_o, x_o, alpha: float = 0.05, num_levels: int = 100) -> PPPlotData:
        """PP-plot of the probabilities at x_o and the null's (1 - alpha) confidence band."""
        return self._pp(theta_o, x_o, alpha, num_levels)

    def _pp(self, theta_o, x_o, alpha: float, num_levels: int) -> PPPlotData:
        check_in_range("alpha", alpha, 0.0, 1.0)
        levels = np.linspace(0.0, 1.0, num_levels)
        obs = self._observed(theta_o, x_o).probabilities
        null = self._null(theta_o, x_o).probabilities
        cdf = lambda p: np.mean(p[..., None] <= levels, axis=-2)  # noqa: E731
        null_cdf = cdf(null)
        return PPPlotData(
            levels=levels,
            observed=cdf(obs),
            null_low=np.quantile(null_cdf, alpha / 2, axis=0),
            null_high=np.quantile(null_cdf, 1 - alpha / 2, axis=0),
            alpha=alpha,
        )


class LC2ST_NF(LC2ST):  # noqa: N801 (the paper's and sbi's name)
    """L-C2ST-NF: the test in a normalizing flow's base space, null from base draws.

    flow_inverse_transform(theta, x) -> z maps parameters to the flow's base space (called
    with the arrays or tensors as given). flow_base_dist: None for N(0, I), or an object
    with `sample(shape)` (a torch distribution). Null classifiers depend only on xs and the
    base distribution: pass `trained_clfs_null` from another instance to reuse them.
    """

    def __init__(
        self,
        prior_samples,
        xs,
        posterior_samples,
        flow_inverse_transform,
        flow_base_dist: Any = None,
        *,
        num_eval: int = 10_000,
        trained_clfs_null: TrainedMLPs | None = None,
        **kwargs,
    ):
        check_at_least("num_eval", num_eval, 1)
        z_prior = to_numpy(flow_inverse_transform(prior_samples, xs))
        z_post = to_numpy(flow_inverse_transform(posterior_samples, xs))
        kwargs["permutation"] = False
        super().__init__(z_prior, xs, z_post, **kwargs)
        self.flow_base_dist = flow_base_dist
        if trained_clfs_null is not None:
            self._check_reusable(trained_clfs_null)
        self.trained_clfs_null = trained_clfs_null
        self.theta_o = self._base(num_eval, np.random.default_rng([self.seed, 10**6]))

    def _check_reusable(self, trained: TrainedMLPs) -> None:
        """Reused null classifiers must match this test's trials, folds, ensemble and inputs."""
        expected = self.num_trials_null * self.num_folds * self.num_ensemble
        models = int(np.asarray(trained.n_iter).shape[0])
        in_dim = int(trained.params[0][0].shape[1])
        if models != expected or in_dim != self.dim_theta + self.x.shape[1]:
            raise InputError(
                f"trained_clfs_null: got {models} classifiers on {in_dim} inputs; allowed: "
                f"{expected} (num_trials_null x num_folds x num_ensemble) on "
                f"{self.dim_theta + self.x.shape[1]} inputs (d_theta + d_x)"
            )

    def _base(self, num: int, rng: np.random.Generator) -> np.ndarray:
        if self.flow_base_dist is None:
            return rng.standard_normal((num, self.dim_theta)).astype(np.float32)
        draw = to_numpy(self.flow_base_dist.sample((num,)))
        return draw.reshape(num, self.dim_theta)

    def _null_draw(self, trial: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, trial])
        n = self.x.shape[0]
        return self._base(n, rng), self._base(n, rng)

    def _null_probs(self, theta_o: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        # sbi evaluates each null classifier on its own fresh base draws
        h = self.num_trials_null
        rng = np.random.default_rng([self.seed, 2 * 10**6])
        evals = np.stack([self._base(theta_o.shape[0], rng) for _ in range(h)])
        rows = evals.reshape(-1, self.dim_theta)
        feats = self._features(rows, np.broadcast_to(x_o, (rows.shape[0], x_o.shape[1])))
        feats = feats.reshape(h, -1, feats.shape[1])
        feats = np.repeat(feats, self.num_folds * self.num_ensemble, axis=0)
        p0 = 1.0 - np.asarray(self.trained_clfs_null.prob_class1(feats))
        return p0.reshape(h, self.num_folds, self.num_ensemble, -1).mean(axis=2)

    def get_scores(self, x_o) -> LC2STScores:  # type: ignore[override]
        """Observed statistic and probabilities at x_o (on the base draws)."""
        return self._observed(self.theta_o, x_o)

    def get_statistic_on_observed_data(self, x_o) -> float:  # type: ignore[override]
        """T at x_o, evaluated on `num_eval` base-distribution draws."""
        return float(self._observed(self.theta_o, x_o).scores[0])

    def get_statistics_under_null_hypothesis(self, x_o) -> LC2STScores:  # type: ignore[override]
        """[H] null statistics at x_o (each null classifier on fresh base draws)."""
        return self._null(self.theta_o, x_o)

    def p_value(self, x_o, method: PValue | None = None) -> float:  # type: ignore[override]
        """p-value at x_o ('sbi' by default; 'exact' = (1 + #) / (1 + H))."""
        return self._p_value(self.theta_o, x_o, method)

    def reject_test(self, x_o, alpha: float = 0.05, method: PValue | None = None) -> bool:  # type: ignore[override]
        """True when the p-value at x_o is below alpha."""
        check_in_range("alpha", alpha, 0.0, 1.0)
        return bool(self._p_value(self.theta_o, x_o, method) < alpha)

    def pp_plot_data(self, x_o, alpha: float = 0.05, num_levels: int = 100) -> PPPlotData:  # type: ignore[override]
        """PP-plot data at x_o with the null band."""
        return self._pp(self.theta_o, x_o, alpha, num_levels)


def plot_pp(data: PPPlotData, ax=None, label: str = "L-C2ST"):
    """Draws a PP-plot (matplotlib) with the null band; returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    ax.fill_between(
        data.levels,
        data.null_low,
        data.null_high,
        color="grey",
        alpha=0.3,
        label=f"{100 * (1 - data.alpha):.0f}% band under H0",
    )
    ax.plot(data.levels, data.levels * 0 + (data.levels >= 0.5), "k--", lw=1, label="H0")
    ax.plot(data.levels, data.observed, label=label)
    ax.set_xlabel("threshold on P(class 0)")
    ax.set_ylabel("empirical CDF")
    ax.legend(loc="upper left")
    return ax


def _lc2st_at_observation(evidence) -> dict[str, float]:
    """L-C2ST at a problem's x_o from its held-out prior simulations.

    Options (`lc2st`): `seed` (draws of q at the simulations; seed + 1 for its draws at
    x_o), `num_samples` at x_o, `num_trials_null`.
    """
    options = {"seed": 0, "num_samples": 10_000, "num_trials_null": 100}
    options.update(evidence.options.get("lc2st", {}))
    theta, xs = evidence["prior_simulations"]
    post, x_o = evidence["amortized_posterior"], evidence["observation"]
    q_samples = post.sample_batched(xs, seed=options["seed"])
    theta_o = post.sample(x_o, options["num_samples"], seed=options["seed"] + 1)
    result = lc2st_test(
        theta, xs, q_samples, theta_o, x_o, num_trials_null=options["num_trials_null"]
    )
    return {f"lc2st_{k}": v for k, v in result.items()}


@register(
    "lc2st",
    ("prior_simulations", "amortized_posterior", "observation"),
    _lc2st_at_observation,
    ("lc2st_statistic", "lc2st_p_value", "lc2st_reject"),
)
def lc2st_test(
    prior_samples,
    xs,
    posterior_samples,
    theta_o,
    x_o,
    *,
    alpha: float = 0.05,
    **kwargs,
) -> dict[str, float]:
    """Local C2ST at x_o: statistic, p-value ('sbi' default) and rejection at alpha."""
    test = LC2ST(prior_samples, xs, posterior_samples, **kwargs).train()
    stat = test.get_statistic_on_observed_data(theta_o, x_o)
    null = test.get_statistics_under_null_hypothesis(theta_o, x_o).scores
    p = p_value_from(stat, null, test.p_value_method)
    return {"statistic": stat, "p_value": p, "reject": float(p < alpha)}
