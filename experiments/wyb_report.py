"""The "What's your bench" reproduction's results: stored and shipped cells, the published
values beside them, the tables and the figure (`experiments.reproduce_wyb --report`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from experiments.lc2st_report import wilson
from testbed.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "leaderboard" / "data"
SHIPPED = DATA / "wyb_ours.csv.gz"
PUBLISHED = DATA / "wyb_published.csv"
OUTPUTS = ("tables.md", "wyb.png")
CELL = ["prior", "problem", "agent", "seed", "num_warmup", "num_samples"]
BENCHMARK_SIZES = (200, 1000)  # its warm-up steps and draws a chain
ALPHA = 0.05
TESTS = ("pit_ks_pvalue", "mahalanobis_pvalue", "ddks_pvalue", "c2st_pvalue")
AGENT_ORDER = ("exact", "stan", "pymc", "nutpie", "pyro", "numpyro", "nuts", "blackjax")
GROUPS = {  # the benchmark's problem groups
    "P1-6 (normal, known variance)": range(1, 7),
    "P7-15 (normal, known mean)": range(7, 16),
    "P16-18 (2-d normal)": range(16, 19),
    "P19-21 (5, 7, 10-d normal)": range(19, 22),
}


def stored_frame(results: str):
    """One row per stored cell of the reproduction: its fields, status, error, metrics."""
    import pandas as pd

    from leaderboard.store import ResultsStore

    with ResultsStore(results, "r") as store:
        rows = [r for r in store.rows() if r["key"].startswith("wyb/")]
    out = []
    for r in rows:
        cfg = json.loads(r["config"]) if isinstance(r["config"], str) else r["config"]
        out.append(
            {
                **{f: cfg[f] for f in CELL},
                "status": r["status"],
                "error": r.get("error") or "",
                "wall_seconds": r["wall_seconds"],
                **r["metrics"],
            }
        )
    return pd.DataFrame(out, columns=None if out else [*CELL, "status", "error"])


def read_shipped(path: Path | None = None):
    """Our shipped cells (default: SHIPPED)."""
    import pandas as pd

    return pd.read_csv(SHIPPED if path is None else path, comment="#")


def load_frame(results: str, shipped: bool = True):
    """The stored cells of `results` (if it exists) and, with `shipped`, our shipped cells
    it does not hold (a cell run here replaces the shipped one), of one MCMC size."""
    from experiments.reproduction import stored_and_shipped

    stored = stored_frame(results).assign(source="stored") if Path(results).exists() else None
    ours = read_shipped().assign(source="shipped") if shipped and SHIPPED.exists() else None
    return one_size(stored_and_shipped(stored, ours, CELL, results, "wyb"))


def one_size(frame):
    """The cells of one MCMC size (the benchmark's 200 + 1,000 if any, else the commonest):
    runs of other sizes are never averaged together (a note says how many are left out)."""
    sizes = list(zip(frame["num_warmup"], frame["num_samples"]))
    keep = BENCHMARK_SIZES if BENCHMARK_SIZES in sizes else max(set(sizes), key=sizes.count)
    chosen = [s == keep for s in sizes]
    if not all(chosen):
        print(
            f"reproduce_wyb: note: {len(sizes) - sum(chosen)} cells of other sizes than "
            f"{keep[0]} warm-up + {keep[1]} draws are left out of the tables",
            file=sys.stderr,
        )
    return frame[chosen]


def ship(results: str, path: Path) -> str:
    """Merges the finished cells of `results` into our shipped runs at `path` (CSV, gzip;
    `#` lines: what, date, commit, machine, versions): a cell the store holds replaces the
    shipped one, every other is kept; says what it wrote."""
    import gzip

    from experiments.reproduction import merged_cells
    from leaderboard.outputs import write_atomically
    from leaderboard.ranking.shipped import provenance

    if not Path(results).exists():
        raise InputError(f"--results: {results!r} does not exist; allowed: a store to ship")
    new = stored_frame(results)
    new = new[new["status"] == "ok"].drop(columns=["error"])
    frame, said = merged_cells(new, CELL, path, results)
    frame = frame.sort_values(CELL)
    head = "".join(f"# {line}\n" for line in provenance("Our runs of the WYB reproduction"))

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.write(head + frame.to_csv(index=False, float_format="%.6g"))

    write_atomically("--ship", path, write, keep_suffix=True)
    return said


def published():
    """The benchmark's published rows (leaderboard/data/wyb_published.csv)."""
    import pandas as pd

    return pd.read_csv(PUBLISHED, comment="#")


# -- summaries ---------------------------------------------------------------------------


def _ok(frame):
    return frame[frame["status"] == "ok"]


def _agents(frame) -> list[str]:
    present = set(frame["agent"])
    return [a for a in AGENT_ORDER if a in present] + sorted(present - set(AGENT_ORDER))


def mean_sd(values) -> str:
    """'m +- sd (n)' of the finite values, 3 significant digits; '' when none."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return ""
    if len(v) == 1:
        return f"{v[0]:.3g} (1)"
    return f"{v.mean():.3g} ± {v.std(ddof=1):.2g} ({len(v)})"


def rejections(values) -> str:
    """'k/n' rejections at ALPHA of the finite p-values; '' when none."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    return f"{int(np.sum(v <= ALPHA))}/{len(v)}" if len(v) else ""


def _col(g, name):
    return g[name] if name in g else np.full(len(g), np.nan)


def _published_cell(pub, problem: int, agent: str, column: str) -> str:
    rows = pub[(pub["problem"] == problem) & (pub["agent"] == agent)]
    return "" if not len(rows) else f"{rows[column].iloc[0]:.4g}"


# -- tables ------------------------------------------------------------------------------


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def _head(names) -> list[str]:
    return [_row(names), "|" + "---|" * len(names)]


def table_published(frame, pub) -> str:
    """Every problem x agent: the published KL and KS score beside ours (paper prior, then
    matched prior; mean +- sd over seeds)."""
    ok = _ok(frame)
    lines = [
        "### The benchmark's measures: published beside ours",
        "",
        "KL: the benchmark's integral of |p log p/q| on its grid; KS p: adKS's analytic "
        "p-value. Ours: mean ± sd (seeds).",
        "",
        *_head(
            [
                "problem",
                "agent",
                "published KL",
                "published KS p",
                "ours, paper prior: KL",
                "KS p",
                "ours, matched prior: KL",
                "KS p",
            ]
        ),
    ]
    agents = _agents(ok) if len(ok) else []
    for k in range(1, 22):
        for agent in agents:
            cells = [str(k), agent]
            cells += [_published_cell(pub, k, agent, c) for c in ("wyb_kl", "wyb_ks_pvalue")]
            for prior in ("paper", "matched"):
                g = ok[(ok["problem"] == k) & (ok["agent"] == agent) & (ok["prior"] == prior)]
                cells += [mean_sd(_col(g, "wyb_kl")), mean_sd(_col(g, "wyb_ks_pvalue"))]
            if any(cells[2:]):
                lines.append(_row(cells))
    return "\n".join(lines)


def table_mismatch(frame, pub) -> str:
    """Per problem: the published KL (mean of the 3 PPLs), the ideal PPL (exact posterior
    of the paper's model), our PPLs on the paper's model, and on the matched model."""
    ok = _ok(frame)
    lines = [
        "### What the published KL measures (per problem, mean over agents and seeds)",
        "",
        *_head(
            [
                "problem",
                "published (3 PPLs)",
                "ideal PPL, paper prior",
                "our PPLs, paper prior",
                "our PPLs, matched prior",
                "exact, matched prior",
                "joint KL (tau 10), PPLs paper prior",
                "joint KL, PPLs matched prior",
            ]
        ),
    ]
    ppl = ok[ok["agent"] != "exact"]
    for k in range(1, 22):
        p = pub[pub["problem"] == k]["wyb_kl"]
        cells = [str(k), f"{p.mean():.4g}" if len(p) else ""]
        for data, prior, col in (
            (ok[ok["agent"] == "exact"], "paper", "wyb_kl"),
            (ppl, "paper", "wyb_kl"),
            (ppl, "matched", "wyb_kl"),
            (ok[ok["agent"] == "exact"], "matched", "wyb_kl"),
            (ppl, "paper", "joint_kl"),
            (ppl, "matched", "joint_kl"),
        ):
            g = data[(data["problem"] == k) & (data["prior"] == prior)]
            cells.append(mean_sd(_col(g, col)))
        lines.append(_row(cells))
    return "\n".join(lines)


def _read_as(ok) -> str:
    """How the tests read the PPLs' draws in these cells: thinned to their ESS (runs since
    the tests do), or 1,000 of the pooled draws (earlier runs, such as our shipped ones)."""
    ppl = ok[ok["agent"] != "exact"] if "agent" in ok else ok
    thinned = "tests_thinning" in ppl and len(ppl) and ppl["tests_thinning"].notna().all()
    if thinned:
        return " on the chains thinned to their ESS; a correct sampler rejects about 5%."
    return (
        " on 1,000 of the pooled draws (runs made before the tests thinned the chains to "
        "their ESS); a correct sampler rejected 8-16% this way."
    )


def table_matched(frame) -> str:
    """Matched prior, per problem group and agent: our measures (mean +- sd over cells) and
    the exact tests' rejections at 0.05 (k/n, 95% Wilson interval)."""
    ok = _ok(frame[frame["prior"] == "matched"])
    names = ["problems", "agent", "cells", "joint KL (tau 10)", "Gaussian KL of draws"]
    names += [f"{t.removesuffix('_pvalue')} rejections [95%]" for t in TESTS]
    lines = [
        "### Matched prior: our measures (inference error alone)",
        "",
        "Joint KL: E_y[log p(y_1:10) - log q(y_1:10)], q the draws' mixture (MC over "
        "futures: can be slightly negative). Rejections of the exact one-sample tests at "
        "0.05" + _read_as(ok),
        "",
        *_head(names),
    ]
    for group, problems in {**GROUPS, "all 21": range(1, 22)}.items():
        for agent in _agents(ok) if len(ok) else []:
            g = ok[(ok["agent"] == agent) & ok["problem"].isin(list(problems))]
            if not len(g):
                continue
            kl = _col(g, "kl_gaussian_moments")
            cells = [group, agent, str(len(g)), mean_sd(_col(g, "joint_kl")), mean_sd(kl)]
            for t in TESTS:
                v = np.asarray(_col(g, t), np.float64)
                v = v[np.isfinite(v)]
                k, n = int(np.sum(v <= ALPHA)), len(v)
                lo, hi = wilson(k, n)
                cells.append(f"{k}/{n} [{lo:.2f}, {hi:.2f}]" if n else "n/a")
            lines.append(_row(cells))
    return "\n".join(lines)


def table_times(frame) -> str:
    """Seconds per agent: compiling (first run of a model shape in a process), the first
    run's total, and later runs' sampling and total (median [min-max] over cells)."""
    ok = _ok(frame)

    def med(v) -> str:
        v = np.asarray(v, np.float64)
        v = v[np.isfinite(v)]
        return f"{np.median(v):.3g} [{v.min():.2g}-{v.max():.2g}] ({len(v)})" if len(v) else ""

    lines = [
        "### Times (seconds; median [min-max] (cells))",
        "",
        "Ours: 2 chains x (200 + 1,000) a run, on a shared 2-core machine. Published: its "
        "PPL call's wall time (PyMC's and Stan's default chains and warm-up, Pyro 1 chain, "
        "compilation included; its Stan executables were prebuilt). On the matched prior "
        "P10 and P13 repeat P7, P14 and P15 repeat P11 and P12 (same data and model; they "
        "differ in the paper's hyperprior only): Stan's fit cache returns those at once.",
        "",
        *_head(
            [
                "agent",
                "problems",
                "compile (first run)",
                "first run: total",
                "later runs: sampling",
                "later runs: total",
                "published model time",
            ]
        ),
    ]
    pub = published() if PUBLISHED.exists() else None
    for agent in _agents(ok) if len(ok) else []:
        for group, problems in GROUPS.items():
            g = ok[(ok["agent"] == agent) & ok["problem"].isin(list(problems))]
            if not len(g):
                continue
            first = g[_col(g, "first_in_process") == 1]
            later = g[_col(g, "first_in_process") == 0]
            p = (
                ""
                if pub is None
                else pub[(pub["agent"] == agent) & pub["problem"].isin(list(problems))]
            )
            cells = [
                agent,
                group,
                med(_col(first, "compile_seconds")),
                med(_col(first, "train_seconds")),
                med(_col(later, "sampling_seconds")),
                med(_col(later, "train_seconds")),
                "" if pub is None else med(p["model_seconds"]),
            ]
            lines.append(_row(cells))
    return "\n".join(lines)


SEPARATION = ("wyb_kl", "wyb_ks_distance", "joint_kl", "kl_gaussian_moments")


def table_separation(frame) -> str:
    """Can a measure tell the PPLs apart? Per measure and prior: the problems where a
    one-way ANOVA over the PPL agents' seeds rejects equal means at 0.05, and the median
    over problems of (range of the agents' means) / (pooled sd within an agent)."""
    ok = _ok(frame[frame["agent"] != "exact"])
    lines = [
        "### Can the measures tell the PPLs apart? (one-way ANOVA over seeds, per problem)",
        "",
        *_head(["prior", "measure", "problems separated (p < 0.05) / tested", "median range / sd"]),
    ]
    for prior in ("matched", "paper"):
        for col in SEPARATION:
            separated, tested, ratios = _separation(ok, prior, col)
            if tested:
                ratio = f"{np.nanmedian(ratios):.3g}" if np.isfinite(ratios).any() else ""
                lines.append(_row([prior, col, f"{separated}/{tested}", ratio]))
    return "\n".join(lines)


def _separation(ok, prior: str, col: str) -> tuple[int, int, list[float]]:
    """For measure `col` on `prior`: the problems where a one-way ANOVA over the PPLs' seeds
    rejects equal means at ALPHA, the problems tested, and each tested problem's range of
    the agents' means over the pooled sd within an agent."""
    from scipy import stats

    tested, separated, ratios = 0, 0, []
    for k in range(1, 22):
        g = ok[(ok["prior"] == prior) & (ok["problem"] == k)]
        groups = [np.asarray(_col(a, col), float) for _, a in g.groupby("agent")]
        groups = [v[np.isfinite(v)] for v in groups]
        groups = [v for v in groups if len(v) >= 2]
        if len(groups) < 2:
            continue
        sd = np.sqrt(np.mean([v.var(ddof=1) for v in groups]))
        means = [v.mean() for v in groups]
        tested += 1
        separated += bool(stats.f_oneway(*groups).pvalue < ALPHA) if sd > 0 else 0
        ratios.append((max(means) - min(means)) / sd if sd > 0 else np.nan)
    return separated, tested, ratios


def _fastest(ok, column: str, first: bool) -> list[tuple[float, str]]:
    """(median seconds, agent), fastest first, of `column` over each agent's first runs of a
    model shape in a process (`first`) or its later runs."""
    out = []
    for agent in _agents(ok):
        g = ok[(ok["agent"] == agent) & (_col(ok, "first_in_process") == (1 if first else 0))]
        v = np.asarray(_col(g, column), float)
        v = v[np.isfinite(v)]
        if len(v):
            out.append((float(np.median(v)), agent))
    return sorted(out)


def verdict(frame) -> str:
    """The report's answer, computed from its tables: can the PPLs be told apart in accuracy
    (each measure's ANOVA separations against what the 5% level alone gives), and which are
    fastest for one run of a model and for many."""
    from scipy import stats

    ok = _ok(frame[frame["agent"] != "exact"])
    if not len(ok):
        return ""
    lines = ["### Verdict (computed from the tables above)", ""]
    apart = []
    for col in SEPARATION:
        separated, tested, _ = _separation(ok, "matched", col)
        if not tested:
            continue
        chance = int(stats.binom.ppf(0.95, tested, ALPHA))  # what the 5% level alone gives
        said = "tells PPLs apart" if separated > chance else "tells no PPLs apart"
        apart.append(separated > chance)
        lines.append(f"- {col}: {said} ({separated} of {tested} matched-prior problems "
                     f"separated; up to {chance} by chance at the 5% level)")  # fmt: skip
    if apart:
        lines.insert(2, "- Accuracy: " + ("some measure tells the PPLs apart (below)."
                     if any(apart) else "no PPL can be told apart by any measure."))  # fmt: skip
    ppls = ok[ok["agent"] != "nuts"]
    once = _fastest(ppls, "train_seconds", first=True)
    many = _fastest(ppls, "train_seconds", first=False)
    if once:
        names = ", ".join(f"{a} ({t:.2g} s)" for t, a in once[:2])
        lines.append(f"- For one run of a model (compilation included), fastest: {names}.")
    if many:
        names = ", ".join(f"{a} ({t:.2g} s)" for t, a in many[:2])
        lines.append(f"- For many runs of one model (compiled once), fastest: {names}.")
    return "\n".join(lines)


def failures(frame) -> str:
    bad = frame[frame["status"] != "ok"]
    if not len(bad):
        return ""
    reasons = bad.groupby("error").size().sort_values(ascending=False)
    lines = [f"### Failed cells ({len(bad)}; stored with their reason)", ""]
    lines += [f"- {n} x {reason[:200]}" for reason, n in reasons.items()]
    return "\n".join(lines)


def markdown(frame) -> str:
    """The report's tables."""
    pub = published()
    ok = _ok(frame)
    runs = ", ".join(
        f"{prior}: {len(ok[ok['prior'] == prior])} cells" for prior in ("matched", "paper")
    )
    parts = [
        f"## WYB reproduction ({runs} finished; {int((frame['status'] != 'ok').sum())} failed)",
        table_mismatch(frame, pub),
        table_matched(frame),
        table_separation(frame),
        table_times(frame),
        table_published(frame, pub),
        "On paper-prior P7-15 cells the draws are the Student-t model's (nu, sigma): the "
        "posterior tests do not apply (blank); ours is the joint predictive KL alone.",
        failures(frame),
        verdict(frame),
    ]
    return "\n\n".join(p for p in parts if p)


# -- figure ------------------------------------------------------------------------------


PROBLEMS = np.arange(1, 22)  # the benchmark's problems 1 to 21, the panels' x axis


def _per_problem(data, col) -> np.ndarray:
    """The mean of a column per problem (NaN for a problem with no rows)."""
    return np.array(
        [
            np.nanmean(_col(data[data["problem"] == k], col))
            if (data["problem"] == k).any()
            else np.nan
            for k in PROBLEMS
        ]
    )


def _problem_axis(ax, yscale: str, ylabel: str, title: str) -> None:
    """Scales and labels of a panel over the 21 problems."""
    ax.set(yscale=yscale, xlabel="problem", ylabel=ylabel, title=title, xticks=PROBLEMS)


def _panel_benchmark_kl(ax, ok, pub) -> None:
    """The benchmark's KL per problem: published, our PPLs on each prior, the ideal PPL."""
    ks, ppl = PROBLEMS, ok[ok["agent"] != "exact"]
    ax.plot(
        ks,
        [
            pub[pub["problem"] == k]["wyb_kl"].mean() if (pub["problem"] == k).any() else np.nan
            for k in ks
        ],
        "ks",
        label="published (3 PPLs)",
    )
    for prior, mark in (("paper", "o"), ("matched", "^")):
        ax.plot(
            ks,
            _per_problem(ppl[ppl["prior"] == prior], "wyb_kl"),
            mark,
            mfc="none",
            label=f"our PPLs, {prior} prior",
        )
    ex = ok[(ok["agent"] == "exact") & (ok["prior"] == "paper")]
    ax.plot(ks, _per_problem(ex, "wyb_kl"), "x", color="C3", label="ideal PPL (paper prior)")
    _problem_axis(ax, "log", "benchmark's KL", "the benchmark's KL")
    ax.legend(fontsize=7)


def _panel_joint_kl(ax, ok) -> list[str]:
    """Our joint predictive KL per agent on the matched prior (mean +- sd over seeds);
    returns the agents drawn."""
    ks, matched = PROBLEMS, ok[ok["prior"] == "matched"]
    agents = _agents(matched) if len(matched) else []
    for i, agent in enumerate(agents):
        g = matched[matched["agent"] == agent]
        stats = [np.asarray(_col(g[g["problem"] == k], "joint_kl"), float) for k in ks]
        means = [np.nanmean(s) if len(s) else np.nan for s in stats]
        sds = [np.nanstd(s, ddof=1) if len(s) > 1 else 0.0 for s in stats]
        ax.errorbar(ks + (i - len(agents) / 2) * 0.09, means, yerr=sds, fmt="o", ms=3, label=agent)
    ax.axhline(0, color="#999", lw=0.8)
    _problem_axis(ax, "symlog", "joint KL (tau = 10)", "ours, matched prior: joint predictive KL")
    ax.set_yscale("symlog", linthresh=1e-3)
    if agents:
        ax.legend(fontsize=7, ncol=2)
    return agents


def _panel_seconds(ax, ok, pub, agents: list[str]) -> None:
    """Later runs' sampling seconds per PPL agent, with the published median model time."""
    later = ok[_col(ok, "first_in_process") == 0] if len(ok) else ok
    names = [a for a in agents if a != "exact"]
    data = [np.asarray(_col(later[later["agent"] == a], "sampling_seconds"), float) for a in names]
    data = [d[np.isfinite(d)] for d in data]
    if names:
        ax.boxplot([d if len(d) else [np.nan] for d in data], tick_labels=names)
    else:
        ax.text(0.5, 0.5, "no PPL runs", ha="center", va="center", transform=ax.transAxes)
    label = "published (median)"
    for a in ("pymc", "pyro", "stan"):
        p = pub[pub["agent"] == a]["model_seconds"]
        if a in names and len(p):
            ax.plot(names.index(a) + 1, p.median(), "ks", label=label)
            label = None
    ax.set(
        yscale="log",
        ylabel="seconds",
        title="sampling seconds, later runs (ours); published model time",
    )
    if label is None:
        ax.legend(fontsize=7)


def figure(frame, path: Path) -> None:
    """Three panels: the benchmark's KL per problem (published, ours on the paper prior,
    ours on the matched prior, the ideal PPL); our joint predictive KL per agent on the
    matched prior (mean +- sd over seeds); later runs' sampling seconds per agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok, pub = _ok(frame), published()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    _panel_benchmark_kl(axes[0], ok, pub)
    agents = _panel_joint_kl(axes[1], ok)
    _panel_seconds(axes[2], ok, pub, agents)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
