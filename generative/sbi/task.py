"""The shared simulator-task interface: prior, simulator, likelihood, transforms, observations.

Subclasses define the model (`_sample_prior`, `_log_prior`, `_simulate`, `_log_likelihood`,
`_reference_posterior`, `_torch_prior`); this base class checks shapes and seeds, maps
parameters to an unconstrained space and gives the ten observations: the SBI benchmark's
published ones (package data from the sbibm 1.1.0 wheel, see experiments/sbibm_wheel.py),
or ours, drawn from fixed seeds (`seeded_observation`). Names of the sbibm package
(`get_observation`, `get_prior`, ...) are offered for people coming from it.

I.i.d. observation sets: `iid_observation(k, n)` is n draws at the benchmark's true
parameters k (the first is its published observation k, the others simulated from a fixed
seed, so the sets are nested); `log_likelihood_iid` is the product likelihood and
`reference_posterior_iid` its posterior, for the tasks whose sampler extends to a set with
a check (`supports_iid`; the others refuse, naming those that work).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import json
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from testbed.errors import InputError, bad_value
from testbed.seeding import Seed, make_rng
from testbed.simulation import Support

NUM_OBSERVATIONS = 10
OBSERVATION_SEED_BASE = 1_000_000
OBSERVATIONS = Path(__file__).resolve().parent / "observations"  # the benchmark's, per task
OBSERVATION_SOURCES = ("sbibm", "seeded")
MAX_IID = 100  # the largest i.i.d. observation set (the sets of one k are nested)


@functools.cache
def published(task: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The SBI benchmark's ten observations [10, dim_data] and true parameters
    [10, dim_parameters] of `task` (None for a task the benchmark does not have)."""
    if not OBSERVATIONS.is_dir():  # an install without its package data: never fall back
        raise FileNotFoundError(
            f"{OBSERVATIONS}: the SBI benchmark's observations are missing from this "
            "install; reinstall testbed (pip install -e .) or run python -m "
            "experiments.sbibm_wheel"
        )
    path = OBSERVATIONS / f"{task}.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return np.asarray(data["observations"], np.float64), np.asarray(
        data["true_parameters"], np.float64
    )


def fresh_or_seeded(seed: Seed | None) -> np.random.Generator:
    """A stream for prior draws and simulations: from `seed` (an int or a Generator), or
    fresh from the OS (None), as sbibm's draws from torch's generator are. A fixed default
    would make the prior's and the simulator's noise the same numbers: gaussian_linear's
    `simulate(sample_prior(n))` was exactly 2 theta."""
    return np.random.default_rng() if seed is None else make_rng(seed)


def check_count(num: int, field: str) -> int:
    """`num` as an int >= 1, else an InputError naming `field`."""
    if isinstance(num, bool) or not isinstance(num, int | np.integer) or num < 1:
        raise bad_value(field, num, "an integer >= 1")
    return int(num)


