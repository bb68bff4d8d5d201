"""two_moons: a crescent-shaped, bimodal posterior with an exact sampler by inversion.

x = p + (-|t1 + t2| / sqrt 2, (-t1 + t2) / sqrt 2), p = (r cos a + 0.25, r sin a),
a ~ U(-pi/2, pi/2), r ~ N(0.1, 0.01^2), theta ~ U(-1, 1)^2.
"""

from __future__ import annotations

import numpy as np

from generative.sbi.task import Support, UniformBoxTask, no_posterior_mass

R_MEAN, R_SD, OFFSET = 0.1, 0.01, 0.25
C = np.cos(np.pi / 4)


def _shift(theta: np.ndarray) -> np.ndarray:
    """The parameter-dependent part of x (a rotation by -pi/4 with |.| on one axis)."""
    return np.stack(
        [-np.abs(theta[:, 0] + theta[:, 1]) * C, (-theta[:, 0] + theta[:, 1]) * C], axis=1
    )


MAX_PROPOSALS = 2_000_000_000  # about 2 minutes of proposals on one core


class TwoMoons(UniformBoxTask):
    """The two-moons task; `log_likelihood` is the true density of x (incl. the 1/(pi r) term).

    The benchmark's closed-form likelihood keeps only the radial normal factor; its reference
    sampler (inversion, used here too) draws from the true posterior.
    """

    name = "two_moons"
    dim_parameters = 2
    dim_data = 2
    support = Support("box", -1.0, 1.0)
    iid_refusal = (
        "its exact sampler inverts the simulator at one observation, which a set of draws "
        "does not allow"
    )
    observation_seeds = (1000011, 1000001, 1000002, 1000003, 1000013) + tuple(
        1000005 + i for i in range(5)
    )

    def _noise(self, num: int, rng: np.random.Generator) -> np.ndarray:
        a = rng.uniform(-np.pi / 2, np.pi / 2, size=num)
        r = rng.normal(R_MEAN, R_SD, size=num)
        return np.stack([r * np.cos(a) + OFFSET, r * np.sin(a)], axis=1)

    def _simulate(self, theta, rng):
        return self._noise(theta.shape[0], rng) + _shift(theta)

    def _log_likelihood(self, theta, x_o):
        p = x_o[None, :] - _shift(theta)
        u, v = p[:, 0] - OFFSET, p[:, 1]
        r = np.hypot(u, v)
        # Density of (r cos a, r sin a) with a ~ U(-pi/2, pi/2), r ~ N(0.1, 0.01^2): polar
        # Jacobian 1/r; support u > 0. (r < 0 has negligible mass: 10 sd below the mean.)
        with np.errstate(divide="ignore"):
            log_r = -0.5 * ((r - R_MEAN) / R_SD) ** 2 - np.log(R_SD * np.sqrt(2 * np.pi))
            out = log_r - np.log(np.pi) - np.log(r)
        return np.where(u > 0, out, -np.inf)

    def _reference_posterior(self, x_o, num_samples, rng):
        """Exact draws (below); an observation where no draw is found in the first 2,000
        batches is refused, one where draws are rare (near the edge of the data's support)
        gets up to MAX_PROPOSALS noise proposals."""
        # x - p = shift(theta): solve for theta given a noise draw p; the |.| makes two
        # preimages, chosen with probability 1/2 each; the map has |det| = 1, so keeping those
        # inside the prior is exact posterior sampling.
        out, count, tries, proposed = [], 0, 0, 0
        while count < num_samples:
            n = max(2 * (num_samples - count), 1000)
            if tries > 2000:  # slow: reachable if a draw was found, so go on in batches
                if count == 0 or proposed > MAX_PROPOSALS:  # sized by the rate seen
                    raise no_posterior_mass(self.name)
                n = min(int(1.5 * (num_samples - count) * proposed / count) + 1, 4_000_000)
            tries += 1
            proposed += n
            p = self._noise(n, rng)
            q1 = p[:, 0] - x_o[0]  # = |t1 + t2| / sqrt 2 >= 0 in exact arithmetic
            q2 = x_o[1] - p[:, 1]  # = (t2 - t1) / sqrt 2
            sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            q1 = q1 * sign
            theta = np.stack([C * q1 - C * q2, C * q1 + C * q2], axis=1)
            ok = np.all(np.abs(theta) <= 1.0, axis=1) & (p[:, 0] - x_o[0] >= 0)
            out.append(theta[ok])
            count += int(ok.sum())
        return np.concatenate(out)[:num_samples]
