"""`nuts` and `numpyro`: NumPyro's NUTS on the problem's model, with R-hat, ESS and ESS/s.

The model comes from the problem's `ModelKnowledge` (its `ModelSpec`: JAX log prior, log
likelihood and a bijection to unconstrained space), so the agent samples exactly the
reference's posterior target; its error is inference error only. Draws of all chains are
pooled into a `PosteriorEstimate`; PPL-benchmark diagnostics ride along as `.diagnostics`.

`numpyro` is the same sampler under the PPL's name, as the other PPL agents run (agents/ppl):
the benchmark's sizes (200 warm-up steps, 1,000 draws a chain, 2 chains) and their
diagnostics (ArviZ R-hat, bulk and tail ESS; compile time apart from sampling time). NumPyro
compiles inside its first run: `numpyro` runs twice with one MCMC object (compiled once),
and reports the second run as `sampling_seconds` and the first run's extra time as
`compile_seconds`; the draws are the second run's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer import MCMC, NUTS

from agents.registry import register
from testbed.base import MODEL_POSTERIOR, Data
from testbed.config import (
    ADDED,
    check_at_least,
    check_in_range,
    check_one_of,
    check_positive,
    check_sizes,
)
from testbed.errors import InputError
from testbed.model import ModelKnowledge
from testbed.seeding import make_rng
from testbed.waiting import waited


@dataclasses.dataclass(frozen=True)
class ChainsConfig:
    """The sizes of an MCMC run that every NUTS agent has (`nuts` and the PPL agents): warm-up
    steps and draws a chain, and chains; `min_samples`, the fewest draws a chain it takes."""

    num_warmup: int = 500
    num_samples: int = 1000
    num_chains: int = 4
    min_samples: ClassVar[int] = 2

    def __post_init__(self):
        check_sizes(self, num_warmup=1, num_samples=self.min_samples, num_chains=1)


@dataclasses.dataclass(frozen=True)
class NutsConfig(ChainsConfig):
    """NUTS settings (PPL Bench-like defaults: warmup then draws, several chains)."""

    target_accept_prob: float = 0.8
    max_tree_depth: int = 10
    init_jitter: float = 0.5
    chain_method: str = "vectorized"
    seed: int = 0
    # NUTS's initial step size (kept fixed when `adapt` is off)
    step_size: float = dataclasses.field(default=1.0, metadata={ADDED: "2026-11-28"})
    # adapt step size and mass matrix in warm-up (off: fixed, identity)
    adapt: bool = dataclasses.field(default=True, metadata={ADDED: "2026-11-28"})

    def __post_init__(self):
        super().__post_init__()
        check_in_range("target_accept_prob", self.target_accept_prob, 0.05, 0.999)
        check_at_least("max_tree_depth", self.max_tree_depth, 1)
        check_in_range("init_jitter", self.init_jitter, 0.0, 10.0)
        check_one_of("chain_method", self.chain_method, ("vectorized", "sequential"))
        check_positive("step_size", self.step_size)


class DrawsPosterior:
    """Pooled MCMC draws [num_draws, dim] as a PosteriorEstimate (x_o: the data it was fit on),
    with the chains they pool ([chains, draws per chain, dim], `chains`) when known."""

    def __init__(
        self, draws: np.ndarray, diagnostics: dict[str, float], chains: np.ndarray | None = None
    ):
        self.draws = np.asarray(draws, np.float64)
        self.diagnostics = diagnostics
        self.chains = None if chains is None else np.asarray(chains, np.float64)

    @classmethod
    def of_chains(cls, chains: np.ndarray, diagnostics: dict[str, float]) -> DrawsPosterior:
        """The draws of chains [chains, draws per chain, dim], pooled chain after chain."""
        chains = np.asarray(chains, np.float64)
        return cls(chains.reshape(-1, chains.shape[-1]), diagnostics, chains)

    def to_inference_data(self, name: str = "theta"):
        """The draws as an ArviZ `InferenceData` (posterior group: variable `name` with dims
        chain, draw, `name`_dim_0), for ArviZ's summaries and plots; needs ArviZ (extra ppl)
        and the chains (a PPL agent's or `nuts`'s posterior keeps them)."""
        if self.chains is None:
            raise InputError(
                "to_inference_data: these draws do not keep their chains; allowed: the "
                "posterior of a PPL agent or of nuts"
            )
        try:
            import arviz as az
        except ImportError:
            raise InputError(
                'to_inference_data: ArviZ is not installed; allowed: pip install -c '
                'constraints.txt -e ".[ppl]"'
            ) from None
        return az.from_dict(posterior={name: self.chains})

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        """Rows of the draws: without replacement when there are enough, else with."""
        rng = make_rng(seed)
        total = self.draws.shape[0]
        idx = rng.choice(total, size=int(num_samples), replace=int(num_samples) > total)
        return self.draws[idx]


def diagnostics(theta: np.ndarray, seconds: float, divergences: int) -> dict[str, float]:
    """R-hat (max), bulk ESS (min, median) and ESS per second of theta [chains, draws, dim].

    `seconds` is the sampling phase (after warmup); it still includes compiling that phase.
    """
    ess = np.atleast_1d(effective_sample_size(theta))
    out = {
        "ess_min": float(np.min(ess)),
        "ess_median": float(np.median(ess)),
        "ess_per_second": float(np.min(ess) / max(seconds, 1e-9)),
        "sampling_seconds": float(seconds),
        "num_divergences": float(divergences),
    }
    if theta.shape[0] > 1:
        out["r_hat_max"] = float(np.max(split_gelman_rubin(theta)))
    return out


def _mcmc(config: NutsConfig, model, x, y):
    """NumPyro's MCMC (NUTS on the model's unconstrained potential), its initial points and
    the key of its run."""

    def potential(u):
        return -model.log_density_unconstrained(u, x, y)

    key_init, key_run = jax.random.split(jax.random.PRNGKey(config.seed))
    u0 = model.unconstrain(jnp.asarray(model.initial_theta, jnp.float32))
    jitter = config.init_jitter * jax.random.normal(
        key_init, (config.num_chains, model.dim_unconstrained)
    )
    init = u0[None, :] + jitter if config.num_chains > 1 else u0 + jitter[0]
    kernel = NUTS(
        potential_fn=potential,
        target_accept_prob=config.target_accept_prob,
        max_tree_depth=config.max_tree_depth,
        step_size=config.step_size,
        adapt_step_size=config.adapt,
        adapt_mass_matrix=config.adapt,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=config.num_warmup,
        num_samples=config.num_samples,
        num_chains=config.num_chains,
        chain_method=config.chain_method,
        progress_bar=False,
    )
    return mcmc, init, key_run


def _require_model(name: str, knowledge) -> None:
    if not isinstance(knowledge, ModelKnowledge):
        raise InputError(
            f"agent {name}: got {type(knowledge).__name__} as prior knowledge, without a "
            "model; allowed: problems that give a ModelKnowledge (log prior, log "
            "likelihood, transform), e.g. conjugate/..."
        )


@register("nuts", NutsConfig, predicts=MODEL_POSTERIOR)
def make(config: NutsConfig):
    """NumPyro NUTS on the problem's JAX model (exactly the reference's prior)."""

    def agent(data: Data, knowledge: ModelKnowledge):
        _require_model("nuts", knowledge)
        model = knowledge.model
        x, y = jnp.asarray(data.x, jnp.float32), jnp.asarray(data.y, jnp.float32)
        mcmc, init, key_run = _mcmc(config, model, x, y)
        start = time.perf_counter()

        def warm_up():
            mcmc.warmup(key_run, init_params=init)
            jax.block_until_ready(mcmc.post_warmup_state)

        def sample():
            mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("diverging",))
            return jax.block_until_ready(mcmc.get_samples(group_by_chain=True))

        waited(warm_up)  # NumPyro's computations: Ctrl-C stops the waits at once
        warmed = time.perf_counter()
        u = waited(sample)
        seconds = time.perf_counter() - warmed
        theta = jax.vmap(jax.vmap(model.constrain))(u.reshape((config.num_chains, -1, u.shape[-1])))
        theta = np.asarray(theta, np.float64)
        divergences = int(np.sum(mcmc.get_extra_fields()["diverging"]))
        diag = diagnostics(theta, seconds, divergences)
        diag["warmup_seconds"] = warmed - start  # includes compiling the model
        return DrawsPosterior.of_chains(theta, diag)

    return agent