def as_float_array(values, field: str, want: str) -> np.ndarray:
    """`values` as a float64 array, or an InputError naming `field` when it is not numeric."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad_value(field, f"a non-numeric {type(values).__name__}", want) from None


def as_rows(values, dim: int, field: str) -> np.ndarray:
    """`values` as a float64 array [n, dim]; a single vector [dim] becomes one row."""
    arr = as_float_array(values, field, f"numbers of shape [n, {dim}] or [{dim}]")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise bad_value(field, f"array of shape {np.shape(values)}", f"shape [n, {dim}] or [{dim}]")
    return arr


class Task(abc.ABC):
    """A simulator with a prior, a tractable likelihood and a reference posterior.

    Public methods take and return float64 numpy arrays with a leading batch axis.
    """

    name: str
    dim_parameters: int
    dim_data: int
    support: Support
    parameter_names: tuple[str, ...] = ()
    # Whether `reference_posterior_iid` serves i.i.d. sets; if not, why (said on refusal).
    supports_iid: bool = False
    iid_refusal: str = "its reference sampler does not extend to i.i.d. sets"
    # Ten observation seeds; the k-th observation uses `observation_seeds[k - 1]`.
    observation_seeds: tuple[int, ...] = tuple(OBSERVATION_SEED_BASE + i for i in range(10))

    # ----- model pieces that subclasses implement (inputs already checked) -----
    @abc.abstractmethod
    def _sample_prior(self, num: int, rng: np.random.Generator) -> np.ndarray: ...

    @abc.abstractmethod
    def _log_prior(self, theta: np.ndarray) -> np.ndarray: ...

    @abc.abstractmethod
    def _simulate(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

    @abc.abstractmethod
    def _log_likelihood(self, theta: np.ndarray, x_o: np.ndarray) -> np.ndarray: ...

    @abc.abstractmethod
    def _reference_posterior(
        self, x_o: np.ndarray, num_samples: int, rng: np.random.Generator
    ) -> np.ndarray: ...

    # ----- public API -----
    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def labels(self) -> tuple[str, ...]:
        """Parameter names (theta_1, ... unless the task names them)."""
        if self.parameter_names:
            return self.parameter_names
        return tuple(f"theta_{i + 1}" for i in range(self.dim_parameters))

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of the prior support per parameter ([dim] each; +-inf)."""
        return self.support.bounds(self.dim_parameters)

    def sample_prior(self, num: int, seed: Seed | None = None) -> np.ndarray:
        """`num` parameter draws from the prior, [num, dim_parameters]; `seed` an int or a
        Generator to reproduce them, None (default) for fresh ones (`fresh_or_seeded`)."""
        return self._sample_prior(check_count(num, "num"), fresh_or_seeded(seed))

    def log_prior(self, theta) -> np.ndarray:
        """Prior log-density of each row of `theta`, [n] (-inf outside the support)."""
        return self._log_prior(as_rows(theta, self.dim_parameters, "theta"))

    def simulate(self, theta, seed: Seed | None = None) -> np.ndarray:
        """One simulation per row of `theta`, [n, dim_data]; failed ODE solves give NaN rows.
        `seed`: an int or a Generator to reproduce them, None (default) for fresh noise."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        outside = ~np.isfinite(self._log_prior(theta))
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise bad_value(
                f"theta[{i}]",
                theta[i].tolist(),
                f"parameters inside the prior support {self.support}",
            )
        return self._simulate(theta, fresh_or_seeded(seed))

    def log_likelihood(self, theta, x_o) -> np.ndarray:
        """log p(x_o | theta) for each row of `theta`, [n]."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        return self._log_likelihood(theta, self.check_observation(x_o))

    def log_posterior_unnormalized(self, theta, x_o) -> np.ndarray:
        """log p(theta) + log p(x_o | theta), [n]; -inf outside the support."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        x_o = self.check_observation(x_o)
        return self._log_posterior(theta, lambda inside: self._log_likelihood(inside, x_o))

    def _log_posterior(
        self, theta: np.ndarray, log_likelihood: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """log p(theta) + log_likelihood(theta) per row [n]: the likelihood is evaluated
        only where the prior is finite (outside the support, and NaN, give -inf)."""
        lp = self._log_prior(theta)
        out = np.full(theta.shape[0], -np.inf)
        ok = np.isfinite(lp)
        if ok.any():
            out[ok] = lp[ok] + log_likelihood(theta[ok])
        return np.where(np.isnan(out), -np.inf, out)

    def check_observation(self, x_o) -> np.ndarray:
        """`x_o` as a vector [dim_data]; accepts [dim_data] or [1, dim_data]."""
        arr = as_float_array(x_o, "x_o", f"numbers of shape [{self.dim_data}]")
        if arr.ndim == 2 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.shape != (self.dim_data,):
            raise bad_value(
                "x_o",
                f"array of shape {np.shape(x_o)}",
                f"shape [{self.dim_data}] or [1, {self.dim_data}]",
            )
        if not np.all(np.isfinite(arr)):
            raise bad_value("x_o", arr.tolist(), "finite values")
        return arr

    def check_index(self, k: int) -> int:
        """`k` as an observation number in 1..NUM_OBSERVATIONS, else a named InputError."""
        if (
            isinstance(k, bool)
            or not isinstance(k, int | np.integer)
            or not 1 <= k <= NUM_OBSERVATIONS
        ):
            raise bad_value("num_observation", k, f"an integer in 1..{NUM_OBSERVATIONS}")
        return int(k)

    def true_parameters(self, k: int, source: str = "sbibm") -> np.ndarray:
        """The parameters behind observation `k` (1..10), [1, dim_parameters]."""
        return self._pair(k, source)[0].copy()

    def observation(self, k: int, source: str = "sbibm") -> np.ndarray:
        """Observation `k` (1..10), [1, dim_data]: the SBI benchmark's published observation
        (`source='sbibm'`) or ours, simulated from fixed seeds (`source='seeded'`)."""
        return self._pair(k, source)[1].copy()

    def seeded_observation(self, k: int) -> np.ndarray:
        """Our observation `k`, simulated from the task's k-th observation seed."""
        return self.observation(k, "seeded")

    def seeded_true_parameters(self, k: int) -> np.ndarray:
        """The parameters behind `seeded_observation(k)`."""
        return self.true_parameters(k, "seeded")

    def _pair(self, k: int, source: str) -> tuple[np.ndarray, np.ndarray]:
        k = self.check_index(k)
        if source not in OBSERVATION_SOURCES:
            raise bad_value("observation source", source, OBSERVATION_SOURCES)
        table = published(self.name) if source == "sbibm" else None
        if table is None:  # not a benchmark task (e.g. conjugate tasks): its own seeds
            return self._observation_pair(k)
        return table[1][k - 1][None, :], table[0][k - 1][None, :]

    @functools.cache  # noqa: B019  (tasks are few, long-lived singletons)
    def _observation_pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        seq = np.random.SeedSequence(self.observation_seeds[k - 1])
        prior_seq, sim_seq = seq.spawn(2)
        theta = self._sample_prior(1, np.random.default_rng(prior_seq))
        return theta, self._simulate(theta, np.random.default_rng(sim_seq))

    def reference_posterior(self, x_o, num_samples: int = 10_000, seed: Seed = 0) -> np.ndarray:
        """`num_samples` draws from p(theta | x_o) for any observation, [num, dim_parameters]."""
        x_o = self.check_observation(x_o)
        num_samples = check_count(num_samples, "num_samples")
        return self._reference_posterior(x_o, num_samples, make_rng(seed))

    # ----- i.i.d. observation sets -----
    def check_observations(self, xs) -> np.ndarray:
        """An i.i.d. set `xs` as [n, dim_data] (a single observation [dim_data] is a set of
        one); every row is checked as `check_observation` checks one observation."""
        arr = as_float_array(xs, "x_o", f"numbers of shape [n, {self.dim_data}]")
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != self.dim_data or len(arr) < 1:
            raise bad_value(
                "x_o", f"array of shape {np.shape(xs)}", f"shape [n, {self.dim_data}], n >= 1"
            )
        return np.stack([self.check_observation(row) for row in arr])

    def check_iid(self, allowed: Sequence[str] = ()) -> None:
        """An InputError in one line when this task has no reference for i.i.d. sets,
        naming the tasks that have one (`allowed`: `tasks.iid_task_names()`)."""
        if not self.supports_iid:
            those = ", ".join(allowed) or "the tasks of generative.sbi.iid_task_names()"
            raise InputError(
                f"task: {self.name} has no trustworthy reference posterior for i.i.d. "
                f"observation sets ({self.iid_refusal}); allowed: i.i.d. sets of {those}"
            )

    def iid_observation(self, k: int, num_iid: int, source: str = "sbibm") -> np.ndarray:
        """`num_iid` i.i.d. draws at the true parameters of observation k, [num_iid,
        dim_data]: observation k itself first, then simulations from a fixed seed per task,
        k and source (nested: the set of 10 is the first 10 of the set of 100)."""
        num_iid = check_count(num_iid, "num_iid")
        if num_iid > MAX_IID:
            raise bad_value("num_iid", num_iid, f"an integer in 1..{MAX_IID}")
        first = self.observation(k, source)
        if num_iid == 1:
            return first
        return np.concatenate([first, self._iid_draws(self.check_index(k), source)[: num_iid - 1]])

    @functools.cache  # noqa: B019  (tasks are few, long-lived singletons)
    def _iid_draws(self, k: int, source: str) -> np.ndarray:
        theta = self.true_parameters(k, source)
        seed = zlib.crc32(f"{self.name}/{k}/{source}/iid".encode())
        x = self.simulate(np.repeat(theta, MAX_IID - 1, axis=0), seed=seed)
        if not np.isfinite(x).all():  # a failed ODE solve at theta*: never seen
            raise InputError(f"{self.name}: a simulation at the true parameters {k} failed")
        x.setflags(write=False)
        return x

    def log_likelihood_iid(self, theta, xs) -> np.ndarray:
        """log prod_i p(x_i | theta) of an i.i.d. set xs [n, dim_data], per row of theta, [m]."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        return self._log_likelihood_iid(theta, self.check_observations(xs))

    def log_posterior_unnormalized_iid(self, theta, xs) -> np.ndarray:
        """log p(theta) + sum_i log p(x_i | theta), [m]; -inf outside the support."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        return self._log_posterior_iid(theta, self.check_observations(xs))

    def _log_posterior_iid(self, theta: np.ndarray, xs: np.ndarray) -> np.ndarray:
        return self._log_posterior(theta, lambda inside: self._log_likelihood_iid(inside, xs))

    def reference_posterior_iid(self, xs, num_samples: int = 10_000, seed: Seed = 0) -> np.ndarray:
        """`num_samples` draws from p(theta | x_1, ..., x_n) for an i.i.d. set xs [n,
        dim_data], [num, dim_parameters]; an InputError for a task without `supports_iid`.
        A set of one is the task's `reference_posterior` at it."""
        self.check_iid()
        xs = self.check_observations(xs)
        num_samples = check_count(num_samples, "num_samples")
        if len(xs) == 1:
            return self._reference_posterior(xs[0], num_samples, make_rng(seed))
        return self._reference_posterior_iid(xs, num_samples, make_rng(seed))

    def _log_likelihood_iid(self, theta: np.ndarray, xs: np.ndarray) -> np.ndarray:
        """Sum of the per-observation log-likelihoods (tasks override it to share work)."""
        return np.sum([self._log_likelihood(theta, x) for x in xs], axis=0)

    def _reference_posterior_iid(
        self, xs: np.ndarray, num_samples: int, rng: np.random.Generator
    ) -> np.ndarray:
        raise NotImplementedError(self.name)  # only reached for supports_iid tasks

    # ----- the sbibm package's names (numpy in and out; seeds optional, None = fresh) -----
    def get_observation(self, num_observation: int) -> np.ndarray:
        """sbibm's name for `observation(k)`: the benchmark's observation, [1, dim_data]."""
        return self.observation(num_observation)

    def get_true_parameters(self, num_observation: int) -> np.ndarray:
        """sbibm's name for `true_parameters(k)`, [1, dim_parameters]."""
        return self.true_parameters(num_observation)

    def get_reference_posterior_samples(
        self, num_observation: int, num_samples: int = 10_000, seed: Seed = 0
    ) -> np.ndarray:
        """Draws of our exact reference posterior at the benchmark's observation k (sbibm
        reads its stored draws; ours are drawn fresh, for any number and seed)."""
        return self.reference_posterior(self.observation(num_observation), num_samples, seed)

    def get_prior(self, seed: Seed | None = None) -> Callable[[int], np.ndarray]:
        """sbibm's `get_prior()`: `prior(num_samples=1) -> theta [num_samples, dim]`, every
        call drawing on from one stream: started at `seed`, or fresh (None, the default)."""
        rng = fresh_or_seeded(seed)
        return lambda num_samples=1: self._sample_prior(
            check_count(num_samples, "num_samples"), rng
        )

    def get_simulator(self, seed: Seed | None = None) -> Callable[[np.ndarray], np.ndarray]:
        """sbibm's `get_simulator()`: `simulator(theta) -> x`, one stream started at `seed`
        or fresh (None, the default)."""
        rng = fresh_or_seeded(seed)
        return lambda theta: self.simulate(theta, rng)

    def get_prior_dist(self):
        """sbibm's `get_prior_dist()`: the prior as a torch Distribution (`torch_prior`)."""
        return self.torch_prior()

    def get_labels_parameters(self) -> list[str]:
        """sbibm's `get_labels_parameters()`: the parameters' names (`labels`)."""
        return list(self.labels)

    @property
    def num_observations(self) -> int:
        """sbibm's `num_observations`: the benchmark's observations, k = 1..10."""
        return NUM_OBSERVATIONS

    def torch_prior(self):
        """The prior as a torch Distribution over [dim_parameters] with the right support
        (box, log-normal, Gaussian), e.g. for `sbi.inference.NPE(prior=task.torch_prior())`."""
        import torch

        return self._torch_prior(torch)

    def _torch_prior(self, torch):
        """Box priors: independent uniforms on the support (other tasks say their own)."""
        if self.support.kind != "box":
            raise NotImplementedError(f"{self.name}: no torch prior")
        low, high = (torch.as_tensor(b, dtype=torch.float32) for b in self.bounds)
        dist = torch.distributions
        return dist.Independent(dist.Uniform(low, high), 1)

    # ----- unconstrained space (for samplers and agents) -----
    def to_unconstrained(self, theta) -> np.ndarray:
        """Maps parameters in the support to R^d (log / scaled logit / identity)."""
        theta = as_rows(theta, self.dim_parameters, "theta")
        return UNCONSTRAINING[self.support.kind].to_z(theta, self.support)

    def from_unconstrained(self, z) -> np.ndarray:
        """Inverse of `to_unconstrained`."""
        z = as_rows(z, self.dim_parameters, "z")
        return UNCONSTRAINING[self.support.kind].from_z(z, self.support)

    def log_abs_det_jacobian(self, z) -> np.ndarray:
        """log |d from_unconstrained(z) / dz|, [n]: add it to densities over theta."""
        z = as_rows(z, self.dim_parameters, "z")
        return UNCONSTRAINING[self.support.kind].log_det(z, self.support)


