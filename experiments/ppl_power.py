"""The level and power of each measure of a PPL's posterior, against samplers made wrong in
known ways (the PPL benchmark "What's your bench": its problems, its sample sizes).

Samplers (`SAMPLERS`) on the benchmark's conjugate problems `conjugate/wyb/<k>`:

- `exact`: draws of the exact posterior (a perfect PPL): each measure's rejection rate is
  its level;
- `nuts`: the project's NumPyro NUTS (`numpyro` agent: 200 warm-up steps, 1,000 draws, 2
  chains pooled, n rows drawn as its predictive draws them) on the problem's own model;
- `nuts_ess`: the same chains as the exact tests of `testbed run` read them: thinned to
  their effective sample size (`ConjugateProblem.independent_rows`), at most n rows;
- `warmup_5`: the same with 5 warm-up steps (step size and mass matrix barely adapted);
- `narrow_step`: a fixed step size of 1e-3 posterior sd, adaptation off;
- `prior_0.1`: the model's prior sd shrunk to 0.1 (the benchmark's hardest prior scale; for
  the Gamma prior on a precision, a Gamma with the same mean and sd 0.1);
- `correlated`: a sampler with high autocorrelation (NUTS with one tree doubling and a
  fixed step of 0.5 posterior sd, adaptation off) whose n consecutive draws of one chain
  are scored; `thinned`: the same sampler, every 20th draw.

Measures (`MEASURES`): the exact one-sample tests of `ConjugateProblem.posterior_scores`
(PIT/KS `pit_ks`, `mahalanobis` for Gaussian posteriors, ddKS with calibrated p-values
`ddks`), C2ST with its binomial p-value (`c2st`, fewer trials) and, when
`testbed.metrics.wyb` is installed, the benchmark's own measures as it computes them on
the plug-in predictive (posterior mean, known scale) against the conjugate posterior
predictive: its adKS p-value `wyb_adks` and its "KL" `wyb_kl` (no test: its mean and sd
over trials; under `exact` its null spread).

One stored row a cell (problem, sampler, n, group of measures, trials): every trial's
p-values, committed as it finishes, so an interrupted run resumes. `--report` runs
nothing and prints the table measure x sampler x n from the store and our shipped runs
(`leaderboard/data/ppl_power_ours.csv.gz`); `--ship` writes the store's finished cells
there. The trials of a NUTS cell are its chains, run at once (vectorized).

Run:
    python -m experiments.ppl_power --results ppl-power.db
    python -m experiments.ppl_power --report
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.conjugate_power import trial_scores
from experiments.ppl_power_report import (  # noqa: F401  (the tables: ppl_power.report, ...)
    ALL_PROBLEMS,
    ALPHA,
    CORRECT,
    SAMPLERS,
    TESTS,
    TRIALS,
    binomial_range,
    level_bound,
    level_table,
    markdown,
    report,
    summary,
)
from testbed.errors import InputError

try:  # the benchmark's own measures (testbed/metrics/wyb.py), where installed
    from testbed.metrics import wyb
except ImportError:  # pragma: no cover (a checkout without it)
    wyb = None

log = logging.getLogger("testbed.ppl_power")

PROBLEMS = ("wyb/1", "wyb/9", "wyb/16", "wyb/21")
WYB = ("wyb_adks", "wyb_kl") if wyb is not None else ()
MEASURES = (*TESTS, "c2st", *WYB)
SIZES = (100, 1_000)  # the benchmark's KS sample size and its MCMC draws
C2ST_TRIALS = 20
THIN = 20
SHIPPED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "ppl_power_ours.csv.gz"
CELL_FIELDS = ["problem", "sampler", "n", "group", "trials"]
SAME_CELL = CELL_FIELDS[:-1]  # cells that differ in their number of trials share trials


@dataclasses.dataclass(frozen=True)
class Sampler:
    """A NUTS run made wrong in a known way: `settings` of the `numpyro` agent's config,
    a fixed step in posterior sds (`step_sd`), a prior sd (`prior_sd`), chains a trial and
    which draws are scored (`pooled`: n rows of the trial's chains, as the agent's
    predictive draws them; `ess`: at most n of them thinned to their ESS, as the exact
    tests read them; `consecutive`: the first n of one chain; `thinned`: every THIN-th)."""

    about: str
    settings: dict = dataclasses.field(default_factory=dict)
    step_sd: float | None = None
    prior_sd: float | None = None
    chains: int = 2
    draws: str = "pooled"


AUTOCORRELATED = {"adapt": False, "max_tree_depth": 1}
NUTS_SAMPLERS = {
    "nuts": Sampler("NUTS at the benchmark's settings (200 warm-up, 1,000 draws, 2 chains)"),
    "nuts_ess": Sampler("the same, its chains thinned to their ESS", draws="ess"),
    "warmup_5": Sampler("5 warm-up steps", {"num_warmup": 5}),
    "narrow_step": Sampler("fixed step 1e-3 posterior sd, no adaptation", {"adapt": False}, 1e-3),
    "prior_0.1": Sampler("prior sd shrunk to 0.1", prior_sd=0.1),
    "correlated": Sampler(
        "n consecutive draws of one chain, step 0.5 sd, 1 doubling",
        AUTOCORRELATED,
        0.5,
        chains=1,
        draws="consecutive",
    ),  # fmt: skip
    "thinned": Sampler(
        f"the same chain, every {THIN}th draw", AUTOCORRELATED, 0.5, chains=1, draws="thinned"
    ),
}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One stored row: a group of measures (`tests`: PIT/KS, Mahalanobis, ddKS and the
    benchmark's measures; `c2st`) on `trials` trials of a sampler at n draws."""

    problem: str
    sampler: str
    n: int
    group: str
    trials: int

    @property
    def key(self) -> str:
        return f"ppl_power/{self.problem}/{self.sampler}/{self.n}/{self.group}/T{self.trials}"


