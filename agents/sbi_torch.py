"""Bridges between a posterior problem's numpy simulation access and the `sbi` package.

A posterior problem hands its agent a `SimulationAccess` (`prior.sample(num, seed)`,
`prior.log_prob(theta)`, a budgeted `simulate(theta, seed)`, `x_o`, `budget`) and states
the prior's support in its `SimulatorKnowledge`. Here that becomes what `sbi` wants (a
torch prior with a `support`, a torch simulator) and an `sbi` posterior becomes our
`PosteriorEstimate` (numpy in, numpy out, seeded). torch is imported lazily by callers.

An observation reaches sbi in the shape the method conditions on (`shape`): one
observation [1, dim_x], an i.i.d. set as n rows [n, dim_x] (likelihood and ratio methods:
sbi sums over them) or as one set [1, n, dim_x] (set-embedding posterior estimators).
"""

from __future__ import annotations

import math

import numpy as np

from agents.sbi_progress import quiet_sampling
from testbed.posterior_adapter import sample_mcmc_many, seeded_global_rngs
from testbed.simulation import SimulationAccess, SimulatorKnowledge

SEED_HIGH = 2**31 - 1


def torch_seed(torch) -> int:
    """A fresh integer seed drawn from torch's global generator (so one seed drives all)."""
    return int(torch.randint(0, SEED_HIGH, ()).item())


def clip_to_support(theta: np.ndarray, kind: str, low: np.ndarray, high: np.ndarray):
    """Moves float32 round-off on the support's edge back inside (open box / positive)."""
    if kind == "box":
        return np.clip(theta, np.nextafter(low, high), np.nextafter(high, low))
    if kind == "positive":
        return np.maximum(theta, np.finfo(np.float64).tiny)
    return theta


def make_torch_prior(access: SimulationAccess, knowledge: SimulatorKnowledge):
    """A torch Distribution over [dim] backed by the problem's numpy prior, with a support.

    The support (interval / positive / real) lets `sbi` build its MCMC transform
    (`biject_to(support)`), as the benchmark's automatic transforms do.
    """
    import torch
    from torch.distributions import Distribution, constraints

    dim, kind = knowledge.dim_theta, knowledge.support.kind
    low, high = knowledge.support.bounds(dim)
    probe = np.asarray(access.prior.sample(10_000, 0), np.float64)
    mean = torch.as_tensor(probe.mean(0), dtype=torch.float32)
    std = torch.as_tensor(probe.std(0, ddof=1), dtype=torch.float32)

    class NumpyPrior(Distribution):
        """The problem's prior seen as a torch Distribution (samples seeded from torch)."""

        arg_constraints: dict = {}
        has_rsample = False

        def __init__(self):
            super().__init__(torch.Size(), torch.Size([dim]), validate_args=False)

        @property
        def support(self):
            if kind == "box":
                base = constraints.interval(
                    torch.as_tensor(low, dtype=torch.float32),
                    torch.as_tensor(high, dtype=torch.float32),
                )
            elif kind == "positive":
                base = constraints.positive
            else:
                base = constraints.real
            return constraints.independent(base, 1)

        @property
        def mean(self):
            return mean

        @property
        def stddev(self):
            return std

        @property
        def variance(self):
            return std**2

        def sample(self, sample_shape=()):
            shape = torch.Size(sample_shape)
            num = max(math.prod(shape), 1)
            theta = np.asarray(access.prior.sample(num, torch_seed(torch)), np.float32)
            return torch.as_tensor(theta).reshape(*shape, dim)

        def log_prob(self, value):
            value = torch.as_tensor(value)
            flat = value.detach().cpu().double().numpy().reshape(-1, dim)
            lp = np.asarray(access.prior.log_prob(flat), np.float64)
            return torch.as_tensor(lp, dtype=torch.float32).reshape(value.shape[:-1])

    return NumpyPrior()


