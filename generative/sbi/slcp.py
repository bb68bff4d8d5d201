"""slcp and slcp_distractors: a simple likelihood with a complex (four-fold) posterior.

theta ~ U(-3, 3)^5; four iid 2-D draws x_i ~ N(m, S) with m = (t1, t2), s1 = t3^2,
s2 = t4^2, rho = tanh(t5), S = [[s1^2, rho s1 s2], [rho s1 s2, s2^2]] + 1e-6 I, flattened as
[a1, b1, a2, b2, ...]. The distractor variant appends 92 dims of a fixed 20-component
Student-t(df=2) mixture and permutes the 100 columns (both from RandomState(42), as the
benchmark generated them).

Reference posterior (exact up to the rejection bound): (t1, t2) is integrated out in closed
form; (|t3|, |t4|, t5) is proposed from a grid over (log|t3|, log|t4|, t5) fitted to that
marginal, (t1, t2) from its box-truncated Gaussian conditional, and the pair is accepted by
rejection against the exact joint; the signs of t3 and t4 are then drawn uniformly, because
the likelihood depends on them only through t3^2 and t4^2 (all four modes are covered).
An i.i.d. set of n observations is 4n i.i.d. points at one theta, sampled the same way
(the same integral with 4n points in place of 4).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import special

from generative.sbi.samplers import (
    log_box_mass,
    rejection_sample,
    truncated_normal,
    truncated_normal_quantile,
)
from generative.sbi.task import Support, UniformBoxTask, no_posterior_mass
from testbed.seeding import Seed, make_rng

NUM_DRAWS = 4
JITTER = 1e-6
BOUND = 3.0
LOG_2PI = np.log(2 * np.pi)


def covariance(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S11, S12, S22) of each row's 2x2 covariance."""
    s1, s2 = theta[:, 2] ** 2, theta[:, 3] ** 2
    rho = np.tanh(theta[:, 4])
    return s1**2 + JITTER, rho * s1 * s2, s2**2 + JITTER


def slcp_log_likelihood(theta: np.ndarray, points: np.ndarray) -> np.ndarray:
    """sum_i log N(points[i]; m(theta), S(theta)); points [N, 2] (4 per observation)."""
    a, b, c = covariance(theta)
    det = a * c - b**2
    d = points[None, :, :] - theta[:, None, :2]  # [n, 4, 2]
    maha = (c[:, None] * d[..., 0] ** 2 - 2 * b[:, None] * d[..., 0] * d[..., 1]) + a[:, None] * d[
        ..., 1
    ] ** 2
    maha = maha / det[:, None]
    return -0.5 * maha.sum(axis=1) - len(points) * (LOG_2PI + 0.5 * np.log(det))


def marginal_log_density(u: np.ndarray, scatter: np.ndarray, num_points: int = NUM_DRAWS):
    """log of the likelihood with (t1, t2) integrated over R^2, up to a constant.

    u = (t3, t4, t5) rows; scatter = sum_i (x_i - mean)(x_i - mean)^T. With N draws,
    prod_i N(x_i; m, S) = const |S|^{-(N-1)/2} exp(-tr(S^-1 scatter) / 2) N(m; mean, S / N)
    (N = 4: one observation).
    """
    full = np.concatenate([np.zeros((u.shape[0], 2)), u], axis=1)
    a, b, c = covariance(full)
    det = a * c - b**2
    tr = (c * scatter[0, 0] - 2 * b * scatter[0, 1] + a * scatter[1, 1]) / det
    return -(num_points - 1) / 2 * np.log(det) - 0.5 * tr


