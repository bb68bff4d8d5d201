"""The L-C2ST reproduction's results: stored and shipped runs, rejection rates with
binomial intervals, the tables and the figure (`experiments.reproduce_lc2st --report`)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np

from experiments.lc2st_published import BUDGET_SWEEP_NCAL, NCAL_SWEEP_BUDGET, read_published

ALPHA = 0.05
FIGURE2_TASKS = ("two_moons", "slcp")

INTERVALS_NOTE = (
    "Intervals: 95% Wilson over the tests (runs x observations); the tests of one run share "
    "its classifier and calibration set, so these are too narrow when a run's tests agree. "
    "The level table's \"over runs\" interval takes each run's share of rejected "
    "observations as one independent value (Student t over the runs; 2 runs at least). "
    "Runs: `(yours)` or `(k yours)` counts the runs of your store in a row; the others are "
    "our shipped runs of the same cell (a run of yours replaces ours of the same number)."
)


def over_runs(shares, level: float = 0.95) -> tuple[float, float]:
    """A t interval of the mean of independent per-run shares (NaN with fewer than 2)."""
    from scipy import stats

    shares = np.asarray(shares, np.float64)
    if len(shares) < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, len(shares) - 1) * shares.std(ddof=1)
    half /= np.sqrt(len(shares))
    return max(0.0, float(shares.mean() - half)), min(1.0, float(shares.mean() + half))


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a binomial rate k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


CELL_FIELDS = ["kind", "task", "budget", "n_cal", "run", "diagnostic", "n_eval", "null_trials"]
PAPER_SIZES = {"n_eval": 10_000, "null_trials": 100}
LONG_KEYS = [*CELL_FIELDS, "statistic", "obs"]
SHIPPED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "lc2st_ours.csv.gz"


def stored_frame(results: str):
    """One row per (stored cell, statistic, observation) of a results store: T and both
    p-values (an empty frame when the store holds no finished L-C2ST cell)."""
    import json

    import pandas as pd

    from leaderboard.store import ResultsStore

    with ResultsStore(results, "r") as store:
        rows = [r for r in store.rows() if r["key"].startswith("lc2st/") and r["status"] == "ok"]
    out = []
    for r in rows:
        cfg = json.loads(r["config"])
        sizes = {
            "n_eval": cfg.get("n_eval", 10_000),
            "null_trials": cfg.get("num_trials_null", 100),
        }
        cell = {f: cfg[f] for f in CELL_FIELDS if f not in sizes} | sizes
        cell["seconds"] = r["wall_seconds"]
        for name, value in r["metrics"].items():
            stat, field, k = name.split("/")
            out.append({**cell, "statistic": stat, "obs": int(k), "field": field, "value": value})
    if not out:
        return pd.DataFrame(columns=[*LONG_KEYS, "seconds", "T", "p_sbi", "p_exact"])
    df = pd.DataFrame(out)
    index = [*LONG_KEYS, "seconds"]
    return df.pivot_table(index=index, columns="field", values="value").reset_index()


def read_shipped(path: Path | None = None):
    """Our shipped runs (default: SHIPPED), with the paper's sizes in files shipped before
    sizes were columns."""
    import pandas as pd

    ours = pd.read_csv(SHIPPED if path is None else path, keep_default_na=False, na_values=[""])
    for name, value in PAPER_SIZES.items():  # kind "null" is a kind, not a missing value
        ours[name] = ours[name] if name in ours else value
    return ours


def long_frame(results: str, shipped: bool = True):
    """The stored runs of `results` (if the file exists) and, with `shipped`, our shipped
    runs of the cells it does not hold (a cell run here replaces the shipped one)."""
    from experiments.reproduction import stored_and_shipped

    stored = stored_frame(results) if Path(results).exists() else None
    ours = read_shipped() if shipped and SHIPPED.exists() else None
    stored = None if stored is None else stored.assign(source="yours")  # whose run it is
    ours = None if ours is None else ours.assign(source="shipped")
    return stored_and_shipped(stored, ours, CELL_FIELDS, results, "L-C2ST")


def ship(results: str, path: Path) -> str:
    """Merges the finished runs of `results` into our shipped runs at `path` (CSV, gzip):
    a cell the store holds replaces the shipped one, every other is kept; says what it
    wrote."""
    from experiments.reproduction import merged_cells
    from leaderboard.outputs import write_atomically

    frame, said = merged_cells(stored_frame(results), CELL_FIELDS, path, results, read_shipped)
    frame = frame.sort_values(LONG_KEYS)
    write_atomically(
        "--ship",
        path,
        lambda tmp: frame.to_csv(tmp, index=False, float_format="%.6g", compression="gzip"),
    )
    return said


def summary(long, alpha: float = ALPHA):
    """Rates per (kind, task, budget, N_cal, diagnostic, statistic): runs, tests (runs x
    observations), mean statistic, the paper's rate (p_sbi <= alpha) and the exactly valid
    p-value's (p_exact <= alpha) with 95% Wilson intervals, and the spread of the paper's
    rate over observations (min-max of the per-observation rates)."""
    import pandas as pd

    long = long.assign(r_paper=long["p_sbi"] <= alpha, r_exact=long["p_exact"] <= alpha)
    keys = ["kind", "task", "budget", "n_cal", "diagnostic", "statistic", "n_eval", "null_trials"]
    rows = []
    for key, g in long.groupby(keys):
        per_obs = g.groupby("obs")["r_paper"].mean()
        n, kp, ke = len(g), g["r_paper"].sum(), g["r_exact"].sum()
        runs_low, runs_high = over_runs(g.groupby("run")["r_paper"].mean())
        rows.append(
            {
                **dict(zip(keys, key)),
                "runs": g["run"].nunique(),
                "your_runs": g.loc[g["source"] == "yours", "run"].nunique() if "source" in g else 0,
                "tests": n,
                "mean_T": g["T"].mean(),
                "rate": kp / n,
                "rate_low": wilson(kp, n)[0],
                "rate_high": wilson(kp, n)[1],
                "rate_exact": ke / n,
                "exact_low": wilson(ke, n)[0],
                "exact_high": wilson(ke, n)[1],
                "runs_low": runs_low,
                "runs_high": runs_high,
                "obs_min": per_obs.min(),
                "obs_max": per_obs.max(),
                "seconds": g.groupby("run")["seconds"].first().median(),
                "per_obs_paper": per_obs.to_dict(),
                "per_obs_exact": g.groupby("obs")["r_exact"].sum().to_dict(),
            }
        )
    return pd.DataFrame(rows)


def label(diagnostic: str, statistic: str, n_eval: int = 10_000, null_trials: int = 100) -> str:
    """A method's name in tables: its registered label and statistic, and its sizes where
    they are not the paper's."""
    from testbed.metrics.local import LOCAL_DIAGNOSTICS

    name = (
        LOCAL_DIAGNOSTICS.get(diagnostic).label
        if diagnostic in LOCAL_DIAGNOSTICS.names()
        else diagnostic
    )
    sizes = "" if (n_eval, null_trials) == (10_000, 100) else f", N_v {n_eval}, H {null_trials}"
    return f"{name} ({'MSE' if statistic == 'mse' else statistic}{sizes})"


