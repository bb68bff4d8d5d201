"""`pyro`: the conjugate problem's model in Pyro, NUTS by Pyro (PyTorch, float64).

Pyro's NUTS at its defaults (no JIT: `compile_seconds` is 0, there is nothing to compile;
step size and diagonal mass matrix adapted during warm-up). Chains run one after the other in
the process, each its own `MCMC` with its own seed (Pyro's several chains would start worker
processes). One torch thread while it samples (two threads cost twice the CPU on these small
models); the caller's thread count is put back after. The Inverse-Wishart family is not
served (PyTorch has no Inverse-Wishart distribution).
"""

from __future__ import annotations

import time

import numpy as np

from agents.ppl.common import PplConfig, check_family, posterior, require
from agents.ppl.spec import NO_INVERSE_WISHART, PARAMS, PplModel, to_theta, translate
from agents.registry import register
from testbed.base import MODEL_POSTERIOR, Data

SERVES = NO_INVERSE_WISHART


def pyro_model(model: PplModel):
    """The family's model as a Pyro program of no arguments (hyperparameters and data are
    float64 tensors it closes over)."""
    import pyro
    import pyro.distributions as dist
    import torch

    def t(v):
        return torch.as_tensor(np.array(v), dtype=torch.float64)

    h = {k: t(v) for k, v in model.hyper.items()}
    y = t(model.data["y"])
    n = model.num_obs
    fam = model.family

    def program():
        if fam == "normal_known_var":
            mu = pyro.sample("mu", dist.Normal(h["m0"], h["s0"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Normal(mu, h["sigma"]), obs=y)
        elif fam == "mvn_known_cov":
            mu = pyro.sample("mu", dist.MultivariateNormal(h["m0"], covariance_matrix=h["S0"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.MultivariateNormal(mu, covariance_matrix=h["S"]), obs=y)
        elif fam == "blr":
            w = pyro.sample("w", dist.MultivariateNormal(h["m0"], covariance_matrix=h["S0"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Normal(t(model.data["X"]) @ w, h["sigma"]), obs=y)
        elif fam == "normal_known_mean":
            lam = pyro.sample("lam", dist.Gamma(h["a"], h["b"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Normal(h["m"], lam.rsqrt()), obs=y)
        elif fam == "nig":
            s2 = pyro.sample("s2", dist.InverseGamma(h["a"], h["b"]))
            mu = pyro.sample("mu", dist.Normal(h["m0"], (s2 / h["kappa"]).sqrt()))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Normal(mu, s2.sqrt()), obs=y)
        elif fam == "beta_binomial":
            p = pyro.sample("p", dist.Beta(h["a"], h["b"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Bernoulli(p), obs=y)
        elif fam == "gamma_poisson":
            lam = pyro.sample("lam", dist.Gamma(h["a"], h["b"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Poisson(lam), obs=y)
        elif fam == "dirichlet_multinomial":
            pi = pyro.sample("pi", dist.Dirichlet(h["alpha"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.Categorical(pi), obs=y)
        elif fam == "student_t_known_loc":
            nu = pyro.sample("nu", dist.HalfNormal(h["s_nu"]))
            sigma = pyro.sample("sigma", dist.HalfNormal(h["s_sigma"]))
            with pyro.plate("data", n):
                pyro.sample("y", dist.StudentT(nu, h["m"], sigma), obs=y)

    return program


@register("pyro", PplConfig, predicts=MODEL_POSTERIOR)
def make(config: PplConfig):
    """Pyro NUTS on the conjugate problem's model written in Pyro."""

    def agent(data: Data, knowledge):
        family = check_family("pyro", knowledge, SERVES)
        pyro = require("pyro", "pyro", "pyro-ppl")
        import torch
        from pyro.infer import MCMC, NUTS

        model = translate(family, data.x, data.y)
        program = pyro_model(model)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        chains, divergences = [], 0
        start = time.perf_counter()
        try:
            for chain in range(config.num_chains):
                pyro.set_rng_seed(config.seed * 1000 + chain)
                pyro.clear_param_store()
                mcmc = MCMC(
                    NUTS(program),
                    num_samples=config.num_samples,
                    warmup_steps=config.num_warmup,
                    num_chains=1,
                    disable_progbar=True,
                )
                mcmc.run()
                samples = mcmc.get_samples()
                chains.append({k: samples[k].numpy() for k in PARAMS[model.family]})
                divergences += sum(len(v) for v in mcmc.diagnostics()["divergences"].values())
        finally:
            torch.set_num_threads(threads)
        seconds = time.perf_counter() - start
        draws = {k: np.stack([c[k] for c in chains]) for k in PARAMS[model.family]}
        return posterior(to_theta(model, draws), 0.0, seconds, divergences)

    return agent
