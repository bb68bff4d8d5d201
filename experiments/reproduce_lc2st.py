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

import dataclasses
import functools
import importlib.util
import logging
import sys
import time
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.lc2st_published import BUDGET_SWEEP_NCAL, NCAL_SWEEP_BUDGET
from experiments.lc2st_report import (
    SHIPPED,
    long_frame,
    markdown,
    published_markdown,
    ship,
    summary,
)
from experiments.lc2st_report import figure as report_figure
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
    n_eval: int = N_EVAL
    null_trials: int = 100

    @property
    def key(self) -> str:
        """Its row's key; sizes other than the paper's are part of it (a smaller run's
        cells never stand in for the paper-sized ones)."""
        sizes = "" if (self.n_eval, self.null_trials) == (N_EVAL, 100) else (
            f"/neval{self.n_eval}/H{self.null_trials}"
        )  # fmt: skip
        cell = f"{self.kind}/{self.task}/{self.budget}/{self.n_cal}/{self.run}/{self.diagnostic}"
        return f"lc2st/{cell}{sizes}"


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
    sizes = {"n_eval": settings.n_eval, "null_trials": settings.num_trials_null}
    return [dataclasses.replace(c, **sizes) for c in cells]


# -- the data of a run ------------------------------------------------------------------


class Estimators:
    """NPEs trained once per (task, budget) in this process (seed 0, the `npe` agent's
    benchmark settings), and each task's calibration sets per run."""

    def __init__(self, cache: MutableMapping[str, Any] | None = None):
        self._npe: dict[tuple[str, int], Any] = {}
        # nulls shared across estimators and runs (LocalData.cache; `experiments.kept_nulls`)
        self.cache: MutableMapping[str, Any] = {} if cache is None else cache

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
        draws_log_prob_at=q.flow_draws_log_prob,
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


def run_cell(cell: Cell, est: Estimators, data_cache: dict, settings: Settings) -> dict[str, float]:
    """The cell's metrics: its diagnostic's statistic and p-values at each observation."""
    from testbed.metrics.local import run_local

    group = (cell.kind, cell.task, cell.budget, cell.n_cal, cell.run)
    if group not in data_cache:
        data_cache.clear()  # one group's data at a time (10^5 draws a observation)
        data_cache[group] = (level_data if cell.kind == "level" else npe_data)(cell, est, settings)
    metrics = {}
    for stat, r in run_local(cell.diagnostic, data_cache[group]).items():
        for k in range(len(r.statistic)):
            metrics[f"{stat}/T/{k + 1}"] = float(r.statistic[k])
            metrics[f"{stat}/p_sbi/{k + 1}"] = float(r.p_sbi[k])
            metrics[f"{stat}/p_exact/{k + 1}"] = float(r.p_exact[k])
    return metrics


def cell_job(cell: Cell, est: Estimators, data_cache: dict, settings: Settings):
    """The cell as `experiments.cells` runs it (`run_cell`), with its stored row's fields."""
    from experiments.cells import CellJob

    sizes = {"n_eval": settings.n_eval, "num_trials_null": settings.num_trials_null}
    return CellJob(
        cell, functools.partial(run_cell, cell, est, data_cache, settings),
        agent=cell.diagnostic, config_key=cell.kind,
        problem_id=f"lc2st/{cell.task}/{cell.budget}/{cell.n_cal}", seed=cell.run,
        config={**dataclasses.asdict(cell), **sizes},
    )  # fmt: skip


def null_salt(settings: Settings) -> tuple:
    """What decides a kept null besides its key (the diagnostic, calibration set or
    estimator, N_cal): the evaluation and null sizes and the versions of the code that
    trains the estimators and the classifiers."""
    from importlib.metadata import version

    import testbed

    versions = tuple(version(p) for p in ("sbi", "torch", "jax"))
    return (settings.n_eval, settings.num_trials_null, testbed.__version__, *versions)