def published_rates():
    """The paper's rates by (kind, task, budget, N_cal, method, statistic)
    (`leaderboard/data/lc2st_published.csv`, decoded from the authors' results)."""
    pub = read_published()
    keys = zip(pub["kind"], pub["task"], pub["budget"], pub["n_cal"], pub["diagnostic"])
    return {(*k, st): (rate, mean_t) for k, st, rate, mean_t in zip(
        keys, pub["statistic"], pub["rate"], pub["mean_T"])}  # fmt: skip


def _published(pub: dict, r) -> str:
    """The paper's rate of a row of ours, with its mean statistic where published."""
    value = pub.get((r.kind, r.task, r.budget, r.n_cal, r.diagnostic, r.statistic))
    if value is None:
        return ""
    rate, mean_t = value
    return f"{rate:.2f}" + ("" if np.isnan(mean_t) else f" (T {mean_t:.3g})")


def published_markdown(tasks: Collection[str] | None = None) -> str:
    """The paper's rates in full (every budget and N_cal it ran) of `tasks` (None: every
    task): one column per method, as its Figure 2 and appendix report them."""
    pub = read_published()
    if tasks is not None:
        pub = pub[pub["task"].isin(list(tasks))]
    if not len(pub):
        return ""
    pub = pub.assign(method=[label(d, s) for d, s in zip(pub["diagnostic"], pub["statistic"])])
    methods = sorted(set(pub["method"]))
    parts = []
    for title, kind, axis, (other, fixed) in (
        ("True-positive rate against the budget (N_cal 10,000)", "power", "budget",
         ("n_cal", BUDGET_SWEEP_NCAL)),
        ("True-positive rate against N_cal (budget 1,000)", "power", "n_cal",
         ("budget", NCAL_SWEEP_BUDGET)),
        ("False-positive rate on the paper's null draws (budget 1,000)", "null", "n_cal",
         ("budget", NCAL_SWEEP_BUDGET)),
    ):  # fmt: skip
        t = pub[(pub["kind"] == kind) & (pub[other] == fixed)]
        if not len(t):
            continue
        wide = t.pivot_table(index=["task", axis], columns="method", values="rate")
        head = ["task", axis.replace("n_cal", "N_cal"), *methods]
        lines = [f"#### The paper: {title}", "", "| " + " | ".join(head) + " |"]
        lines.append("|" + "---|" * len(head))
        for (task, value), row in wide.iterrows():
            cells = ["" if np.isnan(row.get(m, np.nan)) else f"{row[m]:.2f}" for m in methods]
            lines.append("| " + " | ".join([task, f"{value:,}", *cells]) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


SECTIONS = [  # title, kind of cell, the axis its rows run along
    ("True-positive rate against the budget (N_cal = largest)", "power", "budget"),
    ("True-positive rate against N_cal (budget 1,000)", "power", "n_cal"),
    ("False-positive rate, the paper's null draws (budget 1,000)", "null", "n_cal"),
    ("Local type-I error: q = the reference posterior (q = p exactly)", "level", "n_cal"),
]


def markdown(table) -> str:
    """The report's tables: power against budget and N_cal, the paper's false-positive
    rates, the appendix tasks, and the local type-I error with q = the reference."""
    parts, pub = [], published_rates()
    for title, kind, axis in SECTIONS:
        t = table[table["kind"] == kind]
        if axis == "n_cal" and kind != "level":
            t = t[t["budget"] == NCAL_SWEEP_BUDGET]
        if axis == "budget":
            t = t[t["n_cal"] == t.groupby("task")["n_cal"].transform("max")]
        if not len(t):
            continue
        parts.append(_section(title, kind, axis, t, pub))
        if kind == "level":
            parts.append(per_observation(t))
    if parts:
        parts.append(INTERVALS_NOTE)
    return "\n\n".join(parts)


def _rate(r, exact: bool = False) -> str:
    """A rejection rate with its 95% interval, from p_sbi or from the exact p-value."""
    v, lo, hi = (
        (r.rate_exact, r.exact_low, r.exact_high) if exact else (r.rate, r.rate_low, r.rate_high)
    )
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"


def _section(title: str, kind: str, axis: str, t, pub) -> str:
    """One table of the report: a row per task, axis value, method and statistic."""
    head = ["task", axis.replace("n_cal", "N_cal"), "method", "runs", "tests", "mean T",
            "rate (p_sbi <= 0.05) [95%]", "rate (exact p) [95%]", "per obs min-max",
            "s / run"]  # fmt: skip
    head.append("paper (50 runs)" if kind != "level" else "p_sbi rate over runs [95%]")
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in t.sort_values(["task", axis, "diagnostic", "statistic"]).itertuples():
        cells = [
            r.task,
            f"{getattr(r, axis):,}",
            label(r.diagnostic, r.statistic, r.n_eval, r.null_trials),
            runs_cell(r.runs, r.your_runs),
            str(r.tests),
            f"{r.mean_T:.4g}",
            _rate(r),
            _rate(r, True),
            f"{r.obs_min:.2f}-{r.obs_max:.2f}",
            f"{r.seconds:.3g}",
        ]
        if kind != "level":
            cells.append(_published(pub, r))
        else:
            runs = f"[{r.runs_low:.2f}, {r.runs_high:.2f}]"
            cells.append("" if np.isnan(r.runs_low) else runs)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def runs_cell(runs: int, yours: int) -> str:
    """A row's runs, saying which are the user's: `3`, `3 (yours)`, `3 (1 yours)`."""
    if not yours:
        return str(runs)
    return f"{runs} (yours)" if yours == runs else f"{runs} ({yours} yours)"


def per_observation(t) -> str:
    """The local type-I error at each observation: rejections / runs of the paper's
    p-value and of the exact one (runs are independent: a fresh calibration set each)."""
    head = ["task", "method", "p-value", *[f"obs {k}" for k in range(1, 11)]]
    lines = [
        "#### At each observation (rejections / runs)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in t.sort_values(["task", "diagnostic", "statistic"]).itertuples():
        for form, counts in (("paper", r.per_obs_paper), ("exact", r.per_obs_exact)):
            if form == "paper":
                counts = {k: round(v * r.runs) for k, v in counts.items()}
            cells = [f"{int(counts.get(k, 0))}/{r.runs}" for k in range(1, 11)]
            name = label(r.diagnostic, r.statistic, r.n_eval, r.null_trials)
            lines.append("| " + " | ".join([r.task, name, form, *cells]) + " |")
    return "\n".join(lines)


def figure(table, path: Path) -> None:
    """Figure 2's layout for each of its tasks with runs (mean statistic and TPR against the
    budget, TPR and FPR against N_cal; the paper's rates as crosses), and a last row with
    the local type-I error of each method on each task (q = the reference posterior)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig2 = table[table["kind"].isin(["power", "null"])]
    tasks = [t for t in FIGURE2_TASKS if t in set(fig2["task"])]
    level = table[table["kind"] == "level"]
    rows = len(tasks) + (1 if len(level) else 0)
    fig, axes = plt.subplots(max(rows, 1), 4, figsize=(16, 3.3 * max(rows, 1) + 0.8), squeeze=False)
    keys = ["diagnostic", "statistic", "n_eval", "null_trials"]  # a method at its sizes
    methods = sorted(set(table[keys].itertuples(index=False, name=None)))
    colors = {m: f"C{i % 10}" for i, m in enumerate(methods)}
    pub = read_published()
    for row, task in zip(axes, tasks):
        _figure2_row(row, fig2[fig2["task"] == task], pub[pub["task"] == task], methods, colors)
    if len(level):
        _level_row(axes[len(tasks)], level, methods, colors)
    from matplotlib.lines import Line2D

    handles = {}
    for ax in axes.flat:
        for h, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, h)
    if (table["runs"] == 1).any():  # a rate of one run is ten tests of one classifier
        handles["hollow: a rate of one run"] = Line2D(
            [], [], marker="o", ls="none", ms=7, mfc="white", mec="#555"
        )
    fig.legend(
        list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, 0.08 if rows > 1 else 0.15, 1, 1))
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def _of(frame, method):
    """The rows of `method` (diagnostic, statistic, n_eval, null_trials) in `frame`."""
    d, st, n_eval, trials = method
    return frame[
        (frame["diagnostic"] == d)
        & (frame["statistic"] == st)
        & (frame["n_eval"] == n_eval)
        & (frame["null_trials"] == trials)
    ]


def _figure2_row(row, t, pub, methods, colors) -> None:
    """One task's four panels of Figure 2: ours as lines, the paper's as dashed crosses."""
    task = t["task"].iloc[0]
    largest = t[t["kind"] == "power"]["n_cal"].max() if len(t) else 0  # ours: --n-cals' largest
    panels = [  # (kind, axis, the other axis at its fixed value, column, title)
        ("power", "budget", ("n_cal", BUDGET_SWEEP_NCAL), "mean_T", "mean statistic vs budget"),
        ("power", "budget", ("n_cal", BUDGET_SWEEP_NCAL), "rate", "TPR vs budget"),
        ("power", "n_cal", ("budget", NCAL_SWEEP_BUDGET), "rate", "TPR vs N_cal"),
        ("null", "n_cal", ("budget", NCAL_SWEEP_BUDGET), "rate", "FPR (paper's null) vs N_cal"),
    ]
    for ax, (kind, axis, (other, fixed), col, name) in zip(row, panels):
        data = t[(t["kind"] == kind) & (t[other] == (largest if other == "n_cal" else fixed))]
        paper = pub[(pub["kind"] == kind) & (pub[other] == fixed)]
        for m in methods:
            if col == "mean_T" and m[1] != "mse":
                continue  # MSE statistics only (the accuracy is on another scale)
            g = _of(data, m).sort_values(axis)
            if len(g):
                ax.plot(g[axis], g[col], "o-", ms=3, color=colors[m], label=label(*m))
                one = g[g["runs"] == 1]  # a rate of one run: ten tests of one classifier
                ax.plot(one[axis], one[col], "o", ms=7, mfc="white", mec=colors[m], zorder=3)
            p = paper[(paper["diagnostic"] == m[0]) & (paper["statistic"] == m[1])]
            p = p.dropna(subset=[col]).sort_values(axis) if m[2:] == (10_000, 100) else p[:0]
            if len(p):
                ax.plot(p[axis], p[col], "x--", ms=6, lw=0.8, alpha=0.7, color=colors[m],
                        label=f"{label(*m)}, paper")  # fmt: skip
        if col == "mean_T":
            ax.set_yscale("log")
        if not len(data):
            ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
        if kind == "null":
            ax.axhline(ALPHA, color="#999", lw=0.8, ls=":")
        xlabel = "NPE training simulations" if axis == "budget" else "N_cal"
        limits = (70, 1.4e5) if axis == "budget" else (70, 1.4e4)
        ax.set(xscale="log", xlim=limits, title=f"{task}: {name}", xlabel=xlabel)
        if col == "rate":
            ax.set_ylim(-0.03, 1.03)


def _level_row(row, level, methods, colors) -> None:
    """Rejection rates with q = p (paper's p-value, then the exact one) per task and method."""
    tasks = sorted(set(level["task"]))
    for ax, (col, low, high, form) in zip(
        row[:2],
        [
            ("rate", "rate_low", "rate_high", "paper's p"),
            ("rate_exact", "exact_low", "exact_high", "exact p"),
        ],
    ):
        present = [m for m in methods if len(_of(level, m))]
        width = 0.8 / max(len(present), 1)
        for i, m in enumerate(present):
            g = _of(level, m).sort_values("n_cal").drop_duplicates("task", keep="last")
            g = g.set_index("task")  # each task's largest N_cal
            xs = [j + i * width for j, t in enumerate(tasks) if t in g.index]
            vals = [g.loc[t, col] for t in tasks if t in g.index]
            err = [
                [g.loc[t, col] - g.loc[t, low] for t in tasks if t in g.index],
                [g.loc[t, high] - g.loc[t, col] for t in tasks if t in g.index],
            ]
            ax.bar(xs, vals, width, yerr=err, color=colors[m], label=label(*m), capsize=2)
        ax.axhline(ALPHA, color="k", lw=0.8, ls=":")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))], tasks, fontsize=7,
                      rotation=20, ha="right")  # long task names never overlap  # fmt: skip
        ax.set(
            ylim=(0, max(0.3, float(level[high].max()) + 0.02)),
            title=f"local type-I error, q = p ({form} <= 0.05)",
        )
    for ax in row[2:]:
        ax.axis("off")