@dataclasses.dataclass(frozen=True)
class Unconstraining:
    """A support's bijection with R^d on rows [n, d]: theta -> z, z -> theta, and
    log |d theta / dz| per row [n] (the three formulas of one kind kept together)."""

    to_z: Callable[[np.ndarray, Support], np.ndarray]
    from_z: Callable[[np.ndarray, Support], np.ndarray]
    log_det: Callable[[np.ndarray, Support], np.ndarray]


def _box_to_z(theta: np.ndarray, s: Support) -> np.ndarray:
    """Scaled logit of a box's parameters."""
    u = (theta - s.low) / (s.high - s.low)
    return np.log(u) - np.log1p(-u)


def _box_log_det(z: np.ndarray, s: Support) -> np.ndarray:
    """log |d theta / dz| of the scaled sigmoid: log(high - low) + log sigma'(z), summed."""
    log_sig = -np.logaddexp(0.0, -z) - np.logaddexp(0.0, z)
    return (np.log(s.high - s.low) + log_sig).sum(axis=1)


UNCONSTRAINING = {
    "positive": Unconstraining(
        to_z=lambda theta, s: np.log(theta),
        from_z=lambda z, s: np.exp(z),
        log_det=lambda z, s: z.sum(axis=1),
    ),
    "box": Unconstraining(
        to_z=_box_to_z,
        from_z=lambda z, s: s.low + (s.high - s.low) / (1.0 + np.exp(-z)),
        log_det=_box_log_det,
    ),
    "real": Unconstraining(
        to_z=lambda theta, s: theta.copy(),
        from_z=lambda z, s: z.copy(),
        log_det=lambda z, s: np.zeros(z.shape[0]),
    ),
}


class UniformBoxTask(Task):
    """A task whose prior is uniform on its box support: U(low, high)^dim_parameters."""

    def _sample_prior(self, num, rng):
        s = self.support
        return rng.uniform(s.low, s.high, size=(num, self.dim_parameters))

    def _log_prior(self, theta):
        s = self.support
        inside = np.all((theta >= s.low) & (theta <= s.high), axis=1)
        return np.where(inside, -self.dim_parameters * np.log(s.high - s.low), -np.inf)


def no_posterior_mass(task: str) -> InputError:
    """The error for an observation the prior cannot (numerically) produce."""
    return InputError(
        f"x_o: the {task} posterior has no numerically reachable mass for this observation; "
        "allowed: observations the simulator can produce under the prior"
    )