def run(cells: Sequence[Cell], results: str, settings: Settings = Settings()) -> int:
    """Runs the cells not yet stored (a failed one again; an error or a non-finite result
    is a failure with its reason, never the end of the run), committing each row as it
    finishes (`experiments.cells`); returns the number that failed. The NPEs' trainings
    are checkpointed beside the store (`<results>.checkpoints`, `testbed.checkpoints`) and
    kept: they are the experiment's inputs, so a later run (another diagnostic, more runs,
    a run stopped mid-training) loads them instead of training again. So are the nulls the
    diagnostics share, in `<results>.nulls` (`experiments.kept_nulls`)."""
    from experiments.cells import run_cells
    from experiments.kept_nulls import SUFFIX, KeptNulls
    from leaderboard.store.checks import resolved
    from testbed.checkpoints import beside_store

    file = resolved(results)
    nulls = KeptNulls(Path(f"{file}{SUFFIX}"), null_salt(settings))
    est, data_cache = Estimators(nulls), {}
    jobs = [cell_job(c, est, data_cache, settings) for c in cells]
    with beside_store(file):  # kept: a later command's methods test the same NPEs
        return run_cells(jobs, results, log)


# -- command line ----------------------------------------------------------------------


def tasks_of(parts: Sequence[str]) -> str:
    """The tasks of each part, said in one line."""
    of = {"level": LEVEL_TASKS, "figure2": FIGURE2_TASKS, "appendix": APPENDIX_TASKS}
    return "; ".join(f"{p}: {', '.join(of[p])}" for p in parts)


def failures_note(results: str) -> str:
    """A line naming the stored cells that failed (tables hold finished cells only)."""
    if not Path(results).exists():
        return ""
    from leaderboard.store import ResultsStore

    with ResultsStore(results, "r") as store:
        failed = {k: v for k, v in store.failures().items() if k.startswith("lc2st/")}
    if not failed:
        return ""
    shown = "; ".join(f"{k}: {v}" for k, v in list(failed.items())[:5])
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return f"\n\n{len(failed)} cells failed and are not in the tables: {shown}{more}"


def import_file(path: str) -> None:
    """Runs a Python file that registers diagnostics (`--import`)."""
    file = Path(path)
    if not file.is_file() or file.suffix != ".py":
        what = "not a .py file" if file.is_file() else "not a file"
        raise InputError(f"--import: got {path!r}, which is {what}; allowed: a .py file")
    spec = importlib.util.spec_from_file_location(f"lc2st_plugin_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 (the user's file: its error in one line)
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) else ""
        raise InputError(
            f"--import: {path!r} failed{where}: {type(e).__name__}: {e}; allowed: a Python file "
            "that runs and registers diagnostics"
        ) from None