class GridProposal:
    """Piecewise-constant density on a grid over a box; a cell's mass is proportional to
    the largest of `log_f` at its corners and centre (so thin peaks are not starved) times
    a slowly varying factor `log_smooth` taken at the centre."""

    def __init__(self, log_f, low: np.ndarray, high: np.ndarray, cells: int, log_smooth=None):
        self.low, self.high, self.cells = low, high, cells
        self.width = (high - low) / cells
        d = len(low)
        edges = [np.linspace(lo, hi, cells + 1) for lo, hi in zip(low, high)]
        corners = np.stack(np.meshgrid(*edges, indexing="ij"), axis=-1).reshape(-1, d)
        f_corner = log_f(corners).reshape((cells + 1,) * d)
        mids = [(e[1:] + e[:-1]) / 2 for e in edges]
        centres = np.stack(np.meshgrid(*mids, indexing="ij"), axis=-1).reshape(-1, d)
        best = log_f(centres).reshape((cells,) * d)
        for offset in np.ndindex(*(2,) * d):
            view = tuple(slice(o, o + cells) for o in offset)
            best = np.maximum(best, f_corner[view])
        if log_smooth is not None:
            best = best + log_smooth(centres).reshape((cells,) * d)
        self.log_cell_max = np.where(np.isnan(best), -np.inf, best)
        if not np.isfinite(self.log_cell_max.max()):
            raise ValueError("the density is zero on the whole grid")
        w = np.exp(self.log_cell_max - self.log_cell_max.max()).ravel()
        self.cell_probs = w / w.sum()
        self.log_cell_volume = float(np.sum(np.log(self.width)))

    def support_box(self, drop: float) -> tuple[np.ndarray, np.ndarray]:
        """The smallest box of whole cells (plus one cell of margin) holding every cell whose
        density is within exp(-drop) of the largest."""
        keep = np.argwhere(self.log_cell_max >= self.log_cell_max.max() - drop)
        lo_idx = np.maximum(keep.min(axis=0) - 1, 0)
        hi_idx = np.minimum(keep.max(axis=0) + 2, self.cells)
        return self.low + lo_idx * self.width, self.low + hi_idx * self.width

    def sample(self, num_samples: int, seed: Seed) -> np.ndarray:
        rng, num = make_rng(seed), int(num_samples)
        d = len(self.low)
        cell = rng.choice(self.cell_probs.size, size=num, p=self.cell_probs)
        idx = np.stack(np.unravel_index(cell, (self.cells,) * d), axis=1)
        return self.low + (idx + rng.random((num, d))) * self.width

    def log_prob(self, w: np.ndarray) -> np.ndarray:
        d = len(self.low)
        inside = np.all((w >= self.low) & (w <= self.high), axis=1)
        idx = np.clip(np.floor((w - self.low) / self.width).astype(int), 0, self.cells - 1)
        flat = np.ravel_multi_index(tuple(idx.T), (self.cells,) * d)
        with np.errstate(divide="ignore"):
            out = np.log(self.cell_probs[flat]) - self.log_cell_volume
        return np.where(inside, out, -np.inf)


# Grid coordinates w = (log t3, log t4, t5): the variances are t^4, so peaks are thin in t
# but of even width in log t. Below T_MIN the 1e-6 jitter dominates the variance; that
# corner is covered by the uniform component of the proposal.
T_MIN = 1e-2
COARSE, FINE = 40, 64
MIX = (0.8, 0.15, 0.05)  # fine grid, coarse grid, uniform over the whole box


