"""`ensemble+`: an ensemble with randomized prior functions and optional bootstrapping.

Member k outputs f_k(x) + s * p_k(x) where p_k is a fixed, untrained copy of the MLP
(initialised from seed + 999, as the reference) and s = prior_scale / sqrt(T) ('sqrt'),
prior_scale / T ('linear') or prior_scale ('none'). Both networks have a nonzero
first-layer bias (truncated normal, sd 1/sqrt(d)). Bootstrap weights per (member,
example): 'none', 'bernoulli' (2 Bern(1/2)) or 'exponential' (Exp(1)). Decay scale
l2 / K * sqrt(T) d / n over all members.

Reference bug, fixed here: the reference's sweep passes temp_scale_prior='lin' while its
code tests for 'linear', so those sweep entries silently used no temperature scaling.
Our sweep uses 'linear' (the intended 1/T scaling); 'lin' is accepted as an alias.
"""

from __future__ import annotations

import dataclasses

from agents.ensemble import EnsembleConfig, ensemble_agent, register_ensemble
from agents.training import BOOTSTRAP, PriorFunctionConfig, schedule_sweep


@dataclasses.dataclass(frozen=True)
class EnsemblePlusConfig(EnsembleConfig, PriorFunctionConfig):
    """Ensemble with prior functions (reference `EnsembleConfig` defaults)."""


def ensemble_plus_sweep() -> list[EnsemblePlusConfig]:
    """The reference's `testbed` sweep (21): K, bootstrap, l2, prior scaling, schedule."""
    c = EnsemblePlusConfig
    sweep = [c(num_ensemble=k, batch_strategy=True) for k in (1, 3, 10, 30, 100)]
    sweep += [c(distribution=d, batch_strategy=True) for d in BOOTSTRAP]
    sweep += [c(l2_weight_decay=l2, batch_strategy=True) for l2 in (0.1, 0.3, 1.0, 3.0, 10.0)]
    sweep += [
        c(temp_scale_prior=how, prior_scale=s, batch_strategy=True)
        for how in ("linear", "sqrt")  # the reference wrote 'lin' (a no-op); see module doc
        for s in (1.0, 3.0)
    ]
    return sweep + schedule_sweep(c)


@register_ensemble("ensemble+", EnsemblePlusConfig, ensemble_plus_sweep)
def make_ensemble_plus(config: EnsemblePlusConfig):
    """Ensemble with randomized prior functions (and bootstrapping); one member per key."""
    return ensemble_agent(config)
