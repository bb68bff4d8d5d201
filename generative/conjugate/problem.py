"""`ConjugateProblem`: data from a conjugate model, scored against its exact posterior.

The agent gets the data and the model (prior + likelihood as JAX log densities, see
`model.py`) and returns a posterior estimate. Scores: exact or Monte-Carlo KL, one-sample
tests against the exact posterior (PIT/KS, Mahalanobis chi-square, ddKS, C2ST when
available) and the joint posterior-predictive KL over tau future observations, with the
exact log joint predictive as the truth. Diagnostics an agent attaches
(`predictive.diagnostics`, e.g. R-hat and ESS from NUTS) are copied into the Quality.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.special import logsumexp

from generative.conjugate.model import model_spec
from generative.conjugate.task import ConjugateTask
from testbed.base import Data, Quality
from testbed.errors import InputError
from testbed.metrics.ddks import ddks_test
from testbed.metrics.one_sample import gaussian_kl, mahalanobis_chi2, mc_kl, pit_ks
from testbed.model import ModelKnowledge

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
        return self._for(x_o).sample(np.random.default_rng(seed), int(num_samples))

    def log_prob(self, theta, x_o) -> np.ndarray:
        return self._for(x_o).log_prob(np.atleast_2d(theta))


def draw(predictive: Any, x_o: np.ndarray, num_samples: int, seed: int, dim: int) -> np.ndarray:
    """[num_samples, dim] finite samples from a PosteriorEstimate (or an sbi-shaped posterior)."""
    try:
        samples = predictive.sample(x_o, num_samples, seed)
    except TypeError:  # sbi's shape: sample(sample_shape, x=...)
        samples = predictive.sample((num_samples,), x=x_o)
    samples = np.asarray(getattr(samples, "detach", lambda: samples)(), np.float64)
    if samples.shape != (num_samples, dim):
        raise InputError(
            f"posterior samples: got shape {samples.shape}; allowed: ({num_samples}, {dim})"
        )
    if not np.all(np.isfinite(samples)):
        raise InputError("posterior samples: got NaN or inf; allowed: finite values")
    return samples


@dataclasses.dataclass
class ConjugateProblem:
    """`num_train` observations from `family` at `true_theta` (or a prior draw), seeded."""

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
            self.family.prior().sample(rng, 1)[0]
            if self.true_theta is None
            else np.asarray(self.true_theta, np.float64)
        )
        self.theta = theta
        self.x = self.family.sample_inputs(rng, self.num_train)
        self.y = self.family.simulate(rng, theta[None], self.x)[0]
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

    def exact_predictive(self) -> ExactPosterior:
        return ExactPosterior(self.family, self.x, self.y)

    # ---- scores --------------------------------------------------------------------------

    def evaluate(self, predictive: Any) -> Quality:
        d = self.family.dim
        samples = draw(predictive, self.x_o, self.num_samples, self.seed + 1, d)
        quality = Quality(self.posterior_scores(predictive, samples))
        quality.update(self.joint_predictive_scores(predictive, samples))
        for key, value in (getattr(predictive, "diagnostics", None) or {}).items():
            quality[key] = value
        return quality

    def posterior_scores(
        self, predictive: Any, samples: np.ndarray, rng: np.random.Generator | None = None
    ) -> dict[str, float]:
        """Scores of posterior samples; `rng` draws the exact null/reference samples (default:
        seeded by the problem, so the same samples always get the same scores)."""
        post, out = self.posterior, {}
        rng = np.random.default_rng((self.seed, 2)) if rng is None else rng
        sd_p = np.sqrt(post.var)
        out["mean_error_sd"] = np.max(np.abs(samples.mean(0) - post.mean) / sd_p)
        out["log_std_ratio"] = np.max(np.abs(np.log(samples.std(0, ddof=1) / sd_p)))
        if post.gaussian:
            if hasattr(predictive, "mean") and hasattr(predictive, "cov"):
                out["kl_gaussian"] = gaussian_kl(
                    predictive.mean, predictive.cov, post.mean, post.cov
                )
            else:
                cov_q = np.atleast_2d(np.cov(samples, rowvar=False))
                out["kl_gaussian_moments"] = gaussian_kl(
                    samples.mean(0), cov_q, post.mean, post.cov
                )
            m = mahalanobis_chi2(samples, post.mean, post.cov)
            out["mahalanobis_pvalue"] = m["p_value"]
            out["mahalanobis_reject"] = m["p_value"] < self.alpha
            out["mahalanobis_mean_ratio"] = m["mean_ratio"]
        inside = post.in_support(samples)
        out["outside_support_fraction"] = 1.0 - inside.mean()
        if callable(getattr(predictive, "log_prob", None)):
            log_q = np.asarray(predictive.log_prob(samples, self.x_o), np.float64).reshape(-1)
            log_p = np.full(samples.shape[0], -np.inf)  # p has no mass outside its support
            log_p[inside] = post.log_prob(samples[inside])
            kl = mc_kl(log_q, log_p)
            out["kl_q_p"], out["kl_q_p_stderr"] = kl["estimate"], kl["stderr"]
        pit = pit_ks(post.marginal_cdf(samples))
        out["pit_ks_pvalue"], out["pit_ks_statistic"] = pit["p_value"], pit["statistic"]
        out["pit_ks_reject"] = pit["p_value"] < self.alpha
        if self.family.dim <= MAX_DDKS_DIM and self.num_null > 0:
            out.update(self.ddks_scores(samples, rng))
        if self.use_c2st:
            out.update(self.c2st_scores(samples, rng))
        return out

    def ddks_scores(self, samples: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        post, n = self.posterior, samples.shape[0]
        null = post.sample(rng, self.num_null * n).reshape(self.num_null, n, -1)
        if post.independent:
            cdf = post.marginal_cdf(samples)
            null_cdf = post.marginal_cdf(null.reshape(-1, null.shape[-1])).reshape(null.shape)
            res = ddks_test(samples, null, cdf_values=cdf, null_cdf_values=null_cdf)
        else:
            res = ddks_test(samples, null, reference=post.sample(rng, n))
        return {
            "ddks_statistic": res["statistic"],
            "ddks_pvalue": res["p_value"],
            "ddks_reject": res["p_value"] < self.alpha,
        }

    def c2st_scores(self, samples: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        """C2ST accuracy against as many exact samples, with its binomial p-value."""
        from testbed.metrics.c2st import c2st, c2st_pvalue

        reference = self.posterior.sample(rng, samples.shape[0])
        score = c2st(reference, samples)
        p_value = c2st_pvalue(score, reference.shape[0], samples.shape[0])
        return {"c2st": score, "c2st_pvalue": p_value, "c2st_reject": p_value < self.alpha}

    def joint_predictive_scores(self, predictive: Any, samples: np.ndarray) -> dict[str, float]:
        """KL between the exact and the agent's joint predictive of tau future observations.

        joint_kl: E_y[log p(y_1:tau | data) - log (1/M) sum_m prod_t p(y_t | theta_m)] over
        `num_test_batches` futures y drawn from the exact predictive (MC over y; the exact log
        joint predictive has no estimation noise); joint_kl_stderr is its standard error.
        joint_kl_gaussian: the same KL in closed form when the family is linear-Gaussian and
        the agent's posterior is Gaussian (mean, cov). joint_kl_exact: by exact enumeration
        over the sufficient statistic (beta-binomial, gamma-Poisson), for the agent's mixture.
        The agent's predictive mixes its draws inside the parameter space only (a likelihood
        is undefined outside; `outside_support_fraction` reports how many were left out).
        """
        samples = samples[self.posterior.in_support(samples)]
        if samples.shape[0] == 0:
            return {"joint_kl": np.nan, "joint_kl_stderr": np.nan}
        fam, tau, num = self.family, self.tau, self.num_test_batches
        rng = np.random.default_rng((self.seed, 3))
        theta_star = self.posterior.sample(rng, num)
        x_f = fam.sample_inputs(rng, num * tau).reshape(num, tau, -1)
        y_f = fam.simulate_batched(rng, theta_star, x_f)
        log_p = self.updated.log_evidence(x_f, y_f)
        log_q = np.concatenate(
            [
                mixture_log_likelihood(fam, samples, x_f[i : i + 50], y_f[i : i + 50])
                for i in range(0, num, 50)
            ]
        )
        diff = log_p - log_q
        out = {"joint_kl": diff.mean(), "joint_kl_stderr": diff.std(ddof=1) / np.sqrt(num)}
        if hasattr(self.updated, "sum_statistic_log_pmfs"):  # exact enumeration, no MC over y
            log_p, log_q = self.updated.sum_statistic_log_pmfs(samples, tau)
            out["joint_kl_exact"] = float(np.sum(np.exp(log_p) * (log_p - log_q)))
        if fam.linear_gaussian(x_f[0]) is not None and hasattr(predictive, "cov"):
            designs = x_f[:1] if fam.dim_x == 1 else x_f[:100]
            kls = [self._gaussian_joint_kl(predictive, x) for x in designs]
            out["joint_kl_gaussian"] = float(np.mean(kls))
        return out

    def _gaussian_joint_kl(self, predictive: Any, x: np.ndarray) -> float:
        a, noise = self.family.linear_gaussian(x)
        p_mean, p_cov = a @ self.posterior.mean, a @ self.posterior.cov @ a.T + noise
        q_mean = a @ np.asarray(predictive.mean, np.float64)
        q_cov = a @ np.asarray(predictive.cov, np.float64) @ a.T + noise
        return gaussian_kl(p_mean, p_cov, q_mean, q_cov)


def mixture_log_likelihood(family, samples: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log (1/M) sum_m p(y_b | theta_m, x_b) for each batch b: x [B, tau, dx], y [B, tau, dy]."""
    loglik = family.log_likelihood(samples[:, None, :], x[None], y[None])  # [M, B]
    return logsumexp(loglik, axis=0) - np.log(samples.shape[0])
