"""ABC agents in numpy, vectorized over simulations: `rej_abc` and `smc_abc`.

Both are configured as in the SBI benchmark (sbibm `algorithms/sbi/{mcabc,smcabc}.py`,
the paper's `rej-abc.yaml` / `smc-abc.yaml`): L2 distance to x_o; REJ-ABC keeps the 100
simulations closest to x_o; SMC-ABC (Beaumont et al. 2009) runs populations of 100
particles (1,000 above 10,000 simulations), the next epsilon from the 0.2 quantile of the
last population's distances, a Gaussian kernel with 0.5 x the weighted particle
covariance. Both return a KDE (cross-validated bandwidth, weighted for SMC) fit to the
final particles, which gives samples and a density (for NLTP). They are not amortized:
the posterior exists only at the x_o they ran on.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from scipy.special import logsumexp

from agents.kde import fit_kde
from agents.registry import register
from testbed.base import POSTERIOR
from testbed.config import check_in_range, check_nonnegative, check_positive, check_sizes
from testbed.errors import InputError
from testbed.simulation import SimulationAccess, SimulatorKnowledge, check_access


def distances(x: np.ndarray, x_o: np.ndarray) -> np.ndarray:
    """L2 distance of each row of x to x_o; rows with NaN (failed simulations) are +inf."""
    d = np.linalg.norm(np.asarray(x, np.float64) - np.reshape(x_o, (1, -1)), axis=1)
    return np.where(np.isnan(d), np.inf, d)


class KDEPosterior:
    """A KDE at one observation as a PosteriorEstimate (samples and log-density)."""

    def __init__(self, kde, x_o: np.ndarray):
        self.kde = kde
        self.x_o = np.asarray(x_o, np.float64).reshape(1, -1)

    def _check_x(self, x_o) -> None:
        if x_o is not None and not np.allclose(np.reshape(x_o, (1, -1)), self.x_o):
            raise InputError(
                "x_o: an ABC posterior exists only at the observation it ran on; allowed: "
                f"{self.x_o.ravel().tolist()}"
            )

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        self._check_x(x_o)
        return self.kde.sample(num_samples, seed)

    def log_prob(self, theta, x_o=None) -> np.ndarray:
        self._check_x(x_o)
        return self.kde.log_prob(theta)


def _seeds(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


# ----- rejection ABC -----


@dataclasses.dataclass(frozen=True)
class RejABCConfig:
    """REJ-ABC: keep the `num_top_samples` closest simulations, then KDE-resample."""

    num_top_samples: int = 100
    simulation_batch_size: int = 10_000
    kde_bandwidth: str = "cv"
    seed: int = 0

    def __post_init__(self):
        check_sizes(self, num_top_samples=2, simulation_batch_size=1)
        check_bandwidth(self.kde_bandwidth)
        check_nonnegative("seed", self.seed)


def check_bandwidth(text: str) -> None:
    """A KDE bandwidth: 'cv' (cross-validated) or a number > 0, as text."""
    if text != "cv":
        try:
            check_positive("kde_bandwidth", float(text))
        except ValueError:
            raise InputError(
                f"kde_bandwidth: got {text!r}; allowed: 'cv' or a number > 0"
            ) from None


def _bandwidth(text: str) -> str | float:
    return "cv" if text == "cv" else float(text)


def simulate_prior(access, num: int, batch: int, rng: np.random.Generator):
    """`num` prior draws and their simulations, in batches of `batch`."""
    theta = access.prior.sample(num, _seeds(rng))
    x = np.concatenate(
        [access.simulate(theta[i : i + batch], _seeds(rng)) for i in range(0, num, batch)]
    )
    return theta, x


@register("rej_abc", RejABCConfig, predicts=POSTERIOR)
def make_rej_abc(config: RejABCConfig):
    """Rejection ABC (top 100 by L2 distance, KDE resampling), as the SBI benchmark runs it."""

    def agent(access: SimulationAccess, knowledge: SimulatorKnowledge):
        check_access(access, knowledge)
        rng = np.random.default_rng(config.seed)
        budget = int(access.budget)
        if budget < config.num_top_samples:
            raise InputError(
                f"num_top_samples: got {config.num_top_samples}; allowed: at most the budget "
                f"of {budget} simulations"
            )
        theta, x = simulate_prior(access, budget, config.simulation_batch_size, rng)
        d = distances(x, access.x_o)
        top = np.argsort(d, kind="stable")[: config.num_top_samples]
        kde = fit_kde(theta[top], bandwidth=_bandwidth(config.kde_bandwidth))
        return KDEPosterior(kde, access.x_o)

    return agent


# ----- SMC-ABC -----


@dataclasses.dataclass(frozen=True)
class SMCABCConfig:
    """SMC-ABC (Beaumont et al. 2009), the benchmark's settings (sbi's variant C)."""

    population_size: int = 0  # 0: 100, or 1,000 when the budget exceeds 10,000
    initial_round_factor: int = 5
    epsilon_decay: float = 0.2
    epsilon_rule: Literal["sbi", "quantile"] = "sbi"
    kernel_variance_scale: float = 0.5
    use_last_pop_samples: bool = True
    kde_bandwidth: str = "cv"
    kde_sample_weights: bool = True
    seed: int = 0

    def __post_init__(self):
        check_sizes(self, population_size=0, initial_round_factor=1)
        check_in_range("epsilon_decay", self.epsilon_decay, 1e-6, 1.0)
        check_positive("kernel_variance_scale", self.kernel_variance_scale)
        check_bandwidth(self.kde_bandwidth)
        check_nonnegative("seed", self.seed)


def next_epsilon(d: np.ndarray, quantile: float, rule: str) -> float:
    """The next tolerance from the current population's distances.

    'sbi' is sbi's SMCABC rule (the benchmark's): over the unique sorted distances, the
    first whose cumulative sum reaches `quantile` of the total; 'quantile' is the plain
    empirical quantile.
    """
    if rule == "quantile":
        return float(np.quantile(d, quantile))
    u = np.unique(d)
    cdf = np.cumsum(u) / u.sum()
    hit = np.flatnonzero(cdf >= quantile)
    return float(u[hit[0]] if hit.size else u[-1])


def kernel_covariance(particles: np.ndarray, log_w: np.ndarray, scale: float) -> np.ndarray:
    """scale x the weighted particle covariance (identity if it is not positive definite)."""
    d = particles.shape[1]
    cov = np.atleast_2d(np.cov(particles, rowvar=False, aweights=np.exp(log_w)))
    cov = scale * cov
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        cov = np.eye(d)
    return cov


def perturb(access, particles, log_w, num, chol, rng) -> np.ndarray:
    """`num` particles drawn by weight and moved by the Gaussian kernel, inside the prior."""
    out = []
    have = 0
    w = np.exp(log_w - logsumexp(log_w))
    for _ in range(1000):
        idx = rng.choice(particles.shape[0], size=num - have, p=w)
        cand = particles[idx] + rng.standard_normal((num - have, particles.shape[1])) @ chol.T
        ok = np.isfinite(access.prior.log_prob(cand))
        out.append(cand[ok])
        have += int(ok.sum())
        if have >= num:
            return np.concatenate(out)[:num]
    raise InputError("smc_abc: the kernel keeps leaving the prior support; allowed: a wider prior")


def new_log_weights(access, new, old, old_log_w, cov) -> np.ndarray:
    """log prior(new) - log sum_j w_j K(new | old_j): importance weights of variant C."""
    d = new.shape[1]
    chol = np.linalg.cholesky(cov)
    diff = new[:, None, :] - old[None, :, :]  # [n_new, n_old, d]
    z = np.linalg.solve(chol, diff.reshape(-1, d).T).T.reshape(diff.shape)
    log_k = -0.5 * np.sum(z**2, -1) - np.log(np.diag(chol)).sum() - 0.5 * d * np.log(2 * np.pi)
    return access.prior.log_prob(new) - logsumexp(log_k + old_log_w[None, :], axis=1)


def smc_abc(config: SMCABCConfig, access) -> tuple[np.ndarray, np.ndarray, dict]:
    """Runs SMC-ABC to the budget; returns (particles, log weights, summary)."""
    rng = np.random.default_rng(config.seed)
    budget = int(access.budget)
    pop = config.population_size or (1000 if budget > 10_000 else 100)
    pop = min(pop, budget)
    num_initial = int(np.clip(config.initial_round_factor * pop, pop, max(0.5 * budget, pop)))
    theta, x = simulate_prior(access, num_initial, 10_000, rng)
    d = distances(x, access.x_o)
    order = np.argsort(d, kind="stable")[:pop]
    particles, dists = theta[order], d[order]
    log_w = np.full(pop, -np.log(pop))
    epsilons = [float(dists[-1])]
    while access.remaining > 0:
        eps = next_epsilon(dists, config.epsilon_decay, config.epsilon_rule)
        cov = kernel_covariance(particles, log_w, config.kernel_variance_scale)
        chol = np.linalg.cholesky(cov)
        new_p, new_d = [], []
        have = 0
        while have < pop:
            num = min(pop - have, access.remaining)
            cand = perturb(access, particles, log_w, num, chol, rng)
            dc = distances(access.simulate(cand, _seeds(rng)), access.x_o)
            acc = dc <= eps
            new_p.append(cand[acc])
            new_d.append(dc[acc])
            have += int(acc.sum())
            if access.remaining == 0 and have < pop:
                if not config.use_last_pop_samples:
                    new_p, new_d = None, None
                    break
                missing = pop - have
                new_p.append(particles[:missing])
                new_d.append(dists[:missing])
                break
        if new_p is None:  # budget ran out: keep the previous population
            break
        cand_p, cand_d = np.concatenate(new_p), np.concatenate(new_d)
        lw = new_log_weights(access, cand_p, particles, log_w, cov)
        lw = lw - logsumexp(lw)
        order = np.argsort(cand_d, kind="stable")
        particles, dists, log_w = cand_p[order], cand_d[order], lw[order]
        epsilons.append(eps)
    return particles, log_w, {"epsilons": epsilons, "population_size": pop}


@register("smc_abc", SMCABCConfig, predicts=POSTERIOR)
def make_smc_abc(config: SMCABCConfig):
    """SMC-ABC (populations of 100 / 1,000, epsilon quantile 0.2, kernel scale 0.5, KDE)."""

    def agent(access: SimulationAccess, knowledge: SimulatorKnowledge):
        check_access(access, knowledge)
        particles, log_w, _ = smc_abc(config, access)
        weights = np.exp(log_w) if config.kde_sample_weights else None
        kde = fit_kde(particles, weights, bandwidth=_bandwidth(config.kde_bandwidth))
        return KDEPosterior(kde, access.x_o)

    return agent