class MarginalProposal:
    """Proposal for (|t3|, |t4|, t5): a fine grid where the mass is, a coarse grid over the
    whole box and a uniform component (so the proposal is positive wherever the target is)."""

    def __init__(self, log_h_u, log_smooth_u):
        def log_h_w(w):  # density of w = (log t3, log t4, t5), Jacobian t3 t4
            return log_h_u(self.to_u(w)) + w[:, 0] + w[:, 1]

        def log_smooth_w(w):
            return log_smooth_u(self.to_u(w))

        self.low_u = np.array([0.0, 0.0, -BOUND])
        self.high_u = np.array([BOUND, BOUND, BOUND])
        low_w = np.array([np.log(T_MIN), np.log(T_MIN), -BOUND])
        high_w = np.array([np.log(BOUND), np.log(BOUND), BOUND])
        self.coarse = GridProposal(log_h_w, low_w, high_w, COARSE, log_smooth_w)
        box = self.coarse.support_box(drop=30.0)
        self.fine = GridProposal(log_h_w, *box, FINE, log_smooth_w)

    @staticmethod
    def to_u(w):
        return np.concatenate([np.exp(w[:, :2]), w[:, 2:]], axis=1)

    def sample(self, num_samples: int, seed: Seed) -> np.ndarray:
        rng, num = make_rng(seed), int(num_samples)
        which = rng.choice(3, size=num, p=MIX)
        out = self.low_u + rng.random((num, 3)) * (self.high_u - self.low_u)
        for j, grid in ((0, self.fine), (1, self.coarse)):
            rows = which == j
            out[rows] = self.to_u(grid.sample(int(rows.sum()), rng))
        return out

    def log_prob(self, u: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            w = np.concatenate([np.log(u[:, :2]), u[:, 2:]], axis=1)
            jac = -w[:, 0] - w[:, 1]
            parts = [
                np.log(MIX[0]) + self.fine.log_prob(w) + jac,
                np.log(MIX[1]) + self.coarse.log_prob(w) + jac,
                np.full(len(u), np.log(MIX[2]) - np.sum(np.log(self.high_u - self.low_u))),
            ]
        return np.logaddexp.reduce(np.stack(parts), axis=0)


class MeanGeometry:
    """m ~ N(mean, S(u) / N) restricted to the box (N points), factored per row as
    (m_a, m_b | m_a) with m_a the coordinate whose marginal box probability is smaller:
    drawing the hard coordinate from its exact truncated marginal keeps the rejection ratio
    well behaved."""

    def __init__(self, u: np.ndarray, mean: np.ndarray, num_points: int = NUM_DRAWS):
        full = np.concatenate([np.zeros((u.shape[0], 2)), u], axis=1)
        var1, cov, var2 = (v / num_points for v in covariance(full))
        sd = np.sqrt(np.stack([var1, var2], axis=1))
        log_marg = log_box_mass(mean[None, :, None], sd[:, :, None], -BOUND, BOUND)
        self.first = np.argmin(log_marg, axis=1)  # per row: 0 or 1
        f = self.first
        rows = np.arange(len(u))
        self.mean_a = mean[f]
        self.mean_b = mean[1 - f]
        self.sd_a = sd[rows, f]
        var_a, var_b = np.where(f == 0, var1, var2), np.where(f == 0, var2, var1)
        self.slope = cov / var_a
        self.sd_b = np.sqrt(np.maximum(var_b - cov**2 / var_a, 1e-300))
        self.log_mass_a = log_marg[rows, f]

    def cond_mean(self, m_a: np.ndarray) -> np.ndarray:
        return self.mean_b + self.slope * (m_a - self.mean_a)

    def log_mass_b(self, m_a: np.ndarray) -> np.ndarray:
        """log P(m_b in the box | m_a)."""
        return log_box_mass(self.cond_mean(m_a)[:, None], self.sd_b[:, None], -BOUND, BOUND)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One mean m per row of u, from the box-truncated Gaussian (factored)."""
        m_a = truncated_normal(self.mean_a, self.sd_a, -BOUND, BOUND, rng)
        m_b = truncated_normal(self.cond_mean(m_a), self.sd_b, -BOUND, BOUND, rng)
        return np.where(self.first[:, None] == 0, np.stack([m_a, m_b], 1), np.stack([m_b, m_a], 1))

    def hard_coordinate(self, m: np.ndarray) -> np.ndarray:
        return m[np.arange(len(m)), self.first]


QUAD_NODES = 8


def _log_box_factor(u: np.ndarray, mean: np.ndarray, num_points: int = NUM_DRAWS) -> np.ndarray:
    """log P(m in the box | u): P(m_a in box) times the average of P(m_b in box | m_a) over
    8 quantiles of the truncated m_a (an approximation that only shapes the proposal)."""
    geo = MeanGeometry(u, mean, num_points)
    p = (np.arange(QUAD_NODES) + 0.5) / QUAD_NODES
    rep = lambda v: np.repeat(v[:, None], QUAD_NODES, axis=1)  # noqa: E731
    m_a = truncated_normal_quantile(rep(geo.mean_a), rep(geo.sd_a), -BOUND, BOUND, p[None, :])
    mu_b = rep(geo.mean_b) + rep(geo.slope) * (m_a - rep(geo.mean_a))
    log_b = log_box_mass(mu_b[..., None], rep(geo.sd_b)[..., None], -BOUND, BOUND)
    return geo.log_mass_a + special.logsumexp(log_b, axis=1) - np.log(QUAD_NODES)


def slcp_reference_posterior(
    points: np.ndarray, num_samples: int, rng: np.random.Generator
) -> np.ndarray:
    """Posterior draws for N observed 2-D points (4 per observation), [num_samples, 5]
    (see module doc).

    Joint rejection over v = (m, u): u from the grid proposal q, then m from the box-truncated
    Gaussian factored as in `MeanGeometry`. target / proposal =
    h(u) P(m_a in box | u) P(m_b in box | m_a, u) / q(u), near-constant as q follows h P(box).
    """
    num_points = len(points)
    mean = points.mean(axis=0)
    centred = points - mean
    scatter = centred.T @ centred

    try:  # marginal density of u, times the box probability of m (smooth: cell centres)
        grid = MarginalProposal(
            lambda u: marginal_log_density(u, scatter, num_points),
            lambda u: _log_box_factor(u, mean, num_points),
        )
    except ValueError as err:
        raise no_posterior_mass("slcp") from err

    def propose(num, rng_):
        u = grid.sample(num, rng_)
        m = MeanGeometry(u, mean, num_points).draw(rng_)
        return np.concatenate([m, u], axis=1)

    def log_target(v):  # exact joint over the m-proposal: the N(m; mean, S / 4) terms cancel
        u, geo = v[:, 2:], MeanGeometry(v[:, 2:], mean, num_points)
        m_a = geo.hard_coordinate(v[:, :2])
        return marginal_log_density(u, scatter, num_points) + geo.log_mass_a + geo.log_mass_b(m_a)

    draws = rejection_sample(
        log_target,
        propose,
        lambda v: grid.log_prob(v[:, 2:]),
        num_samples,
        rng,
        what="slcp posterior",
    )
    signs = np.where(rng.random((num_samples, 2)) < 0.5, -1.0, 1.0)
    draws[:, 2:4] *= signs
    return draws


class SLCP(UniformBoxTask):
    """The SLCP task (x in R^8)."""

    name = "slcp"
    dim_parameters = 5
    dim_data = 8
    support = Support("box", -BOUND, BOUND)
    supports_iid = True

    def _slcp_draws(self, theta, rng):
        a, b, c = covariance(theta)
        l11 = np.sqrt(a)
        l21 = b / l11
        l22 = np.sqrt(np.maximum(c - l21**2, 0.0))
        z = rng.standard_normal((theta.shape[0], NUM_DRAWS, 2))
        x0 = theta[:, None, 0] + l11[:, None] * z[..., 0]
        x1 = theta[:, None, 1] + l21[:, None] * z[..., 0] + l22[:, None] * z[..., 1]
        return np.stack([x0, x1], axis=-1).reshape(theta.shape[0], 2 * NUM_DRAWS)

    def _simulate(self, theta, rng):
        return self._slcp_draws(theta, rng)

    def slcp_part(self, x: np.ndarray) -> np.ndarray:
        """The 8 SLCP coordinates of observations [n, dim_data] as [n, 4, 2]."""
        return x.reshape(-1, NUM_DRAWS, 2)

    def _log_likelihood(self, theta, x_o):
        return slcp_log_likelihood(theta, self.slcp_part(x_o[None])[0])

    def _reference_posterior(self, x_o, num_samples, rng):
        return slcp_reference_posterior(self.slcp_part(x_o[None])[0], num_samples, rng)

    def _log_likelihood_iid(self, theta, xs):
        return slcp_log_likelihood(theta, self.slcp_part(xs).reshape(-1, 2))

    def _reference_posterior_iid(self, xs, num_samples, rng):
        return slcp_reference_posterior(self.slcp_part(xs).reshape(-1, 2), num_samples, rng)


@functools.cache
def distractor_mixture() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(locs [20, 92], scale_trils [20, 92, 92], permutation [100]) from RandomState(42)."""
    rs = np.random.RandomState(42)
    dim, comps = 92, 20
    locs = np.array([15 * rs.normal(size=dim) for _ in range(comps)])
    trils = np.array(
        [
            np.tril(rs.normal(size=(dim, dim))) + np.diag(np.exp(rs.normal(size=dim)))
            for _ in range(comps)
        ]
    )
    perm = rs.permutation(dim + 2 * NUM_DRAWS)
    return locs, 3 * trils, perm


DISTRACTOR_DF = 2.0


class SLCPDistractors(SLCP):
    """SLCP with 92 uninformative Student-t mixture dims, columns permuted (x in R^100)."""

    name = "slcp_distractors"
    dim_data = 100

    def _simulate(self, theta, rng):
        n = theta.shape[0]
        locs, trils, perm = distractor_mixture()
        comp = rng.integers(0, locs.shape[0], size=n)
        z = rng.standard_normal((n, locs.shape[1]))
        scale = np.sqrt(DISTRACTOR_DF / rng.chisquare(DISTRACTOR_DF, size=n))[:, None]
        noise = np.empty_like(z)
        for c in range(locs.shape[0]):  # loop over the 20 components, not over simulations
            rows = comp == c
            noise[rows] = locs[c] + scale[rows] * (z[rows] @ trils[c].T)
        full = np.concatenate([self._slcp_draws(theta, rng), noise], axis=1)
        return full[:, perm]

    def _columns(self) -> tuple[np.ndarray, np.ndarray]:
        perm = distractor_mixture()[2]
        where = np.argsort(perm)  # where[j] = column of x holding original coordinate j
        return where[: 2 * NUM_DRAWS], where[2 * NUM_DRAWS :]

    def slcp_part(self, x):
        return x[:, self._columns()[0]].reshape(-1, NUM_DRAWS, 2)

    def distractor_log_density(self, x_o: np.ndarray) -> float:
        """log density of the 92 distractor coordinates of one observation (theta-free)."""
        locs, trils, _ = distractor_mixture()
        y = x_o[self._columns()[1]]
        p, df = locs.shape[1], DISTRACTOR_DF
        out = []
        for loc, tril in zip(locs, trils):
            sol = np.linalg.solve(tril, y - loc)
            logdet = np.sum(np.log(np.abs(np.diag(tril))))
            out.append(
                special.gammaln((df + p) / 2)
                - special.gammaln(df / 2)
                - p / 2 * np.log(df * np.pi)
                - logdet
                - (df + p) / 2 * np.log1p(sol @ sol / df)
            )
        return float(special.logsumexp(out) - np.log(len(out)))

    def _log_likelihood(self, theta, x_o):
        return super()._log_likelihood(theta, x_o) + self.distractor_log_density(x_o)

    def _log_likelihood_iid(self, theta, xs):
        distractors = sum(self.distractor_log_density(x) for x in xs)
        return super()._log_likelihood_iid(theta, xs) + distractors