def make_torch_simulator(
    access: SimulationAccess, knowledge: SimulatorKnowledge, set_size: int = 1
):
    """`theta (torch [m, dim]) -> x (torch [m, dim_data])` through the budgeted simulator;
    with `set_size` n > 1, `x [m, n, dim_data]`: n i.i.d. draws at each theta (m * n
    simulations)."""
    import torch

    kind = knowledge.support.kind
    low, high = knowledge.support.bounds(knowledge.dim_theta)

    def simulator(theta):
        arr = clip_to_support(np.asarray(theta.detach().cpu(), np.float64), kind, low, high)
        if set_size > 1:
            arr = np.repeat(arr, set_size, axis=0)
        x = np.asarray(access.simulate(arr, torch_seed(torch)), np.float32)
        if set_size > 1:
            x = x.reshape(-1, set_size, x.shape[-1])
        return torch.as_tensor(x)

    return simulator


class NullTracker:
    """An sbi training tracker that records nothing (sbi's default writes ./sbi-logs)."""

    log_dir = None

    def log_metric(self, name, value, step=None) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        pass

    def log_params(self, params) -> None:
        pass

    def add_figure(self, name, figure, step=None) -> None:
        pass

    def flush(self) -> None:
        pass


class SbiSamples:
    """An `sbi` posterior as our `PosteriorEstimate` (samples only): numpy, explicit seed.

    Used for MCMC posteriors of NLE / NRE, whose densities are unnormalised. `shape` is how
    sbi sees one x_o (default [1, dim_x]; see the module docstring); `sample_kwargs` go to
    every `posterior.sample` call (e.g. NPSE's number of SDE steps).
    """

    def __init__(
        self,
        posterior,
        x_o: np.ndarray,
        shape: tuple[int, ...] | None = None,
        sample_kwargs: dict | None = None,
    ):
        self.posterior = posterior
        self.shape = tuple(shape) if shape is not None else (1, int(np.size(x_o)))
        self.x_o = np.asarray(x_o, np.float32).reshape(self.shape)
        self.sample_kwargs = dict(sample_kwargs or {})

    def _x(self, x_o):
        import torch

        x = self.x_o if x_o is None else np.asarray(x_o, np.float32).reshape(self.shape)
        return torch.as_tensor(x)

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        with seeded_global_rngs(seed), quiet_sampling():
            out = self.posterior.sample(
                (int(num_samples),),
                x=self._x(x_o),
                show_progress_bars=False,
                **self.sample_kwargs,
            )
        return np.asarray(out.detach().cpu(), np.float64)


class SbiMCMC(SbiSamples):
    """An `sbi` MCMC posterior (NLE / NRE) whose sampler batches over observations
    (`slice_np_vectorized`): also draws at several observations in one call."""

    def sample_many(self, x_os, num_samples: int, seed: int) -> np.ndarray:
        """`num_samples` draws at each row of `x_os` [n, dim_x] -> [n, num_samples, dim_theta]
        from one batched MCMC run (the posterior's chains, thinning, warm-up and init per
        observation; `testbed.posterior_adapter.sample_mcmc_many`)."""
        with quiet_sampling():
            return sample_mcmc_many(self.posterior, x_os, num_samples, seed)


class SbiDensity(SbiSamples):
    """A normalised `sbi` posterior (NPE): samples, batched samples and log-densities."""

    def sample_batched(self, xs, seed: int) -> np.ndarray:
        """One posterior draw per row of `xs` [n, dim_data] -> [n, dim_theta] (amortized)."""
        import torch

        xs = torch.as_tensor(np.asarray(xs, np.float32).reshape(-1, *self.shape[1:]))
        with seeded_global_rngs(seed), quiet_sampling():
            out = self.posterior.sample_batched(
                (1,), x=xs, show_progress_bars=False, **self.sample_kwargs
            )
        return np.asarray(out[0].detach().cpu(), np.float64)

    def log_prob(self, theta, x_o=None) -> np.ndarray:
        import torch

        theta = torch.as_tensor(np.asarray(theta, np.float32))
        # sbi estimates the mass leaking outside the prior by sampling: seed it.
        with seeded_global_rngs(0), torch.no_grad(), quiet_sampling():
            lp = self.posterior.log_prob(theta, x=self._x(x_o))
        return np.asarray(lp.detach().cpu(), np.float64)


