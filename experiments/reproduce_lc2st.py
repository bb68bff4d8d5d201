"""Reproduce the L-C2ST paper (Linhart, Gramfort and Rodrigues, NeurIPS 2023) on the SBI
benchmark, and measure the local type-I error it could not.

Four local diagnostics of an amortized NPE (the benchmark's flow, our `npe` agent) are run
as the paper's Figure 2 and appendix run them (`testbed.metrics.local`: `oracle_c2st`,
`lc2st`, `lc2st_nf`, `lhpd`; alpha 0.05, 100 null trials, 10,000 evaluation draws, the
benchmark's 10 observations; one estimator per task and budget, trained once, and per run
a fresh calibration set, as the paper):

- `power`: each diagnostic's rejections of the estimator at every observation, against
  the training budget (10^2 to 10^5 simulations, N_cal 10,000) and against N_cal (100 to
  10,000 at a budget of 1,000): the true-positive rates of the figure;
- `null`: the same tests on the paper's draw of each method's null (permuted rows, base
  draws, uniform HPD values) at each N_cal: its false-positive rates;
- `level`: the diagnostics with q = the task's reference posterior itself (q = p exactly
  at every calibration x and at x_o), so each rejection is a real local type-I error.

Every (kind, task, budget, N_cal, run, diagnostic) is one row of a results store,
committed as it finishes: an interrupted run resumes; `--report` runs nothing and writes
`tables.md` and `lc2st.png` from what is stored. A diagnostic of your own is one function
and one `testbed.metrics.register_local` line in a file: `--import FILE --diagnostics NAME`.

Run:
    python -m experiments.reproduce_lc2st --parts level,figure2 --runs 3
    python -m experiments.reproduce_lc2st --report
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import logging
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from testbed.errors import InputError

log = logging.getLogger("testbed.lc2st")

FIGURE2_TASKS = ("two_moons", "slcp")
APPENDIX_TASKS = (
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "bernoulli_glm",
    "bernoulli_glm_raw",
)
LEVEL_TASKS = ("two_moons", "gaussian_mixture", "gaussian_linear", "gaussian_linear_uniform")
BUDGETS = (100, 1_000, 10_000, 100_000)
N_CALS = (100, 500, 1_000, 2_000, 5_000, 10_000)
NCAL_SWEEP_BUDGET = 1_000  # the paper's N_TRAIN_EXP2
BUDGET_SWEEP_NCAL = 10_000  # the paper's N_CAL_EXP1
N_EVAL = 10_000
ALPHA = 0.05
PARTS = ("level", "figure2", "appendix")
KINDS = ("power", "null", "level")
OUTPUTS = ("tables.md", "lc2st.png")
REFERENCE = 0  # the budget column of `level` rows: q is the reference posterior
# tasks whose reference posterior is an affine map of N(0, I) (Gaussian, one covariance for
# every x): its inverse is exact, so L-C2ST-NF's level is measured there too
EXACT_FLOW_TASKS = ("gaussian_linear",)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The experiment's sizes (the paper's by default; smaller ones for a quick look)."""

    budgets: tuple[int, ...] = BUDGETS
    n_cals: tuple[int, ...] = N_CALS
    n_eval: int = N_EVAL
    num_trials_null: int = 100

    @property
    def max_n_cal(self) -> int:
        return max(self.n_cals)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One stored job: a diagnostic's tests at the 10 observations in one run."""

    kind: str
    task: str
    budget: int
    n_cal: int
    run: int
    diagnostic: str

    @property
    def key(self) -> str:
        return (
            f"lc2st/{self.kind}/{self.task}/{self.budget}/{self.n_cal}/{self.run}/{self.diagnostic}"
        )