def plan(
    problems: Sequence[str], samplers: Sequence[str], sizes: Sequence[int],
    measures: Sequence[str], trials: int, c2st_trials: int,
) -> list[Cell]:  # fmt: skip
    """The cells: the tests problem by problem (a partial store holds whole problems),
    then C2ST's (slow, fewer trials)."""
    cells = []
    if any(m != "c2st" for m in measures):
        cells += [Cell(p, s, n, "tests", trials) for p in problems for s in samplers for n in sizes]
    if "c2st" in measures and c2st_trials > 0:
        cells += [
            Cell(p, s, n, "c2st", c2st_trials) for p in problems for s in samplers for n in sizes
        ]
    return cells


# -- samplers --------------------------------------------------------------------------


def narrow_prior(family, sd: float):
    """`family` with its prior sd shrunk to `sd`: N(m, sd^2 I) for a Gaussian prior; for a
    Gamma prior (on a precision) the Gamma with the same mean and sd `sd`."""
    if hasattr(family, "prior_cov"):
        return dataclasses.replace(family, prior_cov=sd**2 * np.eye(family.dim))
    mean = family.shape / family.rate
    return dataclasses.replace(family, shape=(mean / sd) ** 2, rate=mean / sd**2)


def nuts_draws(problem, sampler: str, trials: int, n: int, seed: int = 0) -> np.ndarray:
    """[chains, draws, dim] of `sampler`'s NUTS (the `numpyro` agent's `_mcmc` on the
    problem's model), `trials` x its chains a trial run at once (vectorized)."""
    import jax
    import jax.numpy as jnp

    from agents.nuts import _mcmc
    from agents.ppl.numpyro_agent import NumpyroConfig
    from generative.conjugate.model import model_spec

    spec = NUTS_SAMPLERS[sampler]
    family = (
        problem.family if spec.prior_sd is None else narrow_prior(problem.family, spec.prior_sd)
    )
    model = model_spec(family)
    settings = {**spec.settings, "num_chains": spec.chains * trials, "seed": seed}
    if spec.draws not in ("pooled", "ess"):  # the agent's 1,000 draws a chain, else n
        settings["num_samples"] = n * (THIN if spec.draws == "thinned" else 1)
    if spec.step_sd is not None:
        settings["step_size"] = spec.step_sd * unconstrained_sd(problem, model)
    config = NumpyroConfig(**settings)
    x, y = jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32)
    from testbed.waiting import waited

    mcmc, init, key = _mcmc(config, model, x, y)

    def sample() -> np.ndarray:  # one long computation: run so that Ctrl-C stops the wait
        mcmc.run(key, init_params=init)
        u = mcmc.get_samples(group_by_chain=True).reshape(
            (config.num_chains, -1, model.dim_unconstrained)
        )
        return np.asarray(jax.vmap(jax.vmap(model.constrain))(u), np.float64)

    return waited(sample)


