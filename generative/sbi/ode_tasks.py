"""sir and lotka_volterra: ODE simulators with log-normal priors, solved in batch.

Both use the batched 5(4) solver of `generative.sbi.ode` at reltol = abstol = 1e-8 (the
benchmark: Tsit5 at 1e-8); a failed solve gives a NaN row. The posteriors are unimodal, so
the reference sampler finds the mode in log space by batched Newton steps from the best
prior draws, and draws exactly by rejection from a Student-t around it; an i.i.d. set of
observations is sampled the same way under the product likelihood (one ODE solve per
theta serves the whole set).
"""

from __future__ import annotations

import abc

import numpy as np
from scipy import special

from generative.sbi import ode
from generative.sbi.samplers import laplace_t_proposal, rejection_sample
from generative.sbi.task import Support, Task, no_posterior_mass
from testbed.errors import bad_value


class LogNormalPriorTask(Task):
    """Shared pieces of tasks with independent log-normal priors and ODE simulators."""

    support = Support("positive")
    supports_iid = True
    prior_loc: np.ndarray
    prior_scale: np.ndarray
    num_starts = 8
    num_start_candidates = 4_000

    def _torch_prior(self, torch):
        loc = torch.as_tensor(self.prior_loc, dtype=torch.float32)
        scale = torch.as_tensor(self.prior_scale, dtype=torch.float32)
        dist = torch.distributions
        return dist.Independent(dist.LogNormal(loc, scale), 1)

    def _sample_prior(self, num, rng):
        return np.exp(
            self.prior_loc + self.prior_scale * rng.standard_normal((num, self.dim_parameters))
        )

    def _log_prior(self, theta):
        with np.errstate(divide="ignore", invalid="ignore"):
            logt = np.log(theta)
            z = (logt - self.prior_loc) / self.prior_scale
            out = (-0.5 * z**2 - np.log(self.prior_scale) - 0.5 * np.log(2 * np.pi) - logt).sum(1)
        return np.where(np.all(theta > 0, axis=1), out, -np.inf)

    @abc.abstractmethod
    def _solution(self, theta: np.ndarray) -> np.ndarray:
        """What the simulator's noise acts on: the ODE solved at theta's rows, [n, ...]."""

    @abc.abstractmethod
    def _log_likelihood_given(self, solution: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        """log p(x_o | theta) [n] from theta's `_solution` (NaN rows: -inf)."""

    def _log_likelihood(self, theta, x_o):
        return self._log_likelihood_given(self._solution(theta), x_o)

    def _log_likelihood_iid(self, theta, xs):
        solution = self._solution(theta)  # one solve per theta for the whole set
        return np.sum([self._log_likelihood_given(solution, x) for x in xs], axis=0)

    def _reference_posterior(self, x_o, num_samples, rng):
        return self._log_space_rejection(
            lambda theta: self.log_posterior_unnormalized(theta, x_o), num_samples, rng
        )

    def _reference_posterior_iid(self, xs, num_samples, rng):
        return self._log_space_rejection(
            lambda theta: self._log_posterior_iid(theta, xs), num_samples, rng
        )

    def _log_space_rejection(self, log_posterior, num_samples, rng):
        """Draws of theta whose unnormalised log posterior is `log_posterior`: Newton modes
        in z = log(theta) from the best prior draws, then rejection from a Student-t."""

        def log_target(z):  # posterior density of z = log(theta)
            theta = np.exp(z)
            return log_posterior(theta) + z.sum(axis=1)

        cand = np.log(self._sample_prior(self.num_start_candidates, rng))
        lp = log_target(cand)
        if not np.isfinite(lp).any():
            raise no_posterior_mass(self.name)
        starts = cand[np.argsort(-np.where(np.isfinite(lp), lp, -np.inf))[: self.num_starts]]
        proposal = laplace_t_proposal(log_target, starts, inflate=1.2, df=5.0)
        z = rejection_sample(
            log_target,
            proposal.sample,
            proposal.log_prob,
            num_samples,
            rng,
            num_pilot=20_000,
            what=f"{self.name} posterior",
        )
        return np.exp(z)


# ----------------------------------------------------------------------------- SIR
POPULATION = 1e6
SIR_TIMES = np.concatenate([np.arange(0.0, 154.0, 17.0), [160.0]])  # 0, 17, ..., 153; end


def sir_rhs(y: np.ndarray, params: np.ndarray) -> np.ndarray:
    s, i = y[:, 0], y[:, 1]
    beta, gamma = params[:, 0], params[:, 1]
    infection = beta * s * i / POPULATION
    recovery = gamma * i
    return np.stack([-infection, infection - recovery, recovery], axis=1)


class SIR(LogNormalPriorTask):
    """SIR epidemic (N = 1e6, one initial infection, 160 days); x = Binomial(1000, I(t)/N)
    at t = 0, 17, ..., 153."""

    name = "sir"
    dim_parameters = 2
    dim_data = 10
    parameter_names = ("beta", "gamma")
    prior_loc = np.log(np.array([0.4, 0.125]))
    prior_scale = np.array([0.5, 0.2])
    num_trials = 1000
    observation_seeds = (1000000, 1000001, 1000010, 1000011, 1000004, 1000005, 1000006, 1000013) + (
        1000008,
        1000009,
    )

    def infected_fraction(self, theta: np.ndarray) -> np.ndarray:
        """I(t) / N at the ten observation times, [n, 10] (NaN rows for failed solves)."""
        y0 = np.tile([POPULATION - 1.0, 1.0, 0.0], (theta.shape[0], 1))
        sol = ode.solve(sir_rhs, y0, theta, SIR_TIMES)
        return np.clip(sol[:, :-1, 1] / POPULATION, 0.0, 1.0)

    def _simulate(self, theta, rng):
        prob = self.infected_fraction(theta)
        bad = np.isnan(prob).any(axis=1)
        x = rng.binomial(self.num_trials, np.where(np.isnan(prob), 0.0, prob)).astype(np.float64)
        x[bad] = np.nan
        return x

    def check_observation(self, x_o):
        x_o = super().check_observation(x_o)
        if np.any((x_o < 0) | (x_o > self.num_trials) | (x_o != np.round(x_o))):
            raise bad_value("x_o", x_o.tolist(), f"integer counts in 0..{self.num_trials}")
        return x_o

    def _solution(self, theta):
        return self.infected_fraction(theta)

    def _log_likelihood_given(self, prob: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            ll = special.xlogy(x_o, prob) + special.xlog1py(self.num_trials - x_o, -prob)
        ll = (
            ll.sum(axis=1)
            + (
                special.gammaln(self.num_trials + 1)
                - special.gammaln(x_o + 1)
                - special.gammaln(self.num_trials - x_o + 1)
            ).sum()
        )
        return np.where(np.isnan(ll), -np.inf, ll)


# ----------------------------------------------------------------------------- Lotka-Volterra
LV_TIMES = np.concatenate([np.arange(10) * 2.1, [20.0]])  # 0, 2.1, ..., 18.9; end
LV_NOISE = 0.1


def lotka_volterra_rhs(y: np.ndarray, params: np.ndarray) -> np.ndarray:
    prey, pred = y[:, 0], y[:, 1]
    alpha, beta, gamma, delta = params.T
    return np.stack(
        [alpha * prey - beta * prey * pred, -gamma * pred + delta * prey * pred], axis=1
    )


class LotkaVolterra(LogNormalPriorTask):
    """Predator-prey ODE from (30, 1) over 20 time units; x = LogNormal(log u, 0.1) of both
    species at t = 0, 2.1, ..., 18.9, ordered [prey x 10, predator x 10]."""

    name = "lotka_volterra"
    dim_parameters = 4
    dim_data = 20
    parameter_names = ("alpha", "beta", "gamma", "delta")
    prior_loc = np.array([-0.125, -3.0, -0.125, -3.0])
    prior_scale = np.full(4, 0.5)
    observation_seeds = (
        1000020,
        1000030,
        1000034,
        1000013,
        1000004,
        1000011,
        1000012,
        1000039,
        1000041,
        1000009,
    )

    def log_populations(self, theta: np.ndarray) -> np.ndarray:
        """log of the clamped populations at the ten times, [n, 20] (NaN rows on failure)."""
        y0 = np.tile([30.0, 1.0], (theta.shape[0], 1))
        sol = ode.solve(lotka_volterra_rhs, y0, theta, LV_TIMES)[:, :-1, :]
        with np.errstate(invalid="ignore"):
            u = np.clip(sol, 1e-10, 1e4)
        return np.log(np.concatenate([u[:, :, 0], u[:, :, 1]], axis=1))

    def _simulate(self, theta, rng):
        logu = self.log_populations(theta)
        return np.exp(logu + LV_NOISE * rng.standard_normal(logu.shape))

    def check_observation(self, x_o):
        x_o = super().check_observation(x_o)
        if np.any(x_o <= 0):
            raise bad_value("x_o", x_o.tolist(), "positive population values")
        return x_o

    def _solution(self, theta):
        return self.log_populations(theta)

    def _log_likelihood_given(self, logu: np.ndarray, x_o: np.ndarray) -> np.ndarray:
        logx = np.log(x_o)
        z = (logx - logu) / LV_NOISE
        ll = (-0.5 * z**2 - np.log(LV_NOISE) - 0.5 * np.log(2 * np.pi) - logx).sum(axis=1)
        return np.where(np.isnan(ll), -np.inf, ll)