def plan(
    parts: Sequence[str],
    runs: Sequence[int],
    diagnostics: Sequence[str],
    tasks: Sequence[str] | None = None,
    settings: Settings = Settings(),
) -> list[Cell]:
    """The cells of the chosen parts, run by run (a partial store fills every table
    evenly); within a run grouped by task and N_cal, so nulls that depend on the
    calibration x alone are trained once for all budgets."""
    cells: list[Cell] = []
    keep = (lambda t: True) if tasks is None else (lambda t: t in tasks)
    for run in runs:
        for part in parts:
            if part == "level":
                for task in filter(keep, LEVEL_TASKS):
                    cells += [
                        Cell("level", task, REFERENCE, settings.max_n_cal, run, d)
                        for d in diagnostics
                        if d != "lc2st_nf" or task in EXACT_FLOW_TASKS
                    ]
                continue
            for task in filter(keep, FIGURE2_TASKS if part == "figure2" else APPENDIX_TASKS):
                cells += [
                    Cell("power", task, b, settings.max_n_cal, run, d)
                    for b in settings.budgets
                    for d in diagnostics
                ]
                if part == "figure2":
                    for n_cal in settings.n_cals:
                        for kind in ("power", "null"):
                            if kind == "power" and n_cal == settings.max_n_cal:
                                continue  # the budget sweep has it
                            cells += [
                                Cell(
                                    kind,
                                    task,
                                    min(NCAL_SWEEP_BUDGET, max(settings.budgets)),
                                    n_cal,
                                    run,
                                    d,
                                )
                                for d in diagnostics
                            ]
    return cells


# -- the data of a run ------------------------------------------------------------------


class Estimators:
    """NPEs trained once per (task, budget) in this process (seed 0, the `npe` agent's
    benchmark settings), and each task's calibration sets per run."""

    def __init__(self):
        self._npe: dict[tuple[str, int], Any] = {}
        self.cache: dict[str, Any] = {}  # nulls shared across estimators (LocalData.cache)

    def npe(self, task: str, budget: int):
        if (task, budget) not in self._npe:
            import agents
            import generative
            from generative.sbi.problems import simulator_knowledge
            from testbed.simulation import SimulationAccess

            t = generative.sbi.get_task(task)
            access = SimulationAccess(t, budget, t.observation(1))
            agent = agents.load("npe")
            start = time.time()
            self._npe[(task, budget)] = agent(access, simulator_knowledge(t, budget))
            log.info("npe on %s, %d simulations: %.0f s", task, budget, time.time() - start)
        return self._npe[(task, budget)]


def calibration(task, run: int, n_cal: int) -> tuple[np.ndarray, np.ndarray]:
    """The run's joint draws (theta, x): the first n_cal of BUDGET_SWEEP_NCAL (so a run's
    smaller calibration sets are parts of its largest, as the paper's)."""
    n = max(n_cal, BUDGET_SWEEP_NCAL)
    theta = task.sample_prior(n, seed=10_007 * run + 1)
    x = task.simulate(theta, seed=10_007 * run + 2)
    return theta[:n_cal].astype(np.float32), x[:n_cal].astype(np.float32)


def observations(task) -> np.ndarray:
    return np.stack([task.observation(k) for k in range(1, 11)]).astype(np.float32)


def npe_data(cell: Cell, est: Estimators, settings: Settings):
    """LocalData of the cell's NPE (its flow's draws, densities and inverse)."""
    import generative
    from testbed.metrics.local import LocalData

    task = generative.sbi.get_task(cell.task)
    q = est.npe(cell.task, cell.budget)
    theta, x = calibration(task, cell.run, cell.n_cal)
    obs = observations(task)
    seed = 1_000 * cell.run + 3
    q_theta = q.flow_draws(x, 1, seed)[0]
    q_at_obs = np.stack(
        [q.flow_draws(o[None], settings.n_eval, seed + 1 + k)[:, 0] for k, o in enumerate(obs)]
    )
    return LocalData(
        theta,
        x,
        q_theta,
        obs,
        q_at_obs,
        seed=cell.run,
        num_trials_null=settings.num_trials_null,
        under_null=cell.kind == "null",
        log_prob_pairs=q.flow_log_prob,
        draws_at=q.flow_draws,
        inverse_transform=q.inverse_transform,
        reference_at=lambda k, num, s: task.reference_posterior(obs[k], num, s),
        cache=est.cache,
        calibration_id=f"{cell.task}/{cell.run}/{cell.n_cal}",
        estimator_id=f"{cell.kind == 'level'}/{cell.task}/{cell.budget}",
    )


