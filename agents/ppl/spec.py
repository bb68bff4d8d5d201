"""The conjugate problem's model as the PPL agents write it: hyperparameters and data by name.

`ModelSpec.family` is the problem's conjugate family (a frozen dataclass of its prior
hyperparameters and known likelihood constants). `translate` turns it and the training data
into a `PplModel`: the same prior and likelihood in the parameterisation PPLs take (standard
deviations where a PPL's normal takes one; Gamma by shape and rate; integer data for discrete
likelihoods), with parameter names shared by every PPL's program. `to_theta` turns a PPL's
draws back into the problem's theta (its `param_names` order), so the exact posterior scores
them. No PPL is imported here.

| family | model (every PPL writes this) | parameters |
|---|---|---|
| normal_known_var | mu ~ N(m0, s0^2), y ~ N(mu, sigma^2) | mu |
| mvn_known_cov | mu ~ MVN(m0, S0), y_i ~ MVN(mu, S) | mu [D] |
| blr | w ~ MVN(m0, S0), y ~ N(X w, sigma^2) | w [D] |
| normal_known_mean | lam ~ Gamma(a, b) (rate b), y ~ N(m, 1 / lam) | lam |
| nig | s2 ~ InvGamma(a, b), mu ~ N(m0, s2 / kappa), y ~ N(mu, s2) | mu, s2 |
| niw | Sigma ~ InvWishart(nu, psi), mu ~ MVN(m0, Sigma / kappa), y_i ~ MVN(mu, Sigma) | mu, Sigma |
| beta_binomial | p ~ Beta(a, b), y ~ Bernoulli(p) | p |
| gamma_poisson | lam ~ Gamma(a, b) (rate b), y ~ Poisson(lam) | lam |
| dirichlet_multinomial | pi ~ Dirichlet(alpha), y ~ Categorical(pi) (labels 0..K-1) | pi [K] |
| student_t_known_loc | nu ~ HN(s_nu), sigma ~ HN(s_sigma), y ~ StudentT(nu, m, sigma) | nu, sigma |

`student_t_known_loc` (HN: half-normal of that scale) is not conjugate: it is the PPL
benchmark's own model of its problems 7-15 (generative/conjugate/paper_models.py), run to
measure the benchmark's prior mismatch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from testbed.errors import InputError

FAMILIES = (
    "beta_binomial",
    "blr",
    "dirichlet_multinomial",
    "gamma_poisson",
    "mvn_known_cov",
    "nig",
    "niw",
    "normal_known_mean",
    "normal_known_var",
    "student_t_known_loc",
)
# the families of a PPL with no Inverse-Wishart prior (PyMC, Pyro): all but niw
NO_INVERSE_WISHART = tuple(f for f in FAMILIES if f != "niw")

PARAMS = {  # the parameters every PPL's program names, by family
    "beta_binomial": ("p",),
    "blr": ("w",),
    "dirichlet_multinomial": ("pi",),
    "gamma_poisson": ("lam",),
    "mvn_known_cov": ("mu",),
    "nig": ("mu", "s2"),
    "niw": ("mu", "Sigma"),
    "normal_known_mean": ("lam",),
    "normal_known_var": ("mu",),
    "student_t_known_loc": ("nu", "sigma"),
}


@dataclasses.dataclass(frozen=True)
class PplModel:
    """A family's model: `hyper` (prior hyperparameters and likelihood constants) and
    `data` (y, and X for regression), as every PPL agent's program names them."""

    family: str
    hyper: dict[str, Any]
    data: dict[str, np.ndarray]

    @property
    def num_obs(self) -> int:
        return int(self.data["y"].shape[0])

    @property
    def dim(self) -> int:
        """D of the vector families (K for Dirichlet), 1 for the scalar ones."""
        for key in ("m0", "alpha"):
            value = np.asarray(self.hyper.get(key, 0.0))
            if value.ndim == 1:
                return int(value.shape[0])
        return 1

    @property
    def shape_key(self) -> tuple[str, int, int]:
        """Problems with one shape share a compiled model: (family, n, D)."""
        return (self.family, self.num_obs, self.dim)


