"""Does the testbed predict real data? Per agent, across its hyper-parameter configs, the
correlation of the testbed's KL with the joint NLL on real datasets (the Neural Testbed
paper's section 5: Figure 5(a) per agent and data regime, 5(b) pooled, 11 per dataset).

Every config of each agent's registered sweep (or of `--grid`) runs on both sides:

- **synthetic**: the problems on which `experiments.tune_references` runs every config
  (seed group 0 of `classification_2d`; for the agents it halves, `HALVED`, the first
  round's T = 0.1 problems), so the two tools share one store and no job runs twice; with
  `uniform` on the same problems, the normaliser; or, with `--synthetic matched`, the
  `classification` sweep's problems nearer the datasets' shapes (`matched`);
- **real**: the datasets (default the four offline ones) in two regimes, `full` (the whole
  training split) and `low` (`low_size`: the largest of the reference's variant-data sizes
  1, 10, 100, ... that is at most a tenth of the training split), at tau 1 and 10, with
  estimator seed 1 (`--seeds`: the data are fixed, a seed changes only the estimator's
  keys).

Jobs run through the leaderboard's sweep into `--results` (an interrupted run resumes).
`--report` runs nothing and writes the tables (`experiments.real_data_report`) of the
store's runs and of ours shipped (`real_data_ours`); `--plan` counts the jobs; `--ship`
merges the store's runs into ours. Run:
    python -m experiments.reproduce_real_data --agents mlp,ensemble --results real.db
"""

from __future__ import annotations

import itertools
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments import tune_references as tune
from testbed.errors import InputError

# tune_references' agents, cheapest real side first (COST): a stopped run has them complete
AGENTS = ("mlp", "epinet", "ensemble+", "ensemble", "bbb", "dropout", "hypermodel", "sgmcmc")
REGIMES = ("full", "low")
TAUS = (1, 10)
SEEDS = (1, 2, 3, 4, 5)  # the reference's real-data seeds (estimator keys only)
GROUP = 0  # tune_references' selection group
SHIPPED = "real_data_ours"  # our shipped runs (leaderboard.shipped_files.SOURCES)
SHIPPED_FILE = Path(__file__).resolve().parents[1] / "leaderboard/data/real_data_ours.csv.gz"
LOW_SHARE = 10  # the low regime trains on at most a tenth of the training split
SIDES = ("2d", "matched")  # the synthetic sides (`synthetic_ids`)
MATCHED_SWEEP, MATCHED_DIMS, MATCHED_MAX_TRAIN = "classification", (10, 100), 1000
GRID_FORM = "key=value1,value2,... (lists, e.g. hidden_sizes, separated by ';': 50,50;100)"
NO_ESTIMATE = "no estimate"  # the plan's hours of an agent with no time measured (`counts`)


def offline_datasets() -> tuple[str, ...]:
    from generative.real_data.datasets import SKLEARN_DATASETS

    return tuple(s.name for s in SKLEARN_DATASETS)


def low_size(dataset: str) -> int:
    """The low regime's training size: the largest of the variant-data sweep's sizes (1,
    10, 100, ..., `train_sizes`) at most a tenth of the training split (iris, wine and
    breast_cancer 10, digits 100; mnist 1,000)."""
    from generative.real_data.datasets import get_spec
    from generative.real_data.problems import train_sizes

    n = get_spec(dataset).num_train
    return max(s for s in train_sizes(n) if s * LOW_SHARE <= n)


def real_ids(
    datasets: Sequence[str],
    regimes: Sequence[str] = REGIMES,
    taus: Sequence[int] = TAUS,
    seeds: Sequence[int] = (1,),
) -> dict[str, list[str]]:
    """{regime: its problem ids}, in the reference's order (tau, dataset, seed)."""
    from generative.real_data.problems import problem_id

    return {
        regime: [problem_id(d, tau, seed, low_size(d) if regime == "low" else None)
                 for tau in taus for d in datasets for seed in seeds]
        for regime in regimes
    }  # fmt: skip


