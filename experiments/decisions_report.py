"""The decisions reproduction's report: regret per agent and environment, its correlation
across agents with the marginal (tau = 1) and joint (tau = 10) KL of the same agents on
the classification problems of the same generator, the verdict, and the figure.

Regret rows come from a results store or our shipped runs (`decisions_ours`); KL rows from
the store where it holds them, else from the Neural Testbed runs the package ships (d = 2:
`classification_2d` at the bandit's temperature, every training size and seed).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.correlation import bootstrap_comparison

OUTPUTS = ("regret.md", "regret.csv", "correlation.md", "correlation.csv", "regret_vs_kl.png")
SHIPPED = "decisions_ours"
KL_FAMILIES = {2: "classification_2d", 10: "classification"}  # input_dim -> its testbed family
CURVE_PREFIX = "regret_w"
BASELINES = ("uniform",)  # left out of the learning agents' correlation: far from them all


def _settings(ids) -> pd.DataFrame:
    import generative

    return pd.DataFrame([{"problem_id": i, **generative.problem_settings(i)} for i in ids])


def regret_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The finished bandit runs with their environment, input_dim, temperature and seed."""
    df = df[(df["status"] == "ok") & df["problem_id"].str.startswith("bandit/")]
    if not len(df):
        return df.assign(environment=[], input_dim=[], temperature=[], seed=[], num_steps=[])
    settings = _settings(sorted(set(df["problem_id"])))
    keep = ["problem_id", "environment", "input_dim", "temperature", "seed", "num_steps"]
    return df.drop(columns=[c for c in keep[1:] if c in df]).merge(settings[keep], on="problem_id")


def kl_rows(df: pd.DataFrame, input_dim: int, temperature: float) -> pd.DataFrame:
    """The finished classification runs of the bandit's generator (d, T) at tau 1 and 10, with
    their tau and training key (tau pairs share it): from `df`, else our shipped runs."""
    from leaderboard.shipped_files import shipped

    family = KL_FAMILIES.get(int(input_dim))
    if family is None:
        return pd.DataFrame()
    for source in (df, shipped("neural_testbed")):
        ok = source["status"] == "ok"
        rows = source[ok & source["problem_id"].str.startswith(family + "/")]
        if not len(rows):
            continue
        settings = _settings(sorted(set(rows["problem_id"])))
        chosen = settings[
            (settings["input_dim"] == input_dim)
            & np.isclose(settings["temperature"], temperature)
            & settings["tau"].isin([1, 10])
        ]
        joined = ["tau", "num_train", "seed"]  # the problem's (a store's rows may hold them)
        rows = rows.drop(columns=[c for c in joined if c in rows]).merge(
            chosen[["problem_id", *joined]], on="problem_id"
        )
        if len(rows):
            return rows.assign(unit=rows["num_train"].astype(str) + "/" + rows["seed"].astype(str))
    return pd.DataFrame()


def complete(kl: pd.DataFrame, agents: list[str]) -> list[str]:
    """The agents whose KL runs cover every (problem pair, tau) that any agent's cover: a
    partial run's mean is over other problems, never compared with complete ones."""
    if not len(kl):
        return []
    cells = set(zip(kl["unit"], kl["tau"]))
    return [a for a in agents if set(zip(*(kl.loc[kl["agent"] == a, c] for c in ("unit", "tau"))))
            == cells]  # fmt: skip


def units(rows: pd.DataFrame, column: str, unit: str, agents: list[str]) -> np.ndarray:
    """[A, U] of `column` per agent (rows of `agents`, in order) and unit (nan: missing)."""
    table = rows.pivot_table(index="agent", columns=unit, values=column, aggfunc="mean")
    return table.reindex(agents).to_numpy(float)