def unconstrained_sd(problem, model) -> float:
    """The smallest posterior sd of the unconstrained coordinates (the scale of a step)."""
    import jax.numpy as jnp

    theta = problem.posterior.sample(4_000, np.random.default_rng((5, 5)))
    return float(np.min(np.std(np.asarray(model.unconstrain(jnp.asarray(theta))), axis=0)))


class Draws:
    """Trial t's n draws of a sampler (`exact`: the exact posterior's)."""

    def __init__(self, problem, sampler: str, trials: int, n: int):
        self.problem, self.sampler, self.n = problem, sampler, n
        self.chains = None if sampler == "exact" else nuts_draws(problem, sampler, trials, n)

    def __call__(self, t: int) -> np.ndarray:
        if self.chains is None:
            return self.problem.exact_posterior().sample(self.problem.x_o, self.n, 10_000 + t)
        from agents.nuts import DrawsPosterior

        spec = NUTS_SAMPLERS[self.sampler]
        if spec.draws == "consecutive":
            return self.chains[t, : self.n]
        if spec.draws == "thinned":
            return self.chains[t, ::THIN][: self.n]
        pooled = self.chains[t * spec.chains : (t + 1) * spec.chains]
        if spec.draws == "ess":
            return self.problem.independent_rows(pooled, self.n, t)[0]
        return DrawsPosterior(pooled.reshape(-1, pooled.shape[-1]), {}).sample(None, self.n, t)

    def ess(self, t: int) -> float:
        """The smallest bulk ESS of trial t's scored chain (NaN for exact draws)."""
        if self.chains is None:
            return float("nan")
        from numpyro.diagnostics import effective_sample_size

        spec = NUTS_SAMPLERS[self.sampler]
        if spec.draws in ("pooled", "ess"):
            chains = self.chains[t * spec.chains : (t + 1) * spec.chains]
        else:
            chains = self(t)[None]
        return float(np.min(effective_sample_size(chains)))


# -- the benchmark's own measures -------------------------------------------------------


def wyb_scores(problem, samples: np.ndarray, random_state: int) -> dict[str, float]:
    """The benchmark's adKS p-value and "KL" of the plug-in predictive (posterior mean of
    the draws, known scale; for a precision, the posterior mean of sigma = lam^-1/2)
    against the exact posterior predictive, as `testbed.metrics.wyb` computes them."""
    from scipy import stats

    family, post = problem.family, problem.posterior
    if hasattr(family, "noise_cov"):  # MVN with known covariance
        noise = np.asarray(family.noise_cov, np.float64)
        p = stats.multivariate_normal(samples.mean(0), noise)
        loc, scale = post.mean, post.cov + noise
        q = stats.multivariate_normal(loc, scale)
    elif hasattr(family, "noise_var"):  # normal with known variance
        p = stats.norm(samples.mean(), np.sqrt(family.noise_var))
        loc, scale = float(post.mean[0]), float(np.sqrt(post.var[0] + family.noise_var))
        q = stats.norm(loc, scale)
    else:  # normal with known mean, Gamma prior on the precision: a Student-t predictive
        up = problem.updated
        p = stats.norm(family.mean, np.mean(samples[:, 0] ** -0.5))
        loc, scale = family.mean, float(np.sqrt(up.rate / up.shape))
        q = stats.t(2 * up.shape, loc, scale)
    out = wyb.wyb_measures(p, q, loc, scale, random_state)
    return {"wyb_adks": out["wyb_ks_pvalue"], "wyb_kl": out["wyb_kl"]}


# -- running ---------------------------------------------------------------------------


def load_problem(name: str, group: str):
    import generative

    options = {"use_c2st": group == "c2st"}
    if group == "c2st":
        options["num_null"] = 0  # C2ST alone: no ddKS null sets
    return generative.load(f"conjugate/{name}", **options)


def cell_metrics(cell: Cell, draws: Draws) -> dict[str, float]:
    """Every trial's p-value of each measure of the cell's group (`<measure>/<t>`; the
    benchmark's KL: its value), and the ESS of the scored chain (`ess/<t>`)."""
    problem = load_problem(cell.problem, cell.group)
    tests = ("c2st",) if cell.group == "c2st" else TESTS
    out: dict[str, float] = {}
    for t, samples, scores in trial_scores(problem, draws, cell.trials):
        for test in tests:
            if f"{test}_pvalue" in scores:
                out[f"{test}/{t}"] = float(scores[f"{test}_pvalue"])
        if cell.group == "tests":
            out[f"ess/{t}"] = draws.ess(t)
            if wyb is not None:
                for name, value in wyb_scores(problem, samples, t).items():
                    out[f"{name}/{t}"] = float(value)
    return out


