"""`numpyro`: the `nuts` agent (NumPyro's NUTS on the problem's own JAX model) under the
PPL's name, at the benchmark's sizes and with the PPL agents' diagnostics.

NumPyro compiles inside its first run: the agent runs twice with one MCMC object (compiled
once), keeps the second run's draws and times, and reports the first run's extra time as
`compile_seconds`. The model is the problem's `ModelSpec` (JAX log prior and likelihood,
transform): every family is served.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from agents.nuts import NutsConfig, _mcmc, _require_model
from agents.ppl.common import posterior, require
from agents.registry import register
from testbed.base import MODEL_POSTERIOR, Data
from testbed.waiting import waited


@dataclasses.dataclass(frozen=True)
class NumpyroConfig(NutsConfig):
    """`nuts`'s settings at the benchmark's sizes: 200 warm-up + 1,000 draws, 2 chains."""

    num_warmup: int = 200
    num_samples: int = 1000
    num_chains: int = 2


@register("numpyro", NumpyroConfig, predicts=MODEL_POSTERIOR)
def make(config: NumpyroConfig):
    """NumPyro NUTS on the problem's JAX model (`nuts` at the benchmark's settings)."""

    def agent(data: Data, knowledge):
        import jax
        import jax.numpy as jnp

        _require_model("numpyro", knowledge)
        require("numpyro", "numpyro")
        model = knowledge.model
        x, y = jnp.asarray(data.x, jnp.float32), jnp.asarray(data.y, jnp.float32)
        mcmc, init, key_run = _mcmc(config, model, x, y)
        times = []
        for key in jax.random.split(key_run):  # the first run compiles
            start = time.perf_counter()

            def sample(key=key):
                mcmc.run(key, init_params=init, extra_fields=("diverging",))
                return jax.block_until_ready(mcmc.get_samples(group_by_chain=True))

            u = waited(sample)  # NumPyro's one computation: Ctrl-C stops the wait at once
            times.append(time.perf_counter() - start)
        u = u.reshape((config.num_chains, -1, u.shape[-1]))
        theta = np.asarray(jax.vmap(jax.vmap(model.constrain))(u), np.float64)
        divergences = int(np.sum(mcmc.get_extra_fields()["diverging"]))
        return posterior(theta, max(times[0] - times[1], 0.0), times[1], divergences)

    return agent
