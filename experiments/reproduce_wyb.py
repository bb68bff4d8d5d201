"""Reproduce "What's your bench" (Pagni 2024): PPLs' NUTS on its 21 conjugate problems,
scored by its two measures and by ours.

Cells: problem (1..21) x agent (pymc, nutpie, pyro, stan, numpyro, blackjax and `exact`, a
perfect PPL) x prior x seed. `matched`: the problem as it is (the PPL's model has the
reference's prior: an error measured is an inference error); `paper`: the benchmark's own
PPL model (N(0, 1) / N(0, I) priors; on P7-15 a Student-t with half-normal priors on nu
and sigma: generative.conjugate.paper_models), scored against the same exact posterior.
Every cell gets

- the benchmark's measures as it computes them (testbed.metrics.wyb): its "KL" of the
  PPL's plug-in predictive (the posterior mean with the known scale; on P7-15 a t with
  the posterior means of nu and sigma, or with the matched model N(3, E[lam]^-1/2)) and
  adKS with its p-value, 100 draws each from the problem's random_state;
- ours: the problem's exact scores (PIT/KS, Mahalanobis, ddKS and C2ST p-values, the
  Gaussian KL of the draws' moments) and the KL of the joint posterior predictive of
  tau = 10 future observations (Monte Carlo over futures from the exact predictive; on
  paper P7-15 cells, whose draws are (nu, sigma), the posterior tests do not apply: NaN);
- the PPL's compile and sampling seconds, and whether it was the first run of its model
  shape in this process (compiling) or a later one.

Each cell is one row of a results store, committed as it finishes; a failing PPL is a
stored failure with its reason; a second run runs only what is missing. `--report` runs
nothing and writes `tables.md` and `wyb.png` from the store and our shipped runs, beside
the published values (leaderboard/data/wyb_published.csv).

Run:
    python -m experiments.reproduce_wyb --seeds 3 --results wyb.db
    python -m experiments.reproduce_wyb --report --results wyb.db
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.console import split_choices
from experiments.wyb_report import OUTPUTS, SHIPPED, figure, load_frame, markdown, ship
from testbed.errors import InputError

log = logging.getLogger("testbed.wyb")

PROBLEMS = tuple(range(1, 22))
AGENTS = ("pymc", "nutpie", "pyro", "stan", "numpyro", "blackjax", "exact")
PRIORS = ("matched", "paper")
NUM_WARMUP, NUM_SAMPLES = 200, 1000  # the benchmark's sizes
STUDENT_T = range(7, 16)  # the benchmark's model of P7-15: a Student-t (no exact posterior)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One stored row: an agent on a problem under a prior, one seed."""

    prior: str
    problem: int
    agent: str
    seed: int
    num_warmup: int = NUM_WARMUP
    num_samples: int = NUM_SAMPLES

    @property
    def key(self) -> str:
        """Its row's key; sizes other than the benchmark's are part of it."""
        sizes = (self.num_warmup, self.num_samples)
        tail = "" if sizes == (NUM_WARMUP, NUM_SAMPLES) else f"/w{sizes[0]}s{sizes[1]}"
        return f"wyb/{self.prior}/{self.problem}/{self.agent}/{self.seed}{tail}"

    @property
    def problem_id(self) -> str:
        return f"conjugate/wyb/{self.problem}"


def plan(
    priors: Sequence[str],
    problems: Sequence[int],
    agents: Sequence[str],
    seeds: Sequence[int],
    num_warmup: int = NUM_WARMUP,
    num_samples: int = NUM_SAMPLES,
) -> list[Cell]:
    """Seed by seed (a partial store covers every problem evenly), then prior, problem."""
    return [
        Cell(prior, k, agent, seed, num_warmup, num_samples)
        for seed in seeds
        for prior in priors
        for k in problems
        for agent in agents
        if not (agent == "exact" and prior == "paper" and k in STUDENT_T)  # no exact posterior
    ]


# -- the agent's predictive -------------------------------------------------------------


class Reseeded:
    """A posterior whose draws depend on the cell's seed (the exact agent's: the problem
    draws its scoring sample with its own seed, the same for every cell seed)."""

    def __init__(self, posterior, offset: int):
        self.posterior, self.offset = posterior, offset

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        return self.posterior.sample(x_o, num_samples, seed + self.offset)

    def log_prob(self, theta, x_o) -> np.ndarray:
        return self.posterior.log_prob(theta, x_o)


