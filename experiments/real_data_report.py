"""The real-data reproduction's report: per agent, regime and tau, each config's testbed
score (mean KL normalised by `uniform`'s) against its real-data score (mean joint NLL over
the datasets), their Pearson and Spearman correlations across the configs with bootstrap
intervals (configs resampled), the same over every agent-config pooled (the paper's
Figure 5(b)), per dataset (its Figure 11), and a verdict per agent.

A config is scored on a side only when every job it needs there is stored as finished: a
failed or missing job leaves that config out of the correlation and counts it in the
`missing` column (never a zero, never a partial mean beside complete ones).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.correlation import bootstrap_pairs

OUTPUTS = ("correlation.md", "correlation.csv", "pooled.md", "pooled.csv", "datasets.md",
           "datasets.csv", "configs.csv", "real_vs_synthetic.png")  # fmt: skip
PAPER = "not published as numbers"  # the paper's Figures 5 and 11 are images; no table
METHODS = ("spearman", "pearson")
MIN_CONFIGS = 3  # below this a correlation across configs is not computed
# below this no verdict: n configs in a random order match perfectly with chance 1/n! (1/6
# at 3, 1/720 at 6), and a bootstrap over configs cannot show that (it then says [1, 1])
MIN_VERDICT = 6
NUM_BOOTSTRAP = 2000
DECADES_LABELLED = 2.5  # the figure labels 1, 2 and 5 times each power of ten up to this span


@dataclasses.dataclass(frozen=True)
class Design:
    """What the report expects: each agent's configs ({config_key: config JSON}), its
    synthetic problems, the pooled figure's synthetic problems (shared by every agent), and
    the real problems of each regime."""

    configs: dict[str, dict[str, str]]
    synthetic: dict[str, list[str]]
    pooled: list[str]
    real: dict[str, list[str]]
    side: str = "2d"  # which synthetic side (`reproduce_real_data.SIDES`), said in the tables


def _settings(ids) -> dict[str, dict]:
    import generative

    return {p: generative.problem_settings(p) for p in ids}


def cleaned(rows: pd.DataFrame, score: str, finite_share: str) -> pd.Series:
    """A score as the testbed's rule cleans it (negative -> 0; non-finite -> 1e6, an
    agent's infinitely wrong prediction, not a failure), on finished rows."""
    value = pd.to_numeric(rows[score], errors="coerce") if score in rows else np.nan
    value = pd.Series(value, index=rows.index, dtype=float)
    finite = np.isfinite(value)
    if finite_share in rows:
        finite &= pd.to_numeric(rows[finite_share], errors="coerce").fillna(1) >= 1
    return value.clip(lower=0).where(finite, 1e6)