def run_cell(cell: Cell, cache: dict) -> dict[str, float]:
    """The cell's measures over its trials (its draws from `cache` when another cell of the
    same sampler run made them)."""
    from testbed.progress import activity

    pooled = cell.sampler == "exact" or NUTS_SAMPLERS[cell.sampler].draws in ("pooled", "ess")
    group = (cell.problem, cell.sampler, cell.trials) + (() if pooled else (cell.n,))
    if group not in cache:  # pooled draws serve every n: one run of the sampler
        cache.clear()
        problem = load_problem(cell.problem, "tests")
        with activity(f"{cell.key}: drawing {cell.trials:,} trials at once"):
            cache[group] = Draws(problem, cell.sampler, cell.trials, cell.n)
    draws = cache[group]
    draws.n = cell.n
    with activity(f"{cell.key}: scoring its trials"):  # a heartbeat while it works
        return cell_metrics(cell, draws)


def run(cells: Sequence[Cell], results: str) -> int:
    """Runs the cells not yet stored (a failed one again; an error is a failure with its
    reason, never the end of the run), committing each row as it finishes; a cell another
    run of this experiment holds the lease of is left to it, and waited for (two runs on
    one store share the work: `experiments.cells`). Returns the number that failed here."""
    from experiments.cells import CellJob, run_cells

    cache: dict = {}
    jobs = [
        CellJob(
            c,
            functools.partial(run_cell, c, cache),
            agent=c.sampler,
            config_key=c.group,
            problem_id=f"conjugate/{c.problem}",
        )
        for c in cells
    ]
    return run_cells(jobs, results, log)


# -- the table -------------------------------------------------------------------------


def stored_frame(results: str):
    """One row per (stored cell, trial, measure) of a results store: its value (a p-value;
    the benchmark's KL: its value; `ess`: the scored chain's ESS)."""
    import pandas as pd

    from leaderboard.store import ResultsStore

    with ResultsStore(results, "r") as store:
        rows = [
            r for r in store.rows() if r["key"].startswith("ppl_power/") and r["status"] == "ok"
        ]
    out = []
    for r in rows:
        _, problem, k, sampler, n, group, trials = r["key"].split("/")
        cell = {"problem": f"{problem}/{k}", "sampler": sampler, "n": int(n), "group": group}
        cell["trials"] = int(trials[1:])
        for name, value in r["metrics"].items():
            measure, t = name.split("/")
            out.append({**cell, "trial": int(t), "measure": measure, "value": value})
    return pd.DataFrame(out, columns=[*CELL_FIELDS, "trial", "measure", "value"])


def long_frame(results: str, shipped: bool = True):
    """The stored trials of `results` (if the file exists) and, with `shipped`, our
    shipped trials of the cells it does not hold (a cell run here replaces ours, whatever
    its number of trials; trial t is one seeded trial in a cell of any size: counted once)."""
    import pandas as pd

    from experiments.reproduction import stored_and_shipped

    stored = stored_frame(results) if Path(results).exists() else None
    ours = pd.read_csv(SHIPPED, comment="#") if shipped and SHIPPED.exists() else None
    frame = stored_and_shipped(stored, ours, SAME_CELL, results, "ppl_power")
    return frame.drop_duplicates([*SAME_CELL, "trial", "measure"])


def ship(results: str, path: Path) -> str:
    """Merges the finished trials of `results` into ours at `path` (CSV, gzip, under `#`
    lines: when, which commit, what machine): a cell the store holds replaces ours."""
    import gzip

    from experiments.reproduction import merged_cells
    from leaderboard.outputs import write_atomically
    from leaderboard.ranking.shipped import provenance

    frame, said = merged_cells(stored_frame(results), SAME_CELL, path, results)
    frame = frame.sort_values([*CELL_FIELDS, "measure", "trial"])
    notes = [
        "The level and power of each measure of a PPL's posterior (experiments.ppl_power), "
        "made by this project (labelled as ours): one row per (cell, trial, measure), the "
        "trial's p-value (wyb_kl: its value; ess: the scored chains' ESS).",
        provenance()[1],  # when, at which commit, on what machine, with which versions
    ]
    text = "".join(f"# {line}\n" for line in notes) + frame.to_csv(index=False, float_format="%.6g")

    def write(tmp: Path) -> None:
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.write(text)

    write_atomically("--ship", path, write)
    return said


