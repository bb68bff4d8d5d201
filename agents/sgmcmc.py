"""`sgmcmc`: SGLD / SGHMC over MLP weights; a key picks one thinned parameter snapshot.

Loss = mean cross entropy + (1 / prior_variance) sqrt(T) d / n * sum w^2 (prior variance
doubled when `adaptive_prior_variance` and d >= 100; T d / n instead of sqrt(T) d / n with
`temperature_scaling='linear'`, the reference's form until 2022 and so of its 2021 figure).
Update (the reference's optax SGLD, identity preconditioner):
m <- beta m + sqrt(lr) g - sqrt(2 (1 - beta) T_alg / n) xi;
theta <- theta - sqrt(lr) m; beta = momentum_decay (0 gives SGLD, 0.9 SGHMC). Snapshots
at steps burn_in, burn_in + every, ... <= num_batches (401 at the defaults: 500,000 steps,
100,000 burn-in, every 1,000). The whole chain is one jitted scan (burn-in, then a scan
over thinning intervals), its noise drawn ahead a block of steps at a time and a batch
of n < 100 examples computed once a distinct example; the sampler is a `FiniteSampler`
over the snapshots.

Reference bug, fixed here: the reference's `testbed` sweep has a "vanilla SGLD" half that
keeps the default momentum 0.9, so it duplicates the SGHMC half; our SGLD half uses
momentum_decay = 0 (the intended vanilla SGLD). The RMSprop preconditioner option of the
reference (unused by its sweeps) is not implemented.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax.tree_util import Partial

from agents.networks import make_flat_mlp
from agents.online import agent_key
from agents.registry import NETWORK, register
from agents.training import (
    SGDConfig,
    WeightedRows,
    data_loss,
    run_steps,
    targets,
    temperature_of,
)
from testbed.base import Data, FiniteSampler, PriorKnowledge
from testbed.config import check_at_least, check_nonnegative, check_one_of, check_positive
from testbed.errors import InputError
from testbed.online import OnlineLearner
from testbed.sizes import check_memory


@dataclasses.dataclass(frozen=True)
class SGMCMCConfig(SGDConfig):
    """SGLD / SGHMC (reference `SGMCMCConfig` defaults)."""

    learning_rate: float = 1e-4
    prior_variance: float = 0.1
    alg_temperature: float = 1.0
    momentum_decay: float = 0.9
    num_hidden: int = 50
    num_batches: int = 500_000
    burn_in_time: int = 100_000
    model_saving_frequency: int = 1000
    adaptive_prior_variance: bool = False
    temperature_scaling: str = "sqrt"  # the prior term's T factor: sqrt(T) or T (2021)

    def __post_init__(self):
        super().__post_init__()
        check_positive("prior_variance", self.prior_variance)
        check_one_of("temperature_scaling", self.temperature_scaling, ("sqrt", "linear"))
        check_nonnegative("alg_temperature", self.alg_temperature)
        if not 0.0 <= self.momentum_decay < 1.0:
            raise InputError(
                f"momentum_decay: got {self.momentum_decay!r}; allowed: a number in [0, 1)"
            )
        check_at_least("num_hidden", self.num_hidden, 1)
        check_at_least("burn_in_time", self.burn_in_time, 0)
        check_at_least("model_saving_frequency", self.model_saving_frequency, 1)
        if self.first_snapshot > self.num_batches:
            raise InputError(
                f"burn_in_time: got {self.burn_in_time!r} (first snapshot at step "
                f"{self.first_snapshot}); allowed: a first snapshot step <= num_batches "
                f"({self.num_batches})"
            )
        check_memory(
            self.chain_bytes, {"num_hidden": self.num_hidden}, "the chain's snapshots", type(self)
        )
        if self.num_batches * 100 >= 2**31:
            raise InputError(
                f"num_batches: got {self.num_batches!r}; allowed: an integer < 21,474,836"
            )

    def chain_bytes(self, num_hidden: int) -> int:
        """A lower bound of the bytes the chain holds: its snapshots and its state (weights,
        momentum, gradient) of the two hidden layers, float32."""
        weights = num_hidden * num_hidden + 3 * num_hidden
        return 4 * (self.num_snapshots + 3) * weights

    @property
    def first_snapshot(self) -> int:
        """The step of the first snapshot (the reference saves after steps 1, 2, ...)."""
        return self.burn_in_time if self.burn_in_time > 0 else self.model_saving_frequency

    @property
    def num_snapshots(self) -> int:
        return (self.num_batches - self.first_snapshot) // self.model_saving_frequency + 1


def sgmcmc_sweep() -> list[SGMCMCConfig]:
    """The reference's `testbed` sweep (36): {SGLD, SGHMC} x lr x prior variance (adaptive)."""
    return [
        SGMCMCConfig(
            learning_rate=lr,
            prior_variance=pv,
            adaptive_prior_variance=True,
            momentum_decay=momentum,
        )
        for momentum in (0.0, 0.9)  # the reference's SGLD half kept 0.9: see module doc
        for lr in (5e-4, 1e-3, 5e-3)
        for pv in (0.05, 0.1, 0.5, 1.0, 2.0, 10.0)
    ]


