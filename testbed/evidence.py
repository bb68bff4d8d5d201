"""The evidence vocabulary: what problems offer and metrics need (a leaf module).

A problem's `evidence(predictive)` is an `Evidence`: named values about one predictive,
each computed once, when a metric first asks for it. The names form one vocabulary
(`EVIDENCE`). A `Metric` names the evidence it needs; `testbed.evaluation` pairs metrics
with a problem's evidence, `testbed.metrics.registry` keeps the registered metrics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from testbed.errors import InputError

# The one vocabulary: what problems offer and metrics need.
EVIDENCE: dict[str, str] = {
    # from the problem's environment
    "label_batches": "test batches x [N, tau, d], y [N, tau] with the environment's log p(y | x)",
    "data_batches": "test batches x [N, tau, d], y [N, tau] of real data (no true likelihood)",
    "regression_batches": "test batches x [N, tau, d], real y [N, tau] with the true log-lik",
    "label_distribution": "the true label log-probabilities at tau inputs (exact enumeration)",
    "labelled_inputs": "labelled inputs per split for accuracy and calibration",
    "reference_samples": "draws of the reference (or exact) posterior at x_o",
    "exact_posterior": "the closed-form posterior at x_o",
    "gaussian_exact_posterior": "the closed-form posterior at x_o when it is Gaussian",
    "exact_predictive": "future data with the exact log joint predictive",
    "true_parameters": "the parameters theta* behind x_o",
    "observation": "the observation x_o",
    "prior_log_prob": "the prior's log density (where the parameters may be)",
    "posterior_predictive": "simulations at the agent's posterior draws (x_o's predictive)",
    "prior_simulations": "held-out joint draws (theta_i, x_i) from the prior and simulator",
    "calibration_draws": "L draws of the agent's posterior at each x_i of prior simulations",
    "calibration_log_probs": "the agent's log density at theta_i and at its draws, per x_i",
    "target_score": "the score (gradient of the log density) of the true posterior",
    # from the agent's predictive
    "sampler": "the agent's sampled functions (an EpistemicSampler)",
    "posterior": "the agent's posterior (any posterior shape, adapted)",
    "posterior_samples": "draws of the agent's posterior at x_o",
    "test_samples": "(the draws tests of independence read: MCMC chains thinned to their "
    "ESS, or the posterior samples; the thinning step)",
    "posterior_log_prob": "the agent's normalised posterior log density",
    "gaussian_posterior": "the agent's posterior when it is Gaussian and says so (mean, cov)",
    "amortized_posterior": "the agent's posterior at any x (one draw per x)",
}


def check_names(field: str, names: Iterable[str]) -> frozenset[str]:
    """`names` as a frozenset, each one of EVIDENCE's (else a named InputError)."""
    out = frozenset(names)
    unknown = sorted(out - set(EVIDENCE))
    if unknown:
        raise InputError(
            f"{field}: got {unknown[0]!r}; allowed: names of testbed.evaluation.EVIDENCE: "
            + ", ".join(EVIDENCE)
        )
    return out


class Evidence:
    """Named values about one predictive on one problem, each computed once on first use.

    `providers` maps evidence names to functions of this Evidence (so one value can build
    on another, e.g. samples on the adapted posterior). A provider may return `MISSING`
    when the predictive cannot give a value (no density, say). `options` holds per-metric
    keyword arguments the problem sets (e.g. C2ST's z-scoring); `diagnostics` collects
    entries that are not metrics (sampling time, the agent's own diagnostics).
    """

    def __init__(
        self,
        providers: Mapping[str, Callable[[Evidence], Any]],
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        self._providers = dict(providers)
        check_names("evidence", self._providers)
        self._values: dict[str, Any] = {}
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self.diagnostics: dict[str, float] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            if name not in self._providers:
                raise InputError(
                    f"evidence: {name!r} is not offered here; offered: "
                    + ", ".join(sorted(self._providers))
                )
            self._values[name] = self._providers[name](self)
        return self._values[name]

    def has(self, name: str) -> bool:
        """Whether `name` is offered and the predictive gives a value for it."""
        return name in self._providers and self[name] is not MISSING

    def missing(self, needs: Iterable[str]) -> list[str]:
        """The names of `needs` this evidence cannot give, in order."""
        return [n for n in needs if not self.has(n)]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # a provider's answer when the predictive has no such value


@dataclasses.dataclass(frozen=True)
class Metric:
    """A registered metric: `fn` on arrays (call it directly), the evidence it `needs` (in
    the order `fn` takes it), the Quality entries it `gives`, and `apply(evidence)` that
    computes those entries on a problem (default: `fn` of the needed values; a number is
    named after the metric, a dict's keys get the metric's name as prefix)."""

    name: str
    fn: Callable[..., Any]
    needs: tuple[str, ...]
    description: str
    apply: Callable[[Evidence], Mapping[str, float]] | None = None
    gives: tuple[str, ...] = ()  # the entries it writes (empty: not declared)

    def __call__(self, evidence: Evidence) -> Mapping[str, float]:
        if self.apply is not None:
            return self.apply(evidence)
        args = [evidence[n] for n in self.needs]
        value = self.fn(*args, **evidence.options.get(self.name, {}))
        if isinstance(value, Mapping):
            return {f"{self.name}_{k}": v for k, v in value.items()}
        return {self.name: value}