class ReferenceAsEstimator:
    """The task's reference posterior used as the estimator (q = p): draws at any x and
    its unnormalised log-density (enough for HPD values, which compare densities at one x)."""

    def __init__(self, task):
        self.task = task

    def draws_at(self, xs, num: int, seed: int) -> np.ndarray:
        rows = [self.task.reference_posterior(x, num, seed + i) for i, x in enumerate(xs)]
        return np.stack(rows, axis=1).astype(np.float32)  # [num, n, d]

    def inverse_transform(self, theta, xs) -> np.ndarray:
        """z = L^-1 (theta - mean(x)) for a Gaussian posterior N(mean(x), L L^T)."""
        means = np.stack([self.task.posterior_mean_cov(x)[0] for x in xs])
        chol = np.linalg.cholesky(self.task.posterior_mean_cov(xs[0])[1])
        centred = np.asarray(theta, np.float64) - means
        return np.linalg.solve(chol, centred.T).T.astype(np.float32)

    def log_prob_pairs(self, theta, xs) -> np.ndarray:
        th = np.asarray(theta, np.float64)
        lead = th.shape[:-1]
        th = th.reshape(-1, len(xs), th.shape[-1])
        out = np.stack(
            [self.task.log_posterior_unnormalized(th[:, i], x) for i, x in enumerate(xs)], 1
        )
        return out.reshape(lead)


def level_data(cell: Cell, est: Estimators, settings: Settings):
    """LocalData with q = the reference posterior at every calibration x and observation."""
    import generative
    from testbed.metrics.local import LocalData

    task = generative.sbi.get_task(cell.task)
    q = ReferenceAsEstimator(task)
    theta, x = calibration(task, cell.run, cell.n_cal)
    obs = observations(task)
    seed = 1_000 * cell.run + 5
    q_theta = q.draws_at(x, 1, seed)[0]
    q_at_obs = np.stack(
        [task.reference_posterior(o, settings.n_eval, seed + 1 + k) for k, o in enumerate(obs)]
    )
    return LocalData(
        theta,
        x,
        q_theta,
        obs,
        q_at_obs.astype(np.float32),
        seed=cell.run,
        num_trials_null=settings.num_trials_null,
        log_prob_pairs=q.log_prob_pairs,
        draws_at=q.draws_at,
        inverse_transform=q.inverse_transform if cell.task in EXACT_FLOW_TASKS else None,
        reference_at=lambda k, num, s: task.reference_posterior(obs[k], num, s + 999),
        cache=est.cache,
        calibration_id=f"{cell.task}/{cell.run}/{cell.n_cal}",
        estimator_id=f"{cell.kind == 'level'}/{cell.task}/{cell.budget}",
    )


# -- running ---------------------------------------------------------------------------


def run_cell(cell: Cell, est: Estimators, data_cache: dict, settings: Settings) -> dict[str, Any]:
    """The cell's stored row: its diagnostic's statistic and p-values at each observation,
    or its failure with the reason (an error or a non-finite result never stops the run)."""
    from testbed.metrics.local import run_local

    start = time.time()
    row = {
        "key": cell.key,
        "agent": cell.diagnostic,
        "config_key": cell.kind,
        "config": {
            **dataclasses.asdict(cell),
            "n_eval": settings.n_eval,
            "num_trials_null": settings.num_trials_null,
        },
        "problem_id": f"lc2st/{cell.task}/{cell.budget}/{cell.n_cal}",
        "seed": cell.run,
        "host": socket.gethostname(),
        "metrics": {},
    }
    try:
        group = (cell.kind == "level", cell.task, cell.budget, cell.n_cal, cell.run, cell.kind)
        if group not in data_cache:
            data_cache.clear()  # one group's data at a time (10^5 draws a observation)
            data_cache[group] = (level_data if cell.kind == "level" else npe_data)(
                cell, est, settings
            )
        results = run_local(cell.diagnostic, data_cache[group])
        for stat, r in results.items():
            for k in range(len(r.statistic)):
                row["metrics"][f"{stat}/T/{k + 1}"] = float(r.statistic[k])
                row["metrics"][f"{stat}/p_sbi/{k + 1}"] = float(r.p_sbi[k])
                row["metrics"][f"{stat}/p_exact/{k + 1}"] = float(r.p_exact[k])
        row["status"] = "ok"
    except (InputError, ValueError, RuntimeError, FloatingPointError) as e:
        row.update(
            status="failed",
            error=f"{type(e).__name__}: {e}",
            traceback=traceback.format_exc()[-4000:],
        )
    row["wall_seconds"] = time.time() - start
    return row