def analyse(df: pd.DataFrame, num_bootstrap: int = 2000) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(regret table, correlation table) of the bandit runs in `df` (see the module doc)."""
    runs = regret_rows(df)
    regret, corr = [], []
    for (env, d, t), g in runs.groupby(["environment", "input_dim", "temperature"], sort=False):
        kl = kl_rows(df, d, t)
        agents = sorted(set(g["agent"]))
        seeds = units(g, "average_regret", "seed", agents)
        kl_agents = complete(kl, agents)
        for i, agent in enumerate(agents):
            values = seeds[i][np.isfinite(seeds[i])]
            row = {"environment": env, "agent": agent, "mean_regret": values.mean(),
                   "stderr": values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1
                   else math.nan, "seeds": len(values),
                   "seconds": g.loc[g["agent"] == agent].get("wall_seconds", pd.Series(
                       dtype=float)).median()}  # fmt: skip
            for tau in (1, 10):
                whole = agent in kl_agents
                mine = kl[(kl["agent"] == agent) & (kl["tau"] == tau)] if whole else kl[:0]
                row[f"kl_tau{tau}"] = mine["kl_estimate"].mean() if len(mine) else math.nan
            regret.append(row)
        chosen = {"all": kl_agents, "learning": [a for a in kl_agents if a not in BASELINES]}
        for which, names in chosen.items():
            corr += _correlations(env, which, names, g, kl, num_bootstrap)
    regret = pd.DataFrame(regret)
    if len(regret):
        regret = regret.sort_values(["environment", "mean_regret"], kind="stable")
    return regret.reset_index(drop=True), pd.DataFrame(corr)


def _correlations(env, which: str, agents: list[str], g, kl, num_bootstrap: int) -> list[dict]:
    """The Spearman and Pearson rows of `agents` in environment `env` (none below 3 agents
    or 2 seeds that every agent ran)."""
    if len(agents) < 3:
        return []
    x = units(g, "average_regret", "seed", agents)
    x = x[:, np.all(np.isfinite(x), axis=0)]  # the seeds every agent ran: like with like
    if x.shape[1] < 2:
        return []
    y = units(kl[kl["tau"] == 10], "kl_estimate", "unit", agents)
    z = units(kl[kl["tau"] == 1], "kl_estimate", "unit", agents)
    rows = []
    for method in ("spearman", "pearson"):
        joint, marginal, gap = bootstrap_comparison(x, y, z, method, num_bootstrap=num_bootstrap)
        rows.append({
            "environment": env, "agents": which, "method": method, "n": len(agents),
            "seeds": x.shape[1], "problems": y.shape[1],
            "joint": joint.value, "joint_low": joint.low, "joint_high": joint.high,
            "marginal": marginal.value, "marginal_low": marginal.low,
            "marginal_high": marginal.high, "difference": gap.value,
            "difference_low": gap.low, "difference_high": gap.high,
        })  # fmt: skip
    return rows


def verdict(corr: pd.DataFrame) -> list[str]:
    """One sentence per environment, from the Spearman rows: does the joint KL predict the
    ranking by regret better than the marginal KL (the difference's 95% interval)?"""
    out = []
    for _, r in corr[corr["method"] == "spearman"].iterrows():
        low, high = r["difference_low"], r["difference_high"]
        gap = f"difference {r['difference']:+.2f} [{low:+.2f}, {high:+.2f}]"
        if r["difference_low"] > 0:
            said = "the joint KL predicts regret better than the marginal KL"
        elif r["difference_high"] < 0:
            said = "the marginal KL predicts regret better than the joint KL"
        else:
            said = "the joint and marginal KL cannot be told apart as predictors of regret"
        who = "all agents" if r["agents"] == "all" else "the learning agents (uniform left out)"
        out.append(
            f"{r['environment']}, {who}: {said} (Spearman with regret: joint {r['joint']:.2f} "
            f"[{r['joint_low']:.2f}, {r['joint_high']:.2f}], marginal {r['marginal']:.2f} "
            f"[{r['marginal_low']:.2f}, {r['marginal_high']:.2f}]; {gap}; "
            f"{r['n']} agents, {r['seeds']} seeds, {r['problems']} problem pairs)."
        )
    return out


def markdown(table: pd.DataFrame, digits: int = 4) -> str:
    """A table as GitHub markdown (numbers rounded)."""
    if not len(table):
        return "(no rows)\n"
    shown = table.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else f"{v:.{digits}g}")
    head = "| " + " | ".join(map(str, shown.columns)) + " |"
    rule = "|" + "---|" * len(shown.columns)
    body = ["| " + " | ".join(map(str, r)) + " |" for r in shown.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


def figure(df: pd.DataFrame, regret: pd.DataFrame):
    """Per environment: the running average regret of each agent (mean over seeds), and its
    average regret against its marginal and joint KL."""
    import matplotlib.pyplot as plt

    runs = regret_rows(df)
    envs = list(dict.fromkeys(regret["environment"]))
    if not envs:
        return None
    fig, axes = plt.subplots(len(envs), 3, figsize=(13, 3.4 * len(envs)), squeeze=False,
                             layout="constrained")  # fmt: skip
    agents = sorted(set(regret["agent"]))
    colours = {a: plt.get_cmap("tab10")(i % 10) for i, a in enumerate(agents)}
    windows = sorted(c for c in runs.columns if str(c).startswith(CURVE_PREFIX))
    for row, env in zip(axes, envs):
        g = runs[runs["environment"] == env]
        for agent, h in g.groupby("agent"):
            curve = h[windows].to_numpy(float).mean(0)
            steps = int(h["num_steps"].iloc[0])
            sizes = np.array([len(w) for w in np.array_split(np.arange(steps), len(windows))])
            row[0].plot(np.cumsum(sizes), np.cumsum(curve * sizes) / np.cumsum(sizes),
                        color=colours[agent], label=agent)  # fmt: skip
        row[0].set(xscale="log", yscale="log", xlabel="step", ylabel="average regret so far",
                   title=f"{env}: regret")  # fmt: skip
        mine = regret[regret["environment"] == env]
        panels = ((row[1], 1, "marginal KL (tau = 1)"), (row[2], 10, "joint KL (tau = 10)"))
        for ax, tau, name in panels:
            for _, r in mine.iterrows():
                if np.isfinite(r[f"kl_tau{tau}"]):
                    ax.errorbar(r[f"kl_tau{tau}"], r["mean_regret"], yerr=r["stderr"], fmt="o",
                                color=colours[r["agent"]])  # fmt: skip
                    ax.annotate(r["agent"], (r[f"kl_tau{tau}"], r["mean_regret"]), fontsize=7,
                                xytext=(3, 3), textcoords="offset points")  # fmt: skip
            ax.set(xscale="log", yscale="log", xlabel=f"mean {name} on the testbed",
                   ylabel="average regret (mean over seeds)",
                   title=f"{env}: regret vs {name}")  # fmt: skip
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(5, len(labels)), fontsize=8)
    return fig


def write(df: pd.DataFrame, out: Path) -> list[str]:
    """Writes OUTPUTS into `out` and returns the verdict sentences."""
    regret, corr = analyse(df)
    out.mkdir(parents=True, exist_ok=True)
    regret.to_csv(out / "regret.csv", index=False)
    (out / "regret.md").write_text(markdown(regret))
    corr.to_csv(out / "correlation.csv", index=False)
    said = verdict(corr) if len(corr) else []
    (out / "correlation.md").write_text(markdown(corr, 3) + "\n" + "\n".join(said) + "\n")
    fig = figure(df, regret)
    if fig is not None:
        fig.savefig(out / "regret_vs_kl.png", dpi=110)
    return said