# -- command line ----------------------------------------------------------------------


GAUSSIAN = tuple(f"wyb/{k}" for k in (*range(1, 7), *range(16, 22)))  # P7-15: a precision


def check_applies(measures: Sequence[str], problems: Sequence[str]) -> None:
    """Mahalanobis asked for problems without a Gaussian posterior only: one line."""
    if list(measures) == ["mahalanobis"] and not set(problems) & set(GAUSSIAN):
        raise InputError(
            f"--measures: got 'mahalanobis' for {', '.join(problems)}, whose posteriors are "
            "not Gaussian (a Gamma on the precision); allowed: another measure, or problems "
            "wyb/1-6 and wyb/16-21"
        )


def _sizes(text: str) -> list[int]:
    from experiments.console import split_items

    allowed = "integers 2 to 100000"  # a spread needs 2 draws
    sizes = split_items(text, "--sizes", int, allowed)
    if any(not 2 <= n <= 100_000 for n in sizes):
        raise InputError(f"--sizes: got {text!r}; allowed: a comma-separated list of {allowed}")
    return sizes


def _parser():
    from experiments.console import script_parser

    parser = script_parser("ppl_power", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="conjugate/wyb ids")
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help="the PPL and its faults")
    parser.add_argument("--measures", default=",".join(MEASURES), help="what scores the draws")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="draws scored, n")
    parser.add_argument("--trials", type=int, default=TRIALS, help="trials a cell (1 to 10000)")
    parser.add_argument(
        "--c2st-trials", type=int, default=C2ST_TRIALS, help="C2ST's trials (0: none)"
    )
    parser.add_argument("--results", default="ppl-power.db", help="results store")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--no-shipped", action="store_true", help="leave out our shipped runs")
    parser.add_argument("--ship", default=None, metavar="CSV.GZ", help="merge finished cells into")
    parser.add_argument("--report", action="store_true", help="run nothing: the table")
    return parser


def _chosen(args, long, problems, samplers, measures, sizes):
    """The stored trials of the cells asked for (by default every stored cell); an
    InputError when none matches."""
    from experiments.reproduction import narrowed

    masks = {
        "--samplers": long["sampler"].isin(samplers),
        "--measures": long["measure"].isin([*measures, "ess"]),
    }
    if args.problems != ",".join(PROBLEMS):
        masks["--problems"] = long["problem"].isin(problems)
    if args.sizes != ",".join(map(str, SIZES)):
        masks["--sizes"] = long["n"].isin(sizes)
    return narrowed(long, masks, "trial")


def _run(args) -> tuple[Any, int]:
    """Runs (or, with --report, reads) the cells asked for: their trials and the number
    of cells that failed."""
    from experiments.console import check_range, split_choices
    from experiments.reproduction import run_unless_report
    from leaderboard.outputs import check_output_path

    problems = split_choices(args.problems.replace("conjugate/", ""), "--problems", ALL_PROBLEMS)
    samplers = split_choices(args.samplers, "--samplers", SAMPLERS)
    measures = split_choices(args.measures, "--measures", MEASURES)
    sizes = _sizes(args.sizes)
    check_applies(measures, problems)
    check_range("--trials", args.trials, 1, 10_000)
    check_range("--c2st-trials", args.c2st_trials, 0, 10_000)
    if args.ship:
        check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
    if args.out:
        check_output_path("--out", Path(args.out), [args.results], suffixes=(".md", ".txt"))

    def run_cells() -> int:
        cells = plan(problems, samplers, sizes, measures, args.trials, args.c2st_trials)
        return run(cells, args.results)

    failed = run_unless_report("ppl_power", args, run_cells, ship, note=False)
    long = long_frame(args.results, shipped=not args.no_shipped)
    return _chosen(args, long, problems, samplers, measures, sizes), failed


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging
    from leaderboard.outputs import write_atomically
    from testbed import threefry_cpu

    args = _parser().parse_args(argv)
    setup_logging()
    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    try:
        long, failed = _run(args)
    except InputError as e:
        return bad_input("ppl_power", e)
    text = report(long)
    if args.out:
        write_atomically("--out", Path(args.out), lambda tmp: tmp.write_text(text + "\n"))
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("ppl_power", main, ends_process=True))