def run(cells: Sequence[Cell], results: str, settings: Settings = Settings()) -> int:
    """Runs the cells not yet stored, committing each row as it finishes; returns the
    number that failed."""
    from leaderboard.store import ResultsStore
    from leaderboard.worker import versions

    failed = 0
    with ResultsStore(results, "w") as store:
        done = store.keys("ok")
        todo = [c for c in cells if c.key not in done]
        log.info("%d cells stored, %d to run", len(cells) - len(todo), len(todo))
        est, data_cache, stamp = Estimators(), {}, versions()
        for i, cell in enumerate(todo):
            row = run_cell(cell, est, data_cache, settings)
            row["versions"] = stamp
            store.record(row)
            failed += row["status"] != "ok"
            log.info(
                "[%d/%d] %s: %s (%.0f s)",
                i + 1,
                len(todo),
                cell.key,
                row["status"],
                row["wall_seconds"],
            )
    return failed


# -- report ----------------------------------------------------------------------------

# The paper's true-positive rates (MSE form; accuracy for the oracle) at a budget of 1,000
# and 10 observations x 50 runs, decoded from the authors' released results
# (JuliaLinhart/lc2st @ eb1bd5f, saved_experiments/lc2st_2023/exp_2/<task>/results/...,
# emp_power_dict_n_cal.pkl; shared/reference/diagnostics_and_ppl.md section 1.5).
PUBLISHED_TPR = {
    ("two_moons", 10_000): {"oracle_c2st": 1.00, "lc2st": 1.00, "lc2st_nf": 1.00, "lhpd": 1.00},
    ("slcp", 10_000): {"oracle_c2st": 1.00, "lc2st": 1.00, "lc2st_nf": 1.00, "lhpd": 0.63},
    ("slcp", 2_000): {"oracle_c2st": 1.00, "lc2st": 0.83, "lc2st_nf": 0.92, "lhpd": 0.23},
    ("gaussian_mixture", 10_000): {
        "oracle_c2st": 1.00,
        "lc2st": 0.92,
        "lc2st_nf": 0.91,
        "lhpd": 0.87,
    },
    ("gaussian_linear_uniform", 10_000): {
        "oracle_c2st": 1.00,
        "lc2st": 0.34,
        "lc2st_nf": 0.06,
        "lhpd": 0.40,
    },
    ("bernoulli_glm", 10_000): {"oracle_c2st": 1.00, "lc2st": 0.98, "lc2st_nf": 1.00, "lhpd": 0.47},
    ("bernoulli_glm_raw", 10_000): {
        "oracle_c2st": 1.00,
        "lc2st": 0.30,
        "lc2st_nf": 1.00,
        "lhpd": 0.11,
    },
}
PUBLISHED_STAT = {"oracle_c2st": "accuracy"}  # the statistic of each method's published rate


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a binomial rate k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


CELL_FIELDS = ["kind", "task", "budget", "n_cal", "run", "diagnostic"]
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
        cell = {f: cfg[f] for f in CELL_FIELDS} | {"seconds": r["wall_seconds"]}
        for name, value in r["metrics"].items():
            stat, field, k = name.split("/")
            out.append({**cell, "statistic": stat, "obs": int(k), "field": field, "value": value})
    if not out:
        return pd.DataFrame(columns=[*LONG_KEYS, "seconds", "T", "p_sbi", "p_exact"])
    df = pd.DataFrame(out)
    index = [*LONG_KEYS, "seconds"]
    return df.pivot_table(index=index, columns="field", values="value").reset_index()


