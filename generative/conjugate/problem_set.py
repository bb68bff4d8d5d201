"""Problem ids `conjugate/<name>`: the PPL benchmarking paper's 21 problems and the other families.

`wyb/1`..`wyb/21` reproduce "What's your bench" (Pagni 2024; settings read from
patrick-pagni/whats_your_bench, problem_set.py): normal with known variance (P1-6), normal with
known mean and a Gamma prior on the precision (P7-15), MVN with known identity covariance
(P16-21, d = 2, 5, 7, 10). Unlike the paper, the agent's model uses exactly the reference
prior (the paper gave its PPLs N(0, 1) / half-normal priors: a mismatch, not an inference
error), and data are drawn with numpy's Generator (same distributions and seeds, not the same
draws). The paper's PPL prior is kept as the setting `paper_ppl_prior` for the record.
"""

from __future__ import annotations

import numpy as np

from generative.conjugate import families as fam
from generative.conjugate.problem import ConjugateProblem
from generative.registry import register_family, register_sweep
from testbed.errors import InputError, bad_value


def _wyb_table() -> dict[str, dict]:
    table = {}
    # P1-6: y ~ N(m, 1), mu ~ N(m, 1) (the reference prior); paper's PPL prior N(0, 1).
    seeds = {10: 1, 50: 2, 100: 3}
    for i, (m, n) in enumerate([(3, 10), (3, 50), (3, 100), (5, 10), (5, 50), (5, 100)]):
        table[f"wyb/{i + 1}"] = dict(
            family=fam.NormalKnownVar(np.array([m], float), np.eye(1), 1.0),
            num_train=n,
            seed=seeds[n],
            true_theta=[m],
            paper_ppl_prior="normal(0, 1)",
        )
    # P7-15: y ~ N(3, 1/lam), lam ~ Gamma(a, b); the paper's PPLs used Student-t likelihoods
    # with half-normal(s) hyperpriors, s = 1, 0.5, 0.1.
    gamma = [(1, 1), (1, 1), (1, 1), (1, 1), (3, 5), (3, 5), (1, 1), (3, 5), (3, 5)]
    scales = [1, 1, 1, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1]
    for j in range(9):
        n = (10, 50, 100)[j % 3]
        table[f"wyb/{j + 7}"] = dict(
            family=fam.NormalKnownMean(3.0, float(gamma[j][0]), float(gamma[j][1])),
            num_train=n,
            seed=4 + j % 3,
            true_theta=[1.0],
            paper_ppl_prior=f"student_t with half_normal({scales[j]}) hyperpriors",
        )
    # P16-21: y ~ N(m_data, I), mu ~ N(m_prior, I); paper's PPL prior N(0, I).
    mvn = [
        ([3, 5], [3, 5], 7),
        ([10, 8], [3, 5], 8),
        ([14, 12], [3, 5], 9),
        ([3, 5, 4, 6, 7], [3, 5, 3, 7, 4], 10),
        ([3, 5, 4, 6, 7, 8, 9], [3, 5, 3, 7, 4, 8, 9], 11),
        ([3, 5, 4, 6, 7, 8, 9, 3, 3, 2], [3, 5, 3, 7, 4, 8, 9, 3, 2, 3], 12),
    ]
    for j, (prior_mean, data_mean, seed) in enumerate(mvn):
        d = len(prior_mean)
        table[f"wyb/{j + 16}"] = dict(
            family=fam.MvnKnownCov(np.array(prior_mean, float), np.eye(d), np.eye(d)),
            num_train=50,
            seed=seed,
            true_theta=data_mean,
            paper_ppl_prior=f"normal(0, I_{d})",
        )
    return table


def _other_table() -> dict[str, dict]:
    corr = np.array([[1.0, 0.8, 0.3], [0.8, 1.0, 0.5], [0.3, 0.5, 1.0]])
    return {
        "mvn_known_cov/corr3": dict(
            family=fam.MvnKnownCov(np.zeros(3), 2.0 * corr, corr), num_train=5, seed=21
        ),
        "mvn_known_cov/d20": dict(
            family=fam.MvnKnownCov(np.zeros(20), np.eye(20), np.eye(20)), num_train=30, seed=22
        ),
        "nig/1": dict(
            family=fam.NormalInverseGammaFamily(0.0, 1.0, 3.0, 2.0), num_train=20, seed=31
        ),
        "niw/2": dict(
            family=fam.NormalInverseWishartFamily(np.zeros(2), 1.0, 5.0, np.eye(2)),
            num_train=30,
            seed=41,
        ),
        "niw/3": dict(
            family=fam.NormalInverseWishartFamily(np.zeros(3), 2.0, 7.0, np.eye(3)),
            num_train=50,
            seed=42,
        ),
        "beta_binomial/1": dict(family=fam.BetaBinomial(2.0, 2.0), num_train=20, seed=51),
        "beta_binomial/2": dict(family=fam.BetaBinomial(1.0, 1.0), num_train=200, seed=52),
        "gamma_poisson/1": dict(family=fam.GammaPoisson(2.0, 1.0), num_train=10, seed=61),
        "dirichlet_multinomial/4": dict(
            family=fam.DirichletMultinomial(np.ones(4)), num_train=30, seed=71
        ),
        "blr/3": dict(family=fam.BayesLinReg(np.zeros(3), np.eye(3), 0.25), num_train=20, seed=81),
        "blr/10": dict(
            family=fam.BayesLinReg(np.zeros(10), np.eye(10), 1.0), num_train=50, seed=82
        ),
    }


PROBLEMS: dict[str, dict] = {**_wyb_table(), **_other_table()}


def conjugate_settings(rest: str) -> dict:
    if rest not in PROBLEMS:
        raise bad_value("problem id", f"conjugate/{rest}", [f"conjugate/{k}" for k in PROBLEMS])
    spec = PROBLEMS[rest]
    family = spec["family"]
    return {
        "problem": rest,
        "model": family.name,
        "dim_theta": family.dim,
        "num_train": spec["num_train"],
        "seed": spec["seed"],
        "tau": 10,
        "paper_ppl_prior": spec.get("paper_ppl_prior", ""),
    }


OPTIONS = ("num_samples", "num_null", "num_test_batches", "use_c2st")  # evaluation sizes


@register_family(
    "conjugate",
    conjugate_settings,
    "conjugate models with exact posteriors and predictives",
    id_form="conjugate/<model>/<name> or conjugate/wyb/<1..21>",
    options=OPTIONS,
    prediction="model_posterior",
    ranked_by=None,  # scored exactly; the scores are in each row (leaderboard.load)
)
def build(settings: dict) -> ConjugateProblem:
    spec = PROBLEMS.get(settings.get("problem"))
    if spec is None:
        raise InputError(f"problem: got {settings.get('problem')!r}; allowed: {sorted(PROBLEMS)}")
    return ConjugateProblem(
        name=settings["problem"],
        family=spec["family"],
        num_train=int(settings["num_train"]),
        seed=int(settings["seed"]),
        true_theta=spec.get("true_theta"),
        tau=int(settings["tau"]),
        **{k: settings[k] for k in OPTIONS if k in settings},
    )


@register_sweep("conjugate_wyb")
def wyb_ids() -> list[str]:
    """The PPL benchmarking paper's 21 problems, with matched priors."""
    return [f"conjugate/wyb/{i}" for i in range(1, 22)]


@register_sweep("conjugate")
def conjugate_ids() -> list[str]:
    """Every conjugate problem: the paper's 21 and one or two per other family."""
    return [f"conjugate/{k}" for k in PROBLEMS]