@functools.cache
def _structure(num_hidden: int, num_classes: int, input_dim: int):
    """(flat initial-parameter maker, loss, logits of all snapshots) for one architecture."""
    mlp = make_flat_mlp((num_hidden, num_hidden), num_classes, input_dim)

    def loss(theta, batch, decay):
        ce = data_loss(mlp.apply(theta, batch.x), batch.y)
        mean = jnp.sum(batch.weight * ce) if isinstance(batch, WeightedRows) else jnp.mean(ce)
        return mean + decay * jnp.sum(jnp.square(theta))

    def logits(thetas, x):
        return jax.vmap(lambda t: mlp.apply(t, x))(thetas)

    return jax.jit(mlp.init), loss, jax.jit(logits)


@functools.partial(jax.jit, static_argnames=("structure", "first", "count", "every", "legacy"))
def _chain(structure, theta, x, y, key, hyper, first, count, every, legacy=False):
    """All snapshots [count, P] of one SG-MCMC chain: one compiled program.

    The step noise is drawn ahead for a block of steps and a batch of n < 100 examples is
    computed on its n distinct rows, weighted by their counts (2.7x faster here); `legacy`
    draws the noise in each step and computes all 100 rows (the same chain up to float
    rounding; kept to measure against)."""
    _, loss, _ = _structure(*structure)
    lr, beta, noise_std, decay = hyper
    step_size = jnp.sqrt(lr)

    draw = functools.partial(jax.random.normal, shape=theta.shape)

    def update(state, batch, random):
        theta, momentum = state
        value, grad = jax.value_and_grad(loss)(theta, batch, decay)
        noise = draw(random) if legacy else random
        momentum = beta * momentum + step_size * grad - noise_std * noise
        return (theta - step_size * momentum, momentum), value

    def steps(state, start, num_steps):
        fast = dict(draw=draw, weighted=True)
        return run_steps(update, state, x, y, key, start, num_steps, **({} if legacy else fast))

    state, _ = steps((theta, jnp.zeros_like(theta)), 0, first)

    def interval(state, i):
        state, _ = steps(state, first + i * every, every)
        return state, state[0]

    _, rest = jax.lax.scan(interval, state, jnp.arange(count - 1))
    return jnp.concatenate([state[0][None], rest])