def selection() -> list[str]:
    """tune_references' selection group (never a held-out problem)."""
    import generative

    return tune.split(generative.sweep_ids(tune.SWEEP), GROUP)[0]


def matched() -> list[str]:
    """The `matched` synthetic side: the problems of the `classification` sweep nearer the
    datasets' shapes (4 to 64 features, 10 to 1,438 training examples): input dims 10 and
    100, training sizes up to 1,000, every temperature and tau, the first seed of each."""
    import generative

    first: dict[tuple, str] = {}
    for p in generative.sweep_ids(MATCHED_SWEEP):
        s = generative.problem_settings(p)
        if s["input_dim"] in MATCHED_DIMS and s["num_train"] <= MATCHED_MAX_TRAIN:
            first.setdefault((s["input_dim"], s["num_train"], s["temperature"], s["tau"]), p)
    return list(first.values())


def side_ids(side: str) -> list[str]:
    """The problems of a synthetic side: `2d`, those on which tune_references runs every
    config (`selection`); `matched`, `matched()`."""
    return selection() if side == "2d" else matched()


def synthetic_ids(agent: str, side: str = "2d") -> list[str]:
    """The synthetic problems of `agent` on `side` (`side_ids`); for the agents
    tune_references halves, their T = 0.1 problems alone (its first round)."""
    chosen = side_ids(side)
    return tune.first_round(chosen) if agent in tune.HALVED else chosen


def takes_list(tp: typing.Any) -> bool:
    """Whether a config field of type `tp` holds a list (a tuple, or a union with one)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(takes_list(a) for a in typing.get_args(tp))
    return tp is tuple or typing.get_origin(tp) is tuple


def grid_values(text: str, lists: bool) -> list[str]:
    """A `--grid` field's values as `--set` writes each (`testbed.config` parses them):
    separated by `;` when any is, else by commas, unless the field takes lists (`lists`):
    then the text is one list (`hidden_sizes=50,50` is [50, 50], never two [50])."""
    if ";" in text or lists:
        return [v.strip() for v in text.split(";")]
    return [v.strip() for v in text.split(",")]


def parse_grid(pairs: Sequence[str], fields: dict[str, dict]) -> dict[str, list[str]]:
    """`--grid key=v1,v2` options as {field: its values (`grid_values`)}, each field given once
    and one of every agent's (`fields`: {agent: {field: type}}); else an InputError."""
    from testbed.names import unused_override

    grid: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, text = (part.strip() for part in pair.partition("="))
        if not sep or not key or not text:
            raise InputError(f"--grid: got {pair!r}; allowed: {GRID_FORM}")
        if key in grid:
            raise InputError(f"--grid: got {key} twice; allowed: each field once, all its "
                             f"values in one --grid {key}=value1,value2,...")  # fmt: skip
        unknown = unused_override(fields, [key])
        if unknown:
            raise InputError(f"--grid: {unknown}")
        lacking = [a for a, f in fields.items() if key not in f]
        if lacking:
            having = [a for a in fields if a not in lacking]
            raise InputError(
                f"--grid: set {key}: not a field of {', '.join(lacking)} (of --agents "
                f"{','.join(fields)}, only {', '.join(having)} "
                f"{'has' if len(having) == 1 else 'have'} it); allowed: a field of "
                "every agent given"
            )
        lists = any(takes_list(f[key]) for f in fields.values())
        values = grid_values(text, lists)
        items = [i.strip() for v in values for i in v.split(",")] if lists else values
        if "" in items:  # `hidden_sizes=,50` would be [50], `l2_weight_decay=1,,2` two values
            raise InputError(f"--grid: got {pair!r}, which has an empty value; allowed: "
                             f"{GRID_FORM}")  # fmt: skip
        twice = next((v for n, v in enumerate(values) if v in values[:n]), None)
        if twice is not None:
            raise InputError(f"--grid: got {pair!r}, which gives {twice} twice; allowed: "
                             "each value once")  # fmt: skip
        grid[key] = values
    return grid


