"""`ConjugateProblem`: data from a conjugate model, scored against its exact posterior.

The agent gets the data and the model (prior + likelihood as JAX log densities, see
`model.py`) and returns a posterior estimate. Scores: exact or Monte-Carlo KL, one-sample
tests against the exact posterior (PIT/KS, Mahalanobis chi-square, ddKS, C2ST when
available; an MCMC agent's chains thinned to their effective sample size first, so that a
correct sampler is rejected at the tests' level) and the joint posterior-predictive KL
over tau future observations, with the exact log joint predictive as the truth.
Diagnostics an agent attaches (`predictive.diagnostics`, e.g. R-hat and ESS from NUTS) are
copied into the Quality.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from generative.conjugate.model import model_spec
from generative.conjugate.task import ConjugateTask
from testbed.base import Data, GaussianPosterior
from testbed.errors import InputError
from testbed.evaluation import MISSING, Evidence, EvidenceScoring
from testbed.joint_kl import joint_kl_summary, mixture_log_likelihood
from testbed.metrics.c2st import c2st, c2st_pvalue
from testbed.metrics.ddks import ddks_against
from testbed.metrics.one_sample import gaussian_kl, mahalanobis_chi2, mc_kl_against, pit_ks
from testbed.metrics.registry import register
from testbed.metrics.thinning import thin_to_ess
from testbed.model import ModelKnowledge
from testbed.posterior_adapter import as_posterior

MAX_DDKS_DIM = 12


class ExactPosterior:
    """The true posterior as a `PosteriorEstimate` (the exact agent's predictive: the floor).

    For any x_o (the flattened data of the problem's design) it updates the prior exactly.
    Gaussian posteriors also expose `mean` and `cov` (exact KL scores use them).
    """

    def __init__(self, family, inputs: np.ndarray, y: np.ndarray):
        self.family, self.inputs = family, inputs
        self._x_o = np.asarray(y, np.float64).reshape(-1)
        self._posterior = family.posterior(inputs, y)
        if self._posterior.gaussian:
            self.mean, self.cov = self._posterior.mean, self._posterior.cov

    @property
    def posterior(self):
        """The exact posterior distribution at the problem's data."""
        return self._posterior

    def _for(self, x_o):
        x_o = np.asarray(x_o, np.float64).reshape(-1)
        if x_o.shape == self._x_o.shape and np.array_equal(x_o, self._x_o):
            return self._posterior
        if x_o.size != self._x_o.size:
            raise InputError(f"x_o: got {x_o.size} values; allowed: {self._x_o.size}")
        return self.family.posterior(self.inputs, x_o.reshape(self.inputs.shape[0], -1))

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        return self._for(x_o).sample(num_samples, seed)

    def log_prob(self, theta, x_o) -> np.ndarray:
        return self._for(x_o).log_prob(np.atleast_2d(theta))


@dataclasses.dataclass
class ConjugateProblem(EvidenceScoring):
    """`num_train` observations from `family` at `true_theta` (or a prior draw), seeded."""

    offers = frozenset(
        {
            "posterior",
            "posterior_samples",
            "posterior_log_prob",
            "gaussian_posterior",
            "exact_posterior",
            "gaussian_exact_posterior",
            "exact_predictive",
            "reference_samples",
            "test_samples",
        }
    )
    metrics = ("conjugate_posterior", "conjugate_predictive")

    name: str
    family: Any
    num_train: int
    seed: int
    true_theta: np.ndarray | None = None
    tau: int = 10
    num_samples: int = 1000
    num_null: int = 100
    num_test_batches: int = 1000
    alpha: float = 0.05
    use_c2st: bool = True  # C2ST trains classifiers (seconds per call): off for many trials

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        theta = (
            self.family.prior().sample(1, rng)[0]
            if self.true_theta is None
            else np.asarray(self.true_theta, np.float64)
        )
        self.theta = theta
        self.x = self.family.sample_inputs(self.num_train, rng)
        self.y = self.family.simulate(theta[None], self.x, rng)[0]
        self.posterior = self.family.posterior(self.x, self.y)
        self.updated = self.family.update(self.x, self.y)

    @property
    def train_data(self) -> Data:
        return Data(x=self.x, y=self.y)

    @property
    def x_o(self) -> np.ndarray:
        return self.y.reshape(-1)

    @property
    def prior_knowledge(self) -> ModelKnowledge:
        return ModelKnowledge(
            input_dim=self.x.shape[1],
            num_train=self.num_train,
            tau=self.tau,
            model=model_spec(self.family),
        )

    @property
    def task(self) -> ConjugateTask:
        return ConjugateTask(f"conjugate/{self.name}", self.family, self.x, seed=self.seed)

    def exact_posterior(self) -> ExactPosterior:
        return ExactPosterior(self.family, self.x, self.y)

    # ---- scores --------------------------------------------------------------------------

    def evidence(self, predictive: Any) -> Evidence:
        """The agent's posterior (any shape, adapted) and its draws at x_o; the exact
        posterior and joint predictive; the agent's own diagnostics (R-hat, ESS, ...)."""
        dim = self.family.dim

        def posterior(_):
            return as_posterior(predictive, dim_theta=dim)

        def log_prob(ev):
            post = ev["posterior"]
            return (lambda theta: post.log_prob(theta, self.x_o)) if post.has_log_prob else MISSING

        evidence = Evidence(
            {
                "posterior": posterior,
                "posterior_samples": lambda ev: ev["posterior"].sample(
                    self.x_o, self.num_samples, self.seed + 1
                ),
                "posterior_log_prob": log_prob,
                "exact_posterior": lambda _: self.posterior,
                "gaussian_exact_posterior": lambda _: (
                    self.posterior if self.posterior.gaussian else MISSING
                ),
                "gaussian_posterior": lambda _: (
                    predictive if isinstance(predictive, GaussianPosterior) else MISSING
                ),
                "exact_predictive": lambda _: JointPredictive(self),
                "reference_samples": lambda _: self.posterior.sample(
                    self.num_samples, np.random.default_rng((self.seed, 4))
                ),
                "test_samples": lambda ev: self.test_samples(predictive, ev["posterior_samples"]),
            },
            options={"conjugate_posterior": {**self.posterior_options(), "seed": self.seed}},
        )
        evidence.diagnostics.update(getattr(predictive, "diagnostics", None) or {})
        return evidence

    def test_samples(self, predictive: Any, samples: np.ndarray) -> tuple[np.ndarray, int]:
        """(the draws the exact tests read, the thinning step): an agent's MCMC chains
        (`predictive.chains` [chains, draws, dim]) thinned by `independent_rows`; `samples`
        (step 1) for any other agent, whose draws are independent."""
        chains = getattr(predictive, "chains", None)
        if chains is None or np.ndim(chains) != 3 or np.shape(chains)[1] < 4:
            return samples, 1
        return self.independent_rows(chains, self.num_samples, self.seed + 1)

    def independent_rows(self, chains: np.ndarray, num: int, seed: int) -> tuple[np.ndarray, int]:
        """(at most `num` rows of chains [chains, draws, dim] thinned to their ESS, the
        step): the smallest ESS over the coordinates and the exact posterior's log density
        along the chains (a Mahalanobis distance mixes slower than any coordinate); more
        than `num` rows are subsampled without replacement (`seed`)."""
        chains = np.asarray(chains, np.float64)
        log_p = self.posterior.log_prob(chains.reshape(-1, chains.shape[-1]))
        series = log_p.reshape(chains.shape[:2]) if np.all(np.isfinite(log_p)) else None
        rows, step = thin_to_ess(chains, series)
        if rows.shape[0] > num:
            rows = rows[np.random.default_rng(seed).choice(rows.shape[0], num, replace=False)]
        return rows, step

    def posterior_options(self) -> dict[str, Any]:
        """The settings of `posterior_scores` on this problem."""
        num_null = self.num_null if self.family.dim <= MAX_DDKS_DIM else 0
        return {"alpha": self.alpha, "num_null": num_null, "use_c2st": self.use_c2st}

    def posterior_scores(self, samples: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        """`posterior_scores` of samples (of an agent with no density nor Gaussian form)
        against this problem's exact posterior; `rng` draws the null and reference sets."""
        return posterior_scores(self.posterior, samples, rng, **self.posterior_options())


def posterior_scores(
    post: Any,
    samples: np.ndarray,
    rng: np.random.Generator,
    *,
    log_q: Any = None,
    gaussian: GaussianPosterior | None = None,
    alpha: float = 0.05,
    num_null: int = 100,
    use_c2st: bool = True,
    test_samples: np.ndarray | None = None,
    thinning: int = 1,
) -> dict[str, float]:
    """Scores of an agent's posterior samples [n, d] against the closed-form posterior.

    Moment errors; Gaussian KL (of the agent's own mean and cov when it is `gaussian`,
    else of the samples' moments) and the Mahalanobis test for Gaussian posteriors; the
    fraction outside the support; KL(q || p) when the agent's log density `log_q` is
    given; PIT/KS; ddKS (`num_null` null sets, 0: none) and C2ST with its binomial
    p-value. The tests (Mahalanobis, PIT/KS, ddKS, C2ST) read `test_samples` when given
    (draws of MCMC chains thinned `thinning`-fold to be about independent), else
    `samples`; `tests_num_draws` and `tests_thinning` say which. `rng` draws the null
    sets, then C2ST's reference, in that order.
    """
    tested = samples if test_samples is None else np.asarray(test_samples, np.float64)
    out = {"tests_num_draws": float(tested.shape[0]), "tests_thinning": float(thinning)}
    sd_p = np.sqrt(post.var)
    out["mean_error_sd"] = np.max(np.abs(samples.mean(0) - post.mean) / sd_p)
    out["log_std_ratio"] = np.max(np.abs(np.log(samples.std(0, ddof=1) / sd_p)))
    if post.gaussian:
        if gaussian is not None:
            out["kl_gaussian"] = gaussian_kl(gaussian.mean, gaussian.cov, post.mean, post.cov)
        else:
            cov_q = np.atleast_2d(np.cov(samples, rowvar=False))
            out["kl_gaussian_moments"] = gaussian_kl(samples.mean(0), cov_q, post.mean, post.cov)
        m = mahalanobis_chi2(tested, post.mean, post.cov)
        out["mahalanobis_pvalue"] = m["p_value"]
        out["mahalanobis_reject"] = m["p_value"] < alpha
        out["mahalanobis_mean_ratio"] = m["mean_ratio"]
    out["outside_support_fraction"] = 1.0 - post.in_support(samples).mean()
    if log_q is not None:
        kl = mc_kl_against(post, log_q(samples), samples)
        out["kl_q_p"], out["kl_q_p_stderr"] = kl["estimate"], kl["stderr"]
    pit = pit_ks(post.marginal_cdf(tested))
    out["pit_ks_pvalue"], out["pit_ks_statistic"] = pit["p_value"], pit["statistic"]
    out["pit_ks_reject"] = pit["p_value"] < alpha
    if num_null > 0:
        res = ddks_against(post, tested, rng, num_null)
        out["ddks_statistic"] = res["statistic"]
        out["ddks_pvalue"] = res["p_value"]
        out["ddks_reject"] = res["p_value"] < alpha
    if use_c2st:
        reference = post.sample(tested.shape[0], rng)
        score = c2st(reference, tested)
        p_value = c2st_pvalue(score, reference.shape[0], tested.shape[0])
        out.update(c2st=score, c2st_pvalue=p_value, c2st_reject=p_value < alpha)
    return out


class JointPredictive:
    """The exact joint predictive of tau future observations after the problem's data: the
    `exact_predictive` evidence of a conjugate problem."""

    def __init__(self, problem: ConjugateProblem):
        self.family, self.posterior, self.updated = (
            problem.family,
            problem.posterior,
            problem.updated,
        )
        self.tau, self.num, self.seed = problem.tau, problem.num_test_batches, problem.seed

    def scores(self, samples: np.ndarray, gaussian: GaussianPosterior | None) -> dict[str, float]:
        """KL between the exact and the agent's joint predictive of tau future observations.

        joint_kl: E_y[log p(y_1:tau | data) - log (1/M) sum_m prod_t p(y_t | theta_m)] over
        `num_test_batches` futures y drawn from the exact predictive (MC over y; the exact
        log joint predictive has no estimation noise; the testbed's one joint-KL summary and
        mixture); joint_kl_stderr is its standard error. joint_kl_gaussian: the same KL in
        closed form when the family is linear-Gaussian and the agent's posterior is
        Gaussian. joint_kl_exact: by exact enumeration over the sufficient statistic
        (beta-binomial, gamma-Poisson), for the agent's mixture. The agent's predictive
        mixes its draws inside the parameter space only (a likelihood is undefined outside;
        `outside_support_fraction` reports how many were left out).
        """
        samples = samples[self.posterior.in_support(samples)]
        if samples.shape[0] == 0:
            return {"joint_kl": np.nan, "joint_kl_stderr": np.nan}
        fam, tau = self.family, self.tau
        x_f, y_f, log_p = self.futures()
        out = self.mixture_kl(fam, samples, x_f, y_f, log_p)
        if hasattr(self.updated, "sum_statistic_log_pmfs"):  # exact enumeration, no MC over y
            log_p, log_q = self.updated.sum_statistic_log_pmfs(samples, tau)
            out["joint_kl_exact"] = float(np.sum(np.exp(log_p) * (log_p - log_q)))
        if fam.linear_gaussian(x_f[0]) is not None and gaussian is not None:
            designs = x_f[:1] if fam.dim_x == 1 else x_f[:100]
            kls = [self._gaussian_joint_kl(gaussian, x) for x in designs]
            out["joint_kl_gaussian"] = float(np.mean(kls))
        return out

    def futures(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `num_test_batches` futures the joint KL averages over, drawn from the exact
        predictive: inputs x [N, tau, dx], observations y [N, tau, dy] and their exact log
        joint predictive [N]."""
        fam, tau, num = self.family, self.tau, self.num
        rng = np.random.default_rng((self.seed, 3))
        theta_star = self.posterior.sample(num, rng)
        x_f = fam.sample_inputs(num * tau, rng).reshape(num, tau, -1)
        y_f = fam.simulate_batched(theta_star, x_f, rng)
        return x_f, y_f, self.updated.log_evidence(x_f, y_f)

    @staticmethod
    def mixture_kl(family, samples, x_f, y_f, log_p) -> dict[str, float]:
        """KL of the exact joint predictive (log_p of the futures x_f, y_f) from the mixture
        of `family`'s likelihoods at the samples [M, d]: its mean and standard error."""
        log_q = np.concatenate(
            [
                mixture_log_likelihood(
                    family.log_likelihood(
                        samples[:, None, :], x_f[i : i + 50][None], y_f[i : i + 50][None]
                    )
                )
                for i in range(0, x_f.shape[0], 50)
            ]
        )
        summary = joint_kl_summary(log_p, log_q)
        return {"joint_kl": summary["mean"], "joint_kl_stderr": summary["stderr"]}

    def _gaussian_joint_kl(self, gaussian: GaussianPosterior, x: np.ndarray) -> float:
        a, noise = self.family.linear_gaussian(x)
        p_mean, p_cov = a @ self.posterior.mean, a @ self.posterior.cov @ a.T + noise
        q_mean = a @ np.asarray(gaussian.mean, np.float64)
        q_cov = a @ np.asarray(gaussian.cov, np.float64) @ a.T + noise
        return gaussian_kl(p_mean, p_cov, q_mean, q_cov)


def _optional(evidence: Evidence, name: str) -> Any:
    return evidence[name] if evidence.has(name) else None


def _posterior_scores(evidence: Evidence) -> dict[str, float]:
    options = evidence.options["conjugate_posterior"]
    rng = np.random.default_rng((options["seed"], 2))
    settings = {k: v for k, v in options.items() if k != "seed"}
    tested, thinning = _optional(evidence, "test_samples") or (None, 1)
    return posterior_scores(
        evidence["exact_posterior"],
        evidence["posterior_samples"],
        rng,
        log_q=_optional(evidence, "posterior_log_prob"),
        gaussian=_optional(evidence, "gaussian_posterior"),
        test_samples=tested,
        thinning=thinning,
        **settings,
    )


def _joint_predictive_scores(evidence: Evidence) -> dict[str, float]:
    gaussian = _optional(evidence, "gaussian_posterior")
    return evidence["exact_predictive"].scores(evidence["posterior_samples"], gaussian)


register(
    "conjugate_posterior",
    needs=("posterior_samples", "exact_posterior"),
    apply=_posterior_scores,
    gives=(
        "tests_num_draws",
        "tests_thinning",
        "mean_error_sd",
        "log_std_ratio",
        "kl_gaussian",
        "kl_gaussian_moments",
        "mahalanobis_pvalue",
        "mahalanobis_reject",
        "mahalanobis_mean_ratio",
        "outside_support_fraction",
        "kl_q_p",
        "kl_q_p_stderr",
        "pit_ks_pvalue",
        "pit_ks_statistic",
        "pit_ks_reject",
        "ddks_statistic",
        "ddks_pvalue",
        "ddks_reject",
        "c2st",
        "c2st_pvalue",
        "c2st_reject",
    ),
)(posterior_scores)
register(
    "conjugate_predictive",
    needs=("posterior_samples", "exact_predictive"),
    apply=_joint_predictive_scores,
    gives=("joint_kl", "joint_kl_stderr", "joint_kl_exact", "joint_kl_gaussian"),
)(JointPredictive.scores)