def long_frame(results: str, shipped: bool = True):
    """The stored runs of `results` (if the file exists) and, with `shipped`, our shipped
    runs of the cells it does not hold (a cell run here replaces the shipped one)."""
    import pandas as pd

    parts = []
    if Path(results).exists():
        parts.append(stored_frame(results))
    if shipped and SHIPPED.exists():
        ours = pd.read_csv(SHIPPED)
        if parts and len(parts[0]):
            held = parts[0][CELL_FIELDS].drop_duplicates()
            ours = ours.merge(held, on=CELL_FIELDS, how="left", indicator=True)
            ours = ours[ours["_merge"] == "left_only"].drop(columns="_merge")
        parts.append(ours)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not len(frame):
        raise InputError(
            f"--results: {results!r} holds no finished L-C2ST cell"
            + ("" if shipped else " (and --no-shipped leaves out ours)")
            + "; allowed: a store this experiment wrote"
        )
    return frame


def ship(results: str, path: Path) -> int:
    """Writes the finished runs of `results` as our shipped runs (CSV, gzip); returns rows."""
    from leaderboard.outputs import write_atomically

    frame = stored_frame(results).sort_values(LONG_KEYS)
    write_atomically(
        "--ship",
        path,
        lambda tmp: frame.to_csv(tmp, index=False, float_format="%.6g", compression="gzip"),
    )
    return len(frame)


def summary(long, alpha: float = ALPHA):
    """Rates per (kind, task, budget, N_cal, diagnostic, statistic): runs, tests (runs x
    observations), mean statistic, the paper's rate (p_sbi <= alpha) and the exactly valid
    p-value's (p_exact <= alpha) with 95% Wilson intervals, and the spread of the paper's
    rate over observations (min-max of the per-observation rates)."""
    import pandas as pd

    long = long.assign(r_paper=long["p_sbi"] <= alpha, r_exact=long["p_exact"] <= alpha)
    keys = ["kind", "task", "budget", "n_cal", "diagnostic", "statistic"]
    rows = []
    for key, g in long.groupby(keys):
        per_obs = g.groupby("obs")["r_paper"].mean()
        n, kp, ke = len(g), g["r_paper"].sum(), g["r_exact"].sum()
        rows.append(
            {
                **dict(zip(keys, key)),
                "runs": g["run"].nunique(),
                "tests": n,
                "mean_T": g["T"].mean(),
                "rate": kp / n,
                "rate_low": wilson(kp, n)[0],
                "rate_high": wilson(kp, n)[1],
                "rate_exact": ke / n,
                "exact_low": wilson(ke, n)[0],
                "exact_high": wilson(ke, n)[1],
                "obs_min": per_obs.min(),
                "seconds": g.groupby("run")["seconds"].first().median(),
                "obs_max": per_obs.max(),
            }
        )
    return pd.DataFrame(rows)


def label(diagnostic: str, statistic: str) -> str:
    from testbed.metrics.local import LOCAL_DIAGNOSTICS

    name = (
        LOCAL_DIAGNOSTICS.get(diagnostic).label
        if diagnostic in LOCAL_DIAGNOSTICS.names()
        else diagnostic
    )
    return f"{name} ({'MSE' if statistic == 'mse' else statistic})"


def _published(task: str, n_cal: int, budget: int, diagnostic: str, statistic: str) -> str:
    if budget != NCAL_SWEEP_BUDGET or PUBLISHED_STAT.get(diagnostic, "mse") != statistic:
        return ""
    value = PUBLISHED_TPR.get((task, n_cal), {}).get(diagnostic)
    return "" if value is None else f"{value:.2f}"


