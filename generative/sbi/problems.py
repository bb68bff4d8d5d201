"""`sbi/<task>/<num_simulations>/<observation>`: simulator tasks as posterior problems.

The agent gets a `SimulationAccess` as its training data (the prior, a simulator that
refuses to run past the budget, the observation x_o) and a `SimulatorKnowledge` (the
task's dimensions, the prior's support, the budget); both are `testbed.simulation` types.
The problem scores the agent's posterior at x_o against the task's reference posterior
as the SBI benchmark does: C2ST (headline, sbibm semantics), MMD, NLTP = -log q(theta* |
x_o) when the posterior has a density, the median distance of posterior-predictive
simulations to x_o, and sampling time. With `lc2st=True` an amortized posterior is also
scored without a reference by L-C2ST on held-out simulations. With `x_o=[...]` (shape
[dim_x] or [1, dim_x], finite) the problem scores the posterior at that observation
instead of observation k: its reference posterior is the task's at x_o, and NLTP is left
out (no theta* is behind a custom x_o).

`sbi/<task>/<num_simulations>/<k>/iid<n>` (n in 1, 10, 100) observes n i.i.d. draws at the
benchmark's true parameters k (`Task.iid_observation`: observation k, then simulations)
and scores against the posterior given all n (`Task.reference_posterior_iid`); the agent
gets x_o [n, dim_x] and `num_iid = n` in its knowledge. Tasks without a trustworthy
reference for sets refuse such ids in one line, naming those that have one. A set has no
median distance (one x_o) and no L-C2ST (amortized over single observations).
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import numpy as np

from generative.registry import parse_int, register_family, register_sweep
from generative.sbi.task import OBSERVATION_SOURCES, Task
from generative.sbi.tasks import get_task, iid_task_names, task_names
from testbed import ranking
from testbed.errors import InputError, bad_value
from testbed.evaluation import MISSING, Evidence, EvidenceScoring
from testbed.posterior_adapter import SampleRequest, as_posterior
from testbed.simulation import SimulationAccess, Simulator, SimulatorKnowledge
from testbed.sizes import check_memory

BUDGETS = (1_000, 10_000, 100_000)
OBSERVATIONS = tuple(range(1, 11))
IID_SIZES = (1, 10, 100)  # i.i.d. draws per observation set (`.../<k>/iid<n>`)
NUM_SAMPLES = 10_000  # reference and posterior samples per evaluation (the benchmark's)


def simulator_knowledge(task: Any, budget: int, num_iid: int = 1) -> SimulatorKnowledge:
    """What an SBI agent is told about a simulator task (`Task` or `ConjugateTask`)."""
    return SimulatorKnowledge(
        dim_theta=task.dim_parameters,
        dim_x=task.dim_data,
        support=task.support,
        budget=int(budget),
        task=task.name,
        parameter_names=tuple(task.labels),
        num_iid=int(num_iid),
    )


class BudgetedSimulation:
    """The simulator side of a posterior problem (`sbi/...`, `conjugate_sbi/...`): a fresh
    budgeted access per training run and the knowledge SBI agents read."""

    simulator: Simulator
    num_simulations: int
    x_o: np.ndarray
    num_iid: int = 1  # x_o holds this many i.i.d. draws at one theta

    @property
    def train_data(self) -> SimulationAccess:
        """A fresh budgeted simulation access (one per training run)."""
        return SimulationAccess(self.simulator, self.num_simulations, self.x_o, self.num_iid)

    @property
    def prior_knowledge(self) -> SimulatorKnowledge:
        return simulator_knowledge(self.simulator, self.num_simulations, self.num_iid)


class ReferencePosterior:
    """The task's reference posterior at x_o as a PosteriorEstimate (the oracle agent);
    at an i.i.d. set x_o [n, dim_x], n > 1, the posterior given all of it."""

    def __init__(self, task: Task):
        self._task = task

    def sample(self, x_o, num_samples: int, seed: int) -> np.ndarray:
        if np.ndim(x_o) == 2 and len(x_o) > 1:
            return self._task.reference_posterior_iid(x_o, num_samples, seed)
        return self._task.reference_posterior(x_o, num_samples, seed)


@dataclasses.dataclass
class PosteriorProblem(BudgetedSimulation, EvidenceScoring):
    """One task, budget and observation; scores posteriors at x_o (see the module doc)."""

    offers = frozenset(
        {
            "posterior",
            "amortized_posterior",
            "posterior_samples",
            "posterior_log_prob",
            "reference_samples",
            "true_parameters",
            "observation",
            "prior_log_prob",
            "posterior_predictive",
            "prior_simulations",
        }
    )

    task: str
    num_simulations: int
    num_observation: int
    num_samples: int = NUM_SAMPLES
    seed: int = 0
    c2st_z_score: bool = True
    median_distance: bool | None = None  # None: scored at one observation, not at a set
    lc2st: bool = False
    lc2st_num_calibration: int = 10_000
    lc2st_num_null: int = 100
    observation_source: str = "sbibm"  # the benchmark's observation k, or "seeded" (ours)
    x_o: Any = None  # a custom observation [dim_x] or [1, dim_x]; None: observation k
    num_iid: int = 1  # i.i.d. draws at theta*_k observed (`Task.iid_observation`)

    def __post_init__(self):
        self._task = self.simulator = get_task(self.task)
        self._task.check_index(self.num_observation)
        if self.observation_source not in OBSERVATION_SOURCES:
            raise bad_value("observation_source", self.observation_source, OBSERVATION_SOURCES)
        for name in (
            "num_simulations",
            "num_samples",
            "lc2st_num_calibration",
            "lc2st_num_null",
            "num_iid",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad_value(name, value, "an integer >= 1")
        sizes = ("num_samples", "lc2st_num_calibration", "lc2st_num_null")
        check_memory(self.scoring_bytes, {n: getattr(self, n) for n in sizes},
                     "the scoring", type(self))  # fmt: skip
        k, source, n = self.num_observation, self.observation_source, self.num_iid
        if n > 1:
            self._task.check_iid(iid_task_names())
            for name in ("lc2st", "median_distance"):  # defined at one observation only
                if getattr(self, name):
                    raise bad_value(name, True, "false for an i.i.d. set (it scores single "
                                    "observations)")  # fmt: skip
        self.custom_x_o = self.x_o is not None
        if self.custom_x_o:  # any observation: the reference posterior is the task's at it
            self.x_o = self._custom_observation(self.x_o)
            self.theta_true = None
            self.offers = type(self).offers - {"true_parameters"}
        else:
            self.x_o = (
                self._task.iid_observation(k, n, source)
                if n > 1
                else self._task.observation(k, source)
            )
            self.theta_true = self._task.true_parameters(k, source)
        self._reference: np.ndarray | None = None

    def scoring_bytes(
        self, num_samples: int, lc2st_num_calibration: int, lc2st_num_null: int
    ) -> int:
        """Bytes the scoring holds at once (float64), its largest arrays: the agent's and
        the reference's draws, C2ST's inputs with two hidden layers of 10 x dim_theta units
        (sbibm's classifier) for both; with `lc2st`, the null trials' classifier outputs
        on the calibration set."""
        dim_theta, dim_x = self._task.dim_parameters, self._task.dim_data
        total = 8 * num_samples * dim_theta * 4 + 8 * 2 * num_samples * 20 * dim_theta
        if self.lc2st:
            total += 8 * lc2st_num_null * lc2st_num_calibration * (dim_theta + dim_x + 2)
        return total

    def _custom_observation(self, x_o) -> np.ndarray:
        """A custom x_o as [num_iid, dim_x] (checked)."""
        if self.num_iid == 1:
            return self._task.check_observation(x_o)[None, :]
        xs = self._task.check_observations(x_o)
        if len(xs) != self.num_iid:
            raise bad_value(
                "x_o", f"{len(xs)} observations", f"a set of num_iid = {self.num_iid} rows"
            )
        return xs

    @property
    def training_key(self) -> str:
        """Problems with one key give the same training data (prior simulations under one
        budget): only their observation differs."""
        keys = ("task", "num_simulations", "observation_source", "num_iid")
        return sbi_training_key({k: getattr(self, k) for k in keys})

    def oracle_predictive(self) -> ReferencePosterior:
        return ReferencePosterior(self._task)

    def reference_samples(self) -> np.ndarray:
        """`num_samples` reference posterior draws at x_o (cached)."""
        if self._reference is None:
            self._reference = self.oracle_predictive().sample(
                self.x_o, self.num_samples, seed=self.seed
            )
        return self._reference

    @property
    def sample_request(self) -> SampleRequest:
        """The draws `posterior_samples` takes at x_o (so an amortized run can take those of
        all its observations in one batched call: `testbed.evaluate.presample`)."""
        return SampleRequest(self.x_o, self.num_samples, self.seed + 1)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The benchmark's scores, plus L-C2ST when the problem was built with lc2st=True."""
        names = ("c2st", "mmd", "outside_support_fraction")
        names += () if self.custom_x_o else ("nltp",)  # no theta* behind a custom x_o
        # the distance of predictive simulations to one x_o: not defined for a set
        on = self.median_distance is not False and self.num_iid == 1
        names += ("median_distance",) if on else ()
        return names + (("lc2st",) if self.lc2st else ())

    def evidence(self, predictive: Any) -> Evidence:
        """What the scores read: the agent's posterior and its draws at x_o (timed), the
        reference draws, theta*, the prior, posterior-predictive and held-out simulations."""
        task, seed = self._task, self.seed

        def posterior(_):
            return as_posterior(predictive, dim_theta=task.dim_parameters)

        def samples(ev):
            draws, seconds = ev["posterior"].sample_timed(*self.sample_request)
            ev.diagnostics["sampling_seconds"] = seconds
            return draws

        def log_prob(ev):
            post = ev["posterior"]
            return (lambda theta: post.log_prob(theta, self.x_o)) if post.has_log_prob else MISSING

        def predictive_simulations(ev):
            draws = ev["posterior_samples"]
            inside = np.isfinite(task.log_prior(draws))
            if not inside.any():
                return MISSING
            x_pred = task.simulate(draws[inside], seed=seed + 2)
            x_pred = x_pred[np.isfinite(x_pred).all(axis=1)]  # failed ODE solves
            return x_pred if len(x_pred) else MISSING

        def prior_simulations(_):
            theta = task.sample_prior(self.lc2st_num_calibration, seed=seed + 3)
            xs = task.simulate(theta, seed=seed + 4)
            ok = np.isfinite(xs).all(axis=1)
            return theta[ok], xs[ok]

        providers = {
            "posterior": posterior,
            "amortized_posterior": posterior,
            "posterior_samples": samples,
            "posterior_log_prob": log_prob,
            "reference_samples": lambda _: self.reference_samples(),
            "true_parameters": lambda _: self.theta_true,
            "observation": lambda _: self.x_o,
            "prior_log_prob": lambda _: task.log_prior,
            "posterior_predictive": predictive_simulations,
            "prior_simulations": prior_simulations,
        }
        if self.custom_x_o:
            del providers["true_parameters"]
        return Evidence(
            providers,
            options={
                "c2st": {"z_score_data": self.c2st_z_score},
                "lc2st": {
                    "seed": seed + 5,
                    "num_samples": self.num_samples,
                    "num_trials_null": self.lc2st_num_null,
                },
            },
        )


# ----- ids, settings, sweeps -----


def problem_seed(task: str, budget: int, observation: int, num_iid: int = 1) -> int:
    """A stable seed per (task, budget, observation[, i.i.d. set size]) for reference and
    evaluation draws."""
    text = f"{task}/{budget}/{observation}" + (f"/iid{num_iid}" if num_iid > 1 else "")
    return zlib.crc32(text.encode()) % (2**31 - 1)


def sbi_training_key(settings: dict[str, Any]) -> str:
    """One key per task, budget, observation source and i.i.d. set size: the observations
    share training (a set's size shapes the training of set-embedding agents)."""
    source = settings.get("observation_source", "sbibm")
    key = f"sbi/{settings['task']}/{settings['num_simulations']}/{source}"
    num_iid = int(settings.get("num_iid", 1))
    return key if num_iid == 1 else f"{key}/iid{num_iid}"


def _id_error(rest: str) -> InputError:
    return InputError(
        f"problem id: got 'sbi/{rest}'; allowed: 'sbi/<task>/<num_simulations>/<observation>'"
        f" (or '.../<observation>/seeded' for our seeded observations, '.../iid<n>' for n "
        f"i.i.d. draws, n one of {', '.join(map(str, IID_SIZES))}) with task one of: "
        f"{', '.join(task_names())}; num_simulations one of: "
        f"{', '.join(map(str, BUDGETS))}; observation in 1..10"
    )


def sbi_settings(rest: str) -> dict[str, Any]:
    """Settings of `sbi/<task>/<num_simulations>/<observation>` (the benchmark's published
    observation), `.../<observation>/seeded` (ours, from fixed seeds), and either with
    `/iid<n>` (n i.i.d. draws at the observation's true parameters)."""
    parts = rest.split("/")
    tail = parts[3:]
    seeded = bool(tail) and tail[0] == "seeded"
    tail = tail[1:] if seeded else tail
    iid = bool(tail) and tail[0].startswith("iid")
    if len(parts) < 3 or len(tail) != int(iid):
        raise _id_error(rest)
    task, budget_text, obs_text = parts[:3]
    if task not in task_names():
        raise bad_value("task", task, task_names())
    budget = parse_int(budget_text, "num_simulations", BUDGETS)
    obs = parse_int(obs_text, "observation", OBSERVATIONS)
    settings = {
        "task": task,
        "num_simulations": budget,
        "num_observation": obs,
        "num_samples": NUM_SAMPLES,
        "seed": problem_seed(task, budget, obs),
        "observation_source": "seeded" if seeded else "sbibm",
    }
    if iid:
        num_iid = parse_int(tail[0][3:], "iid set size (iid<n>)", IID_SIZES)
        get_task(task).check_iid(iid_task_names())
        settings["num_iid"] = num_iid
        if num_iid > 1:  # iid1 is observation k itself: the same draws as without /iid1
            settings["seed"] = problem_seed(task, budget, obs, num_iid)
    return settings


# The SBI benchmark paper's runs (Lueckmann et al. 2021), shown beside ours; newer
# methods it did not run are shown beside a later paper's published mean at the same cell.
SBIBM = ranking.Published(
    name="sbibm",
    citation="Lueckmann 2021",
    agents=(
        ("npe", "NPE"), ("snpe", "SNPE"), ("nle", "NLE"), ("snle", "SNLE"), ("nre", "NRE"),
        ("snre", "SNRE"), ("rej_abc", "REJ-ABC"), ("smc_abc", "SMC-ABC"),
    ),
    columns=(("num_simulations", "budget"), ("num_observation", "observation")),
    newer="sbi_new_methods",
    column_help=tuple({
        "paper_c2st": "the published C2ST for this agent: the SBI benchmark paper's (mean over "
        "the same observations where this row is a mean) or, for a newer method the benchmark "
        "did not run, a paper's at the same task and budget (its mean over its own runs; the "
        "paper column says whose, the docs where none exists)",
        "paper_source": "whose published C2ST: Lueckmann 2021 = Lueckmann et al., "
        "'Benchmarking Simulation-Based Inference', AISTATS 2021 (the SBI benchmark); Miller "
        "2022 = Miller, Weniger, Forre, 'Contrastive Neural Ratio Estimation', NeurIPS 2022 "
        "(data: leaderboard.published('sbi_new_methods'))",
        "paper_min": "the paper's lowest C2ST over those observations",
        "paper_max": "the paper's highest C2ST over those observations",
    }.items()),
)  # fmt: skip

# Ranked as the SBI benchmark ranks: mean C2ST over the observations of a task and budget,
# beside the paper's runs; our seeded observations and i.i.d. sets are tasks of their own.
SBI_C2ST = ranking.c2st(
    ("task", "num_simulations"),
    replicate="num_observation",
    apart=(("observation_source", "sbibm", "{}"), ("num_iid", 1, "iid{}")),
    published=SBIBM,
    shipped="sbibm_ours",
    note=(
        "C2ST: the accuracy of a classifier telling the agent's posterior samples from the "
        "reference posterior's (0.5 = indistinguishable); mean over the benchmark's "
        "observations of a task and budget, with the SBI benchmark paper's runs beside."
    ),
)


@register_family(
    "sbi",
    sbi_settings,
    "SBI benchmark tasks: posterior at x_o vs reference (C2ST)",
    id_form="sbi/<task>/<num_simulations>/<k>[/seeded][/iid<n>], k = 1..10, n = 1, 10, 100",
    options=(
        "num_samples",
        "c2st_z_score",
        "median_distance",
        "lc2st",
        "lc2st_num_calibration",
        "lc2st_num_null",
        "x_o",
    ),
    training_key=sbi_training_key,
    prediction="posterior",
    ranked_by=SBI_C2ST,
)
def build(settings: dict[str, Any]) -> PosteriorProblem:
    return PosteriorProblem(**settings)


def task_ids(task: str, budgets=BUDGETS, observations=OBSERVATIONS) -> list[str]:
    return [f"sbi/{task}/{b}/{k}" for b in budgets for k in observations]


def _register_task_sweep(task: str) -> None:
    register_sweep(f"sbi_{task}")(lambda: task_ids(task))


for _name in task_names():
    _register_task_sweep(_name)


@register_sweep("sbi_all")
def all_ids() -> list[str]:
    """Every task x budget x observation: the benchmark's 300 runs per algorithm."""
    return [i for t in task_names() for i in task_ids(t)]


def iid_ids(task: str, budgets=BUDGETS, observations=OBSERVATIONS, sizes=IID_SIZES) -> list[str]:
    return [f"sbi/{task}/{b}/{k}/iid{n}" for n in sizes for b in budgets for k in observations]


@register_sweep("sbi_iid")
def all_iid_ids() -> list[str]:
    """Every task with i.i.d. references x budget x observation x set size (1, 10, 100)."""
    return [i for t in iid_task_names() for i in iid_ids(t)]


@register_sweep("sbi_test")
def test_ids() -> list[str]:
    """A small smoke sweep: two cheap tasks at the lowest budget, two observations each."""
    return [i for t in ("two_moons", "gaussian_linear") for i in task_ids(t, (1_000,), (1, 2))]
