"""The PPL benchmark's own models: what "What's your bench" ran its PPLs on (not our problems).

The paper (Pagni 2024) scored its PPLs against a conjugate reference but wrote their models
with other priors (patrick-pagni/whats_your_bench: `ppl_priors` in problem_set.py; the models
in pymc_models.py, pyro_models.py, stan_models/*.stan):

- P1-6: mu ~ N(0, 1), y ~ N(mu, 1) (the reference's prior: N(3, 1) or N(5, 1));
- P7-15: nu ~ HalfNormal(s), sigma ~ HalfNormal(s), y ~ StudentT(nu, 3, sigma) with
  s = 1, 1, 1, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1 (the reference: y ~ N(3, 1 / lam), lam ~ Gamma);
- P16-21: mu ~ N(0, I), y ~ N(mu, I) (the reference's prior mean is not 0).

`paper_ppl_model("wyb/k")` gives that model as a family the PPL agents serve; a PPL run on it
and scored against the problem's exact posterior measures the benchmark's prior mismatch,
not an inference error, so these runs are never ranked. P7-15's Student-t model is not
conjugate: `StudentTKnownLoc` has a prior and likelihood but no exact posterior.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from generative.conjugate import densities as dens
from generative.conjugate import families as fam
from generative.conjugate.model import model_spec
from generative.conjugate.problem_set import PROBLEMS
from testbed.errors import InputError, bad_value
from testbed.model import ModelKnowledge
from testbed.seeding import Seed, make_rng

# P7-15's half-normal scales of nu and sigma (problem_set.py: ppl_priors = [s, s])
STUDENT_T_SCALES = (1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1)
STUDENT_T_LOC = 3.0  # the known mean (problem_set.py: NormalKnownMean(mean=3))
NAMES = tuple(f"wyb/{k}" for k in range(1, 22))


@dataclasses.dataclass(frozen=True)
class HalfNormals:
    """Independent HalfNormal(scales) over a positive theta [d] (the Student-t model's prior)."""

    scales: np.ndarray
    gaussian = False
    independent = True

    @property
    def dim(self) -> int:
        return self.scales.shape[0]

    @property
    def mean(self) -> np.ndarray:
        return self.scales * np.sqrt(2.0 / np.pi)

    @property
    def var(self) -> np.ndarray:
        return self.scales**2 * (1.0 - 2.0 / np.pi)

    def sample(self, num_samples: int, seed: Seed = 0) -> np.ndarray:
        rng, n = make_rng(seed), int(num_samples)
        return np.abs(rng.standard_normal((n, self.dim))) * self.scales

    def in_support(self, theta) -> np.ndarray:
        return np.all(np.asarray(theta, np.float64) > 0.0, axis=1)

    def log_prob(self, theta) -> np.ndarray:
        return np.sum(dens.half_normal(np.asarray(theta, np.float64), self.scales), axis=-1)

    def marginal_cdf(self, theta) -> np.ndarray:
        return stats.halfnorm.cdf(np.asarray(theta), scale=self.scales)


@dataclasses.dataclass(frozen=True)
class StudentTKnownLoc(fam.LogTransformed, fam.Family):
    """y_i ~ StudentT(nu, loc, sigma), nu ~ HalfNormal(nu_scale), sigma ~ HalfNormal(sigma_scale).

    theta = (nu, sigma), unconstrained through log. Not conjugate: no exact posterior.
    """

    loc: float
    nu_scale: float
    sigma_scale: float
    name = "student_t_known_loc"
    param_names = ("nu", "sigma")
    dim = 2
    dim_u = 2
    dim_y = 1

    def prior(self) -> HalfNormals:
        return HalfNormals(np.array([self.nu_scale, self.sigma_scale], np.float64))

    def log_prior(self, theta, xp=np):
        nu, sigma = theta[..., 0], theta[..., 1]
        return dens.half_normal(nu, self.nu_scale, xp=xp) + dens.half_normal(
            sigma, self.sigma_scale, xp=xp
        )

    def log_likelihood(self, theta, x, y, xp=np):
        nu, sigma = theta[..., None, 0], theta[..., None, 1]
        return xp.sum(dens.student_t(y[..., 0], nu, self.loc, sigma, xp=xp), axis=-1)

    def update(self, x, y):
        raise InputError(
            f"family {self.name}: got a request for its exact posterior; allowed: none "
            "(the model is not conjugate: sample it)"
        )

    def simulate(self, theta, x, seed: Seed = 0):
        rng = make_rng(seed)
        theta = np.asarray(theta, np.float64)
        t = rng.standard_t(theta[:, None, 0:1], size=(theta.shape[0], x.shape[0], 1))
        return self.loc + theta[:, None, 1:2] * t


def _index(name: str) -> int:
    """k of 'wyb/k' (or 'conjugate/wyb/k'), k = 1..21."""
    short = str(name).removeprefix("conjugate/")
    if short not in NAMES:
        raise bad_value("problem", name, "wyb/1 .. wyb/21 (the PPL benchmark's problems)")
    return int(short.split("/")[1])


def paper_ppl_model(name: str) -> fam.Family:
    """The model the PPL benchmark gave its PPLs on problem `name` ('wyb/1'..'wyb/21')."""
    k = _index(name)
    if k <= 6:
        return fam.NormalKnownVar(np.zeros(1), np.eye(1), 1.0)
    if k <= 15:
        scale = STUDENT_T_SCALES[k - 7]
        return StudentTKnownLoc(STUDENT_T_LOC, scale, scale)
    d = PROBLEMS[f"wyb/{k}"]["family"].dim
    return fam.MvnKnownCov(np.zeros(d), np.eye(d), np.eye(d))


def paper_ppl_knowledge(problem) -> ModelKnowledge:
    """A conjugate `wyb/k` problem's prior knowledge with the paper's PPL model in place of
    its own (same input_dim, num_train, tau)."""
    spec = model_spec(paper_ppl_model(problem.name))
    return dataclasses.replace(problem.prior_knowledge, model=spec)