def grid_points(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """The cartesian product of `--grid key=v1,v2` options (none: [])."""
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*grid.values())]


def agent_configs(agent: str, grid: dict[str, list[str]]) -> list[dict]:
    """The configs of `agent`: its registered sweep, or the grid's points over its default
    config; each once."""
    from leaderboard.execution.jobs import _distinct
    from leaderboard.execution.jobs import agent_configs as configs

    if not grid:
        return configs(agent, {}, configs="sweep")
    return _distinct([configs(agent, p, configs="default")[0] for p in grid_points(grid)])


def jobs_of(agent: str, ids: Sequence[str], grid: dict[str, list[str]]) -> list:
    """The jobs of every config of `agent` on `ids` (as `leaderboard.execution.sweeping.plan`
    makes them, without its checks: the report needs no data)."""
    from leaderboard.execution.jobs import Job

    return [Job.make(agent, c, p) for c in agent_configs(agent, grid) for p in ids]


def planned(agent: str, ids: Sequence[str], grid: dict[str, list[str]]) -> list:
    """The jobs of `jobs_of`, checked by the leaderboard's plan (the agent fits the
    problems, the overrides are its fields, the datasets are at hand)."""
    from leaderboard.execution.sweeping import plan

    try:
        if not grid:
            return plan([agent], list(ids), configs="sweep")
        jobs = {j.key: j for point in grid_points(grid)
                for j in plan([agent], list(ids), overrides=point)}  # fmt: skip
    except InputError as e:  # the plan's words, under the option that chose them
        said = str(e)
        if not said.startswith(("agent ", "set ")):
            raise
        option = "--grid" if said.startswith("set ") or any(k in said for k in grid) else "--agents"
        if option == "--grid":  # a list's example, as --grid writes several
            said = said.replace("(e.g. 50,50)", "(e.g. 50,50; several separated by ';': 50,50;100)")
        raise InputError(f"{option}: {said}") from None
    return list(jobs.values())


def design(agents: Sequence[str], real: dict[str, list[str]], grid: dict[str, list[str]],
           side: str = "2d"):
    """The report's Design: each agent's configs, synthetic problems, the pooled ones (the
    first round's, which every agent ran) and the real ids per regime."""
    from experiments.real_data_report import Design
    from leaderboard.execution.jobs import config_json, config_key

    configs = {a: {config_key(a, c): config_json(c) for c in agent_configs(a, grid)}
               for a in agents}  # fmt: skip
    return Design(configs, {a: synthetic_ids(a, side) for a in agents},
                  tune.first_round(side_ids(side)), real, side)  # fmt: skip


def _run(jobs: Sequence, results: str, workers: int, shipped: bool = True) -> bool:
    """The jobs through the leaderboard's sweep; those the package ships are recorded,
    not run, unless `shipped` is False. True when some job is stored as failed."""
    from experiments.reproduction import take_shipped
    from leaderboard.execution.sweeping import make_executor, run

    if shipped:
        take_shipped(jobs, results)
    return bool(run(jobs, results, make_executor("local", workers=workers)).any_failed)


def run_all(agents: Sequence[str], real: dict[str, list[str]], grid, results: str,
            workers: int = 1, side: str = "2d", shipped: bool = True) -> bool:  # fmt: skip
    """Agent by agent: its configs on its synthetic problems (and `uniform` there), then on
    each regime's real problems; `shipped` False computes the jobs the package ships too.
    True when some job is stored as failed."""
    from leaderboard.execution.sweeping import plan

    every = [p for ids in real.values() for p in ids]
    checked = {a: (planned(a, synthetic_ids(a, side), grid), planned(a, every, grid))
               for a in agents}  # fmt: skip
    failed = False
    for agent in agents:  # every input checked above, before the first job runs
        synthetic, real_jobs = checked[agent]
        uniform = plan([tune.NORMALISER], synthetic_ids(agent, side))
        failed |= _run([*uniform, *synthetic, *real_jobs], results, workers, shipped)  # one pool
    return failed