def _parser():
    from experiments.console import script_parser

    parser = script_parser("reproduce_lc2st", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--parts", default="level,figure2,appendix", help=f"of {', '.join(PARTS)} (and the tables')"
    )
    parser.add_argument("--tasks", default="all", help="only these tasks of the parts (and tables)")
    parser.add_argument("--runs", type=int, default=3, help="runs 1..RUNS (the paper: 50)")
    parser.add_argument(
        "--diagnostics",
        default="oracle_c2st,lc2st,lc2st_nf,lhpd",
        help="registered local diagnostics (with --import: yours)",
    )
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
    parser.add_argument(
        "--budgets",
        default=",".join(map(str, BUDGETS)),
        help="NPE training budgets, of the paper's (given: also of the tables)",
    )
    parser.add_argument(
        "--n-cals",
        default=",".join(map(str, N_CALS)),
        help="calibration set sizes, of the paper's (the largest: the budget sweep's; given: "
        "also of the tables)",
    )
    parser.add_argument(
        "--n-eval", type=int, default=N_EVAL, help="draws of q at each observation (10 to 100000)"
    )
    parser.add_argument(
        "--null-trials", type=int, default=100, help="null trials H of every test (1 to 10000)"
    )
    parser.add_argument("--no-shipped", action="store_true", help="leave out our shipped runs")
    parser.add_argument(
        "--ship",
        default=None,
        metavar="CSV.GZ",
        help=f"also merge the store's finished runs into our shipped runs ({SHIPPED.name})",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: tables and figure from what the store holds",
    )
    return parser


def _checked(args) -> tuple[list[str], list[str] | None, list[str], Settings, Path]:
    """The parts, tasks (None: all), diagnostics and settings asked for, and the --out
    folder, each checked (and the outputs' paths) before any cell runs."""
    from experiments.console import check_range, split_choices
    from experiments.kept_nulls import SUFFIX
    from leaderboard.outputs import check_output_folder, check_output_path
    from testbed.metrics.local import LOCAL_DIAGNOSTICS

    parts = split_choices(args.parts, "--parts", PARTS)
    all_tasks = sorted(set(FIGURE2_TASKS + APPENDIX_TASKS + LEVEL_TASKS))
    tasks = None if args.tasks == "all" else split_choices(args.tasks, "--tasks", all_tasks)
    diagnostics = split_choices(args.diagnostics, "--diagnostics", LOCAL_DIAGNOSTICS.names())
    check_range("--runs", args.runs, 1, 1_000)
    check_range("--n-eval", args.n_eval, 10, 100_000)
    check_range("--null-trials", args.null_trials, 1, 10_000)
    settings = Settings(
        tuple(split_choices(args.budgets, "--budgets", BUDGETS, int)),
        tuple(split_choices(args.n_cals, "--n-cals", N_CALS, int)),
        args.n_eval,
        args.null_trials,
    )
    nulls, aimed = Path(args.results + SUFFIX).resolve(), Path(args.out).resolve()
    if nulls == aimed or nulls in aimed.parents:  # the store's side folder of kept nulls
        raise InputError(
            f"--out: got {args.out!r}, the folder of the nulls kept beside the results store "
            f"{args.results!r}; allowed: a folder of its own"
        )
    out = check_output_folder("--out", args.out, OUTPUTS, [args.results])
    if args.ship:
        check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
    return parts, tasks, diagnostics, settings, out


def _run(args) -> tuple[Any, Path, int]:
    """Runs (or, with --report, reads) the reproduction: its summary table, the --out
    folder, and the number of cells that failed."""
    from experiments.reproduction import run_unless_report

    for path in args.imports:
        import_file(path)
    parts, tasks, diagnostics, settings, out = _checked(args)

    def run_cells() -> int:
        cells = plan(parts, range(1, args.runs + 1), diagnostics, tasks, settings)
        if not cells:
            raise InputError(
                f"--tasks: got {args.tasks!r}, in none of the parts "
                f"{args.parts!r}; allowed: {tasks_of(parts)}"
            )
        return run(cells, args.results, settings)

    failed = run_unless_report("reproduce_lc2st", args, run_cells, ship)
    long = long_frame(args.results, shipped=not args.no_shipped)
    return summary(_chosen(args, long, parts, tasks, settings)), out, failed


def part_of(kind: str, task: str) -> str:
    """The part a cell belongs to: level, figure2 (its power and null cells) or appendix."""
    if kind == "level":
        return "level"
    return "figure2" if task in FIGURE2_TASKS else "appendix"


def _chosen(args, long, parts, tasks, settings: Settings):
    """The rows of the parts, tasks, budgets and N_cal given (left at their defaults:
    every stored and shipped row; the diagnostics and runs never narrow the tables, so a
    diagnostic of yours is tabled beside ours); an InputError when none matches."""
    from experiments.reproduction import narrowed

    defaults, masks = _parser(), {}
    if args.parts != defaults.get_default("parts"):
        masks["--parts"] = [part_of(k, t) in parts for k, t in zip(long["kind"], long["task"])]
    if tasks is not None:
        masks["--tasks"] = long["task"].isin(tasks)
    if args.budgets != defaults.get_default("budgets"):  # level cells have no budget
        masks["--budgets"] = long["kind"].eq("level") | long["budget"].isin(settings.budgets)
    if args.n_cals != defaults.get_default("n_cals"):
        masks["--n-cals"] = long["n_cal"].isin(settings.n_cals)
    return narrowed(long, masks)


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging, shown
    from leaderboard.outputs import write_atomically

    args = _parser().parse_args(argv)
    setup_logging()
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    try:
        table, out, failed = _run(args)
    except InputError as e:
        return bad_input("reproduce_lc2st", e)
    text = markdown(table) + failures_note(args.results)
    # the paper's rates of the tasks tabled (it has none of the level part's)
    published = published_markdown(set(table.loc[table["kind"] != "level", "task"]))
    if published:
        text += "\n\n### The paper's rates (50 runs; lc2st_published.csv)\n\n" + published
    out.mkdir(exist_ok=True)
    write_atomically("--out", out / OUTPUTS[0], lambda tmp: tmp.write_text(text + "\n"))
    write_atomically("--out", out / OUTPUTS[1], lambda tmp: report_figure(table, tmp))
    return shown(text, out, failed, "tables and figure")


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_lc2st", main, ends_process=True))
