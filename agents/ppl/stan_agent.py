"""`stan`: the conjugate problem's model in Stan, NUTS by PyStan 3 (httpstan's bundled Stan).

One Stan program per family, its hyperparameters in the data block, so one compiled program
serves every problem of the family, whatever its shape. httpstan compiles a program once
and keeps it on disk (later processes find it in its cache); `compile_seconds` is the time
of `stan.build` (compiling, or the cache look-up, and reading the data). httpstan also keeps
fits by (program, data, seed): a second run with the same seed returns the stored draws, so
time runs over different seeds. Chains run in httpstan's process pool, also inside a
sweep's (daemonic) worker (`children_allowed`). PyStan runs its calls with `asyncio.run`,
which an event loop running in the caller's thread (a Jupyter notebook's) refuses: there
they run in a worker thread (`outside_running_loop`). CmdStanPy and BridgeStan download
CmdStan or their C++ sources at run time, which these machines cannot: PyStan is the Stan
route.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import multiprocessing
import time
import warnings
from collections.abc import Iterator

import numpy as np

from agents.ppl.common import (
    PplConfig,
    check_family,
    interrupts_kept,
    outside_running_loop,
    posterior,
    quiet,
    require,
)
from agents.ppl.spec import PARAMS, PplModel, to_theta, translate
from agents.registry import register
from testbed import settings
from testbed.base import MODEL_POSTERIOR, Data

PROGRAMS = {
    "normal_known_var": """
data { int<lower=0> N; vector[N] y; real m0; real<lower=0> s0; real<lower=0> sigma; }
parameters { real mu; }
model { mu ~ normal(m0, s0); y ~ normal(mu, sigma); }
""",
    "mvn_known_cov": """
data { int<lower=0> N; int<lower=1> D; array[N] vector[D] y; vector[D] m0; cov_matrix[D] S0;
       cov_matrix[D] S; }
parameters { vector[D] mu; }
model { mu ~ multi_normal(m0, S0); y ~ multi_normal(mu, S); }
""",
    "blr": """
data { int<lower=0> N; int<lower=1> D; matrix[N, D] X; vector[N] y; vector[D] m0;
       cov_matrix[D] S0; real<lower=0> sigma; }
parameters { vector[D] w; }
model { w ~ multi_normal(m0, S0); y ~ normal(X * w, sigma); }
""",
    "normal_known_mean": """
data { int<lower=0> N; vector[N] y; real m; real<lower=0> a; real<lower=0> b; }
parameters { real<lower=0> lam; }
model { lam ~ gamma(a, b); y ~ normal(m, inv_sqrt(lam)); }
""",
    "nig": """
data { int<lower=0> N; vector[N] y; real m0; real<lower=0> kappa; real<lower=0> a;
       real<lower=0> b; }
parameters { real mu; real<lower=0> s2; }
model { s2 ~ inv_gamma(a, b); mu ~ normal(m0, sqrt(s2 / kappa)); y ~ normal(mu, sqrt(s2)); }
""",
    "niw": """
data { int<lower=0> N; int<lower=1> D; array[N] vector[D] y; vector[D] m0; real<lower=0> kappa;
       real<lower=D - 1> nu; cov_matrix[D] psi; }
parameters { vector[D] mu; cov_matrix[D] Sigma; }
model { Sigma ~ inv_wishart(nu, psi); mu ~ multi_normal(m0, Sigma / kappa);
        y ~ multi_normal(mu, Sigma); }
""",
    "beta_binomial": """
data { int<lower=0> N; array[N] int<lower=0, upper=1> y; real<lower=0> a; real<lower=0> b; }
parameters { real<lower=0, upper=1> p; }
model { p ~ beta(a, b); y ~ bernoulli(p); }
""",
    "gamma_poisson": """
data { int<lower=0> N; array[N] int<lower=0> y; real<lower=0> a; real<lower=0> b; }
parameters { real<lower=0> lam; }
model { lam ~ gamma(a, b); y ~ poisson(lam); }
""",
    "dirichlet_multinomial": """
data { int<lower=0> N; int<lower=1> K; array[N] int<lower=1, upper=K> y; vector<lower=0>[K] alpha; }
parameters { simplex[K] pi; }
model { pi ~ dirichlet(alpha); y ~ categorical(pi); }
""",
    "student_t_known_loc": """