class PaperExact:
    """The exact posterior of the paper's (conjugate) PPL model on the problem's data: the
    ideal PPL of the benchmark."""

    def __init__(self, family, problem, seed: int):
        self.post, self.seed = family.posterior(problem.x, problem.y), seed

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        return self.post.sample(num_samples, np.random.default_rng((seed, self.seed)))

    def log_prob(self, theta, x_o) -> np.ndarray:
        return self.post.log_prob(np.atleast_2d(theta))


def paper_family(problem: int):
    """The paper's PPL model of problem k, or a one-line reason why it is unavailable."""
    try:
        from generative.conjugate.paper_models import paper_ppl_model
    except ImportError as e:
        raise InputError(
            f"prior paper: generative.conjugate.paper_models is not available ({e}); "
            "allowed: the matched prior until it is"
        ) from None
    return paper_ppl_model(f"wyb/{problem}")


def predictive_of(cell: Cell, problem) -> tuple[Any, Any]:
    """(the agent's predictive, the model family it sampled) for the cell."""
    import agents
    from generative.conjugate.model import model_spec
    from testbed.evaluate import train

    family = problem.family if cell.prior == "matched" else paper_family(cell.problem)
    if cell.agent == "exact":
        if cell.prior == "matched":
            exact = agents.load("exact")
            return Reseeded(train(exact, problem), 7919 * (cell.seed - 1)), family
        if cell.problem in STUDENT_T:
            raise InputError(
                "agent exact: the paper's Student-t model of P7-15 has no exact posterior "
                "(not conjugate); allowed: a PPL agent"
            )
        return PaperExact(family, problem, cell.seed), family
    sizes = {"num_warmup": cell.num_warmup, "num_samples": cell.num_samples}
    agent = agents.load(cell.agent, seed=cell.seed, **sizes)
    if cell.prior == "matched":
        return train(agent, problem), family
    knowledge = dataclasses.replace(problem.prior_knowledge, model=model_spec(family))
    return agent(problem.train_data, knowledge), family


def draws_of(predictive, problem, seed: int) -> np.ndarray:
    """The draws the plug-in is made of: a PPL's pooled draws, or 2,000 exact ones."""
    draws = getattr(predictive, "draws", None)
    if draws is None:
        draws = predictive.sample(problem.x_o, 2000, seed)
    return np.asarray(draws, np.float64)


# -- the measures -----------------------------------------------------------------------


def reference_predictive(problem):
    """The conjugate predictive the benchmark scores against, as it computes it (for the
    normal-known-variance case the prior variance where the likelihood's belongs: equal,
    1, here), with its loc and scale for the support limits."""
    from scipy import stats

    fam, post = problem.family, problem.posterior
    if fam.name == "normal_known_var":
        loc = float(post.mean[0])
        scale = float(np.sqrt(post.cov[0, 0] + np.asarray(fam.prior_cov)[0, 0]))
        return stats.norm(loc, scale), loc, scale
    if fam.name == "normal_known_mean":
        a, b = problem.updated.shape, problem.updated.rate
        scale = float(np.sqrt(b / a))
        return stats.t(2 * a, fam.mean, scale), fam.mean, scale
    cov = np.asarray(post.cov) + np.asarray(fam.noise_cov)
    return stats.multivariate_normal(post.mean, cov), np.asarray(post.mean), cov


def plug_in(draws: np.ndarray, problem, family):
    """The benchmark's plug-in predictive of a PPL: N(posterior mean, known scale); the
    paper's Student-t model: t(E[nu], loc, E[sigma]); our precision model: N(m, E[lam]^-1/2)."""
    from scipy import stats

    mean = draws.mean(0)
    fam = problem.family
    if family.name == "student_t_known_loc":
        return stats.t(mean[0], family.loc, mean[1]), {
            "plugin_nu": mean[0],
            "plugin_sigma": mean[1],
        }
    if family.name == "normal_known_mean":
        return stats.norm(fam.mean, 1 / np.sqrt(mean[0])), {"plugin_lam": mean[0]}
    if fam.name == "normal_known_var":
        return stats.norm(mean[0], np.sqrt(fam.noise_var)), {"plugin_mean": mean[0]}
    shift = float(np.max(np.abs(mean - problem.posterior.mean)))
    return stats.multivariate_normal(mean, fam.noise_cov), {"plugin_max_shift": shift}


