"""Local HPD (Zhao, Dalmasso, Izbicki and Lee, UAI 2021), the baseline of the L-C2ST paper.

The HPD value of a calibration pair (theta_i, x_i) ~ p(theta, x) under an estimator q is
the q-mass of the region where q(. | x_i) is higher than at theta_i: the fraction of L
draws of q(. | x_i) with a higher log-density. When q = p these values are Uniform(0, 1)
at every x. Local HPD regresses 1[HPD <= level] on x for each of `num_levels` levels
(one binary classifier a level) and tests at x_o whether the fitted coverage r(x_o) is the
level itself: T(x_o) = mean over levels of (r_level(x_o) - level)^2. Its null: the same
regressions on Uniform(0, 1) values in place of the HPD values (H trials). Like L-C2ST it
is amortized (trained once per estimator, evaluated at any x_o) and its null depends only
on the calibration x, so it is shared by every estimator evaluated on the same x.

As the authors' code (JuliaLinhart/lc2st, lc2st/lhpd.py): levels are
linspace(0, max(HPD values) - 0.001, num_levels) for each training set (so the top level
has both classes), the statistic is the mean squared distance above, and the p-value is
the share of null statistics above the observed one. Where ours differs: all (1 + H) x
levels classifiers train at once in the vmapped JAX MLP of `testbed.metrics.mlp` (theirs:
scikit-learn's MLPClassifier(alpha=0, max_iter=25000) one at a time; ours by default has
the same settings: one hidden layer of 100, no weight decay, up to 25,000 epochs, stopping
as scikit-learn's when the training loss stalls); the null's uniform draws come from
numpy's Generator seeded by (seed, trial), not scipy's `uniform().rvs(random_state=t)`;
an 'exact' p-value (1 + #{T_null >= T}) / (1 + H) is offered beside theirs.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from testbed.compilation_cache import with_library_cache
from testbed.config import check_at_least, check_in_range, check_one_of
from testbed.errors import InputError
from testbed.metrics.inputs import as_samples, to_numpy
from testbed.metrics.lc2st import PValue, p_value_from
from testbed.metrics.mlp import MLPConfig, TrainedMLPs, train_many

AUTHORS_MLP = MLPConfig(hidden_layers=(100,), alpha=0.0, max_iter=25_000)


def hpd_values(log_prob_truth, log_prob_draws) -> np.ndarray:
    """[N] HPD values: the share of the L draws of q(. | x_i) whose log-density exceeds
    the truth's, from log q(theta_i | x_i) [N] and log q(draw_l | x_i) [L, N]."""
    truth = np.asarray(log_prob_truth, np.float64).reshape(-1)
    draws = np.asarray(log_prob_draws, np.float64)
    if draws.ndim != 2 or draws.shape[1] != truth.shape[0]:
        raise InputError(
            f"log_prob_draws: got shape {draws.shape} for {truth.shape[0]} truths; "
            f"allowed: [L, {truth.shape[0]}] (L draws at each calibration x)"
        )
    if not (np.all(np.isfinite(truth)) and np.all(~np.isnan(draws))):
        raise InputError(
            "log_prob_truth / log_prob_draws: got NaN or infinite values; "
            "allowed: finite log-densities (draws may be -inf)"
        )
    return np.mean(draws > truth[None, :], axis=0)


def levels_for(values: np.ndarray, num_levels: int) -> np.ndarray:
    """The authors' levels: linspace(0, max(values) - 0.001, num_levels)."""
    return np.linspace(0.0, float(np.max(values)) - 0.001, num_levels)


@dataclasses.dataclass(frozen=True)
class LHPDScores:
    """Statistics (one per trial, or one) and the fitted coverages r_level(x_o)."""

    scores: np.ndarray  # [trials]
    coverage: np.ndarray  # [trials, levels]
    levels: np.ndarray  # [trials, levels]