def finished(frame: pd.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """({job key: cleaned KL}, {job key: cleaned joint NLL}) of the finished jobs."""
    ok = frame[frame["status"] == "ok"]
    kl = cleaned(ok, "kl_estimate", "pct_finite_kl")
    nll = cleaned(ok, "joint_nll", "pct_finite_nll")
    real = ok["problem_id"].str.startswith("real/")
    return dict(zip(ok["key"][~real], kl[~real])), dict(zip(ok["key"][real], nll[real]))


def uniform_kl(frame: pd.DataFrame) -> dict[str, float]:
    """{problem id: uniform's cleaned KL} (the normaliser)."""
    rows = frame[(frame["agent"] == "uniform") & (frame["status"] == "ok")]
    kl = cleaned(rows, "kl_estimate", "pct_finite_kl")
    return kl.groupby(rows["problem_id"]).mean().to_dict()


def _key(agent: str, config_json: str, problem_id: str) -> str:
    from leaderboard.execution.jobs import Job

    return Job(agent, config_json, problem_id).key


def _mean(values: dict[str, float], keys: list[str]) -> float:
    """The mean over `keys`, nan when any is missing (a partial mean is never a score)."""
    got = [values.get(k, math.nan) for k in keys]
    return float(np.mean(got)) if keys and np.all(np.isfinite(got)) else math.nan


def _normalised(kl, uniform, agent, config_json, ids) -> float:
    """Mean KL of a config over `ids` / uniform's mean KL over the same ids."""
    base = [uniform.get(p, math.nan) for p in ids]
    mine = _mean(kl, [_key(agent, config_json, p) for p in ids])
    return mine / float(np.mean(base)) if ids and np.all(np.isfinite(base)) else math.nan


def config_scores(frame: pd.DataFrame, design: Design) -> pd.DataFrame:
    """One row per (agent, config, regime, tau): its synthetic score (on the agent's own
    problems, and on the pooled ones), its real score (mean over datasets of the mean over
    seeds) and its mean NLL per dataset; nan where a job is missing or failed."""
    kl, nll = finished(frame)
    uniform = uniform_kl(frame)
    settings = _settings({p for ids in design.real.values() for p in ids}
                         | set(design.pooled)
                         | {p for ids in design.synthetic.values() for p in ids})  # fmt: skip
    taus = sorted({int(settings[p]["tau"]) for ids in design.real.values() for p in ids})
    rows = []
    for agent, configs in design.configs.items():
        for tau in taus:
            own = [p for p in design.synthetic[agent] if settings[p]["tau"] == tau]
            pooled = [p for p in design.pooled if settings[p]["tau"] == tau]
            for regime, ids in design.real.items():
                at = [p for p in ids if settings[p]["tau"] == tau]
                datasets = list(dict.fromkeys(settings[p]["dataset"] for p in at))
                for key, config in configs.items():
                    per = {d: _mean(nll, [_key(agent, config, p) for p in at
                                          if settings[p]["dataset"] == d]) for d in datasets}
                    rows.append({
                        "agent": agent, "config_key": key, "config": config,
                        "regime": regime, "tau": tau,
                        "synthetic": _normalised(kl, uniform, agent, config, own),
                        "synthetic_pooled": _normalised(kl, uniform, agent, config, pooled),
                        "real": float(np.mean(list(per.values()))) if per else math.nan,
                        **{f"real_{d}": v for d, v in per.items()},
                    })  # fmt: skip
    return pd.DataFrame(rows)


def _correlate(x: np.ndarray, y: np.ndarray, num_bootstrap: int) -> dict[str, float]:
    """Spearman and Pearson of the finite pairs with their 95% intervals (nan below
    MIN_CONFIGS pairs); `n` the pairs they rest on."""
    keep = np.isfinite(x) & np.isfinite(y)
    out: dict[str, float] = {"n": int(keep.sum())}
    for method in METHODS:
        r = {"estimate": math.nan, "low": math.nan, "high": math.nan}
        if keep.sum() >= MIN_CONFIGS:
            r = bootstrap_pairs(x[keep], y[keep], method, num_bootstrap)
        out.update({method: r["estimate"], f"{method}_low": r["low"],
                    f"{method}_high": r["high"]})  # fmt: skip
    return out


def not_run(r) -> str:
    """What a row on no config says: its runs are not there (a store of other datasets or
    agents), not that a verdict needs more configs."""
    n = int(r["configs"])
    return f"not run: 0 of {n} config{'' if n == 1 else 's'} finished on both sides"


def said(r) -> str:
    """`holds` when the Spearman interval is above 0, `reversed` when it is below 0 (the
    testbed ranks the configs the other way round), else `not shown` (or too few, or
    `not_run`)."""
    if r["n"] == 0:
        return not_run(r)
    if r["n"] < MIN_VERDICT:
        return f"too few configs for a verdict (< {MIN_VERDICT})"
    if not np.isfinite(r["spearman"]):
        return "undefined (a side is constant across configs)"
    if r["spearman_high"] < 0:
        return "reversed"
    return "holds" if r["spearman_low"] > 0 else "not shown"


def correlations(scores: pd.DataFrame, num_bootstrap: int = NUM_BOOTSTRAP) -> pd.DataFrame:
    """Per agent, regime and tau: configs, missing ones, Spearman and Pearson across
    configs of the synthetic and the real score, the paper's value and the verdict."""
    rows = []
    for (agent, regime, tau), g in scores.groupby(["agent", "regime", "tau"], sort=False):
        x, y = g["synthetic"].to_numpy(float), g["real"].to_numpy(float)
        r = _correlate(x, y, num_bootstrap)
        r = {"agent": agent, "regime": regime, "tau": tau, "configs": len(g),
             "missing": len(g) - r["n"], **r, "paper": PAPER}  # fmt: skip
        rows.append({**r, "verdict": said(r)})
    return pd.DataFrame(rows)


def pooled(scores: pd.DataFrame, num_bootstrap: int = NUM_BOOTSTRAP) -> pd.DataFrame:
    """Figure 5(b): per regime and tau, across every agent-config, the synthetic score on
    the problems every agent ran (the pooled ones) against the real score. The configs in
    one order (agent, config key), so the bootstrap's draws do not hang on `--agents`'s."""
    rows = []
    for (regime, tau), g in scores.groupby(["regime", "tau"], sort=False):
        g = g.sort_values(["agent", "config_key"], kind="stable")
        r = _correlate(g["synthetic_pooled"].to_numpy(float), g["real"].to_numpy(float),
                       num_bootstrap)  # fmt: skip
        rows.append({"regime": regime, "tau": tau, "agents": g["agent"].nunique(),
                     "configs": len(g), "missing": len(g) - r["n"], **r, "paper": PAPER})
    return pd.DataFrame(rows)


def per_dataset(scores: pd.DataFrame, design: Design,
                num_bootstrap: int = NUM_BOOTSTRAP) -> pd.DataFrame:  # fmt: skip
    """Figure 11: per agent, regime, tau and dataset, the correlation across configs of
    the synthetic score with the dataset's mean NLL."""
    rows = []
    for (agent, regime, tau), g in scores.groupby(["agent", "regime", "tau"], sort=False):
        datasets = dict.fromkeys(s["dataset"] for s in _settings(design.real[regime]).values())
        for d in datasets:
            y = g.get(f"real_{d}", pd.Series(math.nan, index=g.index)).to_numpy(float)
            r = _correlate(g["synthetic"].to_numpy(float), y, num_bootstrap)
            rows.append({"agent": agent, "regime": regime, "tau": tau, "dataset": d,
                         "configs": len(g), "missing": len(g) - r["n"], **r, "paper": PAPER})
    return pd.DataFrame(rows)


def verdict(corr: pd.DataFrame) -> list[str]:
    """One line per agent: where its testbed ranking predicts its real-data ranking."""
    lines = []
    for agent, g in corr.groupby("agent", sort=False):
        cells = []
        for _, r in g.iterrows():
            where = f"{r['regime']} tau={r['tau']}"
            if r["n"] == 0:
                cells.append(f"{where}: {not_run(r)}")
                continue
            if not np.isfinite(r["spearman"]) or r["n"] < MIN_VERDICT:
                cells.append(f"{where}: no verdict, {r['n']} complete configs")
                continue
            cells.append(f"{where}: {r['verdict']}, Spearman {r['spearman']:.2f} "
                         f"[{r['spearman_low']:.2f}, {r['spearman_high']:.2f}], "
                         f"{r['n']} configs, {r['missing']} missing")  # fmt: skip
        if (g["n"] == 0).all():  # a store of other datasets or agents: said once
            cells = "its one cell" if len(g) == 1 else f"all {len(g)} cells"
            lines.append(f"{agent}: {not_run(g.iloc[0])} in {cells}")
            continue
        holds = int((g["verdict"] == "holds").sum())
        turned = int((g["verdict"] == "reversed").sum())
        also = f", reversed in {turned}" if turned else ""
        lines.append(f"{agent}: holds in {holds} of {len(g)}{also} (" + "; ".join(cells) + ")")
    return lines


def _interval(r, method: str) -> str:
    """`0.81 [0.52, 0.95]`, or `n/a` where not computed."""
    if not np.isfinite(r[method]):
        return "n/a"
    return f"{r[method]:.2f} [{r[f'{method}_low']:.2f}, {r[f'{method}_high']:.2f}]"


def markdown(table: pd.DataFrame) -> str:
    """A correlation table as GitHub markdown: each estimate with its 95% interval in one
    column, `n` (the configs it rests on) before them."""
    from experiments.decisions_report import markdown as as_markdown

    if not len(table):
        return "(no rows)\n"
    shown = table.drop(columns=[c for c in table.columns if c.endswith(("_low", "_high"))])
    for method in METHODS:
        shown[method] = [_interval(r, method) for _, r in table.iterrows()]
    return as_markdown(shown, 3)


def dataset_grid(table: pd.DataFrame, tau: int) -> str:
    """The per-dataset table at one tau as a grid, agent and regime by dataset: each cell
    Spearman's rho, in bold where its interval lies above or below 0 (the verdict's rule),
    n/a without a correlation. Figure 11 at a glance."""
    from experiments.decisions_report import markdown as as_markdown

    at = table[table["tau"] == tau]
    if not len(at):
        return "(no rows)\n"
    datasets = list(dict.fromkeys(at["dataset"]))
    rows = []
    for (agent, regime), g in at.groupby(["agent", "regime"], sort=False):
        cells = {}
        for _, r in g.iterrows():
            rho = r["spearman"]
            shown = r["spearman_low"] > 0 or r["spearman_high"] < 0
            cells[r["dataset"]] = ("n/a" if not np.isfinite(rho)
                                   else f"**{rho:.2f}**" if shown else f"{rho:.2f}")  # fmt: skip
        rows.append({"agent": agent, "regime": regime, **{d: cells.get(d, "") for d in datasets}})
    return as_markdown(pd.DataFrame(rows), 2)


def figure(scores: pd.DataFrame):
    """Real against synthetic score, every agent-config (one colour an agent), one panel
    per regime and tau: Figures 5(a) and 5(b) in one."""
    import matplotlib.pyplot as plt

    cells = list(scores.groupby(["regime", "tau"], sort=False))
    if not cells:
        return None
    fig, axes = plt.subplots(1, len(cells), figsize=(4 * len(cells), 3.6), squeeze=False,
                             layout="constrained")  # fmt: skip
    agents = list(dict.fromkeys(scores["agent"]))
    colours = {a: plt.get_cmap("tab10")(i % 10) for i, a in enumerate(agents)}
    for ax, ((regime, tau), g) in zip(axes[0], cells):
        g = g[np.isfinite(g["synthetic_pooled"]) & np.isfinite(g["real"])]
        for agent, h in g.groupby("agent", sort=False):
            ax.scatter(h["synthetic_pooled"], h["real"], s=12, color=colours[agent], label=agent)
        if (g["synthetic_pooled"] > 0).any():  # else no config is complete on both sides
            _log_axis(ax, g["synthetic_pooled"][g["synthetic_pooled"] > 0])
        ax.set(xlabel="testbed KL / uniform's (pooled problems)",
               ylabel="mean joint NLL (real data)", title=f"{regime} data, tau = {tau}")
    handles, labels = [], []
    for ax in axes[0]:  # every agent once, from whichever panel shows it
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(8, len(labels)),
                   fontsize=8)  # fmt: skip
    return fig


