"""bernoulli_glm and bernoulli_glm_raw: a Bernoulli GLM with a smoothness prior.

theta = (offset, 9 filter weights); 100 time bins; spike y_t ~ Bernoulli(sigmoid(X theta)_t)
with X = [1, stimulus lags 0..8] and stimulus = RandomState(42).randn(100) in float32.
The summary variant observes X^T y (spike count and spike-triggered sums; sufficient); the
raw variant observes y. The posterior is log-concave, so a Newton (Laplace) fit is the
unique mode and a Student-t around it is a safe rejection proposal. An i.i.d. set of n
spike trains has likelihood theta . sum_i X^T y_i - n sum_t softplus((X theta)_t): still
log-concave, sampled the same way.
"""

from __future__ import annotations

import functools

import numpy as np

from generative.sbi.samplers import StudentT, rejection_sample
from generative.sbi.task import Support, Task
from testbed.errors import bad_value

NUM_BINS = 10
DURATION = 100


@functools.cache
def design_matrix() -> np.ndarray:
    """X [100, 10]: a column of ones, then the stimulus delayed by 0..8 bins (zeros first)."""
    stim = np.random.RandomState(42).randn(DURATION).astype(np.float32).astype(np.float64)
    x = np.zeros((DURATION, NUM_BINS))
    x[:, 0] = 1.0
    for j in range(NUM_BINS - 1):
        x[j:, j + 1] = stim[: DURATION - j]
    return x


@functools.cache
def prior_precision() -> np.ndarray:
    """B: 0.5 for the offset; F^T F for the filter, F = D D + diag(sqrt(i / 9)), D = I - sub."""
    m = NUM_BINS - 1
    d = np.eye(m) - np.eye(m, k=-1)
    f = d @ d + np.diag(np.sqrt(np.arange(m) / m))
    b = np.zeros((NUM_BINS, NUM_BINS))
    b[0, 0] = 0.5
    b[1:, 1:] = f.T @ f
    return b


def _softplus(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


class BernoulliGLM(Task):
    """The GLM observed through its sufficient statistics X^T y (x in R^10)."""

    name = "bernoulli_glm"
    dim_parameters = NUM_BINS
    dim_data = NUM_BINS
    support = Support("real")
    supports_iid = True

    def _sample_prior(self, num, rng):
        chol = np.linalg.cholesky(prior_precision())
        z = rng.standard_normal((num, NUM_BINS))
        # theta = L^-T z has covariance (L L^T)^-1 = B^-1.
        return np.linalg.solve(chol.T, z.T).T

    def _torch_prior(self, torch):
        precision = torch.as_tensor(prior_precision(), dtype=torch.float32)
        zeros = torch.zeros(NUM_BINS)
        return torch.distributions.MultivariateNormal(zeros, precision_matrix=precision)

    def _log_prior(self, theta):
        b = prior_precision()
        _, logdet = np.linalg.slogdet(b)
        quad = np.einsum("ni,ij,nj->n", theta, b, theta)
        return -0.5 * (quad + NUM_BINS * np.log(2 * np.pi) - logdet)

    def _spikes(self, theta, rng):
        psi = theta @ design_matrix().T
        return (rng.random(psi.shape) < 1.0 / (1.0 + np.exp(-psi))).astype(np.float64)

    def _simulate(self, theta, rng):
        return self._spikes(theta, rng) @ design_matrix()

    def sufficient_statistics(self, x_o: np.ndarray) -> np.ndarray:
        """X^T y of an (already checked) observation."""
        return x_o

    def _log_likelihood(self, theta, x_o):
        # log p(y | theta) = theta . X^T y - sum_t softplus((X theta)_t); with only X^T y
        # observed this is the likelihood up to a theta-free constant (the number of spike
        # trains sharing these statistics).
        return self._glm_log_likelihood(theta, self.sufficient_statistics(x_o), 1)

    def _log_likelihood_iid(self, theta, xs):
        stats = sum(self.sufficient_statistics(x) for x in xs)
        return self._glm_log_likelihood(theta, stats, len(xs))

    @staticmethod
    def _glm_log_likelihood(theta, stats: np.ndarray, n: int) -> np.ndarray:
        """theta . stats - n sum_t softplus((X theta)_t): n spike trains with summed X^T y."""
        return theta @ stats - n * _softplus(theta @ design_matrix().T).sum(axis=1)

    def laplace(self, x_o: np.ndarray, num_iterations: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mode and negative Hessian there, by Newton's method with step halving
        (the log posterior is strictly concave, so this converges to the unique mode)."""
        return self._laplace(self.sufficient_statistics(x_o), 1, num_iterations)

    def _laplace(
        self, s: np.ndarray, n: int, num_iterations: int = 100
    ) -> tuple[np.ndarray, np.ndarray]:
        """`laplace` for n spike trains with summed statistics s."""
        x, b = design_matrix(), prior_precision()

        def objective(t):
            return t @ s - n * _softplus(x @ t).sum() - 0.5 * t @ b @ t

        def neg_hessian(t):
            p = 1.0 / (1.0 + np.exp(-(x @ t)))
            return n * (x.T * (p * (1 - p))) @ x + b, s - n * x.T @ p - b @ t

        theta = np.zeros(NUM_BINS)
        value = objective(theta)
        for _ in range(num_iterations):
            neg_hess, grad = neg_hessian(theta)
            step = np.linalg.solve(neg_hess, grad)
            for _ in range(50):
                new_value = objective(theta + step)
                if new_value >= value:
                    break
                step = step / 2
            theta, value = theta + step, max(new_value, value)
            if np.abs(step).max() < 1e-10:
                break
        return theta, neg_hessian(theta)[0]

    def _reference_posterior(self, x_o, num_samples, rng):
        return self._rejection(
            self.laplace(x_o), lambda t: self.log_posterior_unnormalized(t, x_o), num_samples, rng
        )

    def _reference_posterior_iid(self, xs, num_samples, rng):
        stats = sum(self.sufficient_statistics(x) for x in xs)
        return self._rejection(
            self._laplace(stats, len(xs)),
            lambda t: self._log_posterior_iid(t, xs),
            num_samples,
            rng,
        )

    @staticmethod
    def _rejection(laplace_fit, log_target, num_samples, rng):
        """Exact draws by rejection from a Student-t (df 5) around the mode, scale 1.2x."""
        mode, neg_hess = laplace_fit
        cov = np.linalg.inv(neg_hess) * 1.2**2
        proposal = StudentT(mode, (cov + cov.T) / 2, df=5.0)
        return rejection_sample(
            log_target, proposal.sample, proposal.log_prob, num_samples, rng, what="GLM posterior"
        )


class BernoulliGLMRaw(BernoulliGLM):
    """The same GLM observed through the raw spike train y in {0, 1}^100."""

    name = "bernoulli_glm_raw"
    dim_data = DURATION

    def _simulate(self, theta, rng):
        return self._spikes(theta, rng)

    def check_observation(self, x_o):
        x_o = super().check_observation(x_o)
        if not np.all((x_o == 0) | (x_o == 1)):
            raise bad_value(
                "x_o", "a spike train with values other than 0 and 1", "values in {0, 1}"
            )
        return x_o

    def sufficient_statistics(self, x_o):
        return design_matrix().T @ x_o