def student_t_joint_kl(problem, family, draws: np.ndarray) -> dict[str, float]:
    """KL of the exact joint predictive of tau future observations from the mixture of the
    draws' Student-t likelihoods: E_y[log p(y) - log q(y)] over the futures the problem's
    own joint KL uses (its generator, seed and sizes), with its standard error."""
    from testbed.joint_kl import joint_kl_summary, mixture_log_likelihood

    fam, num, tau = problem.family, problem.num_test_batches, problem.tau
    rng = np.random.default_rng((problem.seed, 3))
    theta = problem.posterior.sample(num, rng)
    x_f = fam.sample_inputs(num * tau, rng).reshape(num, tau, -1)
    y_f = fam.simulate_batched(theta, x_f, rng)
    log_p = problem.updated.log_evidence(x_f, y_f)
    chunks = [
        mixture_log_likelihood(
            family.log_likelihood(draws[:, None, :], x_f[i : i + 50][None], y_f[i : i + 50][None])
        )
        for i in range(0, num, 50)
    ]
    summary = joint_kl_summary(log_p, np.concatenate(chunks))
    return {"joint_kl": summary["mean"], "joint_kl_stderr": summary["stderr"]}


OURS = (
    "tests_num_draws",  # the exact tests read the chains thinned to their ESS
    "tests_thinning",
    "pit_ks_pvalue",
    "mahalanobis_pvalue",
    "ddks_pvalue",
    "c2st",
    "c2st_pvalue",
    "kl_gaussian_moments",
    "kl_gaussian",
    "mean_error_sd",
    "log_std_ratio",
    "joint_kl",
    "joint_kl_stderr",
    "joint_kl_gaussian",
)
DIAGNOSTICS = (
    "compile_seconds",
    "sampling_seconds",
    "r_hat_max",
    "ess_bulk_min",
    "ess_tail_min",
    "num_divergences",
)


def measures(cell: Cell, problem, predictive, family) -> dict[str, float]:
    """The benchmark's measures and ours of the cell's predictive."""
    from testbed.metrics.wyb import wyb_measures

    draws = draws_of(predictive, problem, cell.seed)
    q, loc, scale = reference_predictive(problem)
    p, params = plug_in(draws, problem, family)
    out = {**params, **wyb_measures(p, q, loc, scale, problem.seed)}
    if family.name == "student_t_known_loc":
        out.update(student_t_joint_kl(problem, family, draws))
    else:
        quality = problem.evaluate(predictive)
        out.update({k: float(quality[k]) for k in OURS if k in quality})
    diag = getattr(predictive, "diagnostics", None) or {}
    out.update({k: float(diag[k]) for k in DIAGNOSTICS if k in diag})
    return out


# -- running ---------------------------------------------------------------------------


def run_cell(cell: Cell, shapes: set) -> dict[str, float]:
    """The cell's measures, and the PPL's training and evaluation seconds."""
    import generative

    problem = generative.load(cell.problem_id)
    shape = (cell.agent, cell.prior, problem.family.name, problem.num_train, problem.family.dim)
    first = shape not in shapes
    shapes.add(shape)
    t0 = time.perf_counter()
    predictive, family = predictive_of(cell, problem)
    train_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    metrics = measures(cell, problem, predictive, family)
    metrics.update(
        train_seconds=train_seconds,
        evaluation_seconds=time.perf_counter() - t1,
        first_in_process=float(first),
    )
    return metrics


def run(cells: Sequence[Cell], results: str, rerun_failed: bool = False) -> int:
    """Runs the cells not yet stored (ok, or failed unless `rerun_failed`; a failing PPL is
    a failure with its reason, never the end of the run), committing each row as it
    finishes (`experiments.cells`); returns the number that failed."""
    from experiments.cells import CellJob, run_cells

    shapes: set = set()
    jobs = [
        CellJob(
            c,
            functools.partial(run_cell, c, shapes),
            agent=c.agent,
            config_key=c.prior,
            problem_id=c.problem_id,
            seed=c.seed,
        )
        for c in cells
    ]
    return run_cells(jobs, results, log, rerun_failed=rerun_failed)