def markdown(table) -> str:
    """The report's tables: power against budget and N_cal, the paper's false-positive
    rates, the appendix tasks, and the local type-I error with q = the reference."""

    def rate(r, exact=False):
        v, lo, hi = (
            (r.rate_exact, r.exact_low, r.exact_high)
            if exact
            else (r.rate, r.rate_low, r.rate_high)
        )
        return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"

    parts = []
    sections = [
        ("True-positive rate against the budget (N_cal = largest)", "power", "budget"),
        ("True-positive rate against N_cal (budget 1,000)", "power", "n_cal"),
        ("False-positive rate, the paper's null draws (budget 1,000)", "null", "n_cal"),
        ("Local type-I error: q = the reference posterior (q = p exactly)", "level", "n_cal"),
    ]
    for title, kind, axis in sections:
        t = table[table["kind"] == kind]
        if axis == "n_cal" and kind != "level":
            t = t[t["budget"] == min(NCAL_SWEEP_BUDGET, t["budget"].max() if len(t) else 0)]
        if axis == "budget":
            t = t[t["n_cal"] == t.groupby("task")["n_cal"].transform("max")]
        if not len(t):
            continue
        head = [
            "task",
            axis.replace("n_cal", "N_cal"),
            "method",
            "runs",
            "tests",
            "mean T",
            "rate (p_sbi <= 0.05) [95%]",
            "rate (exact p) [95%]",
            "per obs min-max",
            "s / run",
        ]
        if kind == "power":
            head.append("paper (50 runs)")
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in t.sort_values(["task", axis, "diagnostic", "statistic"]).itertuples():
            cells = [
                r.task,
                f"{getattr(r, axis):,}",
                label(r.diagnostic, r.statistic),
                str(r.runs),
                str(r.tests),
                f"{r.mean_T:.4g}",
                rate(r),
                rate(r, True),
                f"{r.obs_min:.2f}-{r.obs_max:.2f}",
                f"{r.seconds:.3g}",
            ]
            if kind == "power":
                cells.append(_published(r.task, r.n_cal, r.budget, r.diagnostic, r.statistic))
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def figure(table, path: Path) -> None:
    """The paper's Figure 2 layout: per task, mean statistic and TPR against the budget,
    TPR and FPR against N_cal; the paper's published rates as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in FIGURE2_TASKS if t in set(table["task"])] or sorted(set(table["task"]))
    fig, axes = plt.subplots(len(tasks), 4, figsize=(15, 3.2 * len(tasks)), squeeze=False)
    methods = sorted({(d, s) for d, s in zip(table["diagnostic"], table["statistic"])})
    colors = {m: f"C{i}" for i, m in enumerate(methods)}
    for row, task in zip(axes, tasks):
        t = table[table["task"] == task]
        panels = [
            (
                t[(t["kind"] == "power") & (t["n_cal"] == t["n_cal"].max())],
                "budget",
                "mean_T",
                "mean statistic",
            ),
            (t[(t["kind"] == "power") & (t["n_cal"] == t["n_cal"].max())], "budget", "rate", "TPR"),
            (
                t[(t["kind"] == "power") & (t["budget"] == NCAL_SWEEP_BUDGET)],
                "n_cal",
                "rate",
                "TPR",
            ),
            (t[(t["kind"] == "null") & (t["budget"] == NCAL_SWEEP_BUDGET)], "n_cal", "rate", "FPR"),
        ]
        for ax, (data, axis, col, name) in zip(row, panels):
            for m in methods:
                g = data[(data["diagnostic"] == m[0]) & (data["statistic"] == m[1])].sort_values(
                    axis
                )
                if len(g):
                    ax.plot(g[axis], g[col], "o-", ms=3, color=colors[m], label=label(*m))
                if axis == "n_cal" and name == "TPR" and PUBLISHED_STAT.get(m[0], "mse") == m[1]:
                    pub = [
                        (n, v[m[0]])
                        for (tk, n), v in PUBLISHED_TPR.items()
                        if tk == task and m[0] in v
                    ]
                    if pub:
                        ax.plot(*zip(*pub), "x", ms=7, color=colors[m])
            if name == "FPR":
                ax.axhline(ALPHA, color="#999", lw=0.8, ls=":")
            ax.set(xscale="log", title=f"{task}: {name}", xlabel=axis.replace("n_cal", "N_cal"))
            if col == "rate":
                ax.set_ylim(-0.03, 1.03)
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels_, loc="lower center", ncol=len(methods), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


# -- command line ----------------------------------------------------------------------


def _split(text: str, field: str, allowed: Sequence[Any], cast=str) -> list:
    try:
        items = [cast(t.strip()) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"{field}: got {text!r}; allowed: comma-separated integers") from None
    bad = [i for i in items if i not in allowed]
    if not items or bad:
        shown = ", ".join(map(str, allowed))
        raise InputError(f"{field}: got {text!r}; allowed: a comma-separated list of {shown}")
    return items


def import_file(path: str) -> None:
    """Runs a Python file that registers diagnostics (`--import`)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"--import: got {path!r}, which is not a file; allowed: a .py file")
    spec = importlib.util.spec_from_file_location(f"lc2st_plugin_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.cli import OneLineParser, setup_logging
    from leaderboard.outputs import check_output_path, write_atomically

    parser = OneLineParser(
        prog="python -m experiments.reproduce_lc2st",
        name="reproduce_lc2st",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--parts", default="level,figure2,appendix", help=f"of {', '.join(PARTS)}")
    parser.add_argument("--tasks", default="all", help="only these tasks of the parts")
    parser.add_argument("--runs", type=int, default=3, help="runs 1..RUNS (the paper: 50)")
    parser.add_argument("--diagnostics", default="oracle_c2st,lc2st,lc2st_nf,lhpd")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="FILE",
        help="a Python file that registers diagnostics",
    )
    parser.add_argument("--results", default="lc2st-reproduction.db", help="results store")
    parser.add_argument("--out", default="lc2st-reproduction", help="folder for tables and figure")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--n-cals", default=",".join(map(str, N_CALS)))
    parser.add_argument("--n-eval", type=int, default=N_EVAL)
    parser.add_argument("--null-trials", type=int, default=100)
    parser.add_argument("--no-shipped", action="store_true", help="leave out our shipped runs")
    parser.add_argument(
        "--ship",
        default=None,
        metavar="CSV.GZ",
        help=f"also write the store's finished runs as our shipped runs ({SHIPPED.name})",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: tables and figure from what the store holds",
    )
    args = parser.parse_args(argv)
    setup_logging()
    try:
        for path in args.imports:
            import_file(path)
        from testbed.metrics.local import LOCAL_DIAGNOSTICS

        parts = _split(args.parts, "--parts", PARTS)
        all_tasks = sorted(set(FIGURE2_TASKS + APPENDIX_TASKS + LEVEL_TASKS))
        tasks = None if args.tasks == "all" else _split(args.tasks, "--tasks", all_tasks)
        diagnostics = _split(args.diagnostics, "--diagnostics", LOCAL_DIAGNOSTICS.names())
        if not 1 <= args.runs <= 1_000:
            raise InputError(f"--runs: got {args.runs}; allowed: 1 to 1000")
        if not 10 <= args.n_eval <= 100_000:
            raise InputError(f"--n-eval: got {args.n_eval}; allowed: 10 to 100000")
        if not 1 <= args.null_trials <= 10_000:
            raise InputError(f"--null-trials: got {args.null_trials}; allowed: 1 to 10000")
        settings = Settings(
            tuple(_split(args.budgets, "--budgets", BUDGETS, int)),
            tuple(_split(args.n_cals, "--n-cals", N_CALS, int)),
            args.n_eval,
            args.null_trials,
        )
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise InputError(f"--out: got {args.out!r}, a file; allowed: a folder (made if new)")
        if args.ship:
            check_output_path("--ship", Path(args.ship), [args.results])
        out.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            check_output_path("--out", out / name, [args.results])
        failed = 0
        if not args.report:
            cells = plan(parts, range(1, args.runs + 1), diagnostics, tasks, settings)
            failed = run(cells, args.results, settings)
        if args.ship:
            print(
                f"{ship(args.results, Path(args.ship))} rows shipped -> {args.ship}",
                file=sys.stderr,
            )
        table = summary(long_frame(args.results, shipped=not args.no_shipped))
    except InputError as e:
        print(f"reproduce_lc2st: error: {e}", file=sys.stderr)
        return 2
    text = markdown(table)
    write_atomically("--out", out / OUTPUTS[0], lambda tmp: tmp.write_text(text + "\n"))
    write_atomically("--out", out / OUTPUTS[1], lambda tmp: figure(table, tmp))
    print(text)
    print(f"\ntables and figure: {out.resolve()}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from experiments.cli import interruptible

    sys.exit(interruptible("reproduce_lc2st", main))
