"""Do prior functions help on real data? The Neural Testbed paper's Figure 7 on the offline
datasets: ensemble+ at its default config with its MLP prior functions and without them
(`prior_scale` 0, the same ensemble otherwise), beside mlp, each trained with agent seeds
0-2 on every dataset, data regime and tau of the real-data reproduction.

Per cell, the mean joint NLL over the agent seeds of each variant and the paired difference
(without prior - with prior, seed by seed) with its standard error across seeds: the
variation of training, which the estimator seeds (the same data, other test batches) do not
show. A cell is scored only when every job it needs finished.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

# name -> (agent, overrides of its default config)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "mlp": ("mlp", {}),
    "ensemble (no prior)": ("ensemble+", {"prior_scale": "0"}),
    "ensemble+ (prior)": ("ensemble+", {}),
}
WITHOUT, WITH = "ensemble (no prior)", "ensemble+ (prior)"
SEEDS = "0-2"  # agent seeds: training varies, the data and the estimator's keys do not
LEVEL = 0.95  # a verdict when the paired t interval at this level excludes 0
OUTPUTS = ("prior_functions.md", "prior_functions.csv")


def jobs(real: Mapping[str, Sequence[str]], seeds: str = SEEDS) -> dict[str, list]:
    """{variant: its jobs on every real problem}, checked by the leaderboard's plan."""
    from leaderboard.execution.sweeping import plan

    ids = [p for regime in real.values() for p in regime]
    return {name: plan([agent], ids, seeds=seeds, overrides=over)
            for name, (agent, over) in VARIANTS.items()}  # fmt: skip


def _by_seed(values: list[tuple[int, float]]) -> dict[int, float]:
    """{agent seed: mean over its estimator seeds} (nan when any is missing)."""
    out: dict[int, list[float]] = {}
    for seed, v in values:
        out.setdefault(seed, []).append(v)
    return {s: float(np.mean(v)) if np.all(np.isfinite(v)) else math.nan for s, v in out.items()}


def _cell(per: dict[str, dict[int, float]]) -> dict[str, float]:
    """The variants' means over seeds and the paired difference with its standard error."""
    row = {name: float(np.mean(list(v.values()))) for name, v in per.items()}
    seeds = sorted(per[WITHOUT])
    diff = np.array([per[WITHOUT][s] - per[WITH][s] for s in seeds])
    row["difference"] = float(diff.mean())
    spread = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
    row["difference_se"] = float(spread)
    row["seeds"] = len(seeds)
    return row


def said(row: Mapping[str, float]) -> str:
    """What a cell says: the prior helps, hurts, or no difference is seen within noise
    (the paired t interval over the seeds, at LEVEL, holds 0: t quantile 4.30 at 3 seeds)."""
    from scipy import stats

    d, se = row["difference"], row["difference_se"]
    if not np.isfinite(d):
        return "not run"
    if not np.isfinite(se) or abs(d) <= stats.t.ppf((1 + LEVEL) / 2, row["seeds"] - 1) * se:
        return "no difference within noise"
    return "prior helps" if d > 0 else "prior hurts"


def table(frame: pd.DataFrame, real: Mapping[str, Sequence[str]], planned: Mapping[str, list],
          ) -> pd.DataFrame:  # fmt: skip
    """One row per regime, dataset and tau (and per regime and tau over all datasets): the
    variants' mean joint NLL, the difference without - with prior, its standard error, the
    agent seeds it rests on and what it says; nan where a job is missing or failed."""
    from experiments.real_data_report import _settings, finished

    _, nll = finished(frame)
    settings = _settings({p for regime in real.values() for p in regime})
    rows = []
    for regime, ids in real.items():
        cells: dict[tuple, dict[str, list]] = {}
        inside = set(ids)
        for name, variant_jobs in planned.items():
            for job in (j for j in variant_jobs if j.problem_id in inside):
                s = settings[job.problem_id]
                value = nll.get(job.key, math.nan)
                for where in ((s["dataset"], int(s["tau"])), ("all", int(s["tau"]))):
                    cells.setdefault(where, {}).setdefault(name, []).append((job.seed, value))
        for (dataset, tau), per in cells.items():
            by_seed = {name: _by_seed(values) for name, values in per.items()}
            rows.append({"regime": regime, "dataset": dataset, "tau": tau, **_cell(by_seed)})
    out = pd.DataFrame(rows)
    if len(out):
        out["says"] = [said(r) for _, r in out.iterrows()]
        datasets = [d for d in dict.fromkeys(out["dataset"]) if d != "all"]
        order = {d: i for i, d in enumerate([*datasets, "all"])}  # the pooled row last
        out = out.sort_values(["regime", "tau", "dataset"], key=lambda c: c.map(order)
                              if c.name == "dataset" else c, kind="stable")  # fmt: skip
    return out.reset_index(drop=True)


def markdown(table: pd.DataFrame) -> str:
    """The table as GitHub markdown, the difference as `d ± se`."""
    from experiments.decisions_report import markdown as as_markdown

    if not len(table):
        return "(no rows)\n"
    shown = table.drop(columns=["difference_se"]).copy()
    shown["difference"] = [
        f"{r['difference']:.3f} ± {r['difference_se']:.3f}" if np.isfinite(r["difference"])
        else "n/a" for _, r in table.iterrows()
    ]  # fmt: skip
    return as_markdown(shown, 3)


def summary(table: pd.DataFrame) -> str:
    """One line: in how many cells (per dataset) the prior helps, hurts or is not seen."""
    cells = table[table["dataset"] != "all"]
    counts = cells["says"].value_counts()
    parts = [f"{counts.get(k, 0)} {k}" for k in
             ("prior helps", "prior hurts", "no difference within noise", "not run")]  # fmt: skip
    return f"prior functions over {len(cells)} dataset cells: " + ", ".join(parts)