def held_keys(results: str, shipped: bool = True) -> set[str]:
    """The jobs a run would not compute: those the store holds (ok or failed) and, unless
    `shipped` is False (`--no-shipped`), those the package ships runs of."""
    from experiments.console import stored_keys
    from leaderboard.execution.shipped_store import RUN_SOURCES
    from leaderboard.shipped_files import shipped as shipped_rows

    held = stored_keys(results) if Path(results).exists() else set()
    if shipped:
        held |= {k for name in RUN_SOURCES for k in shipped_rows(name)["key"]}
    return held


def counts(agents: Sequence[str], real: dict[str, list[str]], grid, results: str,
           side: str = "2d", shipped: bool = True) -> pd.DataFrame:
    """Per agent: its configs, its synthetic and real jobs, how many the store holds (ok or
    failed) or the package ships (`held_keys`), those left to run and the core-hours they
    should take on each side (`seconds_a_job`; nan where some are left and nothing was
    measured: `plan_table` says `no estimate`)."""
    from leaderboard.shipped_files import shipped as shipped_rows

    held = held_keys(results, shipped)
    measured = seconds_a_job(shipped_rows(SHIPPED))
    rows = []
    for agent in agents:
        sides = {"synthetic": planned(agent, synthetic_ids(agent, side), grid)}
        sides.update({regime: planned(agent, ids, grid) for regime, ids in real.items()})
        cost = dict(zip(("synthetic", *REGIMES), COST.get(agent, (float("nan"),) * 3)))
        cost |= measured.get(agent, {})
        todo = {side: sum(j.key not in held for j in jobs) for side, jobs in sides.items()}
        rows.append({
            "agent": agent, "configs": len(agent_configs(agent, grid)),
            **{f"{side}_jobs": len(jobs) for side, jobs in sides.items()},
            "stored": sum(len(j) for j in sides.values()) - sum(todo.values()),
            "to_run": sum(todo.values()),
            "synthetic_hours": round(_hours(todo["synthetic"], cost["synthetic"]), 2),
            "real_hours": round(sum(_hours(n, cost[s]) for s, n in todo.items() if s in REGIMES),
                                2),  # fmt: skip
        })  # fmt: skip
    return pd.DataFrame(rows)


def _hours(jobs: int, seconds: float) -> float:
    """Core-hours of `jobs` at `seconds` a job: 0 for none (even untimed), nan if untimed."""
    return 0.0 if jobs == 0 else jobs * seconds / 3600


def plan_table(table: pd.DataFrame) -> str:
    """`counts` as `--plan` prints it: with more than one agent an `all` row of the sums
    (as the plan table of docs/reproductions/real-data.md), hours not known said
    `no estimate` (the `all` row's then a lower bound, `>=`) and why, under the table."""
    hours = ["synthetic_hours", "real_hours"]
    shown = table.astype({c: object for c in hours})
    for c in hours:
        shown[c] = [NO_ESTIMATE if pd.isna(v) else v for v in table[c]]
    if len(table) > 1:
        total = {c: int(table[c].sum()) for c in table.columns if c not in ("agent", "configs")}
        for c in hours:
            known = table[c].dropna()
            at_least = ">= " if len(known) < len(table) else ""
            total[c] = f"{at_least}{known.sum():.2f}" if len(known) else NO_ESTIMATE
        shown = pd.concat([shown, pd.DataFrame([{"agent": "all", "configs": "", **total}])])
    text = shown.to_string(index=False)
    unknown = table.loc[table[hours].isna().any(axis=1), "agent"].tolist()
    if unknown:
        text += (f"\n{NO_ESTIMATE}: nothing times a job of {', '.join(unknown)} (no shipped "
                 "real-data run, no entry in reproduce_real_data.COST)")  # fmt: skip
    return text