# -- command line ----------------------------------------------------------------------


def _problems(text: str) -> list[int]:
    if text == "all":
        return list(PROBLEMS)
    return split_choices(text, "--problems", PROBLEMS, int)


def parse(argv: Sequence[str] | None):
    from experiments.console import script_parser

    parser = script_parser("reproduce_wyb", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--agents", default=",".join(AGENTS), help=f"of {', '.join(AGENTS)} (and the tables')"
    )
    parser.add_argument("--problems", default="all", help="of 1..21, comma-separated (and tables')")
    parser.add_argument("--priors", default="matched,paper", help="of matched, paper (and tables')")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..SEEDS")
    parser.add_argument("--num-warmup", type=int, default=NUM_WARMUP, help="PPL warm-up steps")
    parser.add_argument("--num-samples", type=int, default=NUM_SAMPLES, help="draws a chain")
    parser.add_argument("--results", default="wyb-reproduction.db", help="results store")
    parser.add_argument("--out", default="wyb-reproduction", help="folder for tables, figure")
    parser.add_argument("--no-shipped", action="store_true", help="leave out our shipped runs")
    parser.add_argument(
        "--ship", default=None, metavar="CSV.GZ", help=f"merge finished rows in ({SHIPPED.name})"
    )
    parser.add_argument("--rerun-failed", action="store_true", help="run stored failures again")
    parser.add_argument("--report", action="store_true", help="run nothing: tables and figure")
    return parser.parse_args(argv)


def check(args) -> tuple[list[Cell], Path]:
    """The cells to run and the output folder, or an InputError naming the field."""
    from experiments.console import check_range
    from leaderboard.outputs import check_output_folder, check_output_path

    agents = split_choices(args.agents, "--agents", (*AGENTS, "nuts"))
    priors = split_choices(args.priors, "--priors", PRIORS)
    problems = _problems(args.problems)
    check_range("--seeds", args.seeds, 1, 100)
    check_range("--num-warmup", args.num_warmup, 1, 100_000)
    check_range("--num-samples", args.num_samples, 4, 100_000)
    if args.ship:
        check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
    # a folder, made if new (only it may be missing)
    out = check_output_folder("--out", args.out, OUTPUTS, [args.results])
    seeds = range(1, args.seeds + 1)
    return plan(priors, problems, agents, seeds, args.num_warmup, args.num_samples), out


def _chosen(args, frame):
    """The cells of the agents, problems and priors given (left at their defaults: every
    stored and shipped cell; --seeds never narrows the tables); an InputError when none
    matches."""
    from experiments.reproduction import narrowed

    defaults, masks = parse([]), {}
    if args.agents != defaults.agents:
        masks["--agents"] = frame["agent"].isin(
            split_choices(args.agents, "--agents", (*AGENTS, "nuts"))
        )
    if args.problems != defaults.problems:
        masks["--problems"] = frame["problem"].isin(_problems(args.problems))
    if args.priors != defaults.priors:
        masks["--priors"] = frame["prior"].isin(split_choices(args.priors, "--priors", PRIORS))
    return narrowed(frame, masks)


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging, shown
    from experiments.reproduction import run_unless_report

    args = parse(argv)
    setup_logging()
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    try:
        cells, out = check(args)
        failed = run_unless_report(
            "reproduce_wyb", args, lambda: run(cells, args.results, args.rerun_failed), ship
        )
        frame = _chosen(args, load_frame(args.results, shipped=not args.no_shipped))
    except InputError as e:
        return bad_input("reproduce_wyb", e)
    return shown(write_report(frame, out), out, failed, "tables and figure")


def write_report(frame, out: Path) -> str:
    """Writes the tables (markdown) and the figure into `out`; returns the tables."""
    from leaderboard.outputs import write_atomically

    tables, png = (out / name for name in OUTPUTS)
    text = markdown(frame)
    write_atomically("--out", tables, lambda tmp: tmp.write_text(text + "\n"))
    write_atomically("--out", png, lambda tmp: figure(frame, tmp))
    return text


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_wyb", main, ends_process=True))