data { int<lower=0> N; vector[N] y; real m; real<lower=0> s_nu; real<lower=0> s_sigma; }
parameters { real<lower=0> nu; real<lower=0> sigma; }
model { nu ~ normal(0, s_nu); sigma ~ normal(0, s_sigma); y ~ student_t(nu, m, sigma); }
""",
}
SERVES = tuple(sorted(PROGRAMS))

# httpstan builds its aiohttp app with string keys, and aiohttp warns of it (three lines) on
# every run: a warning about httpstan's code that says nothing to a user of this agent.
warnings.filterwarnings("ignore", message="It is recommended to use web.AppKey", module="httpstan")


def stan_data(model: PplModel) -> dict:
    """The data block of the family's program: sizes, hyperparameters and data."""
    data = {"N": model.num_obs, **model.hyper, **model.data}
    if model.family in ("mvn_known_cov", "blr", "niw"):
        data["D"] = model.dim
    if model.family == "dirichlet_multinomial":
        data["K"] = model.dim
        data["y"] = model.data["y"] + 1  # Stan's categorical counts from 1
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in data.items()}


@contextlib.contextmanager
def children_allowed() -> Iterator[None]:
    """httpstan samples its chains in a process pool of its own. A sweep's worker ends
    without exit handlers, which would leave the pool's forked processes waiting on its
    queue for ever (they hold both its ends): there they are ended after each fit. A
    daemonic process may not start children: its flag is lifted while Stan runs."""
    process = multiprocessing.current_process()
    daemonic = process.daemon
    if daemonic:
        process._config["daemon"] = False
    try:
        yield
    finally:
        if daemonic:
            process._config["daemon"] = True
        if daemonic or settings.current().worker:
            _fresh_pool()


def _fresh_pool(stop_chains: bool = False) -> None:
    """End httpstan's pool processes now and give it a new pool: a sweep ends its workers
    without their exit handlers, which would leave the pool's processes behind. The chains
    they sample are waited for, or ended (`stop_chains`: after Ctrl-C, which they ignore;
    httpstan offers no way to cancel a fit)."""
    from httpstan import services_stub

    if stop_chains:
        for process in list(getattr(services_stub.executor, "_processes", {}).values()):
            process.terminate()
    services_stub.executor.shutdown(wait=True, cancel_futures=stop_chains)
    services_stub.executor = concurrent.futures.ProcessPoolExecutor(
        mp_context=multiprocessing.get_context("fork"), initializer=services_stub.init_worker
    )


def _build_and_sample(stan, model: PplModel, config: PplConfig) -> tuple:
    """(the fit, and the times at its start, after `stan.build` and after sampling)."""
    start = time.perf_counter()
    program = stan.build(PROGRAMS[model.family], data=stan_data(model), random_seed=config.seed + 1)
    built = time.perf_counter()
    fit = program.sample(
        num_chains=config.num_chains,
        num_warmup=config.num_warmup,
        num_samples=config.num_samples,
    )
    return fit, start, built, time.perf_counter()


@register("stan", PplConfig, predicts=MODEL_POSTERIOR)
def make(config: PplConfig):
    """Stan (PyStan 3) NUTS on the conjugate problem's model written in Stan."""

    def agent(data: Data, knowledge):
        family = check_family("stan", knowledge, SERVES)
        stan = require("stan", "stan", "pystan")
        model = translate(family, data.x, data.y)
        lines = io.StringIO()  # PyStan's progress lines (Python's streams), g++'s (the fds)
        with (
            quiet(),
            contextlib.redirect_stdout(lines),
            contextlib.redirect_stderr(lines),
            children_allowed(),
        ):
            try:
                with interrupts_kept():  # PyStan answers Ctrl-C by returning None
                    fit, start, built, done = outside_running_loop(
                        lambda: _build_and_sample(stan, model, config)
                    )
            except KeyboardInterrupt:
                _fresh_pool(stop_chains=True)  # else the process waits for them at exit
                raise
        draws = {}
        for name in PARAMS[model.family]:
            value = np.asarray(fit[name])  # [*shape, draws * chains], the chain index fastest
            value = value.reshape(value.shape[:-1] + (config.num_samples, config.num_chains))
            draws[name] = np.moveaxis(value, (-1, -2), (0, 1))  # [chains, draws, *shape]
        divergences = int(np.sum(fit["divergent__"]))
        return posterior(to_theta(model, draws), built - start, done - built, divergences)

    return agent