def seconds_a_job(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{agent: {regime: mean wall seconds of its real-data jobs}} of shipped runs (any
    config): what the runs cost, which the plan prefers to `COST` (measured once on the
    largest dataset under load: 1.5 to 18 times these means)."""
    real = rows[rows["problem_id"].str.startswith("real/") & (rows["status"] == "ok")]
    low = real["problem_id"].str.fullmatch(r"real/[^/]+/\d+/\d+/\d+")  # a training size
    regime = ["low" if is_low else "full" for is_low in low]
    means = real.assign(regime=regime).groupby(["agent", "regime"])["wall_seconds"].mean()
    out: dict[str, dict[str, float]] = {}
    for (agent, name), value in means.items():
        out.setdefault(agent, {})[name] = float(value)
    return out


# Seconds a job, per agent at its default config, for the plan where no run ships: a
# classification_2d problem (a full pass of the shipped runs / 420, docs/performance.md); a
# real problem in the full and in the low regime (digits, the largest offline dataset, half
# a tau pair's wall time with compilation, one worker on 2 loaded cores, 2026-11-29;
# docs/reproductions/real-data.md).
COST: dict[str, tuple[float, float, float]] = {
    "mlp": (5.5, 11.8, 5.0),
    "ensemble": (2.7, 32.6, 19.9),
    "ensemble+": (3.8, 24.8, 23.8),
    "dropout": (24.3, 37.4, 24.2),
    "hypermodel": (2.7, 81.4, 34.2),
    "bbb": (2.2, 21.8, 13.0),
    "sgmcmc": (10.4, 132.3, 68.9),
    "epinet": (1.5, 46.4, 22.4),
}


def load_frame(results: str, shipped: bool = True) -> pd.DataFrame:
    """The store's rows (when it exists), our shipped runs of the jobs it does not hold and
    the shipped `uniform` runs of the testbed (the normaliser); refused when nothing holds
    a real-data run."""
    import leaderboard
    from leaderboard.shipped_files import shipped as shipped_rows

    parts = []
    if Path(results).exists():
        parts.append(leaderboard.load(results))
    elif not shipped or not len(shipped_rows(SHIPPED)):
        raise InputError(
            f"--results: {results!r} does not exist and no runs of ours are "
            f"{'used (--no-shipped)' if shipped is False else 'shipped'}; allowed: a store "
            "this script ran into"
        )
    if shipped:
        held = set(parts[0]["key"]) if parts else set()
        ours = shipped_rows(SHIPPED)
        testbed = shipped_rows("neural_testbed")
        testbed = testbed[testbed["agent"] == tune.NORMALISER]
        for rows in (ours, testbed):
            parts.append(rows[~rows["key"].isin(held)].rename(columns={"agent_seed": "seed"}))
            held |= set(rows["key"])
    frame = pd.concat([p for p in parts if len(p)] or parts, ignore_index=True)
    if not frame["problem_id"].astype(str).str.startswith("real/").any():
        raise InputError(
            f"--results: {results!r} holds no real-data run (real/...)"
            f"{'' if shipped else ' and --no-shipped leaves out ours'}; allowed: a store "
            "this script ran into"
        )
    return frame


def keys_of(agents: Sequence[str], real: dict[str, list[str]], grid, side: str = "2d") -> set[str]:
    """The keys of every job the reproduction runs for `agents` (the normaliser's too)."""
    keys = set()
    for agent in agents:
        own = synthetic_ids(agent, side)
        keys |= {j.key for j in jobs_of(agent, [*own, *(p for ids in real.values() for p in ids)],
                                        grid)}  # fmt: skip
        keys |= {j.key for j in jobs_of(tune.NORMALISER, own, {})}
    return keys


def ship(results: str, path: str, keys: set[str]) -> str:
    """Our shipped runs with the store's finished jobs of `keys` merged in (a job the store
    holds replaces the shipped one; every other shipped job is kept; the store's other jobs,
    e.g. the tuned references' held-out runs in a shared store, stay out); says what it
    wrote."""
    import leaderboard
    from experiments.reproduction import merged_cells
    from leaderboard.execution.shipped_store import from_results
    from leaderboard.ranking import shipped
    from leaderboard.shipped_files import shipped as shipped_rows

    df = leaderboard.load(results)
    ok = df[(df["status"] == "ok") & df["key"].isin(keys)]
    real = ok["problem_id"].str.startswith("real/")
    parts = [from_results(results, set(ok.loc[m, "key"])) for m in (real, ~real) if m.any()]
    if not parts:
        raise InputError(f"--results: {results!r} holds no finished job to ship")
    rows, said = merged_cells(pd.concat(parts, ignore_index=True), ["key"], Path(path),
                              results, read=lambda p: shipped_rows(path=p))  # fmt: skip
    rows = rows.sort_values(["agent", "config_key", "problem_id", "agent_seed"], kind="stable")
    shipped.write(rows.reset_index(drop=True), path)
    return said


def parse(argv: Sequence[str] | None):
    from experiments.console import add_store_options, script_parser

    parser = script_parser("reproduce_real_data", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--agents", default=",".join(AGENTS), help="registered agents")
    parser.add_argument("--datasets", default=",".join(offline_datasets()),
                        help="real datasets (a TFDS one once prepared)")  # fmt: skip
    parser.add_argument("--regimes", default=",".join(REGIMES), help="full, low")
    parser.add_argument("--taus", default=",".join(map(str, TAUS)), help="1, 10")
    parser.add_argument("--seeds", default="1", help="estimator seeds of the real problems, 1-5")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="configs: the product of these values (repeat per field), not "
                        "the sweep; a list field's values separated by ';' "
                        "('hidden_sizes=50,50;100')")
    add_store_options(parser, "real.db", "real_data", "folder for the tables and figure")
    parser.add_argument("--synthetic", default="2d", metavar="SIDE",
                        help="the synthetic side: 2d (classification_2d, the tuned references' "
                        "selection group) or matched (classification at input dims 10 and 100)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap replicates")
    parser.add_argument("--no-shipped", action="store_true",
                        help="leave out our shipped runs: compute every job here")
    parser.add_argument("--ship", default=None, metavar="CSV.GZ",
                        help=f"merge the store's finished runs into ours ({SHIPPED_FILE.name})")
    parser.add_argument("--prior-functions", action="store_true",
                        help="Figure 7 instead: ensemble+ with and without its prior functions "
                        "beside mlp, agent seeds 0-2, on the real problems")  # fmt: skip
    parser.add_argument("--plan", action="store_true", help="run nothing: count the jobs")
    parser.add_argument("--report", action="store_true", help="run nothing: tables and figure")
    return parser.parse_args(argv)


def choices(args) -> dict:
    """The options checked: agents, real ids per regime, the grid, paths that are not empty and
    no --plan with --report or --ship (InputError otherwise)."""
    from agents.registry import AGENTS as REGISTERED
    from experiments.console import check_not_empty, check_range, split_choices
    from generative.real_data.datasets import DATASETS
    from testbed.config import field_types

    agents = split_choices(args.agents, "--agents", REGISTERED.names())
    datasets = split_choices(args.datasets, "--datasets", list(DATASETS))
    regimes = split_choices(args.regimes, "--regimes", REGIMES)
    taus = split_choices(args.taus, "--taus", TAUS, int)
    seeds = split_choices(args.seeds, "--seeds", SEEDS, int)
    check_range("--workers", args.workers, 0, 64)
    check_range("--bootstrap", args.bootstrap, 100, 100_000)
    check_not_empty("--results", args.results, "a results file such as real.db")
    check_not_empty("--out", args.out, "a folder such as real_data")
    for option, other in (("--report", args.report), ("--ship", args.ship)):
        if args.plan and other:  # --plan runs and writes nothing
            raise InputError(f"{option}: not with --plan; allowed: one of the two")
    if args.grid and args.prior_functions:
        raise InputError("--grid: not with --prior-functions; allowed: one of the two")
    fields = {a: field_types(REGISTERED.get(a).config_cls) for a in agents}
    grid = parse_grid(args.grid, fields)
    if args.synthetic not in SIDES:
        from testbed.config import did_you_mean

        near = did_you_mean(args.synthetic, SIDES)
        raise InputError(f"--synthetic: got {args.synthetic!r}{near}; allowed: one of "
                         f"{', '.join(SIDES)}")  # fmt: skip
    if args.prior_functions and args.agents != ",".join(AGENTS):
        raise InputError("--agents: not with --prior-functions (it runs ensemble+ and mlp); "
                         "allowed: the default")  # fmt: skip
    if args.synthetic != "2d" and args.prior_functions:
        raise InputError("--synthetic: not with --prior-functions (real problems only); "
                         "allowed: 2d, the default")  # fmt: skip
    real = real_ids(datasets, regimes, taus, seeds)
    return {"agents": agents, "real": real, "grid": grid, "side": args.synthetic}


def reported(frame: pd.DataFrame, agents: Sequence[str]) -> list[str]:
    """The chosen agents that have some row (the others have not run: said, not tabled)."""
    ran = set(frame["agent"])
    missing = [a for a in agents if a not in ran]
    if missing:
        print(f"reproduce_real_data: note: no runs of {', '.join(missing)}", file=sys.stderr)
    return [a for a in agents if a in ran]


def prior_functions(args, real: dict[str, list[str]], out: Path) -> int:
    """`--prior-functions`: Figure 7's jobs (`experiments.prior_functions`) run unless
    `--report`, shipped with `--ship`, then its table."""
    from experiments import prior_functions as pf
    from experiments.console import shown
    from experiments.reproduction import run_unless_report
    from leaderboard.outputs import check_output_path

    planned = pf.jobs(real)
    every = [j for variant in planned.values() for j in variant]
    if args.plan:
        held = held_keys(args.results, not args.no_shipped)
        for name, variant in planned.items():
            todo = sum(j.key not in held for j in variant)
            print(f"{name}: {len(variant)} jobs, {len(variant) - todo} stored, {todo} to run")
        return 0
    for name in pf.OUTPUTS:
        check_output_path("--out", out / name, [args.results], make_folder=True)
    if args.ship:
        check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
    failed = run_unless_report(
        "reproduce_real_data", args,
        lambda: _run(every, args.results, args.workers, not args.no_shipped),
        lambda results, path: ship(results, path, {j.key for j in every}), note=False,
    )  # fmt: skip
    table = pf.table(load_frame(args.results, shipped=not args.no_shipped), real, planned)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "prior_functions.csv", index=False)
    text = pf.markdown(table) + "\n" + pf.summary(table) + "\n"
    (out / "prior_functions.md").write_text(text)
    return shown(text, out, failed, "table")


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging, shown_tables
    from experiments.real_data_report import OUTPUTS, write
    from experiments.reproduction import run_unless_report
    from leaderboard.outputs import check_output_folder, check_output_path
    from testbed import threefry_cpu

    args = parse(argv)
    setup_logging()
    threefry_cpu.install()  # the entry point's: testbed's threefry lowering
    try:
        c = choices(args)
        if args.prior_functions:
            return prior_functions(args, c["real"], Path(args.out))
        if args.plan:
            print(plan_table(counts(**c, results=args.results, shipped=not args.no_shipped)))
            return 0
        out = check_output_folder("--out", args.out, OUTPUTS, [args.results])
        if args.ship:
            check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
        failed = run_unless_report(
            "reproduce_real_data", args,
            lambda: run_all(**c, results=args.results, workers=args.workers,
                            shipped=not args.no_shipped),
            lambda results, path: ship(results, path, keys_of(**c)), note=False,
        )  # fmt: skip
        frame = load_frame(args.results, shipped=not args.no_shipped)
        chosen = design(reported(frame, c["agents"]), c["real"], c["grid"], c["side"])
        write(frame, chosen, out, args.bootstrap)
    except InputError as e:
        return bad_input("reproduce_real_data", e)
    return shown_tables(out, ("correlation.md", "pooled.md"), failed)


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_real_data", main, ends_process=True))
