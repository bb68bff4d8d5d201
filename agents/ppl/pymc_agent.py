"""`pymc` and `nutpie`: the conjugate problem's model in PyMC; NUTS by PyMC or by nutpie.

The model's hyperparameters and data are `pm.Data` containers, so one PyMC model (and its
compiled functions) is built per (family, n, D) and per process and serves every problem of
that shape: a new problem only sets the containers. `pymc` compiles its NUTS step (PyTensor's
C code of log density and gradient) once per shape: `compile_seconds`; chains run one after
the other in the process (no fork of a process holding JAX and torch). `nutpie` compiles
the same model through numba (8-57 s here) and samples its chains in parallel threads; its
machine code is kept on disk beside PyTensor's cache (`agents/ppl/nutpie_compile.py`), so a
later process only builds PyTensor's functions and loads it (0.3-2.5 s). Before sampling,
`nutpie` sets the problem's values in the model's containers too: its initial point (PyMC's
support point) is the problem's, whichever problem of the shape compiled the model.

PyTensor finds no BLAS by itself here: with OpenBLAS installed (libopenblas-dev),
`blas__ldflags=-lopenblas` is set when PyMC is first imported, before PyTensor reads it
(~5x on a 10-d model). Both
sample with one BLAS thread: PyTensor's linear solves call SciPy, whose OpenBLAS threads
otherwise spin against each other on a busy machine (a 2 x 2 triangular solve took 1.8 ms
instead of 0.06 ms here; PyMC's own `blas_cores` limit is off where processes fork). The
Inverse-Wishart family is not served (PyMC has no Inverse-Wishart prior).
"""

from __future__ import annotations

import ctypes.util
import sys
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from agents.ppl.common import (
    Interrupted,
    ModelCache,
    PplConfig,
    check_family,
    cpu_count,
    interrupts_kept,
    posterior,
    quiet,
    require,
)
from agents.ppl.nutpie_compile import compile_pymc_model
from agents.ppl.spec import NO_INVERSE_WISHART, PARAMS, PplModel, to_theta, translate
from agents.registry import register
from testbed import settings
from testbed.base import MODEL_POSTERIOR, Data
from testbed.waiting import waited

SERVES = NO_INVERSE_WISHART
PYMC_MODELS = ModelCache()  # (family, n, D) -> (pm.Model, its NUTS step)
NUTPIE_MODELS = ModelCache()  # (family, n, D) -> (pm.Model, nutpie's compiled model)


def import_pymc(agent: str):
    """PyMC, with PyTensor linked to OpenBLAS when it is installed: set in PyTensor's
    configuration when this call first imports it, before PyTensor first reads it (as
    `blas__ldflags=-lopenblas` in PYTENSOR_FLAGS would set it then); the user's
    PYTENSOR_FLAGS naming a BLAS win, and a PyTensor imported before keeps its own."""
    fresh = "pytensor" not in sys.modules  # its flags are taken when it is first imported
    pm = require(agent, "pymc")
    flags = settings.current().pytensor_flags
    if fresh and "blas__ldflags" not in flags and ctypes.util.find_library("openblas"):
        sys.modules["pytensor"].config.blas__ldflags = "-lopenblas"
    return pm


def containers(model: PplModel) -> dict[str, np.ndarray]:
    """The values of the model's `pm.Data` containers (data as y_obs and X_obs; a normal's
    covariance S0 or S by its Cholesky factor L0 or L: the same distribution, factored once
    here, not at every evaluation, and nutpie's numba Cholesky fails on read-only data)."""
    values = {k: np.asarray(v) for k, v in model.hyper.items()}
    for cov, chol in (("S0", "L0"), ("S", "L")):
        if cov in values:
            values[chol] = np.linalg.cholesky(values.pop(cov))
    values["y_obs"] = model.data["y"]
    if "X" in model.data:
        values["X_obs"] = model.data["X"]
    return values


def build_model(pm, model: PplModel):
    """The family's model in PyMC, its hyperparameters and data in `pm.Data` containers."""
    with pm.Model() as pm_model:
        c = {k: pm.Data(k, v) for k, v in containers(model).items()}
        fam, y = model.family, c["y_obs"]
        if fam == "normal_known_var":
            mu = pm.Normal("mu", mu=c["m0"], sigma=c["s0"])
            pm.Normal("y", mu=mu, sigma=c["sigma"], observed=y)
        elif fam == "mvn_known_cov":
            mu = pm.MvNormal("mu", mu=c["m0"], chol=c["L0"])
            pm.MvNormal("y", mu=mu, chol=c["L"], observed=y)
        elif fam == "blr":
            w = pm.MvNormal("w", mu=c["m0"], chol=c["L0"])
            pm.Normal("y", mu=c["X_obs"] @ w, sigma=c["sigma"], observed=y)
        elif fam == "normal_known_mean":
            lam = pm.Gamma("lam", alpha=c["a"], beta=c["b"])
            pm.Normal("y", mu=c["m"], tau=lam, observed=y)
        elif fam == "nig":
            s2 = pm.InverseGamma("s2", alpha=c["a"], beta=c["b"])
            mu = pm.Normal("mu", mu=c["m0"], sigma=pm.math.sqrt(s2 / c["kappa"]))
            pm.Normal("y", mu=mu, sigma=pm.math.sqrt(s2), observed=y)
        elif fam == "beta_binomial":
            p = pm.Beta("p", alpha=c["a"], beta=c["b"])
            pm.Bernoulli("y", p=p, observed=y)
        elif fam == "gamma_poisson":
            lam = pm.Gamma("lam", alpha=c["a"], beta=c["b"])
            pm.Poisson("y", mu=lam, observed=y)
        elif fam == "dirichlet_multinomial":
            pi = pm.Dirichlet("pi", a=c["alpha"])
            pm.Categorical("y", p=pi, observed=y)
        elif fam == "student_t_known_loc":
            nu = pm.HalfNormal("nu", sigma=c["s_nu"])
            sigma = pm.HalfNormal("sigma", sigma=c["s_sigma"])
            pm.StudentT("y", nu=nu, mu=c["m"], sigma=sigma, observed=y)
    return pm_model


