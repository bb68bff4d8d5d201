"""What every ranking rule reads the same way: a problem's family, how each family is
ranked (`testbed.ranking.RankedBy`), the label of each agent config, the best config per
agent, and a bootstrap interval.

The rules' own scoring: `leaderboard.ranking.scoring_neural_testbed` (the Neural
Testbed's) and `leaderboard.ranking.scoring_per_cell` (the SBI benchmark's). Problems of
different families are never pooled: the leaderboard cleans and ranks each family's
problems apart, and a task of one family is never averaged with, or ranked against, a task
of another.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from testbed.ranking import JOINT_KL, RankedBy

SHIPPED_LABEL = "{agent} (ours, shipped)"  # leaderboard.ranking.shipped.LABEL

ENTRY = ["agent", "config_key"]
# Below this many observations a cell gets no bootstrap interval: resampling n values
# gives at most C(2n - 1, n) means (3 for n = 2: the interval is just the two values), so
# its percentiles are about the range of the values, not a 95% interval.
MIN_CI_OBSERVATIONS = 5


def family_of(problem_ids: pd.Series) -> pd.Series:
    """The problem family of each id: the part before the first '/' (`coin/3` -> `coin`),
    as `generative.split_id` reads it."""
    return problem_ids.astype(str).str.split("/", n=1).str[0]


def ranked_by(families: Sequence[str]) -> dict[str, RankedBy]:
    """family -> how it is ranked, for the registered families among `families` that are
    ranked (a family no longer registered is ranked by the default, the joint KL)."""
    import generative

    out = {}
    for name in families:
        spec = generative.FAMILIES.get(name).ranked_by if name in generative.FAMILIES else JOINT_KL
        if spec is not None:
            out[name] = spec
    return out


def entry_labels(df: pd.DataFrame) -> dict[str, str]:
    """config_key -> display label: the agent name, plus the config fields that vary
    between that agent's configs present in `df` (e.g. `ensemble[num_ensemble=30]`)."""
    labels: dict[str, str] = {}
    for agent, group in df.groupby("agent", sort=True):
        configs = {
            k: json.loads(c) if isinstance(c, str) else dict(c)
            for k, c in group.drop_duplicates("config_key")[["config_key", "config"]].values
        }
        if len(configs) == 1:
            labels[next(iter(configs))] = str(agent)
            continue
        fields = sorted({f for c in configs.values() for f in c})
        varying = [f for f in fields if len({json.dumps(c.get(f)) for c in configs.values()}) > 1]
        for key, c in configs.items():
            body = ",".join(f"{f}={json.dumps(c.get(f))}" for f in varying)
            labels[key] = f"{agent}[{body}]"
    return labels


def bootstrap_ci(
    values: np.ndarray,
    *,
    num_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    min_observations: int = 1,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (resampled with replacement);
    (nan, nan) with fewer than `min_observations` values (or none)."""
    values = np.asarray(values, float)
    if len(values) == 0 or len(values) < min_observations:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(num_bootstrap, len(values)))
    means = values[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)