def _f(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def translate(family: Any, x: np.ndarray, y: np.ndarray) -> PplModel:
    """The PplModel of `family` (a conjugate family) with inputs x [n, dx] and data y [n, dy]."""
    name = family.name
    x, y = _f(x), _f(y)
    if name == "normal_known_var":
        hyper = dict(
            m0=float(_f(family.prior_mean)[0]),
            s0=float(np.sqrt(_f(family.prior_cov)[0, 0])),
            sigma=float(np.sqrt(family.noise_var)),
        )
        return PplModel(name, hyper, {"y": y[:, 0]})
    if name == "mvn_known_cov":
        hyper = dict(m0=_f(family.prior_mean), S0=_f(family.prior_cov), S=_f(family.noise_cov))
        return PplModel(name, hyper, {"y": y})
    if name == "blr":
        hyper = dict(
            m0=_f(family.prior_mean),
            S0=_f(family.prior_cov),
            sigma=float(np.sqrt(family.noise_var)),
        )
        return PplModel(name, hyper, {"X": x, "y": y[:, 0]})
    if name == "normal_known_mean":
        hyper = dict(m=float(family.mean), a=float(family.shape), b=float(family.rate))
        return PplModel(name, hyper, {"y": y[:, 0]})
    if name == "nig":
        hyper = dict(
            m0=float(family.mu0),
            kappa=float(family.kappa),
            a=float(family.alpha),
            b=float(family.beta),
        )
        return PplModel(name, hyper, {"y": y[:, 0]})
    if name == "niw":
        hyper = dict(
            m0=_f(family.mu0), kappa=float(family.kappa), nu=float(family.nu), psi=_f(family.psi)
        )
        return PplModel(name, hyper, {"y": y})
    if name == "beta_binomial":
        hyper = dict(a=float(family.a), b=float(family.b))
        return PplModel(name, hyper, {"y": np.rint(y[:, 0]).astype(np.int64)})
    if name == "gamma_poisson":
        hyper = dict(a=float(family.shape), b=float(family.rate))
        return PplModel(name, hyper, {"y": np.rint(y[:, 0]).astype(np.int64)})
    if name == "dirichlet_multinomial":
        return PplModel(
            name, {"alpha": _f(family.alpha)}, {"y": np.argmax(y, axis=1).astype(np.int64)}
        )
    if name == "student_t_known_loc":
        hyper = dict(
            m=float(family.loc), s_nu=float(family.nu_scale), s_sigma=float(family.sigma_scale)
        )
        return PplModel(name, hyper, {"y": y[:, 0]})
    raise InputError(f"family: got {name!r}; allowed: {', '.join(FAMILIES)}")


def to_theta(model: PplModel, draws: dict[str, np.ndarray]) -> np.ndarray:
    """The problem's theta [chains, draws, dim] from a PPL's draws by name, each
    [chains, draws, *shape] (scalars [chains, draws])."""

    def vec(name):
        value = _f(draws[name])
        return value[..., None] if value.ndim == 2 else value

    fam = model.family
    if fam in ("normal_known_var", "mvn_known_cov"):
        return vec("mu")
    if fam == "blr":
        return vec("w")
    if fam in ("normal_known_mean", "gamma_poisson"):
        return vec("lam")
    if fam == "beta_binomial":
        return vec("p")
    if fam == "dirichlet_multinomial":
        return vec("pi")
    if fam in ("nig", "student_t_known_loc"):  # scalars in PARAMS's order
        return np.concatenate([vec(name) for name in PARAMS[fam]], axis=-1)
    if fam == "niw":
        sigma = _f(draws["Sigma"])
        rows, cols = np.tril_indices(sigma.shape[-1])
        return np.concatenate([vec("mu"), sigma[..., rows, cols]], axis=-1)
    raise InputError(f"family: got {fam!r}; allowed: {', '.join(FAMILIES)}")
