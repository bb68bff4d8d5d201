"""Score any posterior object as it is: the `sbi` package's shape or our protocol.

Two shapes are accepted, told apart by the signature of `sample`:
- `sbi` posteriors: `sample(sample_shape, x=x_o)` and `log_prob(theta, x=x_o)` on torch
  tensors (`sample_batched(sample_shape, x=xs)` when amortized);
- our `PosteriorEstimate`: `sample(x_o, num_samples, seed)` and optional
  `log_prob(theta, x_o)` on numpy arrays (optional `sample_batched(xs, seed)`).
`as_posterior(obj)` wraps either into `AdaptedPosterior` (numpy in and out, seeded, with
shapes and finiteness checked), so evaluators never branch on where a posterior came from.
torch is imported only when an sbi-shaped object is used.

Draws at several observations in one call (`sample_many`) come from an object's own
`sample_many(x_os, num_samples, seed)` or from an sbi MCMC posterior whose sampler batches
over x (sbi's `sample_batched`, only with `slice_np_vectorized`): the MCMC of NLE / NRE at
the ten observations of an amortized run (`presample`, used by `testbed.evaluate_many`).
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from testbed.errors import InputError

Style = Literal["sbi", "protocol"]

# sbi posteriors whose `log_prob` is only the potential (unnormalised, sbi warns so): their
# "density" would give a meaningless NLTP, so they are scored on samples alone, as the
# benchmark does for NLE / NRE (its NLTP is NaN there).
UNNORMALISED_SBI_POSTERIORS = ("MCMCPosterior", "RejectionPosterior")


class SampleRequest(NamedTuple):
    """The draws a problem takes from a posterior: `num_samples` at `x_o` under `seed`."""

    x_o: Any
    num_samples: int
    seed: int

    def key(self) -> tuple[bytes, int, int]:
        return (np.asarray(self.x_o, np.float64).tobytes(), int(self.num_samples), int(self.seed))


def posterior_style(obj: Any) -> Style:
    """'sbi' when `obj.sample` takes `sample_shape`, or `x=` with neither `num_samples` nor
    `seed` (sbi's `sample(sample_shape, x=x_o)`); else 'protocol' (`sample(x_o, n, seed)`,
    whatever its arguments are called)."""
    sample = getattr(obj, "sample", None)
    if not callable(sample):
        raise InputError(
            f"posterior: got {type(obj).__name__} without a sample method; allowed: an "
            "object with sample(x_o, num_samples, seed) or sbi's sample(shape, x=x_o)"
        )
    try:
        params = inspect.signature(sample).parameters
    except (TypeError, ValueError):
        return "protocol"
    if "sample_shape" in params:
        return "sbi"
    if "x" in params and "num_samples" not in params and "seed" not in params:
        return "sbi"
    return "protocol"


def has_normalised_log_prob(obj: Any) -> bool:
    """Whether `obj` offers a normalised density: a callable `log_prob`, and not one of sbi's
    potential-based posteriors (see UNNORMALISED_SBI_POSTERIORS)."""
    if not callable(getattr(obj, "log_prob", None)):
        return False
    names = {cls.__name__ for cls in type(obj).__mro__}
    return not names & set(UNNORMALISED_SBI_POSTERIORS)


def _to_numpy(value: Any, what: str = "posterior output") -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(
            f"{what}: got a non-numeric {type(value).__name__}; allowed: an array of numbers"
        ) from None


@contextlib.contextmanager
def seeded_global_rngs(seed: int):
    """torch's and numpy's global RNGs seeded for a block, outer states restored after.

    sbi draws from torch's global generator and its slice sampler from `np.random`.
    """
    import torch

    state = np.random.get_state()  # noqa: NPY002  (sbi's MCMC uses the legacy RNG)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            np.random.seed(int(seed) % 2**32)  # noqa: NPY002
            yield torch
    finally:
        np.random.set_state(state)  # noqa: NPY002


def batches_mcmc_over_x(obj: Any) -> bool:
    """Whether `obj` is an sbi MCMC posterior whose sampler batches over observations
    (`sample_batched`; sbi 0.27 allows it only for `slice_np_vectorized`)."""
    names = {cls.__name__ for cls in type(obj).__mro__}
    return "MCMCPosterior" in names and getattr(obj, "method", None) == "slice_np_vectorized"


def sample_mcmc_many(posterior: Any, x_os: Any, num_samples: int, seed: int) -> np.ndarray:
    """`num_samples` draws at each row of `x_os` [n, dim_x] -> [n, num_samples, dim_theta],
    from one `sample_batched` call of an sbi MCMC posterior (`batches_mcmc_over_x`).

    The posterior's own settings hold per observation (method, `num_chains` chains per x,
    thinning, warm-up, init strategy and its parameters); all n x num_chains chains run
    side by side on one random stream seeded by `seed`, so the draws at one x differ from
    those of `posterior.sample` at that x alone (same distribution, other chains).
    """
    xs = np.asarray(x_os, np.float32)
    with seeded_global_rngs(seed) as torch, warnings.catch_warnings():
        # sbi warns whenever n x num_chains > 100 chains: that is the point here.
        warnings.filterwarnings("ignore", message=".*for batched sampling, we use num_chains")
        out = posterior.sample_batched(
            (int(num_samples),),
            x=torch.as_tensor(xs.reshape(len(xs), -1)),
            show_progress_bars=False,
            # a copy: sbi writes `num_return_samples` into the dict it is given
            init_strategy_parameters=dict(posterior.init_strategy_parameters or {}),
        )
    return np.swapaxes(_to_numpy(out, "posterior samples"), 0, 1)


def observation_rows(x_o: Any) -> np.ndarray:
    """`x_o` as rows for an sbi posterior: one observation [dim_x] or [1, dim_x] -> [1, dim_x];
    a set of i.i.d. draws [n, dim_x] stays [n, dim_x] (sbi conditions on all of them)."""
    x = np.asarray(x_o)
    return x.reshape(1, -1) if x.ndim < 2 else x.reshape(len(x), -1)


def check_samples(samples: np.ndarray, num: int, dim: int | None, what: str) -> np.ndarray:
    """`samples` if shaped [num, dim] and finite; else an InputError saying what is wrong."""
    want = f"[{num}, {dim if dim is not None else 'dim_theta'}]"
    if (
        samples.ndim != 2
        or samples.shape[0] != num
        or (dim is not None and samples.shape[1] != dim)
    ):
        raise InputError(
            f"{what}: got an array of shape {list(samples.shape)}; allowed: shape {want}"
        )
    bad = ~np.isfinite(samples).all(axis=1)
    if bad.any():
        raise InputError(
            f"{what}: got {int(bad.sum())} of {num} rows with NaN or infinite values; "
            "allowed: finite values"
        )
    return samples


class AdaptedPosterior:
    """A posterior seen through one interface: `sample`, `log_prob`, `sample_batched`,
    `sample_many` (when `can_sample_many`).

    `dim_theta` (when given) is checked on every output. `has_log_prob` says whether the
    wrapped object offers normalised densities (sbi's MCMC / rejection posteriors do not).
    """

    def __init__(
        self,
        obj: Any,
        dim_theta: int | None = None,
        style: Style | None = None,
        presampled: dict | None = None,
    ):
        self.obj = obj
        self.style: Style = style or posterior_style(obj)
        self.dim_theta = dim_theta
        self.has_log_prob = has_normalised_log_prob(obj)
        self.can_sample_many = (
            batches_mcmc_over_x(obj)
            if self.style == "sbi"
            else callable(getattr(obj, "sample_many", None))
        )
        # draws taken before they are asked for (`presample`): request key -> (draws, s)
        self.presampled: dict = {} if presampled is None else presampled

    @staticmethod
    def _quiet(fn) -> dict[str, Any]:
        """`show_progress_bars=False` where an sbi method takes it."""
        try:
            return (
                {"show_progress_bars": False}
                if "show_progress_bars" in inspect.signature(fn).parameters
                else {}
            )
        except (TypeError, ValueError):
            return {}

    def _x_torch(self, x, torch):
        return torch.as_tensor(np.asarray(x, np.float32))

    def sample(self, x_o: Any, num_samples: int, seed: int) -> np.ndarray:
        """`num_samples` draws at `x_o` as float64 [num_samples, dim_theta] (checked)."""
        num = int(num_samples)
        if self.style == "sbi":
            with seeded_global_rngs(seed) as torch:
                x = self._x_torch(observation_rows(x_o), torch)
                out = self.obj.sample((num,), x=x, **self._quiet(self.obj.sample))
        else:
            out = self.obj.sample(x_o, num, seed)
        return check_samples(
            _to_numpy(out, "posterior samples"), num, self.dim_theta, "posterior samples"
        )

    def sample_timed(self, x_o: Any, num_samples: int, seed: int) -> tuple[np.ndarray, float]:
        """`sample(x_o, num_samples, seed)` and its seconds. Draws `presample` took for this
        request come with their share of that batched call's seconds."""
        hit = self.presampled.get(SampleRequest(x_o, num_samples, seed).key())
        if hit is not None:
            draws, seconds = hit
            draws = check_samples(
                draws.copy(), int(num_samples), self.dim_theta, "posterior samples"
            )
            return draws, seconds
        start = time.perf_counter()
        draws = self.sample(x_o, num_samples, seed)
        return draws, time.perf_counter() - start

    def sample_many(self, x_os: Any, num_samples: int, seed: int) -> np.ndarray:
        """`num_samples` draws at each row of `x_os` [n, dim_x] in one call, as float64
        [n, num_samples, dim_theta] (when `can_sample_many`)."""
        if not self.can_sample_many:
            raise InputError(
                f"posterior: {type(self.obj).__name__} cannot draw at several observations in "
                "one call; allowed: an object with sample_many(x_os, num_samples, seed) or an "
                "sbi MCMCPosterior with mcmc_method='slice_np_vectorized'"
            )
        x_os = np.asarray(x_os, np.float64)
        x_os = x_os.reshape(len(x_os), -1)
        num = int(num_samples)
        if self.style == "sbi":
            out = sample_mcmc_many(self.obj, x_os, num, seed)
        else:
            out = _to_numpy(self.obj.sample_many(x_os, num, seed), "posterior samples")
        if out.ndim != 3 or out.shape[0] != len(x_os):
            raise InputError(
                f"posterior samples: got an array of shape {list(out.shape)} from sample_many; "
                f"allowed: shape [{len(x_os)}, {num}, dim_theta]"
            )
        return np.stack([check_samples(o, num, self.dim_theta, "posterior samples") for o in out])

    def presample(self, requests: Sequence[SampleRequest]) -> float:
        """Takes the draws of all `requests` (one `num_samples`) in one `sample_many` call
        and keeps them for `sample_timed`, each with an equal share of the call's seconds;
        returns the seconds. The call's seed is derived from the requests' seeds, so the
        same requests give the same draws."""
        nums = {int(r.num_samples) for r in requests}
        if len(nums) != 1:
            raise InputError(
                f"requests: got num_samples {sorted(nums)}; allowed: one num_samples for all"
            )
        seed = int(np.random.SeedSequence([int(r.seed) for r in requests]).generate_state(1)[0])
        x_os = np.stack([np.asarray(r.x_o, np.float64).reshape(-1) for r in requests])
        start = time.perf_counter()
        draws = self.sample_many(x_os, nums.pop(), seed % 2**31)
        seconds = time.perf_counter() - start
        for request, d in zip(requests, draws):
            self.presampled[request.key()] = (d, seconds / len(requests))
        return seconds

    def log_prob(self, theta: Any, x_o: Any) -> np.ndarray:
        """log q(theta | x_o) for each row of theta, [n]."""
        if not self.has_log_prob:
            raise InputError(
                f"posterior: {type(self.obj).__name__} has no normalised log_prob; allowed: a "
                "posterior with a normalised log_prob for density metrics (NLTP)"
            )
        theta = np.atleast_2d(np.asarray(theta, np.float64))
        if self.style == "sbi":
            import torch

            # sbi may sample to normalise the density (prior leakage): seed it.
            with seeded_global_rngs(0), torch.no_grad():
                out = self.obj.log_prob(
                    torch.as_tensor(theta, dtype=torch.float32),
                    x=self._x_torch(observation_rows(x_o), torch),
                )
        else:
            out = self.obj.log_prob(theta, x_o)
        lp = _to_numpy(out, "posterior log_prob").reshape(-1)
        if lp.shape[0] != theta.shape[0] or np.isnan(lp).any():
            raise InputError(
                f"posterior log_prob: got {lp.shape[0]} values (NaN: {bool(np.isnan(lp).any())}) "
                f"for {theta.shape[0]} parameters; allowed: one non-NaN value per row"
            )
        return lp

    def sample_batched(self, xs: Any, seed: int) -> np.ndarray:
        """One draw per row of `xs` [n, dim_x] -> [n, dim_theta] (for L-C2ST, SBC).

        Uses the object's batched sampler when it has one, else one call per row.
        """
        xs = np.asarray(xs, np.float64)
        n = xs.shape[0]
        batched = getattr(self.obj, "sample_batched", None)
        if callable(batched) and self.style == "sbi":
            with seeded_global_rngs(seed) as torch:
                out = _to_numpy(batched((1,), x=self._x_torch(xs, torch), **self._quiet(batched)))
            out = out.reshape(n, -1)
        elif callable(batched):
            out = _to_numpy(batched(xs, seed))
        else:
            out = (
                np.concatenate([self.sample(xs[i], 1, seed + i) for i in range(n)], axis=0)
                if n
                else np.zeros((0, self.dim_theta or 0))
            )
        return check_samples(out, n, self.dim_theta, "batched posterior samples")


def as_posterior(obj: Any, dim_theta: int | None = None) -> AdaptedPosterior:
    """`obj` (sbi posterior, our PosteriorEstimate, or already adapted) as an AdaptedPosterior."""
    if isinstance(obj, AdaptedPosterior):
        if dim_theta is None:
            return obj
        return AdaptedPosterior(obj.obj, dim_theta, obj.style, presampled=obj.presampled)
    return AdaptedPosterior(obj, dim_theta)