class SbiFlow(SbiDensity):
    """An `sbi` NPE posterior whose conditional flow is used directly, as the L-C2ST paper
    does: draws of the flow itself (no rejection to the prior's support), its log-density
    at paired (theta_i, x_i) rows, and its inverse transform to the base space N(0, I)."""

    CHUNK_ROWS = 100_000  # flow rows evaluated at once (2.7x faster than 500,000 on this CPU)

    def _net(self):
        return self.posterior.posterior_estimator.net  # the nflows Flow

    def _rows(self, xs, torch):
        return torch.as_tensor(np.asarray(xs, np.float32).reshape(-1, *self.shape[1:]))

    def flow_draws(self, xs, num_samples: int, seed: int) -> np.ndarray:
        """[num_samples, n, dim_theta]: `num_samples` flow draws at each row of xs [n, d]."""
        import torch

        x = self._rows(xs, torch)
        step = max(1, self.CHUNK_ROWS // max(1, int(num_samples)))
        out = []
        with seeded_global_rngs(seed), torch.no_grad():
            for i in range(0, x.shape[0], step):
                draws = self._net().sample(int(num_samples), context=x[i : i + step])
                out.append(np.asarray(draws.transpose(0, 1), np.float32))  # [L, chunk, d]
        return np.concatenate(out, axis=1)

    def flow_draws_log_prob(self, xs, num_samples: int, seed: int):
        """`flow_draws` and their log-densities in one pass of the flow (its inverse gives
        both): ([num_samples, n, dim_theta], [num_samples, n])."""
        import torch

        x = self._rows(xs, torch)
        step = max(1, self.CHUNK_ROWS // max(1, int(num_samples)))
        draws, log_probs = [], []
        with seeded_global_rngs(seed), torch.no_grad():
            for i in range(0, x.shape[0], step):
                d, lp = self._net().sample_and_log_prob(int(num_samples), context=x[i : i + step])
                draws.append(np.asarray(d.transpose(0, 1), np.float32))  # [L, chunk, d]
                log_probs.append(np.asarray(lp.transpose(0, 1), np.float64))  # [L, chunk]
        return np.concatenate(draws, axis=1), np.concatenate(log_probs, axis=1)

    def flow_log_prob(self, theta, xs) -> np.ndarray:
        """log q(theta[..., i, :] | x_i) of the flow: theta [n, d] or [L, n, d] -> [n] / [L, n]."""
        import torch

        x = self._rows(xs, torch)
        th = np.asarray(theta, np.float32)
        lead = th.shape[:-1]
        th = th.reshape(-1, x.shape[0], th.shape[-1])  # [L, n, d]
        out = np.empty(th.shape[:2], np.float64)
        step = max(1, self.CHUNK_ROWS // th.shape[0])
        with torch.no_grad():
            for i in range(0, x.shape[0], step):
                part = torch.as_tensor(th[:, i : i + step])
                ctx = x[i : i + step].unsqueeze(0).expand(part.shape[0], *x[i : i + step].shape)
                lp = self._net().log_prob(
                    part.reshape(-1, part.shape[-1]), context=ctx.reshape(-1, *x.shape[1:])
                )
                out[:, i : i + step] = np.asarray(lp.reshape(part.shape[:2]), np.float64)
        return out.reshape(lead)

    def inverse_transform(self, theta, xs) -> np.ndarray:
        """z = T^{-1}(theta_i; x_i) in the flow's base space (context embedded as the flow
        embeds it when it computes a density), for paired rows [n, d]."""
        import torch

        net = self._net()
        x = self._rows(xs, torch)
        th = torch.as_tensor(np.asarray(theta, np.float32).reshape(x.shape[0], -1))
        out = []
        with torch.no_grad():
            for i in range(0, x.shape[0], self.CHUNK_ROWS):
                ctx = net._embedding_net(x[i : i + self.CHUNK_ROWS])
                z, _ = net._transform(th[i : i + self.CHUNK_ROWS], context=ctx)
                out.append(np.asarray(z, np.float32))
        return np.concatenate(out)
