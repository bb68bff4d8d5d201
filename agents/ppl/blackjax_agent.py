"""`blackjax`: the conjugate problem's model as a JAX log density, NUTS by BlackJAX.

BlackJAX has no modelling language: its model is a log density. Each family's is written
here with `jax.scipy` (hyperparameters and data are arguments, not constants), on an
unconstrained space with the Jacobian of its transform (log for positive scalars, logit for
a probability, additive log-ratio for a simplex, a Cholesky factor with log diagonal for a
covariance). Window adaptation (BlackJAX's Stan-like warm-up: step size and diagonal mass
matrix) then NUTS; chains vmapped and started uniformly in [-2, 2] as Stan does. The whole
run is compiled ahead of time once per (family, n, D, sizes) and process: `compile_seconds`
is that compilation (0.0 when cached).
"""

from __future__ import annotations

import time

import numpy as np

from agents.ppl.common import ModelCache, PplConfig, check_family, posterior, require
from agents.ppl.spec import FAMILIES, PplModel, to_theta, translate
from agents.registry import register
from testbed.base import MODEL_POSTERIOR, Data
from testbed.waiting import waited

SERVES = FAMILIES
COMPILED = ModelCache()  # (family, n, D, warmup, draws, chains) -> compiled run


def unconstrained_dim(model: PplModel) -> int:
    fam, d = model.family, model.dim
    sizes = {
        "nig": 2,
        "student_t_known_loc": 2,
        "niw": d + d * (d + 1) // 2,
        "dirichlet_multinomial": d - 1,
    }
    return sizes.get(fam, d if fam in ("mvn_known_cov", "blr") else 1)


def log_density(family: str, dim: int):
    """`(u, hyper, data) -> (log p(theta(u), y) + log |J|, theta(u) by name)` of a family."""
    import jax
    import jax.numpy as jnp
    from jax.scipy import stats
    from jax.scipy.special import gammaln, multigammaln

    def inv_gamma(x, a, b):
        return a * jnp.log(b) - gammaln(a) - (a + 1.0) * jnp.log(x) - b / x

    def fn(u, h, data):
        y = data["y"]
        if family in ("normal_known_var", "mvn_known_cov", "blr"):
            theta = u if family != "normal_known_var" else u[0]
            if family == "normal_known_var":
                lp = stats.norm.logpdf(theta, h["m0"], h["s0"])
                ll = stats.norm.logpdf(y, theta, h["sigma"]).sum()
                return lp + ll, {"mu": theta}
            lp = stats.multivariate_normal.logpdf(theta, h["m0"], h["S0"])
            if family == "blr":
                ll = stats.norm.logpdf(y, data["X"] @ theta, h["sigma"]).sum()
                return lp + ll, {"w": theta}
            ll = stats.multivariate_normal.logpdf(y, theta, h["S"]).sum()
            return lp + ll, {"mu": theta}
        if family in ("normal_known_mean", "gamma_poisson"):
            lam = jnp.exp(u[0])
            lp = stats.gamma.logpdf(lam, h["a"], scale=1.0 / h["b"]) + u[0]
            if family == "gamma_poisson":
                return lp + stats.poisson.logpmf(y, lam).sum(), {"lam": lam}
            return lp + stats.norm.logpdf(y, h["m"], jax.lax.rsqrt(lam)).sum(), {"lam": lam}
        if family == "nig":
            mu, s2 = u[0], jnp.exp(u[1])
            lp = inv_gamma(s2, h["a"], h["b"]) + u[1]
            lp = lp + stats.norm.logpdf(mu, h["m0"], jnp.sqrt(s2 / h["kappa"]))
            return lp + stats.norm.logpdf(y, mu, jnp.sqrt(s2)).sum(), {"mu": mu, "s2": s2}
        if family == "student_t_known_loc":  # half-normal priors: twice N(0, s)'s density
            nu, sigma = jnp.exp(u[0]), jnp.exp(u[1])
            lp = stats.norm.logpdf(nu, 0.0, h["s_nu"]) + stats.norm.logpdf(sigma, 0.0, h["s_sigma"])
            lp = lp + 2.0 * np.log(2.0) + u.sum()
            ll = stats.t.logpdf(y, nu, h["m"], sigma).sum()
            return lp + ll, {"nu": nu, "sigma": sigma}
        if family == "beta_binomial":
            p = jax.nn.sigmoid(u[0])
            log_j = -jax.nn.softplus(-u[0]) - jax.nn.softplus(u[0])
            lp = stats.beta.logpdf(p, h["a"], h["b"]) + log_j
            return lp + stats.bernoulli.logpmf(y, p).sum(), {"p": p}
        if family == "dirichlet_multinomial":
            z = jnp.concatenate([u, jnp.zeros(1)])
            log_pi = jax.nn.log_softmax(z)
            pi = jnp.exp(log_pi)
            lp = (
                gammaln(h["alpha"].sum())
                - gammaln(h["alpha"]).sum()
                + jnp.sum((h["alpha"] - 1.0) * log_pi)
            )
            return lp + log_pi.sum() + log_pi[y].sum(), {"pi": pi}
        if family == "niw":
            p = dim
            rows, cols = np.tril_indices(p)
            low = jnp.zeros((p, p)).at[rows, cols].set(u[p:])
            diag = jnp.diagonal(low)
            low = low - jnp.diag(diag) + jnp.diag(jnp.exp(diag))
            sigma = low @ low.T
            log_j = p * np.log(2.0) + jnp.sum((p + 1.0 - np.arange(p)) * diag)
            logdet = 2.0 * jnp.sum(diag)
            inv = jax.scipy.linalg.cho_solve((low, True), jnp.eye(p))
            nu, psi = h["nu"], h["psi"]
            lp = (
                -0.5 * nu * p * np.log(2.0)
                - multigammaln(0.5 * nu, p)
                + 0.5 * nu * jnp.linalg.slogdet(psi)[1]
                - 0.5 * (nu + p + 1.0) * logdet
                - 0.5 * jnp.trace(psi @ inv)
            )
            mu = u[:p]
            lp = lp + stats.multivariate_normal.logpdf(mu, h["m0"], sigma / h["kappa"])
            ll = stats.multivariate_normal.logpdf(y, mu, sigma).sum()
            return lp + ll + log_j, {"mu": mu, "Sigma": sigma}
        raise AssertionError(family)

    return fn


