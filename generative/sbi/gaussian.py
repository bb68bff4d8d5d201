"""Gaussian tasks: gaussian_linear, gaussian_linear_uniform, gaussian_mixture.

All three have exact reference posteriors for any observation. As in the benchmark, 0.1 in
the Gaussian-linear tasks is a *variance* (covariance 0.1 I), not a standard deviation.
The two Gaussian-linear tasks also have exact posteriors for i.i.d. sets of n draws (the
set's mean is sufficient: a normal, or normals truncated to the box); the mixture's is a
mixture of 2^n truncated normals, not offered.
"""

from __future__ import annotations

import numpy as np

from generative.sbi.samplers import log_box_mass, truncated_normal
from generative.sbi.task import Support, Task, UniformBoxTask

LOG_2PI = np.log(2 * np.pi)


def isotropic_normal_logpdf(x: np.ndarray, mean: np.ndarray, var: float) -> np.ndarray:
    """log N(x; mean, var I) over the last axis."""
    d = x.shape[-1]
    return -0.5 * (np.sum((x - mean) ** 2, axis=-1) / var + d * (LOG_2PI + np.log(var)))


def isotropic_normal_iid_logpdf(xs: np.ndarray, theta: np.ndarray, var: float) -> np.ndarray:
    """sum_i log N(xs[i]; theta, var I) for an i.i.d. set xs [n, d], per row of theta [m, d]:
    the sum of squares about the set's mean plus n times the mean's distance to theta."""
    n, d = xs.shape
    mean = xs.mean(axis=0)
    within = np.sum((xs - mean) ** 2)
    between = n * np.sum((theta - mean) ** 2, axis=-1)
    return -0.5 * ((within + between) / var + n * d * (LOG_2PI + np.log(var)))


class GaussianLinear(Task):
    """theta ~ N(0, 0.1 I_10); x ~ N(theta, 0.1 I_10); posterior N(x/2, 0.05 I)."""

    name = "gaussian_linear"
    dim_parameters = 10
    dim_data = 10
    support = Support("real")
    prior_var = 0.1
    noise_var = 0.1
    supports_iid = True

    def _sample_prior(self, num, rng):
        return rng.normal(0.0, np.sqrt(self.prior_var), size=(num, self.dim_parameters))

    def _log_prior(self, theta):
        return isotropic_normal_logpdf(theta, 0.0, self.prior_var)

    def _torch_prior(self, torch):
        d = self.dim_parameters
        cov = self.prior_var * torch.eye(d)
        return torch.distributions.MultivariateNormal(torch.zeros(d), covariance_matrix=cov)

    def _simulate(self, theta, rng):
        return theta + rng.normal(0.0, np.sqrt(self.noise_var), size=theta.shape)

    def _log_likelihood(self, theta, x_o):
        return isotropic_normal_logpdf(x_o, theta, self.noise_var)

    def posterior_mean_cov(self, x_o) -> tuple[np.ndarray, np.ndarray]:
        """The exact posterior's mean and covariance (conjugate normal update)."""
        x_o = self.check_observation(x_o)
        post_var = 1.0 / (1.0 / self.prior_var + 1.0 / self.noise_var)
        mean = post_var * x_o / self.noise_var
        return mean, post_var * np.eye(self.dim_parameters)

    def posterior_mean_cov_iid(self, xs) -> tuple[np.ndarray, np.ndarray]:
        """The exact posterior's mean and covariance for an i.i.d. set xs [n, dim]: precision
        1 / prior_var + n / noise_var, mean = covariance * sum(xs) / noise_var."""
        xs = self.check_observations(xs)
        post_var = 1.0 / (1.0 / self.prior_var + len(xs) / self.noise_var)
        return post_var * xs.sum(axis=0) / self.noise_var, post_var * np.eye(self.dim_parameters)

    def _reference_posterior(self, x_o, num_samples, rng):
        mean, cov = self.posterior_mean_cov(x_o)
        sd = np.sqrt(cov[0, 0])
        return mean + sd * rng.standard_normal((num_samples, self.dim_parameters))

    def _log_likelihood_iid(self, theta, xs):
        return isotropic_normal_iid_logpdf(xs, theta, self.noise_var)

    def _reference_posterior_iid(self, xs, num_samples, rng):
        mean, cov = self.posterior_mean_cov_iid(xs)
        sd = np.sqrt(cov[0, 0])
        return mean + sd * rng.standard_normal((num_samples, self.dim_parameters))