def _log_axis(ax, x: pd.Series) -> None:
    """A log x-axis in plain numbers (0.5, 1, 2) at 1, 2 and 5 times the powers of ten when
    `x` spans at most DECADES_LABELLED decades, else at the powers alone; minor ticks
    unlabelled, so no two labels overlap (matplotlib's minor labels, 3x10^-1, did)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    subs = (1.0, 2.0, 5.0) if np.log10(x.max() / x.min()) <= DECADES_LABELLED else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def write(frame: pd.DataFrame, design: Design, out: Path,
          num_bootstrap: int = NUM_BOOTSTRAP) -> list[str]:  # fmt: skip
    """Writes OUTPUTS into `out`; returns the verdict lines."""
    scores = config_scores(frame, design)
    corr = correlations(scores, num_bootstrap)
    pool = pooled(scores, num_bootstrap)
    data = per_dataset(scores, design, num_bootstrap)
    out.mkdir(parents=True, exist_ok=True)
    scores.to_csv(out / "configs.csv", index=False)
    lines = verdict(corr)
    for name, table in (("correlation", corr), ("pooled", pool), ("datasets", data)):
        table.to_csv(out / f"{name}.csv", index=False)
        text = markdown(table)
        if name == "correlation":
            text += "\n" + "\n".join(lines) + f"\n\nsynthetic side: {design.side}\n"
        if name == "datasets":  # the grids first, then every cell with its intervals
            grids = [f"Spearman per dataset, tau = {tau} (bold: its interval excludes 0)\n\n"
                     + dataset_grid(data, tau) for tau in dict.fromkeys(data.get("tau", []))]
            text = "\n".join(grids) + ("\n" if grids else "") + text
        (out / f"{name}.md").write_text(text)
    fig = figure(scores)
    if fig is not None:
        fig.savefig(out / "real_vs_synthetic.png", dpi=110)
    return lines