def build_run(model: PplModel, config: PplConfig):
    """The jitted run `(key, hyper, data) -> (draws by name [chains, draws, ...], divergences)`."""
    import blackjax
    import jax
    import jax.numpy as jnp

    fn = log_density(model.family, model.dim)
    dim_u = unconstrained_dim(model)

    def one_chain(key, hyper, data):
        def logdensity(u):
            return fn(u, hyper, data)[0]

        key_init, key_warm, key_draw = jax.random.split(key, 3)
        u0 = jax.random.uniform(key_init, (dim_u,), minval=-2.0, maxval=2.0)
        warmup = blackjax.window_adaptation(
            blackjax.nuts,
            logdensity,
            adaptation_info_fn=blackjax.adaptation.base.get_filter_adapt_info_fn(),
        )
        (state, parameters), _ = warmup.run(key_warm, u0, num_steps=config.num_warmup)
        kernel = blackjax.nuts(logdensity, **parameters)

        def step(state, key):
            state, info = kernel.step(key, state)
            return state, (fn(state.position, hyper, data)[1], info.is_divergent)

        keys = jax.random.split(key_draw, config.num_samples)
        _, (draws, divergent) = jax.lax.scan(step, state, keys)
        return draws, jnp.sum(divergent)

    return jax.jit(jax.vmap(one_chain, in_axes=(0, None, None)))


@register("blackjax", PplConfig, predicts=MODEL_POSTERIOR)
def make(config: PplConfig):
    """BlackJAX NUTS (window adaptation) on the conjugate problem's JAX log density."""

    def agent(data: Data, knowledge):
        family = check_family("blackjax", knowledge, SERVES)
        require("blackjax", "blackjax")
        import jax
        import jax.numpy as jnp

        model = translate(family, data.x, data.y)
        hyper = {k: jnp.asarray(v, jnp.float32) for k, v in model.hyper.items()}
        obs = {k: jnp.asarray(v) for k, v in model.data.items()}
        if model.family != "dirichlet_multinomial":
            obs = {k: v.astype(jnp.float32) for k, v in obs.items()}
        keys = jax.random.split(jax.random.PRNGKey(config.seed), config.num_chains)
        key = model.shape_key + (config.num_warmup, config.num_samples, config.num_chains)

        def build():
            return build_run(model, config).lower(keys, hyper, obs).compile()

        run, compile_seconds = COMPILED.get(key, lambda: waited(build))
        start = time.perf_counter()
        # one computation samples every draw: waited for so that Ctrl-C stops the wait
        draws, divergent = waited(lambda: jax.block_until_ready(run(keys, hyper, obs)))
        seconds = time.perf_counter() - start
        draws = {k: np.asarray(v, np.float64) for k, v in draws.items()}
        theta = to_theta(model, draws)
        return posterior(theta, compile_seconds, seconds, int(np.sum(divergent)))

    return agent