def sample_chain(
    config: SGMCMCConfig, data: Data, prior: PriorKnowledge, legacy: bool = False
) -> jax.Array:
    """The parameter snapshots [S, P] for the data (the initial weights if n = 0);
    `legacy` runs the chain's slower program (see `_chain`; for benchmarks)."""
    structure = (int(config.num_hidden), int(prior.num_classes), int(prior.input_dim))
    init, _, _ = _structure(*structure)
    init_key, chain_key = config.keys()
    theta = init(init_key)
    n = int(data.x.shape[0])
    if n == 0:
        return theta[None]
    decay = prior_decay_numerator(config, prior) / n
    noise_std = math.sqrt(2 * (1 - config.momentum_decay) * config.alg_temperature / n)
    hyper = tuple(
        jnp.float32(v) for v in (config.learning_rate, config.momentum_decay, noise_std, decay)
    )
    return _chain(
        structure,
        theta,
        jnp.asarray(data.x, jnp.float32),
        targets(data.y),
        chain_key,
        hyper,
        config.first_snapshot,
        config.num_snapshots,
        config.model_saving_frequency,
        legacy,
    )


def prior_decay_numerator(config: SGMCMCConfig, prior: PriorKnowledge) -> float:
    """T-scale * d / prior variance: the prior term's weight times the number of examples."""
    variance = config.prior_variance
    if config.adaptive_prior_variance and prior.input_dim >= 100:
        variance *= 2
    t = temperature_of(prior)
    t = math.sqrt(t) if config.temperature_scaling == "sqrt" else t
    return t * prior.input_dim / variance


@functools.cache
def _online_pieces(structure: tuple[int, int, int]):
    """(step, sample_logits) of one SG-MCMC chain learning online: after t observations the
    prior term weighs numerator / t and the noise has sd sqrt(2 (1 - beta) T_alg / t), as a
    chain on t examples; the chain's current state is the Thompson sample."""
    _, loss, _ = _structure(*structure)
    mlp = make_flat_mlp((structure[0], structure[0]), structure[1], structure[2])

    def step(state, batch, key, t):
        lr, beta, alg_temperature, numerator = state["hyper"]
        theta, momentum = state["theta"], state["momentum"]
        grad = jax.grad(loss)(theta, batch, numerator / t)
        noise_std = jnp.sqrt(2.0 * (1.0 - beta) * alg_temperature / t)
        noise = jax.random.normal(key, theta.shape)
        momentum = beta * momentum + jnp.sqrt(lr) * grad - noise_std * noise
        return {**state, "theta": theta - jnp.sqrt(lr) * momentum, "momentum": momentum}

    def sample_logits(state, x, key):
        return mlp.apply(state["theta"], x)

    return step, sample_logits


def online_sgmcmc(config: SGMCMCConfig, prior: PriorKnowledge, key: jax.Array) -> OnlineLearner:
    """SGLD / SGHMC learning online: one chain step per SGD step on replay batches; each
    action is chosen by the chain's current state (Langevin Thompson sampling)."""
    structure = (int(config.num_hidden), int(prior.num_classes), int(prior.input_dim))
    init, _, _ = _structure(*structure)
    theta = init(agent_key(config.seed, key))
    hyper = tuple(
        jnp.float32(v)
        for v in (
            config.learning_rate,
            config.momentum_decay,
            config.alg_temperature,
            prior_decay_numerator(config, prior),
        )
    )
    state = {"theta": theta, "momentum": jnp.zeros_like(theta), "hyper": hyper}
    return OnlineLearner(state, *_online_pieces(structure))


@register("sgmcmc", SGMCMCConfig, sweep=sgmcmc_sweep, predicts=NETWORK, online=online_sgmcmc)
def make_sgmcmc(config: SGMCMCConfig):
    """SGHMC (momentum 0.9) or SGLD (momentum 0) snapshots; each key picks one."""

    def agent(data: Data, prior: PriorKnowledge):
        thetas = sample_chain(config, data, prior)
        structure = (int(config.num_hidden), int(prior.num_classes), int(prior.input_dim))
        _, _, logits = _structure(*structure)
        return FiniteSampler(Partial(logits, thetas), thetas.shape[0])

    return agent