class LocalHPD:
    """Local HPD test of an estimator from calibration x [N, d_x] and HPD values [N].

    `hpd`: the estimator's HPD values at the calibration pairs (`hpd_values`). Train with
    `train()` (observed and null classifiers in one run), then evaluate at any x_o.
    """

    def __init__(
        self,
        xs,
        hpd,
        *,
        num_levels: int = 11,
        seed: int = 1,
        mlp_config: MLPConfig | None = None,
        num_trials_null: int = 100,
        p_value_method: PValue = "sbi",
        trained_null: tuple[TrainedMLPs, np.ndarray] | None = None,
    ):
        x = to_numpy(xs)
        x = x[:, None] if x.ndim == 1 else x
        values = np.asarray(to_numpy(hpd), np.float64).reshape(-1)
        if x.ndim != 2 or x.shape[0] != values.shape[0]:
            raise InputError(
                f"xs / hpd: got shapes {x.shape} and {values.shape}; allowed: [N, d_x] and "
                "[N] (one HPD value a calibration x)"
            )
        if not np.all((values >= 0) & (values <= 1)):
            raise InputError("hpd: got values outside [0, 1] or NaN; allowed: HPD values in [0, 1]")
        as_samples(x, "xs", min_rows=2)
        check_at_least("num_levels", num_levels, 2)
        check_at_least("num_trials_null", num_trials_null, 1)
        check_one_of("p_value_method", p_value_method, ("sbi", "exact"))
        self.x = x.astype(np.float32)
        self.hpd = values
        self.num_levels = num_levels
        self.seed = seed
        self.mlp_config = mlp_config or AUTHORS_MLP
        self.num_trials_null = num_trials_null
        self.p_value_method = p_value_method
        if trained_null is not None:
            models = int(np.asarray(trained_null[0].n_iter).shape[0])
            if models != num_trials_null * num_levels:
                raise InputError(
                    f"trained_null: got {models} classifiers; allowed: num_trials_null x "
                    f"num_levels = {num_trials_null * num_levels}"
                )
        self.trained_null = trained_null  # (models [H * levels], levels [H, levels])
        self.trained: tuple[TrainedMLPs, np.ndarray] | None = None  # the estimator's

    def _trial_values(self, trial: int) -> np.ndarray:
        """HPD values of trial -1 (the estimator's) or of null trial t (uniform draws)."""
        if trial < 0:
            return self.hpd
        return np.random.default_rng([self.seed, trial]).uniform(size=self.hpd.shape[0])

    @with_library_cache
    def _fit(self, trials: list[int]) -> tuple[TrainedMLPs, np.ndarray]:
        """Classifiers of `trials` (-1: the estimator's HPD values, t >= 0: null trial t),
        levels each, trained at once; and their levels [trials, levels]."""
        labels, levels = [], []
        for t in trials:
            values = self._trial_values(t)
            lv = levels_for(values, self.num_levels)
            levels.append(lv)
            labels.extend((values <= a).astype(np.float32) for a in lv)
        rows = [np.arange(self.x.shape[0])] * len(labels)
        # each (trial, level) classifier starts from its own weights
        seeds = [self.seed + 1000 * (t + 1) + j for t in trials for j in range(self.num_levels)]
        key = jax.random.fold_in(jax.random.PRNGKey(self.seed), 2 if trials[0] < 0 else 3)
        trained = train_many(
            self.mlp_config, self.x, np.stack(labels), rows, init_seeds=seeds, key=key,
            val_seed=self.seed,
        )  # fmt: skip
        return trained, np.stack(levels)

    def train_null(self) -> tuple[TrainedMLPs, np.ndarray]:
        """The H null regressions (they depend on the calibration x alone: pass them as
        `trained_null` to the test of another estimator on the same x)."""
        if self.trained_null is None:
            self.trained_null = self._fit(list(range(self.num_trials_null)))
        return self.trained_null

    def train(self) -> LocalHPD:
        """Trains the estimator's regressions (and the null's, unless given)."""
        if self.trained is not None:
            raise InputError("train: already trained; make a new instance to retrain")
        self.train_null()
        self.trained = self._fit([-1])
        return self

    def _coverage(self, x_o) -> tuple[np.ndarray, np.ndarray]:
        """[(1 + H), levels] fitted coverage P(HPD <= level | x_o) of every classifier
        (row 0 the estimator's) and the levels."""
        if self.trained is None:
            raise InputError("x_o: the classifiers are not trained; call train() first")
        x_o = as_samples(np.reshape(to_numpy(x_o), (1, -1)), "x_o")
        if x_o.shape[1] != self.x.shape[1]:
            raise InputError(
                f"x_o: got {x_o.size} values; allowed: one observation of dim {self.x.shape[1]}"
            )
        parts = [self.trained, self.trained_null]
        probs = [np.asarray(m.prob_class1(x_o.astype(np.float32)))[:, 0] for m, _ in parts]
        cov = np.concatenate(probs).reshape(-1, self.num_levels)
        return cov, np.concatenate([lv for _, lv in parts])

    def scores(self, x_o) -> LHPDScores:
        """Statistics at x_o of the observed (row 0) and the H null regressions."""
        cov, levels = self._coverage(x_o)
        stats = np.mean((cov - levels) ** 2, axis=1)
        return LHPDScores(stats, cov, levels)

    def get_statistic_on_observed_data(self, x_o) -> float:
        """T at x_o: mean over levels of (fitted coverage - level)^2."""
        return float(self.scores(x_o).scores[0])

    def get_statistics_under_null_hypothesis(self, x_o) -> np.ndarray:
        """[H] null statistics at x_o."""
        return self.scores(x_o).scores[1:]

    def p_value(self, x_o, method: PValue | None = None) -> float:
        """p-value at x_o ('sbi': share of null statistics above T, as the authors';
        'exact': (1 + #{T_null >= T}) / (1 + H))."""
        method = method or self.p_value_method
        check_one_of("method", method, ("sbi", "exact"))
        s = self.scores(x_o).scores
        return p_value_from(float(s[0]), s[1:], method)

    def reject_test(self, x_o, alpha: float = 0.05, method: PValue | None = None) -> bool:
        """True when the p-value at x_o is below alpha."""
        check_in_range("alpha", alpha, 0.0, 1.0)
        return bool(self.p_value(x_o, method) < alpha)

    def pp_plot_data(self, x_o, alpha: float = 0.05) -> dict[str, np.ndarray]:
        """The per-level regression at x_o as a PP-plot: levels, fitted coverage, and the
        null's alpha/2 and 1 - alpha/2 quantiles of the coverage at each level."""
        check_in_range("alpha", alpha, 0.0, 1.0)
        s = self.scores(x_o)
        # each null trial has levels of its own: its coverage read at the estimator's levels
        null = np.stack(
            [np.interp(s.levels[0], lv, cov) for lv, cov in zip(s.levels[1:], s.coverage[1:])]
        )
        return {
            "levels": s.levels[0],
            "coverage": s.coverage[0],
            "null_low": np.quantile(null, alpha / 2, axis=0),
            "null_high": np.quantile(null, 1 - alpha / 2, axis=0),
        }


def plot_lhpd(data: dict[str, np.ndarray], ax=None, label: str = "local HPD"):
    """Draws the local-HPD PP-plot (fitted coverage against level, null band); returns ax."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    lv = data["levels"]
    ax.fill_between(lv, data["null_low"], data["null_high"], color="grey", alpha=0.3,
                    label="band under H0")  # fmt: skip
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="H0")
    ax.plot(lv, data["coverage"], "o-", ms=3, label=label)
    ax.set_xlabel("level")
    ax.set_ylabel("P(HPD <= level | x_o)")
    ax.legend(loc="upper left")
    return ax