class GaussianLinearUniform(UniformBoxTask):
    """theta ~ U(-1, 1)^10; x ~ N(theta, 0.1 I); posterior = product of truncated normals."""

    name = "gaussian_linear_uniform"
    dim_parameters = 10
    dim_data = 10
    support = Support("box", -1.0, 1.0)
    noise_var = 0.1
    supports_iid = True

    def _simulate(self, theta, rng):
        return theta + rng.normal(0.0, np.sqrt(self.noise_var), size=theta.shape)

    def _log_likelihood(self, theta, x_o):
        return isotropic_normal_logpdf(x_o, theta, self.noise_var)

    def _reference_posterior(self, x_o, num_samples, rng):
        # Prior and likelihood factorize over dimensions: each coordinate is an exact
        # N(x_o[i], 0.1) truncated to [-1, 1] (the benchmark's rejection, done by inversion).
        mean = np.broadcast_to(x_o, (num_samples, self.dim_parameters))
        return truncated_normal(mean, np.sqrt(self.noise_var), -1.0, 1.0, rng)

    def _log_likelihood_iid(self, theta, xs):
        return isotropic_normal_iid_logpdf(xs, theta, self.noise_var)

    def _reference_posterior_iid(self, xs, num_samples, rng):
        # n draws: each coordinate is N(mean of the set, 0.1 / n) truncated to [-1, 1].
        mean = np.broadcast_to(xs.mean(axis=0), (num_samples, self.dim_parameters))
        return truncated_normal(mean, np.sqrt(self.noise_var / len(xs)), -1.0, 1.0, rng)


class GaussianMixture(UniformBoxTask):
    """theta ~ U(-10, 10)^2; x ~ 0.5 N(theta, I) + 0.5 N(theta, 0.01 I), component per row."""

    name = "gaussian_mixture"
    dim_parameters = 2
    dim_data = 2
    support = Support("box", -10.0, 10.0)
    scales = (1.0, 0.1)
    weights = (0.5, 0.5)
    iid_refusal = "its posterior for n draws is a mixture of 2^n truncated normals"

    def _simulate(self, theta, rng):
        # One mixture component per simulation (the benchmark's v1.1.0 fix), shared by both dims.
        comp = rng.random(theta.shape[0]) < self.weights[1]
        sd = np.where(comp, self.scales[1], self.scales[0])[:, None]
        return theta + sd * rng.standard_normal(theta.shape)

    def _log_likelihood(self, theta, x_o):
        terms = [
            np.log(w) + isotropic_normal_logpdf(x_o, theta, s**2)
            for w, s in zip(self.weights, self.scales)
        ]
        return np.logaddexp(*terms)

    def component_log_weights(self, x_o: np.ndarray) -> np.ndarray:
        """Posterior log-probabilities of the two components (truncated-normal masses)."""
        logits = np.array(
            [
                np.log(w) + log_box_mass(x_o, s, -10.0, 10.0)
                for w, s in zip(self.weights, self.scales)
            ]
        )
        return logits - np.logaddexp.reduce(logits)

    def _reference_posterior(self, x_o, num_samples, rng):
        # Posterior = mixture of the two isotropic normals centred at x_o, each truncated to
        # the box, with weights 0.5 * (box mass of that component): exact for any x_o.
        probs = np.exp(self.component_log_weights(x_o))
        comp = rng.random(num_samples) < probs[1]
        sd = np.where(comp, self.scales[1], self.scales[0])[:, None]
        mean = np.broadcast_to(x_o, (num_samples, 2))
        return truncated_normal(mean, sd, -10.0, 10.0, rng)