def _draws(posterior_group, model: PplModel) -> np.ndarray:
    """theta [chains, draws, dim] from an InferenceData's posterior group."""
    return to_theta(model, {n: np.asarray(posterior_group[n]) for n in PARAMS[model.family]})


def _model(agent: str, data: Data, knowledge) -> tuple:
    """PyMC (imported for `agent`) and the problem's model translated for it."""
    family = check_family(agent, knowledge, SERVES)
    pm = import_pymc(agent)
    return pm, translate(family, data.x, data.y)


def _posterior(trace, model: PplModel, compile_seconds: float, start: float):
    """The trace's pooled draws with their diagnostics (sampling time since `start`)."""
    seconds = time.perf_counter() - start
    divergences = int(np.sum(np.asarray(trace.sample_stats["diverging"])))
    return posterior(_draws(trace.posterior, model), compile_seconds, seconds, divergences)


def _compiled(pm, model: PplModel, cache: ModelCache, compile_model: Callable) -> tuple:
    """((the PyMC model of the problem's shape, what `compile_model(pm, pm_model)` compiles
    for it), compile seconds): built and compiled, quietly, once per shape in `cache`, in a
    worker thread (`waited`): numba's LLVM passes run for tens of seconds in native code,
    which would hold a Ctrl-C back until they return."""

    def build():
        pm_model = build_model(pm, model)
        return pm_model, compile_model(pm, pm_model)

    def quietly():
        with quiet():  # entered here: an interrupt's line is printed after it ends
            return waited(build)

    return cache.get(model.shape_key, quietly)


def _nuts_step(pm, pm_model):
    """PyMC's NUTS step for the model: compiles the log density and its gradient."""
    with pm_model:
        return pm.NUTS()


def _nutpie_model(pm, pm_model):
    """nutpie's compiled model (numba), or its code loaded from the disk cache."""
    return compile_pymc_model(pm_model)


@register("pymc", PplConfig, predicts=MODEL_POSTERIOR)
def make_pymc(config: PplConfig):
    """PyMC NUTS on the conjugate problem's model written in PyMC."""

    def agent(data: Data, knowledge):
        pm, model = _model("pymc", data, knowledge)
        (pm_model, step), compile_seconds = _compiled(pm, model, PYMC_MODELS, _nuts_step)
        start = time.perf_counter()
        with interrupts_kept() as interrupted, pm_model, quiet(), threadpool_limits(1):

            def stop_after_ctrl_c(trace, draw):  # PyMC ends a chain at Ctrl-C, then samples on
                if interrupted():
                    raise Interrupted

            pm.set_data(containers(model))
            trace = pm.sample(
                draws=config.num_samples,
                tune=config.num_warmup,
                chains=config.num_chains,
                cores=1,
                step=step,
                random_seed=config.seed,
                progressbar=False,
                compute_convergence_checks=False,
                callback=stop_after_ctrl_c,
            )
        return _posterior(trace, model, compile_seconds, start)

    return agent


@register("nutpie", PplConfig, predicts=MODEL_POSTERIOR)
def make_nutpie(config: PplConfig):
    """nutpie's NUTS (numba-compiled) on the conjugate problem's model written in PyMC."""

    def agent(data: Data, knowledge):
        pm, model = _model("nutpie", data, knowledge)
        nutpie = require("nutpie", "nutpie")
        (pm_model, compiled), compile_seconds = _compiled(pm, model, NUTPIE_MODELS, _nutpie_model)
        values = containers(model)
        with pm_model:
            pm.set_data(values)  # the initial point's containers (PyMC's function reads them)
        compiled = compiled.with_data(**values)  # the log density's (nutpie's copies)
        start = time.perf_counter()
        with interrupts_kept(), quiet(), threadpool_limits(1):  # Ctrl-C: nutpie returns draws
            trace = nutpie.sample(
                compiled,
                draws=config.num_samples,
                tune=config.num_warmup,
                chains=config.num_chains,
                cores=min(config.num_chains, cpu_count()),
                seed=config.seed,
                progress_bar=False,
            )
        return _posterior(trace, model, compile_seconds, start)

    return agent
